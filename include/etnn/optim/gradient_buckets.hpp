#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Gradient buckets: the flat gradient buffer cut into ranges of at least `bucket_bytes` (PyTorch's
// DistributedDataParallel default, 25 MiB), in reverse layer order, the order in which backward
// finishes them. Each bucket's allreduce starts as soon as backward has finished every gradient in
// it (overlap), and step() waits for all of them. Buckets end at layer boundaries and, unlike
// DDP's, also inside a large dense layer, between the row blocks in which backward then computes
// its weight's gradient (nn/weight_row_blocks.hpp): a model's first layer, the last one backward
// finishes, need not wait for all of its gradient before its first allreduce starts.
//
//   flat gradients   [ layer 0: W rows | W rows | b | layer 1 | layer 2 | layer 3 ]
//   buckets          [ bucket 2        | bucket 1                | bucket 0          ]
//                                                                  bucket 0 is reduced first
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

#include "../dist/reducer.hpp"

namespace etnn::optim {

struct BucketOptions {
  std::size_t bucket_bytes = std::size_t{25} << 20;
  bool overlap = true;  // false: start every allreduce in step(), after backward (for comparison)
  // Buckets may end inside a large dense layer, at its weight gradient's row blocks (on the CPU);
  // false: only between layers, as DDP's (for comparison).
  bool split_layers = true;
  // Where the reducer offers memory it sums in place (dist::Mpi with every rank on one machine),
  // the model's gradients live there for the optimizer's life, as with PyTorch DDP's
  // gradient_as_bucket_view (optim/gradient_storage.hpp); false keeps them in the model's buffer.
  bool gradient_as_bucket_view = true;
};

template <dist::Reducer R, class T>
class GradientBuckets {
 public:
  // layer_ends: the end offset of each layer's parameters in the flat buffer, in layer order;
  // cuts: where a bucket may end, ascending (layer_ends and the row blocks inside layers).
  GradientBuckets(R& reducer, std::span<const std::size_t> layer_ends, std::span<const std::size_t> cuts,
                  BucketOptions options)
      : reducer_(&reducer), options_(options) {
    if (!options.split_layers) cuts = layer_ends;
    const std::size_t per_bucket = std::max<std::size_t>(1, options.bucket_bytes / sizeof(T));
    std::size_t end = cuts.empty() ? 0 : cuts.back();
    for (std::size_t i = cuts.size(); i-- > 0;) {
      const std::size_t begin = i == 0 ? 0 : cuts[i - 1];
      if (end - begin >= per_bucket || (i == 0 && end > begin)) {
        buckets_.push_back({begin, end});
        ends_inside_layers_ =
            ends_inside_layers_ || (begin > 0 && !std::binary_search(layer_ends.begin(), layer_ends.end(), begin));
        end = begin;
      }
    }
  }

  // Backward has finished every gradient at offsets >= first_final: start the buckets it completes
  // and drive the ones in flight. `gradients` is the flat buffer, the same one until reduce_all().
  void ready_from(T* gradients, std::size_t first_final) {
    if (!options_.overlap || reducer_->size() == 1) return;
    for (Bucket& b : buckets_) {
      if (!b.started && b.begin >= first_final) start(b, gradients);
      if (b.started && !b.done) b.done = reducer_->poll(b.pending);
    }
  }

  // Sums every bucket across ranks (starting those not started yet) and waits for them all.
  void reduce_all(T* gradients) {
    sums_finite_ = -1;
    if (reducer_->size() == 1) return;
    for (Bucket& b : buckets_)
      if (!b.started) start(b, gradients);
    for (Bucket& b : buckets_)
      if (!b.done) {
        reducer_->wait(b.pending);
        b.done = true;
      }
    sums_finite_ = checked_finite();
    for (Bucket& b : buckets_) b.started = b.done = false;
  }

  // After reduce_all(): 1 when the reducer checked every bucket's sum and none holds a NaN or an
  // infinity, 0 when one does, -1 when some sum was not checked (dist::Reducer's finite_sum).
  int sums_finite() const noexcept { return sums_finite_; }

  std::size_t count() const noexcept { return buckets_.size(); }
  // Whether backward should report the row blocks of layers' weight gradients as they complete:
  // a bucket ends inside a layer, and its allreduce would start then.
  bool wants_row_blocks() const noexcept { return ends_inside_layers_ && options_.overlap && reducer_->size() > 1; }

  // Called when an exception interrupts a step after a reduction started (complete or not): the
  // ranks no longer agree on the sequence of collectives (an unfinished one still writes into the
  // gradients), so the job ends.
  void abandon() noexcept {
    for (const Bucket& b : buckets_)
      if (b.started) reducer_->abort("a gradient reduction was abandoned by an exception during backward or step");
    for (Bucket& b : buckets_) b.started = b.done = false;
  }

  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;
  ~GradientBuckets() { abandon(); }

 private:
  struct Bucket {
    std::size_t begin;
    std::size_t end;
    typename R::Pending pending{};
    bool started = false;
    bool done = false;
  };

  int checked_finite() const noexcept {
    if constexpr (requires(const typename R::Pending& p) { { R::finite_sum(p) } -> std::convertible_to<int>; }) {
      int verdict = 1;
      for (const Bucket& b : buckets_) {
        const int finite = R::finite_sum(b.pending);
        if (finite == 0) return 0;
        if (finite < 0) verdict = -1;
      }
      return verdict;
    } else {
      return -1;
    }
  }

  void start(Bucket& b, T* gradients) {
    b.pending = reducer_->start_allreduce_sum(gradients + b.begin, b.end - b.begin);
    b.started = true;
  }

  R* reducer_;
  BucketOptions options_;
  std::vector<Bucket> buckets_;
  bool ends_inside_layers_ = false;
  int sums_finite_ = -1;  // of the last reduce_all()
};

}  // namespace etnn::optim
