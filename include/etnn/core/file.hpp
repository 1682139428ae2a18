#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// A C stream that closes itself: the readers (IDX, safetensors) own their files through it; and
// read_file_bytes, a whole file in memory (the NumPy and CSV readers).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "error.hpp"

namespace etnn {

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

// The file opened for binary reading, or null.
inline UniqueFile open_for_reading(const std::filesystem::path& path) {
  return UniqueFile(std::fopen(path.c_str(), "rb"));
}

// Every byte of the file. where ("etnn::data::load_npy: 'x.npy'") starts the etnn::IoError thrown
// when the file is missing or unreadable.
inline std::vector<unsigned char> read_file_bytes(const std::filesystem::path& path, const std::string& where) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(where + ": cannot read the file (" + ec.message() + "); check the path");
  const UniqueFile file = open_for_reading(path);
  if (!file) throw IoError(where + ": cannot open the file (" + std::strerror(errno) + "); check its permissions");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  const std::size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), file.get());
  if (got != bytes.size()) {
    throw IoError(where + ": read " + std::to_string(got) + " of its " + std::to_string(size) +
                  " bytes (" + std::strerror(errno) + "); is another program writing it?");
  }
  return bytes;
}

}  // namespace etnn
