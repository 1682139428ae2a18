#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// A C stream that closes itself: the readers (IDX, safetensors) own their files through it.
#include <cstdio>
#include <filesystem>
#include <memory>

namespace etnn {

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

// The file opened for binary reading, or null.
inline UniqueFile open_for_reading(const std::filesystem::path& path) {
  return UniqueFile(std::fopen(path.c_str(), "rb"));
}

}  // namespace etnn
