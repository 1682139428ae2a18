#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// LruCache<Key, Value, Release>: at most `capacity` values by key, each released exactly once by
// Release (when evicted, cleared or destroyed with the cache); when full, adding a value releases
// the least recently used one first. GraphCache (cuda/graph.hpp) keeps its executable graphs in
// one, so that inputs that keep changing (device data fed as offset views) cost a bounded number
// of graphs. This header needs no CUDA: the host tests check the policy.
//   LruCache<Key, Handle, Destroy> cache(16);
//   Handle* h = cache.find(key);              // null on a miss; a hit becomes the most recent
//   if (h == nullptr) h = &cache.insert(key, make());
#include <cstddef>
#include <list>
#include <map>
#include <stdexcept>
#include <utility>

namespace etnn::cuda {

template <class Key, class Value, class Release>
class LruCache {
 public:
  explicit LruCache(std::size_t capacity, Release release = {}) : capacity_(capacity), release_(std::move(release)) {
    if (capacity_ == 0) throw std::invalid_argument("etnn::cuda::LruCache: the capacity must be at least 1");
  }
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;
  ~LruCache() { clear(); }

  // The value of `key`, now the most recently used; null when there is none.
  Value* find(const Key& key) {
    const auto at = index_.find(key);
    if (at == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, at->second);  // iterators stay valid
    return &at->second->second;
  }

  // Owns `value` as the value of `key` (releasing the one it had, if any), the most recently used;
  // when that makes one more than the capacity, the least recently used is released and forgotten.
  Value& insert(const Key& key, Value value) {
    if (const auto at = index_.find(key); at != index_.end()) {
      release_(at->second->second);
      order_.erase(at->second);
      index_.erase(at);
    }
    try {
      order_.emplace_front(key, value);
      try {
        index_.emplace(key, order_.begin());
      } catch (...) {
        order_.pop_front();
        throw;
      }
    } catch (...) {
      release_(value);
      throw;
    }
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      release_(order_.back().second);
      order_.pop_back();
      ++evictions_;
    }
    return order_.front().second;
  }

  // Releases every value, least recently used first, and forgets them.
  void clear() {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) release_(it->second);
    order_.clear();
    index_.clear();
  }

  std::size_t size() const noexcept { return order_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }
  // Values released to make room, over the cache's life (clear() does not count).
  std::size_t evictions() const noexcept { return evictions_; }

 private:
  using Order = std::list<std::pair<Key, Value>>;  // most recently used first
  std::size_t capacity_;
  Release release_;
  Order order_;
  std::map<Key, typename Order::iterator> index_;
  std::size_t evictions_ = 0;
};

}  // namespace etnn::cuda
