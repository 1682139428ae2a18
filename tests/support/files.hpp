#pragma once
// Files for reader tests: a temporary directory that removes itself, writing bytes or text to a
// file, and the message of the etnn::IoError a call throws.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <etnn/core/core.hpp>

namespace etnn_test {

// A fresh directory under the system temp dir, removed with its files at scope exit.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("etnn_test_" + std::to_string(std::random_device{}()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

inline std::filesystem::path write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::filesystem::path write_file(const std::filesystem::path& path, const std::vector<unsigned char>& bytes) {
  return write_file(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// Checks that f throws an etnn::IoError whose message contains every one of parts.
template <class F>
void check_io_error(F&& f, std::initializer_list<std::string_view> parts) {
  std::string message;
  try {
    f();
  } catch (const etnn::IoError& e) {
    message = e.what();
  }
  INFO("message: " << message);
  REQUIRE_MESSAGE(!message.empty(), "expected an etnn::IoError");
  for (std::string_view part : parts) CHECK_MESSAGE(message.find(part) != std::string::npos, "missing: " << part);
}

}  // namespace etnn_test
