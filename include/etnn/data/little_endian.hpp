#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// Little-endian loads from a byte buffer, on any host: the integers of ZIP records and the values
// of .npy arrays are stored least significant byte first.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace etnn::data::detail {

// The sizeof(U) bytes at p as an unsigned integer, p[0] least significant.
template <class U>
  requires std::is_unsigned_v<U>
U load_le(const unsigned char* p) noexcept {
  U v = 0;
  for (std::size_t b = 0; b < sizeof(U); ++b) v = static_cast<U>(v | (static_cast<U>(p[b]) << (8 * b)));
  return v;
}

// The sizeof(T) bytes at p as T (an integer or an IEEE float of the same size), little-endian.
template <class T>
T load_le_value(const unsigned char* p) noexcept {
  using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t,
               std::conditional_t<sizeof(T) == 2, std::uint16_t,
               std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
  return std::bit_cast<T>(load_le<Bits>(p));
}

}  // namespace etnn::data::detail
