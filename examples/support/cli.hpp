#pragma once
// What the examples share: command-line flags, reporting errors, and the Fashion-MNIST files.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <etnn/etnn.hpp>

namespace example {

namespace fs = std::filesystem;

using FlagTarget = std::variant<int*, long*, float*, std::uint64_t*, std::string*, fs::path*>;
struct Flag {
  std::string_view name;  // "--epochs"
  FlagTarget target;
};

// Prints `usage` (to stdout when status is 0, as for --help; to stderr otherwise) and ends the
// program with `status`.
[[noreturn]] inline void exit_with_usage(const char* usage, int status) {
  std::fputs(usage, status == 0 ? stdout : stderr);
  std::exit(status);
}

// Parses `--flag value` pairs into the targets; prints `usage` and exits 0 on --help, 2 on an
// unknown flag, a missing value or a value that is not a number where one is needed.
inline void parse_flags(int argc, char** argv, const char* usage, std::initializer_list<Flag> flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view name = argv[i];
    if (name == "--help" || name == "-h") exit_with_usage(usage, 0);
    const Flag* flag = nullptr;
    for (const auto& f : flags)
      if (f.name == name) flag = &f;
    if (flag == nullptr || i + 1 >= argc) exit_with_usage(usage, 2);
    const char* value = argv[++i];
    try {
      std::visit([&](auto* target) {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, int>) *target = std::stoi(value);
        else if constexpr (std::is_same_v<T, long>) *target = std::stol(value);
        else if constexpr (std::is_same_v<T, float>) *target = std::stof(value);
        else if constexpr (std::is_same_v<T, std::uint64_t>) *target = std::stoull(value);
        else *target = value;
      }, flag->target);
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "%s: %s needs a number, got '%s'\n", argv[0], argv[i - 1], value);
      std::exit(2);
    }
  }
}

// body()'s exit status; an etnn::Error it throws is printed as "program: what went wrong" and
// gives status 1.
template <class Body>
int run_reporting_errors(const char* program, Body&& body) {
  try {
    return body();
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

// --device auto|cpu|cuda as a device kind: auto is etnn::best_device() (CUDA when this binary has
// it and a usable GPU is present, else the CPU with one line saying why); cuda where it cannot run
// prints why and exits 2, as does an unknown name (after `usage`).
inline etnn::DeviceKind parse_device(const std::string& name, const char* program, const char* usage) {
  if (name == "auto") return etnn::best_device();
  if (name == "cpu") return etnn::DeviceKind::cpu;
  if (name != "cuda") exit_with_usage(usage, 2);
  try {
    etnn::dispatch(etnn::DeviceKind::cuda, [](auto) {});
  } catch (const etnn::UnavailableError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    std::exit(2);
  }
  return etnn::DeviceKind::cuda;
}

inline constexpr const char* default_data_dir = "/usr/share/datasets/fashion-mnist";

// The four MNIST-format files in dir (raw or .gz): train images, train labels, test images, test
// labels. When one is missing, says how to get them and returns nothing.
inline std::optional<std::array<fs::path, 4>> find_mnist_files(const fs::path& dir, const char* program) {
  const char* names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                         "t10k-labels-idx1-ubyte"};
  std::array<fs::path, 4> files;
  for (int i = 0; i < 4; ++i) {
    bool found = false;
    for (const fs::path& candidate : {dir / names[i], dir / (std::string(names[i]) + ".gz")}) {
      if (!found && fs::exists(candidate)) files[static_cast<std::size_t>(i)] = candidate, found = true;
    }
    if (!found) {
      std::fprintf(stderr,
                   "%s: %s[.gz] not found in %s\n"
                   "  install Fashion-MNIST with: sudo apt-get install dataset-fashion-mnist\n"
                   "  or pass --data DIR with the four MNIST-format files (raw or .gz)\n",
                   program, names[i], dir.c_str());
      return std::nullopt;
    }
  }
  return files;
}

// body(files)'s exit status for the four files in dir, with errors reported as by
// run_reporting_errors; 2 when a file is missing.
template <class Body>
int run_with_mnist_files(const char* program, const fs::path& dir, Body&& body) {
  const auto files = find_mnist_files(dir, program);
  if (!files) return 2;
  return run_reporting_errors(program, [&] { return body(*files); });
}

// Training and test sets with pixels in [0, 1] normalised by the training set's mean and
// standard deviation; the training set cut to its first `limit` samples when limit > 0.
template <etnn::ShapeType S>
struct MnistData {
  etnn::data::Dataset<S> train, test;
  float mean, stddev;
};

template <etnn::ShapeType S>
MnistData<S> load_mnist(const std::array<fs::path, 4>& files, long limit = 0) {
  auto train = etnn::data::load_idx<S>(files[0], files[1], /*num_classes=*/10);
  auto test = etnn::data::load_idx<S>(files[2], files[3], /*num_classes=*/10);
  if (limit > 0 && static_cast<std::size_t>(limit) < train.size()) train = train.subset(0, static_cast<std::size_t>(limit));
  const auto mean = static_cast<float>(etnn::data::mean(train));
  const auto stddev = static_cast<float>(etnn::data::stddev(train));
  train.normalize(mean, stddev);
  test.normalize(mean, stddev);
  return {std::move(train), std::move(test), mean, stddev};
}

}  // namespace example
