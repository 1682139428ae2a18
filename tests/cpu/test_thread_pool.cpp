// etnn's CPU thread pool: every chunk runs exactly once, on several threads when asked; a
// home-range job's threads take their own ranges first; the first exception reaches the caller
// after every started chunk ended; a job inside a chunk and jobs from concurrent caller threads
// run (on their callers); the pool takes new thread counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <etnn/etnn.hpp>

#include "support/thread_count.hpp"

namespace {
using etnn::cpu::ThreadPool;
using etnn::test::ThreadCount;
}  // namespace

TEST_CASE("thread pool: every chunk once, for any thread count and placement") {
  for (const int threads : {1, 2, 3, 8}) {
    ThreadCount count(threads);
    for (const std::size_t chunks : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{1000}}) {
      for (const auto placement : {etnn::cpu::Placement::any_thread, etnn::cpu::Placement::home_range}) {
        std::vector<std::atomic<int>> runs(chunks);
        auto f = [&](std::size_t c) { runs[c].fetch_add(1, std::memory_order_relaxed); };
        for (int repeat = 0; repeat < 20; ++repeat) ThreadPool::instance().run(chunks, f, placement);
        for (const auto& r : runs) REQUIRE(r.load() == 20);
      }
    }
  }
}

TEST_CASE("thread pool: workers take chunks when the caller is busy") {
  ThreadCount count(2);
  std::atomic<int> others{0};
  const auto caller = std::this_thread::get_id();
  auto f = [&](std::size_t) {
    if (std::this_thread::get_id() != caller) others.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  for (int repeat = 0; repeat < 5 && others.load() == 0; ++repeat) ThreadPool::instance().run(8, f);
  CHECK(others.load() > 0);
}

TEST_CASE("thread pool: the first exception reaches the caller after every started chunk ended") {
  ThreadCount count(3);
  std::atomic<int> started{0}, ended{0};
  auto f = [&](std::size_t c) {
    started.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ended.fetch_add(1);
    if (c % 3 == 1) throw std::runtime_error("chunk failed");
  };
  for (const auto placement : {etnn::cpu::Placement::any_thread, etnn::cpu::Placement::home_range}) {
    started = 0;
    ended = 0;
    CHECK_THROWS_WITH(ThreadPool::instance().run(30, f, placement), "chunk failed");
    CHECK(ended.load() == started.load());
    CHECK(started.load() < 30);  // chunks after the failure never started
  }
  // The pool still works afterwards.
  std::atomic<int> runs{0};
  auto g = [&](std::size_t) { runs.fetch_add(1); };
  ThreadPool::instance().run(10, g);
  CHECK(runs.load() == 10);
}

TEST_CASE("thread pool: a job inside a chunk, and jobs from several caller threads") {
  ThreadCount count(2);
  std::atomic<int> inner{0};
  auto nested = [&](std::size_t) {
    auto leaf = [&](std::size_t) { inner.fetch_add(1); };
    ThreadPool::instance().run(4, leaf);
  };
  ThreadPool::instance().run(6, nested);
  CHECK(inner.load() == 24);

  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      auto f = [&](std::size_t) { total.fetch_add(1); };
      for (int repeat = 0; repeat < 50; ++repeat) ThreadPool::instance().run(16, f);
    });
  }
  for (auto& c : callers) c.join();
  CHECK(total.load() == 4 * 50 * 16);
}

TEST_CASE("thread pool: set_threads(0) restores the default, and the count bounds available threads") {
  ThreadCount count(5);
  CHECK(etnn::cpu::ThreadPool::instance().threads() == 5);
  CHECK(ThreadPool::instance().available_threads() <= 5);
  ThreadPool::instance().set_threads(0);
  CHECK(ThreadPool::instance().threads() >= 1);
}

TEST_CASE("thread pool: an owned job of at most as many chunks as threads runs chunk c on the same thread every time") {
  for (const int threads : {2, 3, 4}) {
    ThreadCount count(threads);
    std::vector<std::thread::id> first(static_cast<std::size_t>(threads));
    for (int repeat = 0; repeat < 50; ++repeat) {
      std::vector<std::thread::id> ids(static_cast<std::size_t>(threads));
      auto f = [&](std::size_t c) { ids[c] = std::this_thread::get_id(); };
      ThreadPool::instance().run(static_cast<std::size_t>(threads), f, etnn::cpu::Placement::owner);
      REQUIRE(ids[0] == std::this_thread::get_id());
      if (first[0] == std::thread::id{}) first = ids;
      REQUIRE(ids == first);
    }
  }
}

TEST_CASE("thread pool: in a home-range job each thread takes its own range's chunks before the others'") {
  // 2 threads, 6 chunks: the caller's range is chunks 0-2, the worker's 3-5. Whatever the timing
  // (a thread the OS holds back may find its range taken), each thread runs what it takes of its
  // own range in order and then, in order, what it takes of the other.
  ThreadCount count(2);
  const auto caller = std::this_thread::get_id();
  bool worker_started_at_home = false;
  // At least 20 repeats; more (up to 2 s) until the worker has once come in time to start at home,
  // which a loaded machine may deny it for a while.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int repeat = 0; repeat < 20 || (!worker_started_at_home && std::chrono::steady_clock::now() < give_up);
       ++repeat) {
    ThreadPool::instance().set_threads(2);  // ends any period of running jobs alone
    std::mutex order_mutex;
    std::vector<std::size_t> by_caller, by_worker;
    auto f = [&](std::size_t c) {
      {
        std::lock_guard<std::mutex> lock(order_mutex);
        (std::this_thread::get_id() == caller ? by_caller : by_worker).push_back(c);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    };
    ThreadPool::instance().run(6, f, etnn::cpu::Placement::home_range);
    REQUIRE(by_caller.size() + by_worker.size() == 6);
    // ran: chunks of the home range [home, home + 3), ascending, then chunks of the other, ascending.
    const auto home_first = [](const std::vector<std::size_t>& ran, std::size_t home) {
      const auto at_home = [&](std::size_t c) { return c >= home && c < home + 3; };
      std::size_t i = 0;
      while (i < ran.size() && at_home(ran[i])) ++i;
      for (std::size_t j = i; j < ran.size(); ++j) {
        if (at_home(ran[j])) return false;
      }
      return std::is_sorted(ran.begin(), ran.begin() + static_cast<std::ptrdiff_t>(i)) &&
             std::is_sorted(ran.begin() + static_cast<std::ptrdiff_t>(i), ran.end());
    };
    CHECK(home_first(by_caller, 0));
    CHECK(home_first(by_worker, 3));
    if (!by_worker.empty() && by_worker.front() == 3) worker_started_at_home = true;
  }
  CHECK(worker_started_at_home);
}

TEST_CASE("thread pool: after a smaller thread count, a job runs on at most that many threads") {
  { ThreadCount many(8); }  // starts 7 workers, which stay
  ThreadCount count(2);
  for (const auto placement : {etnn::cpu::Placement::any_thread, etnn::cpu::Placement::home_range}) {
    std::mutex ids_mutex;
    std::vector<std::thread::id> ids;
    auto f = [&](std::size_t) {
      {
        std::lock_guard<std::mutex> lock(ids_mutex);
        if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end()) {
          ids.push_back(std::this_thread::get_id());
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    };
    for (int repeat = 0; repeat < 10; ++repeat) ThreadPool::instance().run(16, f, placement);
    CHECK(ids.size() <= 2);
  }
}

TEST_CASE("thread pool: periods of running jobs alone start short and grow while the workers fail again at once") {
  constexpr long long ms = 1'000'000;
  // The first, or one that starts long after the last ended (a moment's absence, now and then): the shortest.
  CHECK(ThreadPool::next_solo_ns(ThreadPool::solo_retry_ns + 1, 0) == ThreadPool::solo_min_ns);
  CHECK(ThreadPool::next_solo_ns(ThreadPool::solo_retry_ns + 1, ThreadPool::solo_max_ns) == ThreadPool::solo_min_ns);
  // Failing again within the retry time of the last one's end: four times the last, up to the longest.
  long long period = ThreadPool::solo_min_ns;
  for (int trial = 0; trial < 10; ++trial) {
    const long long next = ThreadPool::next_solo_ns(2 * ms, period);
    CHECK(next == std::min(4 * period, ThreadPool::solo_max_ns));
    period = next;
  }
  CHECK(period == ThreadPool::solo_max_ns);
  static_assert(ThreadPool::solo_min_ns <= 5 * ms);  // a moment's absence costs milliseconds, not the longest period
  static_assert(ThreadPool::solo_retry_ns < ThreadPool::solo_max_ns);
}

TEST_CASE("thread pool: workers a smaller count left out take part again as soon as a larger one takes them in") {
  // An owned job needs every owner: a worker that came back too late to see it would hang it.
  std::atomic<int> sink{0};
  auto g = [&](std::size_t c) { sink.fetch_add(static_cast<int>(c)); };
  for (int repeat = 0; repeat < 100; ++repeat) {
    ThreadCount count(2);
    ThreadPool::instance().run(2, g);  // workers 2 and 3 see a job not theirs, and sleep until taken in
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ThreadPool::instance().set_threads(4);
    std::vector<std::thread::id> ids(4);
    auto f = [&](std::size_t c) { ids[c] = std::this_thread::get_id(); };
    ThreadPool::instance().run(4, f, etnn::cpu::Placement::owner);  // at once: before they wake
    for (std::size_t c = 1; c < 4; ++c) REQUIRE(ids[c] != std::thread::id{});
  }
}
