#pragma once
// Writers of the files numpy writes, for the NumPy reader's tests and fuzz seeds (fuzz/make_seeds.cpp):
//   npy(descr, shape, data)   a .npy file as np.save writes it (header padded to 64 bytes, final '\n')
//   zip(members)              an .npz: members stored (np.savez) or deflated (np.savez_compressed),
//                             optionally with zip64 records as Python's zipfile writes for 4 GiB
// Deflated members use deflate's stored blocks, valid deflate data that needs no zlib to write.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <etnn/data/data.hpp>

namespace etnn_test {

using Bytes = std::vector<unsigned char>;

// The little-endian bytes of each value.
template <class T>
Bytes le_bytes(const std::vector<T>& values) {
  Bytes out;
  for (T v : values) {
    using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t,
                 std::conditional_t<sizeof(T) == 2, std::uint16_t,
                 std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
    const auto bits = std::bit_cast<Bits>(v);
    for (std::size_t b = 0; b < sizeof(T); ++b) out.push_back(static_cast<unsigned char>(bits >> (8 * b)));
  }
  return out;
}

// The low `bytes` (<= 8) bytes of v, least significant first.
inline void put_le(Bytes& out, std::uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out.push_back(static_cast<unsigned char>(v >> (8 * b)));
}

// The dict numpy writes: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
inline std::string npy_dict(std::string_view descr, std::string_view shape, bool fortran_order = false) {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
         ", 'shape': " + std::string(shape) + ", }";
}

// A .npy file of format version major.0 with the header text dict, padded as np.save pads it.
inline Bytes npy_with_header(std::string dict, const Bytes& data, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  dict += std::string((64 - (prefix + dict.size() + 1) % 64) % 64, ' ') + "\n";
  Bytes out{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  out.reserve(prefix + dict.size() + data.size());  // also keeps GCC 12 from a false -Wstringop-overflow
  put_le(out, dict.size(), major == 1 ? 2 : 4);
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline Bytes npy(std::string_view descr, std::string_view shape, const Bytes& data, int major = 1) {
  return npy_with_header(npy_dict(descr, shape), data, major);
}

struct ZipEntry {
  ZipEntry(std::string name_, Bytes data_, bool deflated_ = false, Bytes deflate_stream_ = {})
      : name(std::move(name_)), data(std::move(data_)), deflated(deflated_), deflate_stream(std::move(deflate_stream_)) {}
  std::string name;
  Bytes data;
  bool deflated;
  Bytes deflate_stream;  // a deflated member's stored data (e.g. from zlib); empty: deflate_stored(data)
};

// data as raw deflate: stored blocks of at most 65535 bytes, the last one marked final.
inline Bytes deflate_stored(const Bytes& data) {
  Bytes out;
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, data.size() - pos);
    out.push_back(pos + n == data.size() ? 1 : 0);  // BFINAL, BTYPE 00
    put_le(out, n, 2);
    put_le(out, ~n & 0xFFFF, 2);
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
               data.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < data.size());
  return out;
}

// A ZIP archive of the entries; with zip64 the directory entries carry their sizes and offsets in
// zip64 extra fields and the end record points at a zip64 end record.
inline Bytes zip(const std::vector<ZipEntry>& entries, bool zip64 = false) {
  Bytes out, directory;
  for (const ZipEntry& e : entries) {
    const Bytes stored = !e.deflated ? e.data : e.deflate_stream.empty() ? deflate_stored(e.data) : e.deflate_stream;
    const std::uint32_t crc = etnn::data::detail::crc32_of(e.data);
    const std::uint64_t offset = out.size();
    const auto header = [&](Bytes& to, std::uint32_t signature, bool central) {
      put_le(to, signature, 4);
      if (central) put_le(to, 45, 2);  // version made by
      put_le(to, 45, 2);               // version needed
      put_le(to, 0, 2);                // flags
      put_le(to, e.deflated ? 8 : 0, 2);
      put_le(to, 0, 4);  // time, date
      put_le(to, crc, 4);
      put_le(to, central && zip64 ? 0xFFFFFFFFu : stored.size(), 4);
      put_le(to, central && zip64 ? 0xFFFFFFFFu : e.data.size(), 4);
      put_le(to, e.name.size(), 2);
      put_le(to, central && zip64 ? 28 : 0, 2);  // extra length
      if (central) {
        put_le(to, 0, 6);  // comment length, disk, internal attributes
        put_le(to, 0, 4);  // external attributes
        put_le(to, zip64 ? 0xFFFFFFFFu : offset, 4);
      }
      to.insert(to.end(), e.name.begin(), e.name.end());
      if (central && zip64) {
        put_le(to, 0x0001, 2);
        put_le(to, 24, 2);
        put_le(to, e.data.size(), 8);
        put_le(to, stored.size(), 8);
        put_le(to, offset, 8);
      }
    };
    header(out, 0x04034b50u, false);
    out.insert(out.end(), stored.begin(), stored.end());
    header(directory, 0x02014b50u, true);
  }
  const std::uint64_t directory_offset = out.size();
  out.insert(out.end(), directory.begin(), directory.end());
  if (zip64) {
    const std::uint64_t record = out.size();
    put_le(out, 0x06064b50u, 4);
    put_le(out, 44, 8);  // size of the rest of the record
    put_le(out, 45, 2);
    put_le(out, 45, 2);
    put_le(out, 0, 8);  // disk numbers
    put_le(out, entries.size(), 8);
    put_le(out, entries.size(), 8);
    put_le(out, directory.size(), 8);
    put_le(out, directory_offset, 8);
    put_le(out, 0x07064b50u, 4);
    put_le(out, 0, 4);
    put_le(out, record, 8);
    put_le(out, 1, 4);
  }
  put_le(out, 0x06054b50u, 4);
  put_le(out, 0, 4);  // disk numbers
  put_le(out, zip64 ? 0xFFFF : entries.size(), 2);
  put_le(out, zip64 ? 0xFFFF : entries.size(), 2);
  put_le(out, zip64 ? 0xFFFFFFFFu : directory.size(), 4);
  put_le(out, zip64 ? 0xFFFFFFFFu : directory_offset, 4);
  put_le(out, 0, 2);  // comment length
  return out;
}

}  // namespace etnn_test
