// Per-thread device scratch (cuda/per_thread.hpp), on the host with a plain value in place of a
// device buffer: one object per thread and tag, the same on every call of that thread, and kept
// after its thread has ended (a CUDA graph the thread recorded may still point at it).
#include <doctest/doctest.h>

#include <etnn/cuda/per_thread.hpp>

#include <set>
#include <thread>
#include <vector>

using etnn::cuda::detail::per_thread;

namespace {
struct Scratch {
  int value = 0;
};
struct OtherKind;
}  // namespace

TEST_CASE("per_thread: one object per thread, the same on every call of that thread") {
  Scratch& mine = per_thread<Scratch>();
  CHECK(&per_thread<Scratch>() == &mine);
  CHECK(&per_thread<Scratch, OtherKind>() != &mine);  // another tag, another object

  constexpr int threads = 8;
  std::vector<Scratch*> theirs(threads);
  std::vector<int> changed(threads, 0);  // calls of a thread that gave another object than its first
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&theirs, &changed, t] {
      Scratch& s = per_thread<Scratch>();
      for (int i = 0; i < 1000; ++i) changed[t] += &per_thread<Scratch>() != &s;
      s.value = 100 + t;  // no other thread writes it
      theirs[t] = &s;
    });
  for (auto& w : workers) w.join();
  CHECK(changed == std::vector<int>(threads, 0));
  std::set<Scratch*> distinct(theirs.begin(), theirs.end());
  distinct.insert(&mine);
  CHECK(distinct.size() == threads + 1);
  // Each thread has ended; what it wrote is still there.
  for (int t = 0; t < threads; ++t) CHECK(theirs[t]->value == 100 + t);
}
