#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// ZipArchive: the members of a ZIP archive held in memory, as np.savez (stored members) and
// np.savez_compressed (deflated members) write them. Read through the central directory, every
// integer little-endian:
//   local header  50 4B 03 04 ... name, extra, then the member's data      one per member
//   central dir   50 4B 01 02 ... method, crc32, sizes, local header offset, name, extra, comment
//   [zip64 end    50 4B 06 06 ... entry count, directory size and offset as 64-bit values]
//   [locator      50 4B 06 07 ... offset of the zip64 end record]
//   end record    50 4B 05 06 ... entry count, directory size and offset, comment length, comment
// A 32-bit field of all ones (0xFFFFFFFF, or 0xFFFF for counts) means "see the zip64 record", or in a
// directory entry "see its zip64 extra field" (id 0x0001: the full sizes and offset, in that order,
// only those that overflowed). Python's zipfile writes them for members of 4 GiB and more.
// Every offset and size is checked against the archive's length before it is used, the data of each
// member against its CRC-32. Deflated members are inflated by zlib, linked or loaded at run time
// (gzip.hpp); without it they are refused with a message naming the fix.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "gzip.hpp"
#include "little_endian.hpp"

namespace etnn::data::detail {

// CRC-32 of bytes (ISO 3309, polynomial 0xEDB88320 reflected), the checksum ZIP stores per member.
inline std::uint32_t crc32_of(std::span<const unsigned char> bytes) noexcept {
  static constexpr std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

struct ZipMember {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint32_t crc = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;  // after inflating
  std::uint64_t local_header_offset = 0;
};

class ZipArchive {
 public:
  // bytes: the whole archive, which must outlive this object. where: "etnn::data::load_npz: 'a.npz'",
  // the start of every message.
  ZipArchive(std::span<const unsigned char> bytes, std::string where) : bytes_(bytes), where_(std::move(where)) {
    read_central_directory();
  }

  const std::string& where() const noexcept { return where_; }
  [[noreturn]] void fail(const std::string& what) const { throw IoError(where_ + ": " + what); }

  const std::vector<ZipMember>& members() const noexcept { return members_; }

  // The member called name, or null.
  const ZipMember* find(std::string_view name) const noexcept {
    const auto it = std::find_if(members_.begin(), members_.end(), [&](const ZipMember& m) { return m.name == name; });
    return it == members_.end() ? nullptr : &*it;
  }

  // "'x.npy', 'y.npy'": the member names, for messages.
  std::string member_list() const {
    std::string out;
    for (const ZipMember& m : members_) out += (out.empty() ? "'" : ", '") + m.name + "'";
    return out.empty() ? "no members" : out;
  }

  // The member's bytes, inflated if deflated, checked against its size and CRC-32.
  std::vector<unsigned char> extract(const ZipMember& member) const {
    const std::string who = "member '" + member.name + "'";
    const std::uint64_t header = member.local_header_offset;
    if (!fits(header, 30) || load_le<std::uint32_t>(at(header)) != 0x04034b50u) {
      fail(who + ": no local header at offset " + std::to_string(header) + "; the archive is corrupt, write it again");
    }
    const std::uint16_t name_length = load_le<std::uint16_t>(at(header + 26));
    const std::uint16_t extra_length = load_le<std::uint16_t>(at(header + 28));
    const std::uint64_t data = header + 30 + name_length + extra_length;
    if (name_length != member.name.size() || !fits(header + 30, name_length) ||
        std::string_view(reinterpret_cast<const char*>(at(header + 30)), name_length) != member.name) {
      fail(who + ": its local header names another member; the archive is corrupt, write it again");
    }
    if (!fits(data, member.compressed_size) || data + member.compressed_size > directory_offset_) {
      fail(who + ": its " + std::to_string(member.compressed_size) + " data bytes at offset " + std::to_string(data) +
           " run past the member area, which ends at " + std::to_string(directory_offset_) +
           "; the archive is truncated or corrupt, write it again");
    }
    const std::span<const unsigned char> stored(at(data), static_cast<std::size_t>(member.compressed_size));
    std::vector<unsigned char> out;
    if (member.method == 0) {
      if (member.compressed_size != member.size) {
        fail(who + " is stored uncompressed but its sizes differ (" + std::to_string(member.compressed_size) + " and " +
             std::to_string(member.size) + "); the archive is corrupt, write it again");
      }
      out.assign(stored.begin(), stored.end());
    } else if (member.method == 8) {
      out = inflate(stored, member, who);
    } else {
      fail(who + " uses compression method " + std::to_string(member.method) +
           "; etnn reads stored (0) and deflated (8) members, as np.savez and np.savez_compressed write them");
    }
    if (crc32_of(out) != member.crc) {
      fail(who + ": its CRC-32 does not match its data; the archive is corrupt, write it again");
    }
    return out;
  }

 private:
  // Whether [offset, offset + length) lies inside the archive, without overflowing.
  bool fits(std::uint64_t offset, std::uint64_t length) const noexcept {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }
  const unsigned char* at(std::uint64_t offset) const noexcept { return bytes_.data() + offset; }

  // Where the end-of-central-directory record starts: searched from the end, over at most its 22
  // bytes and a 65535-byte comment, for a signature whose comment ends exactly at the end.
  std::uint64_t find_end_record() const {
    constexpr std::uint64_t record = 22;
    if (bytes_.size() < record) {
      fail("not a ZIP archive (.npz): " + std::to_string(bytes_.size()) +
           " bytes, fewer than the 22 of an empty archive; write it with np.savez");
    }
    const std::uint64_t last = bytes_.size() - record;
    const std::uint64_t first = last > 0xFFFF ? last - 0xFFFF : 0;
    for (std::uint64_t pos = last + 1; pos-- > first;) {
      if (load_le<std::uint32_t>(at(pos)) == 0x06054b50u && pos + record + load_le<std::uint16_t>(at(pos + 20)) == bytes_.size()) {
        return pos;
      }
    }
    fail("not a ZIP archive (.npz): no end-of-central-directory record; the file is truncated or not an .npz, "
         "write it with np.savez (a single array's .npy file is read by etnn::data::load_npy)");
  }

  void read_central_directory() {
    const std::uint64_t end = find_end_record();
    if (load_le<std::uint16_t>(at(end + 4)) != 0 || load_le<std::uint16_t>(at(end + 6)) != 0) {
      fail("a multi-part (split) ZIP archive is not supported; write the .npz as one file");
    }
    std::uint64_t entries = load_le<std::uint16_t>(at(end + 10));
    std::uint64_t directory_size = load_le<std::uint32_t>(at(end + 12));
    directory_offset_ = load_le<std::uint32_t>(at(end + 16));
    std::uint64_t directory_end = end;  // the directory is followed by the zip64 records or the end record
    if (entries == 0xFFFF || directory_size == 0xFFFFFFFFu || directory_offset_ == 0xFFFFFFFFu) {
      // Zip64: a 20-byte locator right before the end record points at the zip64 end record.
      if (end < 20 || load_le<std::uint32_t>(at(end - 20)) != 0x07064b50u) {
        fail("the end record asks for zip64 values but there is no zip64 locator before it; the archive is corrupt");
      }
      const std::uint64_t record = load_le<std::uint64_t>(at(end - 20 + 8));
      if (!fits(record, 56) || record + 56 > end - 20 || load_le<std::uint32_t>(at(record)) != 0x06064b50u) {
        fail("the zip64 locator points at offset " + std::to_string(record) +
             ", where there is no zip64 end record; the archive is corrupt");
      }
      entries = load_le<std::uint64_t>(at(record + 32));
      directory_size = load_le<std::uint64_t>(at(record + 40));
      directory_offset_ = load_le<std::uint64_t>(at(record + 48));
      directory_end = record;
    }
    if (directory_offset_ > directory_end || directory_size != directory_end - directory_offset_) {
      fail("the central directory (" + std::to_string(directory_size) + " bytes at offset " +
           std::to_string(directory_offset_) + ") does not end where the end record starts (" +
           std::to_string(directory_end) + "); the archive is truncated or corrupt");
    }
    constexpr std::uint64_t entry_bytes = 46;  // a directory entry without name, extra and comment
    if (entries > directory_size / entry_bytes) {
      fail(std::to_string(entries) + " members cannot fit a central directory of " + std::to_string(directory_size) +
           " bytes; the archive is corrupt");
    }
    members_.reserve(static_cast<std::size_t>(entries));
    std::uint64_t pos = directory_offset_;
    for (std::uint64_t i = 0; i < entries; ++i) pos = read_directory_entry(pos, directory_end, i);
    if (pos != directory_end) {
      fail("the central directory has " + std::to_string(directory_end - pos) +
           " bytes after its last entry; the archive is corrupt");
    }
  }

  // Reads the directory entry at pos (inside [pos, limit)) into members_; returns where the next starts.
  std::uint64_t read_directory_entry(std::uint64_t pos, std::uint64_t limit, std::uint64_t index) {
    const std::string who = "central directory entry " + std::to_string(index);
    if (pos + 46 > limit || load_le<std::uint32_t>(at(pos)) != 0x02014b50u) {
      fail(who + " is missing or truncated; the archive is corrupt, write it again");
    }
    const std::uint16_t flags = load_le<std::uint16_t>(at(pos + 8));
    const std::uint16_t name_length = load_le<std::uint16_t>(at(pos + 28));
    const std::uint16_t extra_length = load_le<std::uint16_t>(at(pos + 30));
    const std::uint16_t comment_length = load_le<std::uint16_t>(at(pos + 32));
    const std::uint64_t next = pos + 46 + name_length + extra_length + comment_length;
    if (next > limit) fail(who + ": its name, extra field and comment run past the directory; the archive is corrupt");
    ZipMember m;
    m.name.assign(reinterpret_cast<const char*>(at(pos + 46)), name_length);
    if (flags & 1) fail("member '" + m.name + "' is encrypted; write the .npz without a password (np.savez)");
    m.method = load_le<std::uint16_t>(at(pos + 10));
    m.crc = load_le<std::uint32_t>(at(pos + 16));
    m.compressed_size = load_le<std::uint32_t>(at(pos + 20));
    m.size = load_le<std::uint32_t>(at(pos + 24));
    m.local_header_offset = load_le<std::uint32_t>(at(pos + 42));
    read_zip64_extra(m, pos + 46 + name_length, extra_length);
    members_.push_back(std::move(m));
    return next;
  }

  // Replaces the member's saturated 32-bit fields by those of its zip64 extra field (id 0x0001), which
  // holds, in this order, the full size, compressed size and local header offset that overflowed.
  void read_zip64_extra(ZipMember& m, std::uint64_t extra, std::uint16_t length) const {
    std::array<std::uint64_t*, 3> wide{};
    std::size_t count = 0;
    for (std::uint64_t* field : {&m.size, &m.compressed_size, &m.local_header_offset}) {
      if (*field == 0xFFFFFFFFu) wide[count++] = field;
    }
    if (count == 0) return;
    for (std::uint64_t p = extra; p + 4 <= extra + length;) {
      const std::uint16_t id = load_le<std::uint16_t>(at(p));
      const std::uint16_t size = load_le<std::uint16_t>(at(p + 2));
      if (p + 4 + size > extra + length) break;
      if (id == 0x0001) {
        if (size < 8 * count) break;
        for (std::size_t f = 0; f < count; ++f) *wide[f] = load_le<std::uint64_t>(at(p + 4 + 8 * f));
        return;
      }
      p += 4 + size;
    }
    fail("member '" + m.name + "' has 32-bit sizes or offset of all ones but no zip64 extra field with their values; "
         "the archive is corrupt, write it again");
  }

  // A deflated member cannot be read: why (zlib_unavailable()) says what to do.
  [[noreturn]] void refuse_deflated(const std::string& who, const std::string& why) const {
    fail(who + " is deflated (np.savez_compressed) and " + why + ", or write the archive with np.savez");
  }

  std::vector<unsigned char> inflate(std::span<const unsigned char> stored, const ZipMember& member,
                                     const std::string& who) const {
#if defined(ETNN_ZLIB_LINKED) || defined(ETNN_ZLIB_LOADED)
    if (const std::string why = zlib_unavailable(); !why.empty()) refuse_deflated(who, why);  // the library did not load
    // Deflate expands at most about 1032:1, so a larger claimed size is corrupt; checked before allocating.
    if (member.size / 1032 > member.compressed_size + 1) {
      fail(who + " claims " + std::to_string(member.size) + " bytes from " + std::to_string(member.compressed_size) +
           " deflated ones, more than deflate can encode; the archive is corrupt, write it again");
    }
    const ZlibFunctions& z = zlib().functions;
    z_stream stream{};
    // -15: raw deflate (no zlib or gzip wrapper) with a 32 KiB window, as ZIP stores it.
    if (z.inflate_init(&stream, -MAX_WBITS, ZLIB_VERSION, static_cast<int>(sizeof(z_stream))) != Z_OK) {
      fail(who + ": zlib could not start inflating (out of memory?)");
    }
    std::vector<unsigned char> out(static_cast<std::size_t>(member.size));
    // zlib counts in uInt: feed and drain in pieces that fit. With input and room left inflate always
    // progresses, so Z_BUF_ERROR (no progress) means the data ended early or inflates to more bytes.
    constexpr std::size_t step = std::numeric_limits<uInt>::max();
    unsigned char no_room = 0;  // zlib refuses a null output pointer, even for 0 bytes
    int status = Z_OK;
    std::size_t in = 0, produced = 0;
    while (status == Z_OK) {
      stream.next_in = const_cast<unsigned char*>(stored.data() + in);
      stream.avail_in = static_cast<uInt>(std::min(step, stored.size() - in));
      stream.next_out = out.empty() ? &no_room : out.data() + produced;
      stream.avail_out = static_cast<uInt>(std::min(step, out.size() - produced));
      const uInt avail_in = stream.avail_in, avail_out = stream.avail_out;
      status = z.inflate(&stream, Z_NO_FLUSH);
      in += avail_in - stream.avail_in;
      produced += avail_out - stream.avail_out;
    }
    z.inflate_end(&stream);
    if (status != Z_STREAM_END || produced != out.size()) {
      fail(who + ": its deflated data is corrupt or does not inflate to its " + std::to_string(member.size) +
           " bytes; write the archive again");
    }
    return out;
#else
    (void)stored;
    (void)member;
    refuse_deflated(who, zlib_unavailable());
#endif
  }

  std::span<const unsigned char> bytes_;
  std::string where_;
  std::vector<ZipMember> members_;
  std::uint64_t directory_offset_ = 0;  // where the members' area ends
};

}  // namespace etnn::data::detail
