#pragma once
// Private to dist/: include <etnn/dist/mpi.hpp>, which uses it.
// etnn::dist::SharedStorage<T>: n values of T that every rank on the machine can read and write,
// in a shared memory window that dist::Mpi keeps (Mpi::shared_storage, when every rank runs on one
// machine). An allreduce of a range of it, the same range on every rank, sums in place
// (shared_memory_sum.hpp): each rank sums its share straight from every rank's storage and writes
// the result into all of them, nothing copied in or out. A data-parallel optimizer keeps its
// model's gradients in one (optim/gradient_storage.hpp), as PyTorch's DistributedDataParallel
// makes the gradients views of its buckets with gradient_as_bucket_view.
//
// The windows live as long as the Mpi: a SharedStorage that goes away returns its window (without
// a collective) for a later one of at most its size to reuse, and the Mpi frees them all at its
// end; no SharedStorage may outlive it.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "shared_window.hpp"

namespace etnn::dist {

namespace detail {

// The windows of an Mpi's SharedStorage, each in use by one SharedStorage or free for the next.
class SharedStoragePool {
 public:
  struct Entry {
    SharedWindow window;
    bool in_use = false;
  };

  // The index of the smallest free window of at least `bytes` (the first of equals), or -1.
  int free_entry(std::size_t bytes) const {
    int best = -1;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const SharedWindow& w = entries_[i]->window;
      if (!entries_[i]->in_use && w.bytes() >= bytes && (best < 0 || w.bytes() < entries_[static_cast<std::size_t>(best)]->window.bytes()))
        best = static_cast<int>(i);
    }
    return best;
  }

  // True while a SharedStorage uses one of the windows.
  bool in_use() const noexcept {
    for (const auto& e : entries_)
      if (e->in_use) return true;
    return false;
  }
  Entry& entry(int i) { return *entries_[static_cast<std::size_t>(i)]; }

  // A new window of `bytes` per rank (collective over `node`), or nullptr where none can be had.
  Entry* add(MPI_Comm node, std::size_t bytes) {
    auto e = std::make_unique<Entry>();
    if (!e->window.allocate(node, bytes)) return nullptr;
    entries_.push_back(std::move(e));
    return entries_.back().get();
  }

  // The window in use whose segment on this rank holds [p, p + bytes), or nullptr.
  const SharedWindow* holding(const void* p, std::size_t bytes) const noexcept {
    for (const auto& e : entries_)
      if (e->in_use && e->window.holds(p, bytes)) return &e->window;
    return nullptr;
  }

  // Collective; before MPI_Finalize.
  void release() {
    for (auto& e : entries_) e->window.free();
    entries_.clear();
  }

 private:
  std::vector<std::unique_ptr<Entry>> entries_;  // stable addresses for SharedStorage
};

}  // namespace detail

template <class T>
class SharedStorage {
 public:
  SharedStorage() = default;  // empty: no shared memory to be had
  SharedStorage(detail::SharedStoragePool::Entry& entry, std::size_t n) : entry_(&entry), size_(n) {
    entry.in_use = true;
  }
  SharedStorage(SharedStorage&& other) noexcept
      : entry_(std::exchange(other.entry_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  SharedStorage& operator=(SharedStorage&& other) noexcept {
    if (this != &other) {
      give_back();
      entry_ = std::exchange(other.entry_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~SharedStorage() { give_back(); }

  explicit operator bool() const noexcept { return entry_ != nullptr; }
  // This rank's n values (uninitialised when new).
  T* data() const noexcept { return entry_ ? reinterpret_cast<T*>(entry_->window.mine()) : nullptr; }
  std::size_t size() const noexcept { return size_; }

 private:
  void give_back() noexcept {
    if (entry_ != nullptr) entry_->in_use = false;
    entry_ = nullptr;
    size_ = 0;
  }

  detail::SharedStoragePool::Entry* entry_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace etnn::dist
