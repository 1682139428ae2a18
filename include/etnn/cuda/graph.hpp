#pragma once
// Private to cuda/: include <etnn/cuda/cuda.hpp> or <etnn/etnn.hpp>.
// CUDA graphs for the training step: the forward and backward passes of a static network launch
// the same GEMMs and kernels on the same pointers at every step of a given batch size, so each is
// recorded once into a graph and replayed with one launch (no per-kernel launch cost on the host).
//
//   GraphCache graphs;
//   graphs.run({part, batch, input}, [&] { program::forward_train(...); });
//
// The first run for a key records work() (nothing executes while recording) and launches the
// graph; later runs launch it again without calling work(). If recording fails (work() did
// something a graph cannot hold), the cache turns itself off, says why (reason()), and from then
// on calls work() directly: never a wrong result, at worst the eager speed.
// The cache holds at most `capacity` graphs (default_capacity unless told), least recently used
// out first (cuda/lru_cache.hpp): an input that moves every step (device data fed as offset views
// of one buffer) records a graph each step, but never holds more than the capacity.
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "lru_cache.hpp"
#include "runtime.hpp"

namespace etnn::cuda {

class GraphCache {
 public:
  // part: which piece of the step (forward, backward); batch and input: what the work depends on
  // that may change between steps (every other pointer belongs to the trainer and stays put).
  using Key = std::tuple<int, int, const void*>;
  // Graphs kept: a step's forward and backward at a few batch sizes (the last batch of an epoch
  // is often shorter) and inputs.
  static constexpr std::size_t default_capacity = 16;

  // off_reason: empty to record, else why the step is not recorded (reason() says it).
  explicit GraphCache(std::string off_reason = "", std::size_t capacity = default_capacity)
      : reason_(std::move(off_reason)), graphs_(capacity) {}
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  template <class Work>
  void run(const Key& key, Work&& work) {
    if (!enabled()) {
      work();
      return;
    }
    cudaGraphExec_t* graph = graphs_.find(key);
    if (graph == nullptr) {
      cudaGraphExec_t recorded = record(work);
      if (recorded == nullptr) {
        work();
        return;
      }
      graph = &graphs_.insert(key, recorded);
    }
    ETNN_CHECK_CUDA(runtime().cudaGraphLaunch(*graph, stream()));
    ++replays_;
  }

  // Forgets every recorded graph: the memory they point at is about to go (a training pass's
  // workspace when it grows, nn/training_pass.hpp). The next run of each key records again.
  void clear() { graphs_.clear(); }

  bool enabled() const noexcept { return reason_.empty(); }
  // Why graphs are off ("" while they are on).
  const std::string& reason() const noexcept { return reason_; }
  // Graphs held now (at most capacity()), and those dropped to make room over the cache's life.
  std::size_t recorded() const noexcept { return graphs_.size(); }
  std::size_t capacity() const noexcept { return graphs_.capacity(); }
  std::size_t evicted() const noexcept { return graphs_.evictions(); }
  std::int64_t launches() const noexcept { return replays_; }

 private:
  // work() recorded into an executable graph, or null (and the cache off) when it cannot be.
  template <class Work>
  cudaGraphExec_t record(Work& work) {
    const RecordingStream recording;  // this thread's own stream: no other thread's work is captured
    ETNN_CHECK_CUDA(runtime().cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    std::string failure;
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = runtime().cudaStreamEndCapture(stream(), &graph);
    if (failure.empty() && ended != cudaSuccess) failure = cudaGetErrorString(ended);
    cudaGraphExec_t executable = nullptr;
    if (failure.empty()) {
      const cudaError_t made = runtime().cudaGraphInstantiate(&executable, graph, 0);
      if (made != cudaSuccess) failure = cudaGetErrorString(made);
    }
    if (graph != nullptr) (void)runtime().cudaGraphDestroy(graph);
    if (failure.empty()) return executable;
    (void)runtime().cudaGetLastError();
    reason_ = "recording failed: " + failure;
    return nullptr;
  }

  // An evicted graph may still be running on the stream: CUDA frees it when that launch ends.
  struct DestroyGraph {
    void operator()(cudaGraphExec_t graph) const { (void)runtime().cudaGraphExecDestroy(graph); }
  };

  std::string reason_;  // why graphs are off; empty while they are on
  LruCache<Key, cudaGraphExec_t, DestroyGraph> graphs_;
  std::int64_t replays_ = 0;
};

}  // namespace etnn::cuda
