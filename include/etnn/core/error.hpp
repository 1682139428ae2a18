#pragma once
// Private to core/: include <etnn/core/core.hpp> or <etnn/etnn.hpp>.
// Runtime errors. Every message says what went wrong, where, and how to fix it.
#include <stdexcept>
#include <string>

namespace etnn {

// Base of every exception etnn throws.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A runtime value (batch size, label, tensor size) does not fit what the static type expects.
struct ShapeError : Error {
  using Error::Error;
};

// A file could not be read or written, or its content is malformed.
struct IoError : Error {
  using Error::Error;
};

// A collective operation failed, timed out, or the ranks disagree (different models, sizes).
struct DistError : Error {
  using Error::Error;
};

// Training met NaN or infinity it could not skip past (the Trainer's non-finite guard).
struct NonFiniteError : Error {
  using Error::Error;
};

// A device call failed (a CUDA, cuBLAS or NCCL error): the message names the call.
struct DeviceError : Error {
  using Error::Error;
};

// A requested feature or device is not available in this build or on this machine.
struct UnavailableError : Error {
  using Error::Error;
};

namespace detail {

// "who: part part ...", built with += (GCC 12 reports false -Wrestrict on literal + string chains).
template <class... Parts>
std::string message(const char* who, const Parts&... parts) {
  std::string m = who;
  m += ": ";
  ((m += parts), ...);
  return m;
}

}  // namespace detail
}  // namespace etnn
