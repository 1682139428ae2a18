#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// An update whose step number the device picks, so that the host need not wait for the verdicts
// of earlier steps. A step's skip is decided on the device (cuda::StepVerdict) and the host counts
// it when the verdict arrives, normally some steps later. A step's update depends on how many
// steps applied before it: its learning rate (the schedule's, at that count), Adam's bias
// corrections and SGD's first step. So the host builds one candidate update for each count the
// verdicts still on their way allow, and the device runs the one their skip words pick:
//   steps       the updates the host has counted
//   earlier[k]  the skip word of the k-th verdict on its way (k < pending), oldest first
//   applied     #{k : *earlier[k] == 0}, in [0, pending]
//   candidate j the update of step number steps + j + 1, at lr(steps + j), for j = 0 .. pending
// and each index i runs candidates[applied](i) unless this step's own *skip is set.
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"

namespace etnn::optim {

namespace detail {

// Update: an ETNN_HD functor of one index (a Rule's update). Slots: the most candidates, that is
// one more than the most verdicts on their way.
template <class Update, std::size_t Slots>
struct PickedUpdate {
  static_assert(Slots >= 1);
  static_assert(std::is_trivially_copyable_v<Update> && std::is_copy_assignable_v<Update>,
                "a Rule's update functor is copied into a kernel's argument and assigned among candidates");
  const unsigned long long* skip;                 // this step's verdict: non-zero skips it
  const unsigned long long* earlier[Slots];       // [0, pending): the earlier verdicts on their way
  std::size_t pending;                            // at most Slots - 1
  Update candidates[Slots];                       // [0, pending]: the update after j earlier applied

  ETNN_HD void operator()(std::size_t i) const {
    if (*skip != 0) return;
    run<0>(applied<0>(0), i);
  }

 private:
  // Constant indices only: a kernel indexing its parameters at run time would copy them to local
  // memory, in every thread.
  template <std::size_t K>
  ETNN_HD std::size_t applied(std::size_t so_far) const {
    if constexpr (K + 1 < Slots) {
      if (K == pending) return so_far;
      return applied<K + 1>(so_far + (*earlier[K] == 0 ? 1 : 0));
    } else {
      return so_far;
    }
  }
  template <std::size_t J>
  ETNN_HD void run(std::size_t j, std::size_t i) const {
    if constexpr (J + 1 < Slots) {
      if (j != J) return run<J + 1>(j, i);
    }
    candidates[J](i);
  }
};

}  // namespace detail

// Builds the picked update and calls launch(picked) with it, a detail::PickedUpdate<Update, Slots>.
// make(j, run) calls run(update) with candidate j's update (the Rule's, for step steps + j + 1 at
// lr(steps + j)); earlier: the skip words of the verdicts on their way, oldest first (at most
// Slots - 1). Returns false, launching nothing, when the candidates differ in type (SGD's first
// step is a type of its own): the caller then counts the verdicts on their way and updates with
// the one update left.
template <std::size_t Slots, class Make, class Launch>
bool launch_picked_update(const unsigned long long* skip, std::span<const unsigned long long* const> earlier,
                          Make&& make, Launch&& launch) {
  if (earlier.size() >= Slots)
    throw Error("etnn::optim: " + std::to_string(earlier.size()) + " verdicts on their way, past the " +
                std::to_string(Slots - 1) + " a picked update counts");
  bool one_type = true;
  make(std::size_t{0}, [&](const auto& first) {
    using Update = std::remove_cvref_t<decltype(first)>;
    // A kernel's arguments hold 4 KiB (CUDA before 12.1, and pre-Volta devices).
    static_assert(sizeof(detail::PickedUpdate<Update, Slots>) <= 4000,
                  "the candidates of a picked update must fit a kernel's arguments");
    detail::PickedUpdate<Update, Slots> picked{skip, {}, earlier.size(), {}};
    for (std::size_t j = 0; j < Slots; ++j) {
      picked.earlier[j] = skip;  // read by none past `pending`; a valid word all the same
      picked.candidates[j] = first;
    }
    for (std::size_t k = 0; k < earlier.size(); ++k) {
      picked.earlier[k] = earlier[k];
      make(k + 1, [&](const auto& candidate) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(candidate)>, Update>)
          picked.candidates[k + 1] = candidate;
        else
          one_type = false;
      });
    }
    if (one_type) launch(picked);
  });
  return one_type;
}

}  // namespace etnn::optim
