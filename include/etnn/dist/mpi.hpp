#pragma once
// etnn::dist::Mpi: data parallelism over MPI. Include <etnn/dist/mpi.hpp> and link etnn::mpi.
//   etnn::dist::Mpi world(argc, argv);                       // MPI_Init, or attach to a running MPI
//   etnn::optim::SGD opt(model, {.lr = 0.01f}, world);       // Optimizer<Sgd, Model, dist::Mpi>
//   mpirun -np 2 ./train
//
// Every collective is non-blocking underneath and waited for with a deadline, so a rank that stops
// taking part ends the job with an error naming the rank and the operation instead of a hang
// (timeout: MpiOptions::timeout_seconds, or ETNN_DIST_TIMEOUT seconds). A failed collective throws
// etnn::DistError; when an Mpi whose job saw such an error (or that is destroyed by an exception)
// goes away, it calls MPI_Abort, which ends every rank with a non-zero exit. A rank that dies is
// noticed by the launcher (mpirun, srun), which ends the others; the survivors' writes to it fail
// with EPIPE rather than killing them with SIGPIPE (Mpi ignores SIGPIPE where its disposition is
// the default), so each ends with its own error or the launcher's word. Any other error that one rank
// catches inside the Mpi's scope must end the job with world.abort(reason): the other ranks would
// otherwise wait for it until the timeout. With ETNN_DIST_DEBUG=1 each collective first checks that
// every rank is in the same operation with the same element count.
//
// With every rank on one machine, large float and double sums go through shared memory
// (shared_memory_sum.hpp), and a data-parallel optimizer keeps the model's gradients in a
// SharedStorage (shared_storage.hpp), which is summed in place. Across machines they go by
// MpiOptions::allreduce (ETNN_DIST_ALLREDUCE; point_to_point_sum.hpp): etnn's ring from 64 KiB
// and MPI's MPI_Iallreduce below by default, or always MPI's, the ring or a parameter server.
#include <mpi.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "point_to_point_sum.hpp"
#include "seconds.hpp"
#include "shared_memory_sum.hpp"
#include "shared_storage.hpp"

namespace etnn::dist {

struct MpiOptions {
  double timeout_seconds = 300;  // longest wait for one collective before the job is ended
  bool debug = false;            // check element counts across ranks before each collective
  bool shared_memory = true;     // sum large float/double buffers through shared memory when every
                                 // rank is on one machine (dist/shared_memory_sum.hpp)
  // How other float/double sums go: etnn's ring from 64 KiB and MPI's allreduce below, or always
  // MPI's, the ring or a parameter server (dist/point_to_point_sum.hpp).
  Allreduce allreduce = Allreduce::automatic;
};

namespace detail {

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, int>) return MPI_INT;
  else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, unsigned char>) return MPI_UNSIGNED_CHAR;
  else static_assert(sizeof(T) == 0, "etnn::dist::Mpi: unsupported element type");
}

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

}  // namespace detail

class Mpi {
 public:
  using memory = Cpu;  // it sums host memory (Optimizer checks the model's device)
  // A started non-blocking collective.
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    const char* operation = "";
    std::size_t count = 0;
    detail::PointToPointSum* sum = nullptr;  // a ring or parameter-server sum in flight
    int finite = -1;  // a sum in place: 1 when the result holds no NaN and no infinity, else 0
  };

  // Initialises MPI from the program's arguments, or attaches to an MPI already initialised.
  Mpi(int& argc, char**& argv, MpiOptions options = from_environment()) : options_(options) {
    init(&argc, &argv);
  }
  explicit Mpi(MpiOptions options = from_environment()) : options_(options) { init(nullptr, nullptr); }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  // Finalises MPI if this object initialised it. After an error, or during unwinding of an
  // exception, ends the whole job instead: the other ranks may be blocked in a collective.
  ~Mpi() {
    if (failed_ || std::uncaught_exceptions() > 0) abort("an error ended this rank");
    if (storage_.in_use()) abort("an optimizer or SharedStorage outlives the etnn::dist::Mpi whose memory it uses");
    storage_.release();
    shared_.release();
    if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
    if (messages_ != MPI_COMM_NULL) MPI_Comm_free(&messages_);
    if (owns_mpi_) MPI_Finalize();
  }

  // MpiOptions from ETNN_DIST_TIMEOUT (seconds, > 0), ETNN_DIST_DEBUG=1,
  // ETNN_DIST_SHARED_MEMORY=0 (no shared memory even on one machine) and
  // ETNN_DIST_ALLREDUCE=automatic|mpi|ring|parameter_server.
  static MpiOptions from_environment() {
    MpiOptions o;
    if (const char* t = std::getenv("ETNN_DIST_TIMEOUT")) {
      char* end = nullptr;
      o.timeout_seconds = std::strtod(t, &end);
      if (end == t || *end != '\0' || !(o.timeout_seconds > 0) || !std::isfinite(o.timeout_seconds))
        throw DistError(std::string("etnn::dist::Mpi: ETNN_DIST_TIMEOUT='") + t +
                        "' is not a positive number of seconds");
    }
    o.debug = detail::env_flag("ETNN_DIST_DEBUG");
    if (const char* s = std::getenv("ETNN_DIST_SHARED_MEMORY")) o.shared_memory = s[0] != '0';
    if (const char* a = std::getenv("ETNN_DIST_ALLREDUCE")) {
      const std::string name = a;
      if (name == "automatic") o.allreduce = Allreduce::automatic;
      else if (name == "mpi") o.allreduce = Allreduce::mpi;
      else if (name == "ring") o.allreduce = Allreduce::ring;
      else if (name == "parameter_server") o.allreduce = Allreduce::parameter_server;
      else
        throw DistError("etnn::dist::Mpi: ETNN_DIST_ALLREDUCE='" + name +
                        "' is not one of automatic, mpi, ring, parameter_server");
    }
    return o;
  }

  // Ends every rank of the job now, with `reason` on this rank's standard error.
  // A collective that failed before (fail()) is named too: the abort often comes from a destructor
  // unwinding that failure's exception, before anything could print it.
  [[noreturn]] void abort(const char* reason) {
    if (failure_.empty() || failure_ == reason)
      std::fprintf(stderr, "etnn: rank %d: %s; ending the MPI job\n", rank_, reason);
    else
      std::fprintf(stderr, "etnn: rank %d: %s, after: %s; ending the MPI job\n", rank_, reason, failure_.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest if it does
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // Rank among the processes on this node (one GPU per local rank).
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return local_size_; }
  MPI_Comm comm() const noexcept { return MPI_COMM_WORLD; }
  // Whether large float and double sums go through shared memory: every rank on one machine (by
  // MPI's own node detection, MPI_COMM_TYPE_SHARED), more than one rank, options().shared_memory,
  // and /dev/shm had room. Otherwise they follow options().allreduce (over the network across
  // machines).
  bool sums_in_shared_memory() const noexcept { return shared_.usable(); }

  // data = root's data on every rank.
  template <class T>
  void broadcast(T* data, std::size_t n, int root) {
    Pending p = start("MPI_Ibcast", n);
    check(MPI_Ibcast(data, count_of(n, "MPI_Ibcast"), detail::mpi_type<T>(), root, comm(), &p.request), p.operation);
    wait(p);
  }

  // data = sum over ranks of data, started now; finish with poll() or wait(). Large float and
  // double buffers on one machine are summed through shared memory, complete on return.
  // A range of a SharedStorage (the same range on every rank) is summed in place. Other float and
  // double sums follow options().allreduce; integer sums are always MPI's.
  template <class T>
  Pending start_allreduce_sum(T* data, std::size_t n) {
    if constexpr (std::is_floating_point_v<T>) {
      if (const detail::SharedWindow* window = storage_.holding(data, n * sizeof(T))) {
        Pending p = start("allreduce (shared memory, in place)", n);
        const auto offset = static_cast<std::size_t>(reinterpret_cast<unsigned char*>(data) - window->mine());
        p.finite = detail::sum_in_place<T>(*window, offset, n, [&] { node_barrier(p); }) ? 1 : 0;
        return p;
      }
      if (shared_.takes(n * sizeof(T))) {
        Pending p = start("allreduce (shared memory)", n);
        shared_.sum(data, n, [&] { node_barrier(p); });
        return p;
      }
      const Allreduce algorithm = options_.allreduce != Allreduce::automatic ? options_.allreduce
                                  : n * sizeof(T) >= ring_from_bytes          ? Allreduce::ring
                                                                              : Allreduce::mpi;
      if (algorithm != Allreduce::mpi && size_ > 1) {
        Pending p = start(algorithm == Allreduce::ring ? "ring allreduce" : "parameter-server allreduce", n);
        p.sum = idle_sum();
        tag_ = (tag_ + 1) % 32768;  // MPI_TAG_UB is at least 32767; every rank counts its sums alike
        check(p.sum->start(algorithm, data, static_cast<std::size_t>(count_of(n, p.operation)),
                           detail::mpi_type<T>(), messages_, tag_),
              p.operation);
        return p;
      }
    }
    Pending p = start("MPI_Iallreduce", n);
    check(MPI_Iallreduce(MPI_IN_PLACE, data, count_of(n, p.operation), detail::mpi_type<T>(), MPI_SUM, comm(),
                         &p.request),
          p.operation);
    return p;
  }

  // After a completed sum: 1 when it is known to hold no NaN and no infinity, 0 when it is known
  // to hold one, -1 when it was not checked. A sum in place checks its result as it writes it (the
  // same verdict on every rank), so the non-finite guard needs no pass of its own over it.
  static int finite_sum(const Pending& p) noexcept { return p.finite; }

  // data = sum over ranks of data.
  template <class T>
  void allreduce_sum(T* data, std::size_t n) {
    Pending p = start_allreduce_sum(data, n);
    wait(p);
  }

  // n values of T in shared memory that every rank on this machine reads and writes, for a buffer
  // summed at every step: a data-parallel optimizer's gradients (dist/shared_storage.hpp). Its
  // allreduce sums in place. Empty where sums do not go through shared memory (ranks on several
  // machines, ETNN_DIST_SHARED_MEMORY=0, one rank) or /dev/shm has no room for it (then a
  // data-parallel optimizer keeps the gradients in the model). Collective: every rank asks for the
  // same n. The storage must not outlive this Mpi (which ends the job if one does).
  template <class T>
  SharedStorage<T> shared_storage(std::size_t n) {
    if (!shared_.usable()) return {};
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 1);
    // A free window again where every rank would take the same one, else a new one everywhere
    // (none where /dev/shm has no room for it: SharedWindow::allocate).
    const int reuse = storage_.free_entry(bytes);
    int range[2] = {reuse, -reuse};  // max and -min over ranks
    Pending p = start("MPI_Iallreduce (shared storage)", 2);
    check(MPI_Iallreduce(MPI_IN_PLACE, range, 2, MPI_INT, MPI_MAX, comm(), &p.request), p.operation);
    wait(p);
    if (reuse >= 0 && range[0] == -range[1]) return SharedStorage<T>(storage_.entry(reuse), n);
    detail::SharedStoragePool::Entry* entry = storage_.add(local_, bytes);
    return entry != nullptr ? SharedStorage<T>(*entry, n) : SharedStorage<T>();
  }

  void barrier() {
    Pending p = start("MPI_Ibarrier", 0);
    check(MPI_Ibarrier(comm(), &p.request), p.operation);
    wait(p);
  }

  // Point to point, for users' own protocols.
  template <class T>
  void send(const T* data, std::size_t n, int destination, int tag = 0) {
    Pending p{MPI_REQUEST_NULL, "MPI_Isend", n};
    check(MPI_Isend(data, count_of(n, p.operation), detail::mpi_type<T>(), destination, tag, comm(), &p.request),
          p.operation);
    wait(p);
  }
  template <class T>
  void recv(T* data, std::size_t n, int source, int tag = 0) {
    Pending p{MPI_REQUEST_NULL, "MPI_Irecv", n};
    check(MPI_Irecv(data, count_of(n, p.operation), detail::mpi_type<T>(), source, tag, comm(), &p.request),
          p.operation);
    wait(p);
  }

  // True once the collective has completed; drives MPI's progress.
  bool poll(Pending& p) {
    if (p.sum != nullptr) {
      bool finished = false;
      check(p.sum->advance(finished), p.operation);
      if (finished) p.sum = nullptr;
      return finished;
    }
    int done = 0;
    check(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE), p.operation);
    return done != 0;
  }

  // Waits for the collective, at most options().timeout_seconds.
  void wait(Pending& p) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.timeout_seconds);
    while (!poll(p)) {
      if (std::chrono::steady_clock::now() > deadline)
        fail(std::string(p.operation) + " of " + std::to_string(p.count) + " elements did not complete within " +
             detail::seconds_text(options_.timeout_seconds) + " s; another rank has stopped taking part "
             "(raise ETNN_DIST_TIMEOUT if a step is legitimately that slow)");
      std::this_thread::yield();
    }
  }

  const MpiOptions& options() const noexcept { return options_; }

  // Reports the error on this rank and throws; the job ends when this Mpi is destroyed.
  [[noreturn]] void fail(const std::string& what) {
    failed_ = true;
    failure_ = "etnn::dist::Mpi: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + what;
    throw DistError(failure_);
  }

 private:
  void init(int* argc, char*** argv) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw DistError("etnn::dist::Mpi: MPI_Init_thread failed; start the program with mpirun or srun");
      owns_mpi_ = true;
    }
    ignore_broken_pipes();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // The destructor does not run when the constructor throws: a failure here ends the job itself.
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_) != MPI_SUCCESS)
      abort("MPI_Comm_split_type failed while setting up etnn::dist::Mpi");
    MPI_Comm_set_errhandler(local_, MPI_ERRORS_RETURN);
    // The ring's and the parameter server's messages, apart from users' own send() and recv().
    if (MPI_Comm_dup(MPI_COMM_WORLD, &messages_) != MPI_SUCCESS)
      abort("MPI_Comm_dup failed while setting up etnn::dist::Mpi");
    MPI_Comm_set_errhandler(messages_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(local_, &local_rank_);
    MPI_Comm_size(local_, &local_size_);
    if (options_.shared_memory && local_size_ == size_ && size_ > 1) shared_.create(local_);
  }

  // A peer that died leaves its TCP connections broken; the next write to one raises SIGPIPE,
  // whose default action kills this rank silently (mpirun then names the wrong rank, by signal
  // 13). Ignored, the write fails with EPIPE and the collective reports it. A handler the program
  // installed itself is left alone.
  static void ignore_broken_pipes() {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
  }

  // A barrier of the ranks on this machine, with the deadline, reported as `p`'s operation.
  void node_barrier(const Pending& p) {
    Pending step{MPI_REQUEST_NULL, p.operation, p.count};
    check(MPI_Ibarrier(local_, &step.request), p.operation);
    wait(step);
  }

  // A Pending for `operation`; in debug mode, first checks (with the usual deadline) that every
  // rank is in the same operation with the same element count.
  Pending start(const char* operation, std::size_t n) {
    if (options_.debug) {
      std::uint32_t op = 2166136261u;  // FNV-1a of the operation's name
      for (const char* c = operation; *c != '\0'; ++c) op = (op ^ static_cast<unsigned char>(*c)) * 16777619u;
      // max and -min of the count and of the operation id
      long long range[4] = {static_cast<long long>(n), -static_cast<long long>(n), op, -static_cast<long long>(op)};
      Pending check_pending{MPI_REQUEST_NULL, "MPI_Iallreduce (ETNN_DIST_DEBUG check)", 4};
      check(MPI_Iallreduce(MPI_IN_PLACE, range, 4, MPI_LONG_LONG, MPI_MAX, comm(), &check_pending.request),
            check_pending.operation);
      wait(check_pending);
      if (range[2] != -range[3])
        fail(std::string(operation) + " here, but another rank is in a different collective (ETNN_DIST_DEBUG)");
      if (range[0] != -range[1])
        fail(std::string(operation) + " of " + std::to_string(n) + " elements here, but between " +
             std::to_string(-range[1]) + " and " + std::to_string(range[0]) +
             " across ranks (ETNN_DIST_DEBUG); every rank must pass the same size");
    }
    return {MPI_REQUEST_NULL, operation, n};
  }

  // A point-to-point sum that is not in flight, kept from the sums before.
  detail::PointToPointSum* idle_sum() {
    for (auto& sum : sums_)
      if (!sum->busy()) return sum.get();
    return sums_.emplace_back(std::make_unique<detail::PointToPointSum>()).get();
  }

  int count_of(std::size_t n, const char* operation) {
    if (n > static_cast<std::size_t>(INT_MAX))
      fail(std::string(operation) + " of " + std::to_string(n) + " elements exceeds MPI's int count");
    return static_cast<int>(n);
  }

  void check(int code, const char* operation) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail(std::string(operation) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
  }

  MpiOptions options_;
  bool owns_mpi_ = false;
  bool failed_ = false;
  std::string failure_;  // fail()'s message, repeated by abort()
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  int local_rank_ = 0;
  int local_size_ = 1;
  MPI_Comm messages_ = MPI_COMM_NULL;
  detail::SharedMemorySum shared_;
  std::vector<std::unique_ptr<detail::PointToPointSum>> sums_;  // ring / parameter-server sums
  int tag_ = 0;
  detail::SharedStoragePool storage_;
};

}  // namespace etnn::dist
