#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// The loops of the losses on the device, with the host's semantics (cpu/loss_loops.hpp): the sum of
// an element-wise ETNN_HD term over every value (one grid-stride kernel, block partials in double),
// and the rows of class scores (a grid-stride loop over the rows, row losses summed on the host in
// row order). Both return the loss on its way to the host (cuda::PendingLoss), read when converted.
#include <algorithm>
#include <cstddef>
#include <concepts>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../expr/loss_term.hpp"
#include "../tensor/buffer.hpp"
#include "../tensor/tensor.hpp"
#include "input_check.hpp"
#include "memory.hpp"
#include "pending_loss.hpp"
#include "pinned_staging.hpp"
#include "reduce.hpp"
#include "runtime.hpp"

namespace etnn {
namespace cuda {
namespace detail {

// partial[block] = sum of term values over the block's grid-stride share (in double), and
// grad[i] = scale f'(y_i, t_i) when grad is not null. A DomainTerm also lowers *first_invalid to
// the index of any element outside its domain.
template <class T, class F>
__global__ void elementwise_kernel(const T* y, const T* t, std::size_t n, T* grad, T scale, F term, double* partial,
                                   unsigned long long* first_invalid) {
  double sum = 0.0;
  for (const std::size_t i : grid_stride(n)) {
    if constexpr (expr::DomainTerm<F, T>)
      if (!term.valid(y[i], t[i])) atomicMin(first_invalid, static_cast<unsigned long long>(i));
    const expr::Term<T> e = term(y[i], t[i]);
    sum += static_cast<double>(e.value);
    if (grad != nullptr) grad[i] = e.grad * scale;
  }
  store_block_sum(sum, partial);
}

// Lowers *first_outside to the index of any t[i], i < n, outside the TargetDomain.
template <class T, class Domain>
__global__ void target_domain_kernel(const T* t, std::size_t n, Domain domain, unsigned long long* first_outside) {
  for (const std::size_t i : grid_stride(n))
    if (!domain.valid(t[i])) atomicMin(first_outside, static_cast<unsigned long long>(i));
}

// A grid-stride loop over the rows b of a (B, C) output with class indices:
// row_loss[b] = row(x_b, C, y_b, weight, g_b, scale), where row also writes scale * dl_b/dx_b into
// g_b when g_b is not null.
template <class T, class Row>
__global__ void label_rows_kernel(const T* x, int batch, int classes, const int* labels, const float* weight,
                                  T* grad, T scale, Row row, double* row_loss) {
  for (const std::size_t b : grid_stride(static_cast<std::size_t>(batch))) {
    const std::size_t at = b * classes;
    row_loss[b] = static_cast<double>(row(x + at, classes, labels[b], weight, grad != nullptr ? grad + at : nullptr,
                                          scale));
  }
}

}  // namespace detail

// The rows of class scores on the device: the labels (and the class weights, when they differ from
// those sent last), checked on the host, are sent over through pinned memory, one kernel computes
// every row, and the row losses come back without a wait, to be summed in T in row order when the
// loss is read (cuda::PendingLoss), as the host's label_rows_loss sums them. Row losses travel as double, which holds a float or a double
// exactly. Its buffers are scratch that grows to the largest batch: a copy starts with its own,
// empty, so a loss that holds one stays copyable.
class LabelRowsScratch {
 public:
  LabelRowsScratch() = default;
  LabelRowsScratch(const LabelRowsScratch&) {}
  LabelRowsScratch& operator=(const LabelRowsScratch&) { return *this; }

  // scale * sum_b row_b, on its way to the host.
  template <class T, class Row>
  PendingLoss<T> run(const T* x, int batch, int classes, std::span<const int> labels, const float* weight, T* grad,
                     T scale, Row row, const char* who) {
    labels_.reserve_discard(labels.size());
    from_host_.send(labels_.data(), labels.size(), [&](int* to) { std::copy(labels.begin(), labels.end(), to); });
    if (weight != nullptr && !std::equal(weight, weight + classes, sent_weight_.begin(), sent_weight_.end())) {
      weight_.reserve_discard(static_cast<std::size_t>(classes));
      from_host_.send(weight_.data(), static_cast<std::size_t>(classes),
                      [&](float* to) { std::copy_n(weight, classes, to); });
      sent_weight_.assign(weight, weight + classes);
    }
    row_loss_.reserve_discard(static_cast<std::size_t>(batch));
    if (batch > 0) {
      launch(who, detail::label_rows_kernel<T, Row>, {(static_cast<unsigned>(batch) + 127) / 128, 128}, x, batch,
             classes, labels_.data(), weight != nullptr ? weight_.data() : nullptr, grad, scale, row,
             row_loss_.data());
    }
    return loss_readback().receive(row_loss_.data(), static_cast<std::size_t>(batch), Sum::rows, scale);
  }

 private:
  PinnedStaging from_host_;  // the labels' and weights' way to the device
  Buffer<int, Cuda> labels_;
  Buffer<float, Cuda> weight_;
  std::vector<float> sent_weight_;  // what weight_ holds: class weights are sent again only when they change
  Buffer<double, Cuda> row_loss_;
};

}  // namespace cuda

namespace cuda::detail {

// A stateless DomainTerm's message for element i (what cuda::InputCheck keeps until the host reads
// the check, after the loss object may have gone).
template <class F, class T>
std::string complaint_of(std::size_t i, double input, double target) {
  return F{}.complaint(i, static_cast<T>(input), static_cast<T>(target));
}

}  // namespace cuda::detail

// The element-wise loss on the device, for a term that is an ETNN_HD functor: one kernel, the sum through a
// fixed number of block partials, which come back without a wait and are added when the loss is
// read (cuda::PendingLoss: the same result on every run; it may differ from the host's
// sequential sum in the last bits). A DomainTerm's first invalid element is searched in the same
// kernel. Inside a cuda::DeferInputChecks scope (a stateless term, the scope's first) the answer
// stays on the device, for the non-finite guard's verdict (cuda/input_check.hpp); otherwise it is
// read at once (a wait), so that a bad input stops the step before backward, as on the host; only
// when there is one are its two values copied back for the message.
template <class T, ShapeType S, ShapeType TS, class F>
cuda::PendingLoss<T> elementwise_loss(Cuda, TensorView<const T, S, Cuda> output, TensorView<const T, TS, Cuda> target,
                                      T* grad, T scale, F term) {
  const std::size_t n = output.size();
  cuda::LossReadback& to_host = cuda::loss_readback();
  if (n == 0) return to_host.receive(static_cast<const double*>(nullptr), 0, cuda::Sum::partials, scale);
  double* partial = cuda::detail::reduction_partials();
  unsigned long long* first_invalid = nullptr;
  if constexpr (expr::DomainTerm<F, T>) {  // starts at the largest index: none found
    first_invalid = cuda::detail::reduction_index();
    ETNN_CHECK_CUDA(cuda::runtime().cudaMemsetAsync(first_invalid, 0xFF, sizeof *first_invalid, cuda::stream()));
  }
  using cuda::detail::reduction_blocks, cuda::detail::reduction_threads;
  cuda::launch("etnn::loss elementwise", cuda::detail::elementwise_kernel<T, F>, {reduction_blocks, reduction_threads},
               output.data(), target.data(), n, grad, scale, term, partial, first_invalid);
  if constexpr (expr::DomainTerm<F, T> && std::is_empty_v<F> && std::default_initializable<F>) {
    if (unsigned long long* found = cuda::DeferInputChecks::defer(&cuda::detail::complaint_of<F, T>)) {
      cuda::launch("etnn::loss record_input_check", cuda::detail::record_input_check_kernel<T>, {1, 1}, first_invalid,
                   n, output.data(), target.data(), found);
      return to_host.receive(partial, reduction_blocks, cuda::Sum::partials, scale);
    }
  }
  if constexpr (expr::DomainTerm<F, T>) {
    unsigned long long found = 0;
    copy_to_host(Cuda{}, &found, first_invalid, 1);
    if (found < n) {
      T y{}, t{};
      copy_to_host(Cuda{}, &y, output.data() + found, 1);
      copy_to_host(Cuda{}, &t, target.data() + found, 1);
      throw Error(term.complaint(static_cast<std::size_t>(found), y, t));
    }
  }
  return to_host.receive(partial, reduction_blocks, cuda::Sum::partials, scale);
}

// The index of the first of the device's targets t[i], i < n, outside a TargetDomain
// (expr/loss_term.hpp), n when none is: one kernel, then a wait for its answer. (Targets from the
// host are checked there as they are staged, loss/target_staging.hpp, and never come here.)
template <class T, class Domain>
std::size_t first_target_outside(Cuda, const T* t, std::size_t n, Domain domain) {
  if (n == 0) return 0;
  unsigned long long* first_outside = cuda::detail::reduction_index();  // from the largest index: none found
  ETNN_CHECK_CUDA(cuda::runtime().cudaMemsetAsync(first_outside, 0xFF, sizeof *first_outside, cuda::stream()));
  cuda::launch("etnn::loss target_domain", cuda::detail::target_domain_kernel<T, Domain>, {cuda::grid_blocks(n), 256},
               t, n, domain, first_outside);
  unsigned long long found = 0;
  copy_to_host(Cuda{}, &found, first_outside, 1);
  return found < n ? static_cast<std::size_t>(found) : n;
}

// scale * sum_b row_b on the device (cpu/loss_loops.hpp's label_rows_loss), through `scratch`, on
// its way to the host.
template <class T, class Row>
cuda::PendingLoss<T> label_rows_loss(Cuda, cuda::LabelRowsScratch& scratch, const T* x, int batch, int classes,
                                     std::span<const int> labels, const float* weight, T* grad, T scale, Row row,
                                     const char* who) {
  return scratch.run(x, batch, classes, labels, weight, grad, scale, row, who);
}

}  // namespace etnn
