#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// GzipReader: the inflated bytes of a gzip file (one member or several concatenated, as gzip(1)
// reads them), for the readers of gzipped data (IDX); zlib() and zlib_unavailable() also serve the
// .npz reader's deflated members (zip.hpp). zlib does the inflating; how a program
// reaches zlib is decided when it is compiled:
//   ETNN_WITH_ZLIB=1    zlib linked (-lz): CMake's etnn::etnn defines it and links zlib.
//   ETNN_WITH_ZLIB=0    no zlib: a gzipped file is refused with a message naming the fix.
//   not defined         zlib's types and constants from <zlib.h>, its four inflate functions looked
//                       up in the shared libz at run time (dlopen + dlsym) the first time a gzipped
//                       file is read. Plain `g++ main.cpp` then reads gzipped files: a header-only
//                       library cannot add -lz to a user's link line, and naming zlib's functions
//                       directly would make every program that includes etnn fail to link without
//                       -lz, gzip or not. dlopen is part of libc on glibc 2.34+ (Debian 12, Ubuntu
//                       22.04), musl and macOS, so no -ldl is needed either; on an older glibc
//                       (where it would be) this mode is off, as it is without <zlib.h> or
//                       <dlfcn.h>. The library loaded is the one -lz would link (libz.so.1, zlib's
//                       ABI since 1.0), and inflateInit2_ checks it against the header's version.
// Without zlib, or when the library cannot be loaded, opening a gzip file throws etnn::IoError
// saying what to install or how to compile, or to gunzip the file. ETNN_ZLIB_LINKED or
// ETNN_ZLIB_LOADED (defined as 1) tells the includer which mode it got.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/file.hpp"

#if defined(ETNN_WITH_ZLIB) && ETNN_WITH_ZLIB
#define ETNN_ZLIB_LINKED 1
#include <zlib.h>
#elif !defined(ETNN_WITH_ZLIB) && __has_include(<zlib.h>) && __has_include(<dlfcn.h>) && \
    !(defined(__GLIBC__) && (__GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 34)))
#define ETNN_ZLIB_LOADED 1
#include <dlfcn.h>
#include <zlib.h>
#endif

namespace etnn::data::detail {

#if defined(ETNN_ZLIB_LINKED) || defined(ETNN_ZLIB_LOADED)

// The zlib functions GzipReader calls, linked or looked up.
struct ZlibFunctions {
  int (*inflate_init)(z_streamp, int, const char*, int);  // inflateInit2_ (inflateInit2 is a macro)
  int (*inflate)(z_streamp, int);
  int (*inflate_reset)(z_streamp);
  int (*inflate_end)(z_streamp);
};

// The functions, or (error non-empty) why there are none and what to do.
struct Zlib {
  ZlibFunctions functions{};
  std::string error;
};

#if defined(ETNN_ZLIB_LOADED)
#if defined(__APPLE__)
inline constexpr const char* zlib_library = "libz.1.dylib";
#else
inline constexpr const char* zlib_library = "libz.so.1";
#endif

// zlib's functions from the shared library `name`. The library stays loaded for the life of the
// process: the functions are kept for every later gzip file.
inline Zlib load_zlib(const char* name) {
  const auto missing = [&](const std::string& what) {
    return Zlib{{}, what + "; install zlib (Debian/Ubuntu: apt-get install zlib1g), or compile with "
                           "-DETNN_WITH_ZLIB=1 -lz"};
  };
  const auto why = [] {
    const char* error = ::dlerror();
    return std::string(error != nullptr ? error : "no reason given");
  };
  void* library = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return missing("zlib could not be loaded at run time (" + why() + ")");
  Zlib zlib;
  // POSIX's way from dlsym's void* to a function pointer: copy the object representation.
  const auto find = [&](auto& function, const char* symbol) {
    void* address = ::dlsym(library, symbol);
    if (address != nullptr) std::memcpy(&function, &address, sizeof address);
    return address != nullptr;
  };
  if (!find(zlib.functions.inflate_init, "inflateInit2_") || !find(zlib.functions.inflate, "inflate") ||
      !find(zlib.functions.inflate_reset, "inflateReset") || !find(zlib.functions.inflate_end, "inflateEnd")) {
    return missing(std::string(name) + " lacks zlib's inflate functions (" + why() + ")");
  }
  return zlib;
}
#endif

// This program's zlib; loaded (when it is loaded at run time) once, by the first caller.
inline const Zlib& zlib() {
#if defined(ETNN_ZLIB_LINKED)
  static const Zlib linked{{&::inflateInit2_, &::inflate, &::inflateReset, &::inflateEnd}, {}};
  return linked;
#else
  static const Zlib loaded = load_zlib(zlib_library);
  return loaded;
#endif
}

// Why this program cannot inflate and what to do, or empty when it can: the words every reader of
// deflated data (gzip files, .npz members) puts after "... and ".
inline std::string zlib_unavailable() { return zlib().error; }

class GzipReader {
 public:
  // file: open for reading at the start of the gzip data. where: the start of every message
  // ("etnn::data::load_idx: 'path'").
  GzipReader(UniqueFile file, std::string where) : file_(std::move(file)), where_(std::move(where)) {
    const Zlib& z = zlib();
    if (!z.error.empty()) fail("the file is gzipped and " + z.error + ", or gunzip the file");
    zlib_ = z.functions;
    // 16 + 15: a gzip wrapper (header and CRC-32 trailer, both checked) around a 32 KiB window.
    const int status = zlib_.inflate_init(&stream_, 16 + MAX_WBITS, ZLIB_VERSION, static_cast<int>(sizeof(z_stream)));
    if (status != Z_OK) fail("cannot start inflating: " + zlib_message(status));
  }
  ~GzipReader() { zlib_.inflate_end(&stream_); }
  // zlib's state points back at stream_: the reader stays where it was made.
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Inflates up to n bytes into dst; returns fewer only at the end of the data. Throws etnn::IoError
  // for a read error and for corrupt or truncated data.
  std::size_t read(unsigned char* dst, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      if (stream_.avail_in == 0 && !refill()) {
        if (!in_member_) break;  // the last member ended with the file
        fail("truncated gzip data: the file ends inside the compressed stream; it is incomplete, download it again");
      }
      if (!in_member_) {  // bytes after a member: the next member of a concatenated file
        zlib_.inflate_reset(&stream_);
        in_member_ = true;
      }
      const std::size_t want = std::min<std::size_t>(n - done, max_step);
      stream_.next_out = dst + done;
      stream_.avail_out = static_cast<uInt>(want);
      const int status = zlib_.inflate(&stream_, Z_NO_FLUSH);
      done += want - stream_.avail_out;
      if (status == Z_STREAM_END) {
        in_member_ = false;
      } else if (status != Z_OK) {
        fail("corrupt gzip data (" + zlib_message(status) + "); the file is damaged, download it again");
      }
    }
    return done;
  }

 private:
  static constexpr std::size_t max_step = std::size_t{1} << 30;  // within zlib's uInt counts

  [[noreturn]] void fail(const std::string& what) const { throw IoError(where_ + ": " + what); }

  std::string zlib_message(int status) const {
    return "zlib: " + (stream_.msg != nullptr ? std::string(stream_.msg) : "error " + std::to_string(status));
  }

  // More compressed bytes into the input buffer; false at the end of the file.
  bool refill() {
    const std::size_t got = std::fread(input_.data(), 1, input_.size(), file_.get());
    if (got == 0 && std::ferror(file_.get())) fail("read error (" + std::string(std::strerror(errno)) + ")");
    stream_.next_in = input_.data();
    stream_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  UniqueFile file_;
  std::string where_;
  ZlibFunctions zlib_{};
  z_stream stream_{};  // zalloc, zfree, opaque null: zlib's own allocator
  std::vector<unsigned char> input_ = std::vector<unsigned char>(std::size_t{1} << 16);
  bool in_member_ = true;  // inside a member: the end of the file now would cut it short
};

#else

// Why this program cannot inflate and what to do (see above).
inline std::string zlib_unavailable() {
#if defined(ETNN_WITH_ZLIB)
  return "this program was compiled with -DETNN_WITH_ZLIB=0 (CMake: ETNN_WITH_ZLIB=OFF); compile without that "
         "macro (zlib is then loaded at run time) or with -DETNN_WITH_ZLIB=1 -lz";
#elif !__has_include(<zlib.h>)
  return "this program was compiled without zlib's header <zlib.h>; install it (Debian/Ubuntu: apt-get install "
         "zlib1g-dev; Fedora: zlib-devel) and compile again";
#else
  return "zlib cannot be loaded at run time here (no <dlfcn.h>, or a glibc before 2.34, whose dlopen needs -ldl); "
         "compile with -DETNN_WITH_ZLIB=1 -lz";
#endif
}

// Without zlib a gzipped file cannot be read: opening one says how to get zlib.
class GzipReader {
 public:
  GzipReader(UniqueFile, const std::string& where) {
    throw IoError(where + ": the file is gzipped and " + zlib_unavailable() + ", or gunzip the file");
  }
  std::size_t read(unsigned char*, std::size_t) noexcept { return 0; }  // no reader is ever made
};

#endif

}  // namespace etnn::data::detail
