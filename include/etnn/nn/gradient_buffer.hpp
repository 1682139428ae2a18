#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// The flat gradient buffer of a parameter set (a Model, a loss with parameters): memory of its
// own, or for a while memory that a data-parallel optimizer's reducer sums in place (dist::Mpi's
// shared memory on one machine; optim/gradient_storage.hpp), the gradients moving along each way.
// Its own memory is released meanwhile, so the gradients exist once, as with PyTorch DDP's
// gradient_as_bucket_view, and allocated again when they come back.
#include <cstddef>
#include <utility>

#include "../backend/executor.hpp"
#include "../expr/expression.hpp"
#include "../tensor/buffer.hpp"

namespace etnn::nn {

template <class T, class Device>
class GradientBuffer {
 public:
  explicit GradientBuffer(std::size_t n) : own_(n), size_(n) {}
  GradientBuffer(GradientBuffer&& other) noexcept
      : own_(std::move(other.own_)), elsewhere_(std::exchange(other.elsewhere_, nullptr)), size_(other.size_) {}
  GradientBuffer& operator=(GradientBuffer&& other) noexcept {
    own_ = std::move(other.own_);
    elsewhere_ = std::exchange(other.elsewhere_, nullptr);
    size_ = other.size_;
    return *this;
  }

  T* data() noexcept { return elsewhere_ != nullptr ? elsewhere_ : own_.data(); }
  const T* data() const noexcept { return elsewhere_ != nullptr ? elsewhere_ : own_.data(); }

  // Keeps the gradients in `storage` (size() values on Device that outlive this use), or in memory
  // of its own again with nullptr (which allocates it). The values move along.
  void keep_in(T* storage) {
    if (storage == data() || (storage == nullptr && elsewhere_ == nullptr)) return;
    if (storage == nullptr) {
      Buffer<T, Device> own(size_);
      assign(Device{}, own.data(), expr::ref(static_cast<const T*>(elsewhere_), size_));
      own_ = std::move(own);
    } else {
      assign(Device{}, storage, expr::ref(static_cast<const T*>(data()), size_));
      own_ = Buffer<T, Device>();
    }
    elsewhere_ = storage;
  }

  std::size_t size() const noexcept { return size_; }

 private:
  Buffer<T, Device> own_;
  T* elsewhere_ = nullptr;
  std::size_t size_;
};

}  // namespace etnn::nn
