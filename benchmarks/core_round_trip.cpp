// How far apart the machine has put the first two CPUs this process may run on: the median time
// for a cache line to go from one to the other and back, two threads pinned to them passing a
// counter. For scripts/compare.sh, which probes before each 2-thread etnn run, since a VM's host
// may move its vCPUs between cores that share a last-level cache (one CCX of an AMD EPYC: about
// 55 ns here) and cores that do not (another CCD: about 330 ns). Every 2-thread training step
// hands data between its threads (B panels, C tiles, gradients), so in the second case it runs
// far slower (mlp784/64 on such a VM: 56-64k samples/s against 92-109k) while two 1-thread
// processes, which share nothing, keep their speed.
//
//   core_round_trip            prints "probe round_trip_ns=<median> cpus=<a>,<b>"
//
// With fewer than two CPUs allowed, or where it cannot pin its threads, it prints nothing and exits 0.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

alignas(64) std::atomic<long> ball{0};  // odd: the first CPU's serve, even: the second's return

}  // namespace

int main() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 0;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2 || !pin_to(cpus[0])) return 0;
  bool partner_pinned = false;

  constexpr int batches = 21, trips = 4000;  // about 5 to 30 ms in all
  std::thread partner([&] {
    partner_pinned = pin_to(cpus[1]);  // read after join()
    for (long i = 0; i < long{batches} * trips; ++i) {
      while (ball.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      ball.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::vector<double> per_trip_ns;
  for (long i = 0, b = 0; b < batches; ++b) {
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < trips; ++t, ++i) {
      ball.store(2 * i + 1, std::memory_order_release);
      while (ball.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    per_trip_ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
                          trips);
  }
  partner.join();
  if (!partner_pinned) return 0;
  std::nth_element(per_trip_ns.begin(), per_trip_ns.begin() + batches / 2, per_trip_ns.end());
  std::printf("probe round_trip_ns=%.0f cpus=%d,%d\n", per_trip_ns[batches / 2], cpus[0], cpus[1]);
}
