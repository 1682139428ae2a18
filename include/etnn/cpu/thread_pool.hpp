#pragma once
// Private to cpu/: include <etnn/cpu/cpu.hpp> or <etnn/etnn.hpp>.
// The threads of etnn's CPU kernels: the calling thread and a pool of workers that help it with
// a job's chunks.
//
// A job is shared unless its caller asks otherwise: every thread, the caller included, takes chunks
// until none is left (from one counter, or from its home range first, below), and the caller then
// waits only for workers that have joined. A worker the OS schedules late (another process busy on
// its core) finds nothing left, or a job already closed, and goes back to waiting; it never holds
// the caller up, unlike a fork-join team whose barrier waits for every member. A shared job placed
// by Placement::home_range (parallel_chunks' default, cpu/parallel.hpp) splits its chunks into one
// contiguous range per thread, near-equal, with a counter each (chunk c is thread c's when there
// are at most as many chunks as threads); a thread takes its own range's chunks first and then what
// is left of the others'. Passes over the same arrays in every step (the guard's and the
// optimizer's over the gradients and parameters) then touch each part of them from the same core
// each time, so it stays in that core's caches: mlp784/64's SGD update on 2 threads took 23-35 us
// instead of 64-78 (2-core Zen 4 VM), where a shared counter handed the halves to either thread.
// The GEMM's tiles stay on one counter: at batch 8 its dW (512 x 784 x 8) ran 60 us on it and 70-80
// us in home ranges, unexplained. A job placed by Placement::owner, of at most as many chunks as
// threads, is owned: chunk c runs on thread c (0: the caller), so that every thread sees the same
// chunk shapes in every step and its reusable buffers (Eigen's packing, sized by the products it
// has run) have grown in the first one; the caller then waits for every owner. Idle workers spin
// briefly (a training step's next parallel loop is microseconds away) and then sleep on a condition
// variable.
//
// A worker can still be preempted while it holds a chunk, and then the caller waits for the OS to
// run it again (milliseconds, when another process is busy on its core). When the caller waits
// for its helpers much longer than its own chunks took (three jobs in a row), or the workers take
// under a quarter of the shared chunks (over a window of jobs), the pool runs shared jobs on the
// caller alone for a while (5 ms, four times longer each time the workers fail again at once, up
// to a second), so that its workers sleep instead of spinning beside the other process, and then
// tries its workers again. Owned jobs always run on their owners.
//
// Workers past a smaller thread count (set_threads) join no job and sleep until a larger count
// takes them in. A job from a second caller thread while one runs, and a job started inside a
// chunk, run on the calling thread alone. Which thread runs a chunk never changes what it
// computes: callers fix the chunks' bounds from the thread count, not from who runs them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "features.hpp"
#include "packing_storage.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace etnn::cpu {

// Where a job's chunks may run: on whichever thread takes them (shared), on their home range's
// thread unless it comes late (shared, home_range), or chunk c on thread c (owned, for chunks
// whose thread's reusable buffers are sized by the chunk; see above).
enum class Placement { any_thread, home_range, owner };

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool pool;
    return pool;
  }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() { stop_workers(); }

  // Threads a job may use, the caller included (at least 1).
  int threads() const { return threads_.load(std::memory_order_relaxed); }

  // Threads a shared job started now would get: 1 while the pool runs them on their callers
  // alone. For sizing the packed GEMM's tiles (whose packing storage is one size for all).
  int available_threads() const {
    return solo_until_ns_.load(std::memory_order_relaxed) > now_ns() ? 1 : threads();
  }

  // Whether the calling thread is a worker or runs a chunk of a job: which chunks it takes, and
  // so what it needs, changes from job to job.
  static bool inside_job() { return in_job(); }

  // How long a period of running shared jobs alone lasts (ns), when it starts `since_end` after the
  // last one ended, which lasted `last`: four times the last, up to solo_max_ns, when the workers
  // failed again within solo_retry_ns of being tried again (another process keeps their cores
  // busy); else solo_min_ns. A worker whose CPU was taken away for a moment (a virtual machine's
  // host running something else for a millisecond, once or twice in a 2 s run on the 2-core Zen 4
  // VM) costs a few milliseconds alone, however often that happens; a worker that keeps losing
  // its core to another process fails again 1-5 ms after each trial there, and is left out for a
  // second at a time after four of them, so that trials cost under 1% of the time.
  static constexpr long long solo_min_ns = 5'000'000;
  static constexpr long long solo_max_ns = 1'000'000'000;
  static constexpr long long solo_retry_ns = 100'000'000;
  static constexpr long long next_solo_ns(long long since_end, long long last) {
    return since_end > solo_retry_ns ? solo_min_ns : std::clamp(4 * last, solo_min_ns, solo_max_ns);
  }

  // n <= 0 restores the default: OMP_NUM_THREADS when set, else one per core. Also ends a period
  // of running jobs alone, so the workers are tried again. Called from another thread while a
  // job runs, it waits for the job to end (the count never changes within a job); it must not be
  // called from inside a chunk.
  void set_threads(int n) {
    std::lock_guard<std::mutex> owner(job_owner_);
    threads_.store(n > 0 ? n : default_threads(), std::memory_order_relaxed);
    solo_until_ns_.store(0, std::memory_order_relaxed);
    solo_ns_ = 0;
    ensure_workers(threads() - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);  // a worker checks the count under it before it waits
      resized_generation_ = generation_.load(std::memory_order_relaxed);
    }
    resized_.notify_all();
  }

  // f(c) for every c in [0, chunks), on the caller and up to threads() - 1 workers. After a chunk
  // throws, no further shared chunk starts (each thread still runs an owned job's chunk of its
  // own); the first exception is rethrown here once every chunk that started has ended.
  template <class F>
  void run(std::size_t chunks, F& f, Placement placement = Placement::any_thread) {
    std::unique_lock<std::mutex> owner(job_owner_, std::try_to_lock);
    const bool owned = placement == Placement::owner && chunks <= static_cast<std::size_t>(threads());
    if (chunks <= 1 || threads() <= 1 || in_job() || !owner.owns_lock() || (!owned && available_threads() == 1)) {
      for (std::size_t c = 0; c < chunks; ++c) f(c);
      return;
    }
    const auto start = Clock::now();
    const auto team = static_cast<std::size_t>(threads());  // fixed while job_owner_ is held
    const std::size_t ranges = placement == Placement::home_range ? team : 1;
    Job job{[](void* context, std::size_t c) { (*static_cast<F*>(context))(c); }, &f, chunks, owned,
            ranges_.get(), ranges};
    if (!owned) job.split_ranges();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    in_job() = true;
    const std::size_t own = job.owned ? job.run_owned(0) : job.take_chunks(0);
    in_job() = false;
    const auto own_end = Clock::now();
    if (job.owned) await_workers([&] { return job.finished(); });  // its chunks wait for their threads
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = nullptr;  // closed: no worker joins it from now on
    }
    await_workers([&] { return job.helpers.load(std::memory_order_acquire) == 0; });  // those that joined
    note_job(chunks, own, job.owned, own_end - start, Clock::now() - own_end);
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  // A shared job's chunks [next, end) not yet taken, claimed one at a time; on a cache line of its
  // own, so that threads claiming from their own ranges do not contend.
  struct alignas(64) Range {
    std::atomic<std::size_t> next{0};
    std::size_t end = 0;
  };

  struct Job {
    void (*call)(void*, std::size_t);
    void* context;
    std::size_t chunks;
    bool owned;  // chunk c on thread c, instead of shared through the ranges
    Range* ranges;  // the pool's, one per thread: a shared job's chunks, split among them
    std::size_t range_count;
    std::atomic<std::size_t> done{0};  // chunks ended
    std::atomic<int> helpers{0};  // workers that joined (they join under mutex_)
    std::mutex error_mutex{};
    std::exception_ptr error{};

    bool finished() const { return done.load(std::memory_order_acquire) == chunks; }

    // Runs chunk c, keeping the first exception; after one, shared chunks stop starting.
    void run_chunk(std::size_t c) {
      try {
        call(context, c);
      } catch (...) {
        for (std::size_t r = 0; r < range_count; ++r) ranges[r].next.store(ranges[r].end, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      done.fetch_add(1, std::memory_order_acq_rel);
    }

    // Shared: range r of chunks holds chunks / T chunks, one more for the first chunks % T ranges
    // (T = range_count), in order; with at most T chunks, chunk c is range c's.
    void split_ranges() {
      const std::size_t per_range = chunks / range_count, longer = chunks % range_count;
      for (std::size_t r = 0; r < range_count; ++r) {
        const std::size_t begin = r * per_range + std::min(r, longer);
        ranges[r].next.store(begin, std::memory_order_relaxed);
        ranges[r].end = begin + per_range + (r < longer ? 1 : 0);
      }
    }

    // Shared: runs chunks until none is left, those of its own range first, then what is left of
    // the others' (a thread that came late, or was slowed, leaves them to the rest); returns how
    // many this thread ran.
    std::size_t take_chunks(std::size_t thread) {
      std::size_t taken = 0;
      for (std::size_t r = 0; r < range_count; ++r) {
        Range& range = ranges[(thread + r) % range_count];
        for (std::size_t c = range.next.fetch_add(1, std::memory_order_relaxed); c < range.end;
             c = range.next.fetch_add(1, std::memory_order_relaxed), ++taken) {
          run_chunk(c);
        }
      }
      return taken;
    }

    // Owned: runs thread t's chunk, if the job has one for it; returns how many (0 or 1).
    std::size_t run_owned(std::size_t t) {
      if (t >= chunks) return 0;
      run_chunk(t);
      return 1;
    }
  };

  using Clock = std::chrono::steady_clock;
  // A wait for helpers longer than this plus twice the caller's own time per chunk is a stall.
  static constexpr Clock::duration stall_floor = std::chrono::microseconds(200);
  static long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }
  static constexpr int strikes_to_solo = 3;
  static constexpr std::size_t starved_window = 32;

  // Until done(): briefly spinning, then asleep on left_, which workers notify when they finish.
  template <class Done>
  void await_workers(Done done) {
    for (int spin = 0; spin < spins_before_sleep && !done(); ++spin) spin_pause();
    if (done()) return;
    std::unique_lock<std::mutex> lock(mutex_);
    left_.wait(lock, done);
  }

  // After a job: the caller ran `own` of its chunks in `own_time`, then waited `wait` for its
  // workers. A wait much longer than its own chunks took (stalled) three jobs in a row, or
  // workers that ran under a quarter of the last starved_window or more shared chunks (starved:
  // the caller ran the rest while they were off the CPU), starts a period of running shared jobs
  // alone (see solo_min_ns for how long).
  void note_job(std::size_t chunks, std::size_t own, bool owned, Clock::duration own_time, Clock::duration wait) {
    const bool stalled = own > 0 && wait > stall_floor + 2 * own_time / static_cast<long>(own);
    strikes_ = stalled ? strikes_ + 1 : 0;
    bool starved = false;
    if (!owned) {
      window_chunks_ += chunks;
      window_helped_ += chunks - own;
      if (window_chunks_ >= starved_window) {
        starved = 4 * window_helped_ < window_chunks_;
        window_chunks_ = window_helped_ = 0;
      }
    }
    if (strikes_ >= strikes_to_solo || starved) {
      const long long now = now_ns();
      solo_ns_ = next_solo_ns(now - solo_until_ns_.load(std::memory_order_relaxed), solo_ns_);
      solo_until_ns_.store(now + solo_ns_, std::memory_order_relaxed);
      strikes_ = 0;
      window_chunks_ = window_helped_ = 0;
    }
  }

  // Workers start with the pool (the first parallel loop or thread count asked for, which a
  // training step's reserve() runs), not inside a step.
  ThreadPool() : threads_(default_threads()) { ensure_workers(threads() - 1); }

  static int default_threads() {
    if (const char* env = std::getenv("OMP_NUM_THREADS")) {
      const int n = std::atoi(env);  // a list ("4,2") gives its first entry
      if (n > 0) return n;
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  static bool& in_job() {
    thread_local bool inside = false;
    return inside;
  }

  void ensure_workers(int count) {
    const std::size_t threads_wanted = static_cast<std::size_t>(count) + 1;  // the caller's too
    if (range_capacity_ < threads_wanted) {
      ranges_ = std::make_unique<Range[]>(threads_wanted);
      range_capacity_ = threads_wanted;
    }
    if (static_cast<int>(workers_.size()) >= count) return;
    workers_.reserve(static_cast<std::size_t>(count));
    while (static_cast<int>(workers_.size()) < count) {
      const std::size_t index = workers_.size() + 1;  // the caller is thread 0
      // Jobs posted from now on are this worker's to join, even before its thread runs.
      const unsigned seen = generation_.load(std::memory_order_acquire);
      workers_.emplace_back([this, index, seen] { work(index, seen); });
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    resized_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  // About half a millisecond of polling before a worker (or a caller waiting for one) sleeps.
  static constexpr int spins_before_sleep = 30000;

  void work(std::size_t index, unsigned seen) {
    in_job() = true;  // a job started inside a chunk runs on this thread
#if ETNN_PACKED_GEMM
    if (float_gemm_engine() != GemmEngine::eigen) packed::packing_storage();  // before any step
#endif
    for (;;) {
      if (index >= static_cast<std::size_t>(threads())) {
        // Past the thread count (a smaller set_threads()): asleep until a larger one or the end,
        // not spinning beside the threads at work (woken by a job at most once, on its way here).
        std::unique_lock<std::mutex> lock(mutex_);
        resized_.wait(lock, [&] { return stopping_ || index < static_cast<std::size_t>(threads()); });
        if (stopping_) return;
        seen = resized_generation_;  // jobs posted since the count took it in are its to join
        continue;
      }
      for (int spin = 0; spin < spins_before_sleep && generation_.load(std::memory_order_acquire) == seen; ++spin) {
        spin_pause();
      }
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (generation_.load(std::memory_order_relaxed) == seen) {
          sleepers_.fetch_add(1, std::memory_order_release);
          wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = generation_.load(std::memory_order_relaxed);
        if (stopping_) return;
        // threads() is the job's while it runs (set_threads waits for it); a smaller count left this worker out.
        job = job_ != nullptr && index < static_cast<std::size_t>(threads()) ? job_ : nullptr;
        if (job != nullptr) job->helpers.fetch_add(1, std::memory_order_relaxed);
      }
      if (job == nullptr) continue;  // the job closed before this worker came, or is not its to join
      if (job->owned) {
        const bool ran = job->run_owned(index) > 0;
        if (ran && job->finished()) {
          std::lock_guard<std::mutex> lock(mutex_);  // the caller may be asleep on it
          left_.notify_all();
        }
      } else {
        job->take_chunks(index);
      }
      // The job may end (and leave the caller's stack) as soon as helpers reaches 0.
      if (job->helpers.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        left_.notify_all();
      }
    }
  }

  std::atomic<int> threads_;
  std::mutex job_owner_;  // held by the thread whose job runs
  std::mutex mutex_;      // job_, helpers, stopping_
  std::condition_variable wake_, left_, resized_;
  unsigned resized_generation_ = 0;  // generation_ at the last set_threads() (under mutex_)
  std::atomic<unsigned> generation_{0};
  std::atomic<int> sleepers_{0};
  Job* job_ = nullptr;
  bool stopping_ = false;
  std::atomic<long long> solo_until_ns_{0};
  // Only the thread holding job_owner_ touches these four.
  int strikes_ = 0;
  std::size_t window_chunks_ = 0;  // shared chunks since the last starvation verdict
  std::size_t window_helped_ = 0;  // of those, the ones workers ran
  long long solo_ns_ = 0;  // the last period of running shared jobs alone (ends at solo_until_ns_)
  std::unique_ptr<Range[]> ranges_;  // a shared job's, one per thread; replaced only outside jobs
  std::size_t range_capacity_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace etnn::cpu
