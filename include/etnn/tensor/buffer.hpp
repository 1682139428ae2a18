#pragma once
// Private to tensor/: include <etnn/tensor/tensor.hpp> or <etnn/etnn.hpp>.
// Buffer<T, Device>: an owning, move-only, uninitialised array of T in a device's memory.
#include <cstddef>
#include <utility>

#include "../core/device.hpp"

namespace etnn {

template <class T, class Device>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t size)
      : data_(static_cast<T*>(Device::allocate(size * sizeof(T)))), size_(size) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~Buffer() { release(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // Grows to at least `size` elements; contents are not preserved. Never shrinks.
  void reserve_discard(std::size_t size) {
    if (size > size_) *this = Buffer(size);
  }

 private:
  void release() noexcept {
    if (data_ != nullptr) Device::deallocate(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace etnn
