#pragma once
// What the losses share: the reduction to one number, the checks of targets, labels and class
// weights, the value_and_grad/value pair, and the loop of element-wise losses.
//   etnn::loss::L1 loss({.reduction = etnn::loss::Reduction::sum});
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/static_checks.hpp"
#include "../tensor/copy.hpp"
#include "../tensor/tensor.hpp"
#if defined(__CUDACC__)
#include "../cuda/memory.hpp"
#include "../cuda/reduce.hpp"
#include "../cuda/runtime.hpp"
#include "../tensor/buffer.hpp"
#endif

namespace etnn::loss {

// PyTorch's `reduction`: the mean (default) or the sum of the per-element (or per-sample) losses.
// PyTorch's 'none' has no counterpart: a loss returns one number.
enum class Reduction { mean, sum };

namespace detail {

// "who: part part ...", built with += (GCC 12 reports false -Wrestrict on literal + string chains).
template <class... Parts>
std::string message(const char* who, const Parts&... parts) {
  std::string m = who;
  m += ": ";
  ((m += parts), ...);
  return m;
}

// 1/count for the mean, 1 for the sum.
template <class T>
T reduction_scale(Reduction reduction, std::size_t count) {
  return reduction == Reduction::mean ? T(1) / static_cast<T>(count) : T(1);
}

// Targets of the output's shape, one row per sample (on any device: only the shapes are read).
template <class T, ShapeType S, ShapeType TS, class Device>
void check_targets(TensorView<const T, S, Device> output, TensorView<const T, TS, Device> target, const char* who) {
  static_assert(check::target_shape<TS, S>());
  if (output.batch() != target.batch())
    throw ShapeError(message(who, std::to_string(target.batch()), " targets for a batch of ",
                             std::to_string(output.batch()), "; pass one target row per sample"));
}

// One class index in [0, classes) per sample.
inline void check_labels(std::span<const int> labels, int batch, int classes, const char* who) {
  if (static_cast<int>(labels.size()) != batch)
    throw ShapeError(message(who, std::to_string(labels.size()), " labels for a batch of ", std::to_string(batch),
                             "; pass one class index per sample"));
  for (std::size_t b = 0; b < labels.size(); ++b) {
    if (labels[b] < 0 || labels[b] >= classes)
      throw ShapeError(message(who, "label ", std::to_string(labels[b]), " of sample ", std::to_string(b),
                               " is outside [0, ", std::to_string(classes), "); the network has ",
                               std::to_string(classes), " outputs"));
  }
}

// The complaint about a target that is neither of the two values a loss takes (0/1 multi-hot,
// -1/+1 signs).
template <class T>
std::string binary_target_complaint(const char* who, std::size_t i, T target, T negative, T positive) {
  return message(who, "target element ", std::to_string(i), " is ", std::to_string(target),
                 "; this loss takes targets of ", std::to_string(negative), " or ", std::to_string(positive));
}

// PyTorch's per-class `weight` (empty: all ones): finite and >= 0, checked at construction.
inline void validate_weights(const std::vector<float>& weight, const char* who) {
  for (std::size_t c = 0; c < weight.size(); ++c) {
    if (!(weight[c] >= 0.0f) || !std::isfinite(weight[c]))
      throw Error(message(who, "weight[", std::to_string(c), "] is ", std::to_string(weight[c]),
                          "; class weights must be finite and >= 0"));
  }
}

// One weight per class, checked where the class count is known (at each use).
inline void check_weight_count(const std::vector<float>& weight, int classes, const char* who) {
  if (!weight.empty() && weight.size() != static_cast<std::size_t>(classes))
    throw ShapeError(message(who, std::to_string(weight.size()), " class weights for ", std::to_string(classes),
                             " classes; pass one weight per network output, or none"));
}

// The weights as a pointer, null for all ones.
inline const float* weights_or_null(const std::vector<float>& weight) {
  return weight.empty() ? nullptr : weight.data();
}

template <class T>
ETNN_HD T class_weight(const float* weight, int c) {
  return weight == nullptr ? T(1) : static_cast<T>(weight[c]);
}

// PyTorch's weighted mean over the batch divides by the targets' weights, sum_b w[y_b]
// (B without weights); the sum divides by nothing.
template <class T>
T weighted_reduction_scale(Reduction reduction, std::span<const int> labels, const float* weight) {
  if (reduction == Reduction::sum) return T(1);
  T total = 0;
  for (int y : labels) total += class_weight<T>(weight, y);
  return T(1) / total;
}

// -1, 0 or 1 (PyTorch's sign: 0 at 0).
template <class T>
ETNN_HD T sign(T x) {
  return static_cast<T>((x > T(0)) - (x < T(0)));
}

// The value and gradient of one element-wise term.
template <class T>
struct Term {
  T value;
  T grad;
};

// A term whose inputs have a domain (BCE's probabilities, -1/+1 or 0/1 targets): valid(y, t) is
// false outside it, and complaint(i, y, t) is the error message for element i.
template <class F, class T>
concept DomainTerm = requires(const F& f, T y, T t, std::size_t i) {
  { f.valid(y, t) } -> std::convertible_to<bool>;
  { f.complaint(i, y, t) } -> std::convertible_to<std::string>;
};

// loss = scale sum_i f(y_i, t_i),  dL/dy_i = scale f'(y_i, t_i)   y, t: (B, S...)
// term(y, t) returns {f, f'}; grad null: the value alone. A term that is an ETNN_HD functor runs
// on either device (the Cuda overload below). A DomainTerm's inputs are checked in the same pass:
// an element outside its domain throws etnn::Error naming the first such element (after grad
// was written: it is the step's scratch, and nothing else has changed).
template <class T, ShapeType S, ShapeType TS, class F>
T elementwise(Cpu, TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target, T* grad, T scale,
              F term) {
  const std::size_t n = output.size();
  const T* y = output.data();
  const T* t = target.data();
  T total = 0;
  std::size_t first_invalid = n;
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (DomainTerm<F, T>)
      if (first_invalid == n && !term.valid(y[i], t[i])) first_invalid = i;
    const Term<T> e = term(y[i], t[i]);
    total += e.value;
    if (grad != nullptr) grad[i] = e.grad * scale;
  }
  if constexpr (DomainTerm<F, T>)
    if (first_invalid < n) throw Error(term.complaint(first_invalid, y[first_invalid], t[first_invalid]));
  return total * scale;
}

#if defined(__CUDACC__)
// partial[block] = sum of term values over the block's grid-stride share (in double), and
// grad[i] = scale f'(y_i, t_i) when grad is not null. A DomainTerm also lowers *first_invalid to
// the index of any element outside its domain.
template <class T, class F>
__global__ void elementwise_kernel(const T* y, const T* t, std::size_t n, T* grad, T scale, F term, double* partial,
                                   unsigned long long* first_invalid) {
  double sum = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if constexpr (DomainTerm<F, T>)
      if (!term.valid(y[i], t[i])) atomicMin(first_invalid, static_cast<unsigned long long>(i));
    const Term<T> e = term(y[i], t[i]);
    sum += static_cast<double>(e.value);
    if (grad != nullptr) grad[i] = e.grad * scale;
  }
  cuda::detail::store_block_sum(sum, partial);
}

// The same on the device, for a term that is an ETNN_HD functor: one kernel, the sum through a
// fixed number of block partials (the same result on every run; it may differ from the host's
// sequential sum in the last bits). A DomainTerm's first invalid element is searched in the same
// kernel; only when there is one are its two values copied back for the message.
template <class T, ShapeType S, ShapeType TS, class F>
T elementwise(Cuda, TensorView<const T, S, Cuda> output, TensorView<const T, TS, Cuda> target, T* grad, T scale,
              F term) {
  const std::size_t n = output.size();
  if (n == 0) return T(0);
  double* partial = cuda::detail::reduction_partials();
  unsigned long long* first_invalid = nullptr;
  if constexpr (DomainTerm<F, T>) {  // starts at the largest index: none found
    first_invalid = cuda::detail::reduction_index();
    ETNN_CHECK_CUDA(cudaMemsetAsync(first_invalid, 0xFF, sizeof *first_invalid, cuda::stream()));
  }
  elementwise_kernel<<<cuda::detail::reduction_blocks, cuda::detail::reduction_threads, 0, cuda::stream()>>>(
      output.data(), target.data(), n, grad, scale, term, partial, first_invalid);
  cuda::check_launch("etnn::loss elementwise");
  const double total = cuda::detail::sum_of_partials(partial);
  if constexpr (DomainTerm<F, T>) {
    unsigned long long found = 0;
    copy_to_host(Cuda{}, &found, first_invalid, 1);
    if (found < n) {
      T y{}, t{};
      copy_to_host(Cuda{}, &y, output.data() + found, 1);
      copy_to_host(Cuda{}, &t, target.data() + found, 1);
      throw Error(term.complaint(static_cast<std::size_t>(found), y, t));
    }
  }
  return static_cast<T>(total) * scale;
}
#endif

// What a loss on class indices gives both devices' row loops: the host class weights (or null),
// the reduction's scale and its row functor.
template <class T, class Row>
struct LabelRowPlan {
  const float* weight;
  T scale;
  Row row;
};

// The labels (one in [0, classes) per sample) and class weights (one per class, or none) checked;
// the weights, or null for all ones.
inline const float* checked_class_weights(std::span<const int> labels, int batch, int classes,
                                          const std::vector<float>& weight, const char* who) {
  check_labels(labels, batch, classes, who);
  check_weight_count(weight, classes, who);
  return weights_or_null(weight);
}

// A loss on class indices whose rows are independent (CrossEntropy, NLL, MultiMargin), on the host:
// scale * sum_b row(x_b, C, y_b, weight, g_b, scale) in row order, where row also writes
// scale * dl_b/dx_b into g_b when grad is not null. Labels and weights are checked by the caller.
template <class T, class Row>
T label_rows(const T* x, int batch, int classes, std::span<const int> labels, const float* weight, T* grad, T scale,
             Row row) {
  T total = 0;
  for (int b = 0; b < batch; ++b) {
    const std::size_t at = static_cast<std::size_t>(b) * classes;
    total += row(x + at, classes, labels[static_cast<std::size_t>(b)], weight, grad != nullptr ? grad + at : nullptr,
                 scale);
  }
  return total * scale;
}

#if defined(__CUDACC__)
// One thread per row b of a (B, C) output with class indices: row_loss[b] = row(x_b, C, y_b,
// weight, g_b, scale), where row also writes scale * dl_b/dx_b into g_b when g_b is not null.
template <class T, class Row>
__global__ void label_rows_kernel(const T* x, int batch, int classes, const int* labels, const float* weight,
                                  T* grad, T scale, Row row, double* row_loss) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  const std::size_t at = static_cast<std::size_t>(b) * classes;
  row_loss[b] = static_cast<double>(row(x + at, classes, labels[b], weight, grad != nullptr ? grad + at : nullptr,
                                        scale));
}

// The same on the device: the labels and class weights (checked on the host) are copied over, one
// kernel computes every row, and the row losses come back and are summed in T in row order, as
// label_rows sums them. Row losses travel as double, which holds a float or a double exactly.
// Its buffers are scratch that grows to the largest batch: a copy starts with its own, empty, so
// a loss that holds one stays copyable.
class DeviceLabelRows {
 public:
  DeviceLabelRows() = default;
  DeviceLabelRows(const DeviceLabelRows&) {}
  DeviceLabelRows& operator=(const DeviceLabelRows&) { return *this; }

  // scale * sum_b row_b.
  template <class T, class Row>
  T run(const T* x, int batch, int classes, std::span<const int> labels, const float* weight, T* grad, T scale,
        Row row, const char* who) {
    labels_.reserve_discard(labels.size());
    copy_from_host(Cuda{}, labels_.data(), labels.data(), labels.size());
    if (weight != nullptr) {
      weight_.reserve_discard(static_cast<std::size_t>(classes));
      copy_from_host(Cuda{}, weight_.data(), weight, static_cast<std::size_t>(classes));
    }
    row_loss_.reserve_discard(static_cast<std::size_t>(batch));
    if (batch > 0) {
      label_rows_kernel<<<(batch + 127) / 128, 128, 0, cuda::stream()>>>(
          x, batch, classes, labels_.data(), weight != nullptr ? weight_.data() : nullptr, grad, scale, row,
          row_loss_.data());
      cuda::check_launch(who);
    }
    host_row_loss_.resize(static_cast<std::size_t>(batch));
    copy_to_host(Cuda{}, host_row_loss_.data(), row_loss_.data(), host_row_loss_.size());
    T total = 0;
    for (double l : host_row_loss_) total += static_cast<T>(l);
    return total * scale;
  }

 private:
  Buffer<int, Cuda> labels_;
  Buffer<float, Cuda> weight_;
  Buffer<double, Cuda> row_loss_;
  std::vector<double> host_row_loss_;
};
#endif

// The public pair of a loss whose targets are a tensor of the output's shape (RealValues,
// MultiHot), from its private `compute(device, output, target, grad)` (grad null: the value
// alone), which a loss defines for any device.
template <class Loss>
struct TensorTargetLoss {
  // Returns the loss; grad (the output's size) receives dL/doutput.
  template <class T, ShapeType S, ShapeType TS>
  T value_and_grad(Cpu, TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target, T* grad) const {
    return static_cast<const Loss&>(*this).compute(Cpu{}, output, target, grad);
  }
  template <class T, ShapeType S, ShapeType TS>
  T value(Cpu, TensorView<const T, S, Cpu> output, TensorView<const T, TS, Cpu> target) const {
    return static_cast<const Loss&>(*this).compute(Cpu{}, output, target, static_cast<T*>(nullptr));
  }
#if defined(__CUDACC__)
  template <class T, ShapeType S, ShapeType TS>
  T value_and_grad(Cuda, TensorView<const T, S, Cuda> output, TensorView<const T, TS, Cuda> target, T* grad) const {
    return static_cast<const Loss&>(*this).compute(Cuda{}, output, target, grad);
  }
  template <class T, ShapeType S, ShapeType TS>
  T value(Cuda, TensorView<const T, S, Cuda> output, TensorView<const T, TS, Cuda> target) const {
    return value_and_grad(Cuda{}, output, target, static_cast<T*>(nullptr));
  }
#endif
};

// The same pair for a loss on class indices (ClassIndices), whose rows are independent, from its
// private `plan<T>(labels, batch, classes)` (checks the labels; returns a LabelRowPlan): label_rows
// on the host, DeviceLabelRows on the device.
template <class Loss>
struct LabelTargetLoss {
  template <class T, ShapeType S>
  T value_and_grad(Cpu, TensorView<const T, S, Cpu> output, std::span<const int> labels, T* grad) const {
    static_assert(check::class_scores<S>());
    const auto p = loss().template plan<T>(labels, output.batch(), S::dims[0]);
    return label_rows(output.data(), output.batch(), S::dims[0], labels, p.weight, grad, p.scale, p.row);
  }
  template <class T, ShapeType S>
  T value(Cpu, TensorView<const T, S, Cpu> output, std::span<const int> labels) const {
    return value_and_grad(Cpu{}, output, labels, static_cast<T*>(nullptr));
  }
#if defined(__CUDACC__)
  template <class T, ShapeType S>
  T value_and_grad(Cuda, TensorView<const T, S, Cuda> output, std::span<const int> labels, T* grad) const {
    static_assert(check::class_scores<S>());
    const auto p = loss().template plan<T>(labels, output.batch(), S::dims[0]);
    return device_.run(output.data(), output.batch(), S::dims[0], labels, p.weight, grad, p.scale, p.row, Loss::who);
  }
  template <class T, ShapeType S>
  T value(Cuda, TensorView<const T, S, Cuda> output, std::span<const int> labels) const {
    return value_and_grad(Cuda{}, output, labels, static_cast<T*>(nullptr));
  }
#endif

 private:
  const Loss& loss() const { return static_cast<const Loss&>(*this); }
#if defined(__CUDACC__)
  mutable DeviceLabelRows device_;
#endif
};

}  // namespace detail
}  // namespace etnn::loss
