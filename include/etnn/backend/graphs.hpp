#pragma once
// Private to backend/: include <etnn/backend/backend.hpp> or <etnn/etnn.hpp>.
// StepGraphs<Device>: how the training pass runs the pieces of a step on Device. A CUDA model
// records them into CUDA graphs and replays those (cuda::GraphCache, under nvcc); a host model runs
// them as they come (EagerSteps).
#include <string>
#include <type_traits>

#include "../core/device.hpp"
#if defined(__CUDACC__)
#include "../cuda/graph.hpp"
#endif

namespace etnn::backend {

// Runs each piece of a step when asked: GraphCache's interface, without the recording.
struct EagerSteps {
  explicit EagerSteps(const std::string&) {}
  void clear() {}
  template <class Key, class Work>
  void run(const Key&, Work&& work) {
    work();
  }
};

#if defined(__CUDACC__)
template <class Device>
using StepGraphs = std::conditional_t<std::is_same_v<Device, Cuda>, cuda::GraphCache, EagerSteps>;
#else
template <class Device>
using StepGraphs = EagerSteps;
#endif

}  // namespace etnn::backend
