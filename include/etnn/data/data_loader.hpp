#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// DataLoader: the batches of an in-memory dataset in a per-epoch sample order.
//   order  the sampler's indices for the epoch: 0..n-1 (SequentialSampler) or a permutation seeded
//          by (seed, epoch) (RandomSampler), identical on every platform and standard library
//   batch  k covers order[k * B, min((k + 1) * B, n)); x (count, S) floats and y the count samples'
//          targets (count labels, or count rows of the dataset's target shape), gathered into
//          loader-owned memory that stays valid until the iterator advances
// With prefetch a worker thread gathers batch k + 1 while the caller uses batch k (two buffers).
// By default it does so only for a dataset streamed from disk (IdxDataset over its memory cap),
// whose reads are worth hiding, and only where a CPU is free for the worker (the process may run
// on more CPUs than etnn's compute threads). An in-memory batch is a few copies of rows, cheaper
// than handing it over between threads (tiny/32 at 1 thread: 1.1M samples/s with the worker,
// 2.2M without), and where the compute threads take every CPU the worker preempts one of them
// mid-tile and the step waits for it (README's first command on 2 cores and 2 threads: 115k
// samples/s gathering on the caller, 97k with the worker). So by default the caller gathers, as
// PyTorch's DataLoader does with num_workers=0.
// Buffers are sized at construction (a second one only where prefetch may run): iterating
// allocates nothing per batch.
#include <algorithm>
#include <array>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../backend/executor.hpp"
#include "../backend/threads.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/buffer.hpp"
#include "../tensor/tensor.hpp"
#include "sampler.hpp"
#include "targets.hpp"

namespace etnn::data {

// Designated-initializer options: {.batch = 64, .shuffle = true, .seed = 0}.
struct LoaderOptions {
  int batch = 64;
  bool shuffle = false;       // RandomSampler{seed} if true, else SequentialSampler
  std::uint64_t seed = 0;
  bool drop_last = false;     // skip the last batch when it has fewer than `batch` samples
  // Gather the next batch on a worker thread while the caller trains on this one: unset, for a
  // dataset streamed from disk where a CPU is free for it (usable_cpus() > num_threads() when an
  // iteration begins); true always, false never.
  std::optional<bool> prefetch = std::nullopt;
  // Data parallelism: this rank's share, in the sampler's own order (shuffle and seed above are
  // then not used): {.batch = 64, .sampler = etnn::data::DistributedSampler(world)}.
  std::optional<DistributedSampler> sampler = std::nullopt;
};

// One batch: x (B, S) features and y the B samples' targets, B <= LoaderOptions::batch; y is a
// std::span<const int> of B class indices, or a (B, target_shape<Y>) TensorView (targets.hpp).
template <ShapeType S, class Y = ClassIndices>
struct Batch {
  TensorView<const float, S, Cpu> x;
  target_batch<Y> y;
};

namespace detail {
template <class D>
struct DatasetTargets {
  using type = ClassIndices;
};
template <class D>
  requires requires { typename D::target_kind; }
struct DatasetTargets<D> {
  using type = typename D::target_kind;
};
}  // namespace detail

// The kind of target a dataset holds: D::target_kind, or class indices for a dataset that does not
// say (one with label(i) only).
template <class D>
using dataset_targets = typename detail::DatasetTargets<D>::type;

// What a DataLoader reads from: Dataset<S, Y>, IdxDataset<S, Y>, or anything with the same indexed
// access: label(i) (class indices) or target(i) (a pointer to the sample's target_size<Y> floats),
// and a pointer to each sample or a copy of it into the loader's batch.
template <class D>
concept DatasetType = ShapeType<typename D::shape> && TargetKind<dataset_targets<D>> &&
                      requires(const D& data, std::size_t i) {
                        { data.size() } -> std::convertible_to<std::size_t>;
                      } &&
                      (class_targets<dataset_targets<D>> ? requires(const D& data, std::size_t i) {
                        { data.label(i) } -> std::convertible_to<int>;
                      } : requires(const D& data, std::size_t i) {
                        { data.target(i) } -> std::convertible_to<const target_value<dataset_targets<D>>*>;
                      }) && (requires(const D& data, std::size_t i) {
  { data.sample(i) } -> std::convertible_to<const float*>;  // in memory
} || requires(const D& data, std::size_t i, float* out) {
  data.copy_sample(i, out);  // read as needed (IdxDataset streaming from disk)
});

// for (auto batch : loader) ...: one iteration at a time; begin() ends any previous one.
template <DatasetType D>
class DataLoader {
 public:
  using dataset_type = D;
  using shape = typename D::shape;
  using target_kind = dataset_targets<D>;
  using batch_type = Batch<shape, target_kind>;
  class Iterator;

  // The dataset is referenced, not copied: it must outlive the loader.
  DataLoader(const D& data, LoaderOptions options = {})
      : data_(&data), options_(checked(options)), sampler_(make_sampler(options)),
        order_(std::visit([&](const auto& s) { return s.num_samples(data.size()); }, sampler_)),
        num_batches_(order_.size() / batch_size() +
                     (options.drop_last || order_.size() % batch_size() == 0 ? 0 : 1)) {
    const std::size_t rows = std::min(batch_size(), order_.size());
    for (std::size_t s = 0; s < (options_.prefetch.value_or(streamed()) ? 2u : 1u); ++s) {
      slots_[s].x = Buffer<float, Cpu>(rows * shape::size);
      slots_[s].y = Buffer<target_value<target_kind>, Cpu>(rows * target_size<target_kind>);
    }
  }
  // A temporary dataset would be destroyed before the loader reads it.
  DataLoader(const D&&, LoaderOptions = {}) = delete;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  ~DataLoader() { stop(); }

  // Selects the sample order of the following iterations (PyTorch's sampler.set_epoch).
  void set_epoch(int epoch) noexcept {
    if (epoch != epoch_) {
      resume_position_ = 0;
      position_ = 0;
    }
    epoch_ = epoch;
  }
  int epoch() const noexcept { return epoch_; }
  // Batches per epoch; the partial last one counts unless drop_last.
  std::size_t size() const noexcept { return num_batches_; }
  // Whether an iteration begun now gathers on a worker thread (LoaderOptions::prefetch).
  bool prefetches() const { return options_.prefetch.value_or(streamed() && usable_cpus() > num_threads()); }
  // Batches of the current epoch handed out so far, including the one being used (a batch counts
  // as consumed once the iterator has produced it), or where a resume() will start.
  std::size_t position() const noexcept { return position_; }

  // Resuming training: the next iteration covers epoch `epoch` from batch `position` on, exactly
  // as the uninterrupted iteration would have continued (set_epoch(epoch) keeps this).
  void resume(int epoch, std::size_t position) noexcept {
    epoch_ = epoch;
    resume_position_ = position;
    position_ = position;
  }

  Iterator begin() {
    stop();
    prefetching_ = prefetches();
    ++generation_;
    std::visit([&](const auto& s) { s.fill(data_->size(), epoch_, order_); }, sampler_);
    const std::size_t first = std::exchange(resume_position_, 0);
    Iterator it(this, generation_, first);
    position_ = std::min(first, num_batches_);
    if (first >= num_batches_) return it;
    if (prefetching_) {
      for (Slot& s : slots_) s.ready = no_batch;
      claimed_ = first;
      held_ = first;
      stop_ = false;
      error_ = nullptr;
      worker_ = std::thread([this] { work(); });
    }
    acquire(first);  // on a throw, `it` stops the worker
    return it;
  }
  std::default_sentinel_t end() const noexcept { return {}; }

  // Move-only input iterator; destroying the active one (loop end, break, exception) stops the worker.
  class Iterator {
   public:
    using iterator_concept = std::input_iterator_tag;
    using value_type = batch_type;
    using difference_type = std::ptrdiff_t;

    Iterator(Iterator&& other) noexcept
        : loader_(std::exchange(other.loader_, nullptr)), generation_(other.generation_), index_(other.index_) {}
    Iterator& operator=(Iterator&& other) noexcept {
      if (this != &other) {
        release();
        loader_ = std::exchange(other.loader_, nullptr);
        generation_ = other.generation_;
        index_ = other.index_;
      }
      return *this;
    }
    ~Iterator() { release(); }

    batch_type operator*() const { return loader_->batch(index_); }
    Iterator& operator++() {
      loader_->advance(generation_, ++index_);
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& it, std::default_sentinel_t) noexcept {
      return it.loader_ == nullptr || it.index_ >= it.loader_->size();
    }

   private:
    friend DataLoader;
    Iterator(DataLoader* loader, std::uint64_t generation, std::size_t first) noexcept
        : loader_(loader), generation_(generation), index_(first) {}
    void release() noexcept {
      if (loader_ != nullptr && loader_->generation_ == generation_) loader_->stop();
      loader_ = nullptr;
    }

    DataLoader* loader_ = nullptr;
    std::uint64_t generation_ = 0;
    std::size_t index_ = 0;
  };

 private:
  static constexpr std::size_t no_batch = static_cast<std::size_t>(-1);

  struct Slot {
    Buffer<float, Cpu> x;  // (rows, S)
    Buffer<target_value<target_kind>, Cpu> y;  // (rows, target_size<target_kind>)
    int count = 0;         // rows of the batch it holds
    std::size_t ready = no_batch;  // with prefetch: the batch it holds, once gathered (under mutex_)
  };

  static LoaderOptions checked(const LoaderOptions& options) {
    if (options.batch <= 0) {
      throw ShapeError("etnn::data::DataLoader: batch is " + std::to_string(options.batch) +
                       "; pass a positive batch size, e.g. {.batch = 64}");
    }
    return options;
  }
  static Sampler make_sampler(const LoaderOptions& options) {
    if (options.sampler) return *options.sampler;
    if (options.shuffle) return RandomSampler{options.seed};
    return SequentialSampler{};
  }
  std::size_t batch_size() const noexcept { return static_cast<std::size_t>(options_.batch); }
  // Whether the dataset reads its samples from disk as batches need them.
  bool streamed() const {
    if constexpr (requires { data_->streaming(); }) return data_->streaming();
    return false;
  }
  Slot& slot(std::size_t k) noexcept { return slots_[prefetching_ ? k % 2 : 0]; }

  batch_type batch(std::size_t k) {
    const Slot& s = slot(k);
    return {TensorView<const float, shape, Cpu>(s.x.data(), s.count), target_rows<target_kind>(s.y.data(), s.count)};
  }

  // Whether the dataset copies its samples out (read from a file) rather than pointing at them.
  static constexpr bool copies_samples = requires(const D& data, std::size_t i, float* out) {
    data.copy_sample(i, out);
  };

  // Copies the samples of batch k into s: rows in order, x row r and y row r from dataset sample
  // order[k * B + r]. Rows of samples in memory are copied on etnn's CPU threads when the batch is
  // large enough to pay for a parallel loop (mlp784 at a batch of 256: 4% more samples/s on 2
  // threads; at 64, no change either way); a dataset that reads its samples from a file
  // (copy_sample) is read by one thread, in order.
  void gather(std::size_t k, Slot& s) const {
    const std::size_t first = k * batch_size();
    const std::size_t count = std::min(batch_size(), order_.size() - first);
    auto gather_row = [&](std::size_t r) {
      const std::size_t i = order_[first + r];
      if constexpr (copies_samples)
        data_->copy_sample(i, s.x.data() + r * shape::size);
      else
        std::copy_n(data_->sample(i), shape::size, s.x.data() + r * shape::size);
      if constexpr (class_targets<target_kind>)
        s.y.data()[r] = data_->label(i);
      else
        std::copy_n(data_->target(i), target_size<target_kind>, s.y.data() + r * target_size<target_kind>);
    };
    if constexpr (copies_samples) {
      for (std::size_t r = 0; r < count; ++r) gather_row(r);
    } else {
      for_each_index(Cpu{}, count, shape::size, gather_row);
    }
    s.count = static_cast<int>(count);
  }

  void advance(std::uint64_t generation, std::size_t k) {
    if (generation != generation_) {
      throw Error("etnn::data::DataLoader: this iterator's iteration was ended by a later begin(); "
                  "run one loop over a loader at a time");
    }
    if (k < num_batches_) {
      acquire(k);
    } else {
      stop();
    }
  }

  // Makes batch k the current one. With prefetch the worker has usually gathered it already; if
  // the worker has not started it (it may not have had a core: the training step keeps both busy),
  // the caller gathers it itself rather than wait for the worker to be scheduled.
  void acquire(std::size_t k) {
    position_ = k + 1;
    if (!prefetching_) {
      gather(k, slot(k));
      return;
    }
    std::unique_lock lock(mutex_);
    held_ = k;
    if (claimed_ == k) {
      claimed_ = k + 1;
      lock.unlock();
      gather(k, slot(k));
      lock.lock();
      slot(k).ready = k;
    }
    cv_.notify_all();
    cv_.wait(lock, [&] { return slot(k).ready == k || error_; });
    if (slot(k).ready != k) std::rethrow_exception(error_);
  }

  // The worker: claims the next batch k once the caller holds batch k - 1 or later (so batch k - 2,
  // the previous content of slot k % 2, is released), gathers it, and publishes it.
  void work() noexcept {
    try {
      std::unique_lock lock(mutex_);
      while (true) {
        cv_.wait(lock, [&] { return stop_ || (claimed_ < num_batches_ && claimed_ <= held_ + 1); });
        if (stop_) return;
        const std::size_t k = claimed_++;
        lock.unlock();
        gather(k, slot(k));
        lock.lock();
        slot(k).ready = k;
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      cv_.notify_all();
    }
  }

  void stop() noexcept {
    if (!worker_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  const D* data_;
  LoaderOptions options_;
  Sampler sampler_;
  std::vector<std::size_t> order_;  // this epoch's sample indices, filled by begin()
  std::size_t num_batches_;
  std::array<Slot, 2> slots_;       // slot 1 only with prefetch
  bool prefetching_ = false;        // the current iteration's choice (prefetches() at begin())
  int epoch_ = 0;
  std::size_t position_ = 0;         // batches of this epoch handed out
  std::size_t resume_position_ = 0;  // where the next iteration starts (resume())
  std::uint64_t generation_ = 0;    // counts begin() calls; an iterator acts only on its own iteration

  // Shared with the worker under mutex_.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t claimed_ = 0;         // batches [0, claimed_) are gathered or being gathered
  std::size_t held_ = 0;            // the batch the caller holds
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace etnn::data
