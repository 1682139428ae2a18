#pragma once
// Private to tensor/: include <etnn/tensor/tensor.hpp> or <etnn/etnn.hpp>.
// Tensor<T, Shape, Device> owns a batch of samples of a static Shape; TensorView<T, Shape, Device>
// refers to one. Layout is row-major with the batch outermost: element (b, i0, i1, ...) lives at
//   b * Shape::size + ((i0 * D1 + i1) * D2 + ...).
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "buffer.hpp"

namespace etnn {

template <class T, ShapeType S, class Device = Cpu>
class TensorView {
 public:
  using value_type = std::remove_const_t<T>;
  using shape = S;
  using device = Device;

  TensorView() = default;
  TensorView(T* data, int batch) : data_(data), batch_(batch) {
    if (batch < 0) throw ShapeError("etnn::TensorView: negative batch " + std::to_string(batch));
  }
  // A view of mutable data converts to a view of const data.
  template <class U>
    requires(std::is_const_v<T> && std::is_same_v<std::remove_const_t<T>, U>)
  TensorView(const TensorView<U, S, Device>& other) : data_(other.data()), batch_(other.batch()) {}

  T* data() const noexcept { return data_; }
  int batch() const noexcept { return batch_; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(batch_) * S::size; }
  // First element of sample b.
  T* sample(int b) const noexcept { return data_ + static_cast<std::size_t>(b) * S::size; }
  std::span<T> flat() const noexcept { return {data_, size()}; }

  // Element (b, i0, i1, ...); host memory only.
  template <class... I>
    requires(sizeof...(I) == S::rank && std::is_same_v<Device, Cpu>)
  T& operator()(int b, I... index) const noexcept {
    std::size_t offset = 0;
    int d = 0;
    ((offset = offset * static_cast<std::size_t>(S::dims[static_cast<std::size_t>(d++)]) +
               static_cast<std::size_t>(index)),
     ...);
    return data_[static_cast<std::size_t>(b) * S::size + offset];
  }

  // The first `batch` samples.
  TensorView first(int batch) const {
    if (batch > batch_)
      throw ShapeError("etnn::TensorView::first: asked for " + std::to_string(batch) +
                       " samples of a view holding " + std::to_string(batch_));
    return {data_, batch};
  }

 private:
  T* data_ = nullptr;
  int batch_ = 0;
};

template <class T, ShapeType S, class Device = Cpu>
class Tensor {
 public:
  using value_type = T;
  using shape = S;
  using device = Device;

  Tensor() = default;
  explicit Tensor(int batch) : buffer_(checked_elements(batch)), batch_(batch) {}

  T* data() noexcept { return buffer_.data(); }
  const T* data() const noexcept { return buffer_.data(); }
  int batch() const noexcept { return batch_; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(batch_) * S::size; }
  // Capacity in samples; resize() within it does not allocate.
  int capacity() const noexcept { return static_cast<int>(buffer_.size() / S::size); }

  // Changes the batch; allocates only when it exceeds the capacity. Contents are unspecified.
  void resize(int batch) {
    buffer_.reserve_discard(checked_elements(batch));
    batch_ = batch;
  }

  TensorView<T, S, Device> view() noexcept { return {data(), batch_}; }
  TensorView<const T, S, Device> view() const noexcept { return {data(), batch_}; }
  operator TensorView<T, S, Device>() noexcept { return view(); }
  operator TensorView<const T, S, Device>() const noexcept { return view(); }

  template <class... I>
    requires(sizeof...(I) == S::rank && std::is_same_v<Device, Cpu>)
  T& operator()(int b, I... index) noexcept {
    return view()(b, index...);
  }
  template <class... I>
    requires(sizeof...(I) == S::rank && std::is_same_v<Device, Cpu>)
  const T& operator()(int b, I... index) const noexcept {
    return view()(b, index...);
  }

 private:
  static std::size_t checked_elements(int batch) {
    if (batch < 0) throw ShapeError("etnn::Tensor: negative batch " + std::to_string(batch));
    return static_cast<std::size_t>(batch) * S::size;
  }

  Buffer<T, Device> buffer_;
  int batch_ = 0;
};

// A read-only view of a tensor or view: lets functions take either.
template <class T, ShapeType S, class Device>
TensorView<const T, S, Device> const_view(const Tensor<T, S, Device>& t) noexcept {
  return t.view();
}
template <class T, ShapeType S, class Device>
TensorView<const T, S, Device> const_view(TensorView<T, S, Device> v) noexcept {
  return v;
}

}  // namespace etnn
