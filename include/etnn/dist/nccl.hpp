#pragma once
// etnn::dist::Nccl: the data-parallel reducer of CUDA models (one GPU per rank). Gradient buckets
// are summed with ncclAllReduce on a side stream that starts once backward has produced them on
// etnn's stream (the buckets overlap the rest of backward), and the optimizer's step waits for
// them; parameters are broadcast from rank 0 with ncclBroadcast.
//
//   etnn::dist::Mpi world(argc, argv);     // the launcher: mpirun -np N (or srun)
//   etnn::dist::Nccl nccl(world);          // before any model: picks GPU local_rank, bootstraps
//                                          // the communicator by broadcasting NCCL's id over MPI
//   etnn::Model<Net, float, etnn::Cuda> model(0);
//   etnn::optim::SGD opt(model, {.lr = 0.01f}, nccl);
//   etnn::dist::Nccl single;               // one process, world size 1 (the current GPU)
//
// Every NCCL and CUDA call is checked (etnn::DeviceError naming the call). A collective that does
// not complete within the timeout (ETNN_DIST_TIMEOUT seconds, default 300; a rank died or stalled)
// aborts the communicator and throws etnn::DistError naming this rank and the operation; the MPI
// world then ends the job. Needs nvcc and NCCL (CMake target etnn::nccl).
#if !defined(__CUDACC__)
#error "etnn/dist/nccl.hpp is part of the CUDA backend: compile with nvcc (a .cu file linked to etnn::nccl)"
#endif
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../cuda/memory.hpp"
#include "../cuda/runtime.hpp"
#include "../tensor/buffer.hpp"
#include "seconds.hpp"

namespace etnn {

namespace dist::detail {
inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess) cuda::detail::fail("NCCL", call, ncclGetErrorString(status), file, line);
}
}  // namespace dist::detail

#define ETNN_CHECK_NCCL(call) ::etnn::dist::detail::check_nccl((call), #call, __FILE__, __LINE__)

namespace dist {

class Nccl {
 public:
  using memory = Cuda;  // it reduces device memory (Optimizer checks the model's device)

  // A started allreduce: an event on the side stream, and for host data (a flag the Trainer
  // reduces) where to copy the result back.
  struct Pending {
    cudaEvent_t done = nullptr;
    const char* operation = "";
    std::size_t count = 0;
    void* host = nullptr;
    std::size_t bytes = 0;
  };

  // One process: world size 1 on the current GPU.
  Nccl() {
    ncclUniqueId id;
    ETNN_CHECK_NCCL(ncclGetUniqueId(&id));
    connect(id, 0, 1);
  }

  // One rank of an MPI world (anything with rank(), size(), local_rank(), broadcast of bytes and
  // abort(reason)): uses GPU local_rank modulo the node's GPUs; rank 0's NCCL id reaches the
  // others over MPI.
  template <class World>
  explicit Nccl(World& world) : end_job_([&world](const char* reason) { world.abort(reason); }) {
    int devices = 0;
    ETNN_CHECK_CUDA(cuda::runtime().cudaGetDeviceCount(&devices));
    ETNN_CHECK_CUDA(cuda::runtime().cudaSetDevice(world.local_rank() % devices));
    ncclUniqueId id;
    if (world.rank() == 0) ETNN_CHECK_NCCL(ncclGetUniqueId(&id));
    world.broadcast(reinterpret_cast<unsigned char*>(&id), sizeof id, 0);
    connect(id, world.rank(), world.size());
  }

  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;
  ~Nccl() {
    if (comm_ != nullptr) (void)(aborted_ ? ncclSuccess : ncclCommDestroy(comm_));
    if (side_ != nullptr) (void)cuda::runtime().cudaStreamDestroy(side_);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  // data = root's data on every rank (device memory), waited for.
  template <class T>
  void broadcast(T* data, std::size_t n, int root) {
    Pending p{event(), "ncclBroadcast", n};
    ETNN_CHECK_NCCL(ncclBroadcast(data, data, n, type_of<T>(), root, comm_, cuda::stream()));
    ETNN_CHECK_CUDA(cuda::runtime().cudaEventRecord(p.done, cuda::stream()));
    wait(p);
  }

  // data = sum over ranks of data, started once the work on etnn's stream so far is done. Device
  // memory is reduced in place; host memory (a count) goes through a device copy.
  template <class T>
  Pending start_allreduce_sum(T* data, std::size_t n) {
    Pending p{event(), "ncclAllReduce", n};
    T* on_device = data;
    if (is_host(data)) {
      p.host = data;
      p.bytes = n * sizeof(T);
      host_staging_.reserve_discard(p.bytes);
      on_device = reinterpret_cast<T*>(host_staging_.data());
      copy_from_host(Cuda{}, on_device, data, n);
    }
    cudaEvent_t ready = event();
    ETNN_CHECK_CUDA(cuda::runtime().cudaEventRecord(ready, cuda::stream()));
    ETNN_CHECK_CUDA(cuda::runtime().cudaStreamWaitEvent(side_, ready, 0));
    ETNN_CHECK_CUDA(cuda::runtime().cudaEventDestroy(ready));
    ETNN_CHECK_NCCL(ncclAllReduce(on_device, on_device, n, type_of<T>(), ncclSum, comm_, side_));
    ETNN_CHECK_CUDA(cuda::runtime().cudaEventRecord(p.done, side_));
    return p;
  }

  // True once the collective has completed (its result is then in place).
  bool poll(Pending& p) {
    if (p.done == nullptr) return true;
    if (!cuda::finished(p.done)) return false;
    finish(p);
    return true;
  }

  // Waits (on the host, at most the timeout) for the collective.
  void wait(Pending& p) {
    if (p.done == nullptr) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds_);
    while (!poll(p)) {
      ncclResult_t async_error = ncclSuccess;
      ETNN_CHECK_NCCL(ncclCommGetAsyncError(comm_, &async_error));
      if (async_error != ncclSuccess) fail(p, ncclGetErrorString(async_error));
      if (std::chrono::steady_clock::now() > deadline)
        fail(p, "did not complete within " + detail::seconds_text(timeout_seconds_) +
                    " s; another rank has stopped taking part (raise ETNN_DIST_TIMEOUT if a step is that slow)");
      std::this_thread::yield();
    }
  }

  // Ends the job: aborts the communicator (other ranks' collectives fail instead of hanging), then
  // ends the MPI world. A single process has nothing else to end.
  void abort(const char* reason) {
    std::fprintf(stderr, "etnn: rank %d: %s; aborting the NCCL communicator\n", rank_, reason);
    std::fflush(stderr);
    if (comm_ != nullptr && !aborted_) {
      (void)ncclCommAbort(comm_);
      aborted_ = true;
    }
    if (end_job_) end_job_(reason);
  }

 private:
  template <class T>
  static ncclDataType_t type_of() {
    if constexpr (std::is_same_v<T, float>) return ncclFloat32;
    else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
    else if constexpr (std::is_same_v<T, int>) return ncclInt32;
    else if constexpr (std::is_same_v<T, unsigned char>) return ncclUint8;
    else static_assert(sizeof(T) == 0, "etnn::dist::Nccl: unsupported element type");
  }

  static bool is_host(const void* p) {
    cudaPointerAttributes attributes{};
    ETNN_CHECK_CUDA(cuda::runtime().cudaPointerGetAttributes(&attributes, p));
    return attributes.type == cudaMemoryTypeHost || attributes.type == cudaMemoryTypeUnregistered;
  }

  static cudaEvent_t event() {
    cudaEvent_t e = nullptr;
    ETNN_CHECK_CUDA(cuda::runtime().cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  void connect(const ncclUniqueId& id, int rank, int size) {
    rank_ = rank;
    size_ = size;
    if (const char* t = std::getenv("ETNN_DIST_TIMEOUT")) {
      char* end = nullptr;
      timeout_seconds_ = std::strtod(t, &end);
      if (end == t || *end != '\0' || !(timeout_seconds_ > 0))
        throw DistError(std::string("etnn::dist::Nccl: ETNN_DIST_TIMEOUT='") + t + "' is not a positive number of seconds");
    }
    ETNN_CHECK_CUDA(cuda::runtime().cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    ETNN_CHECK_NCCL(ncclCommInitRank(&comm_, size, id, rank));
  }

  // A completed collective: its event released, a host operand's result copied back.
  void finish(Pending& p) {
    ETNN_CHECK_CUDA(cuda::runtime().cudaEventDestroy(p.done));
    p.done = nullptr;
    if (p.host != nullptr) {
      copy_to_host(Cuda{}, static_cast<unsigned char*>(p.host), host_staging_.data(), p.bytes);
      p.host = nullptr;
    }
  }

  [[noreturn]] void fail(Pending& p, const std::string& what) {
    std::string message = "etnn::dist::Nccl: rank ";
    message += std::to_string(rank_);
    message += " of ";
    message += std::to_string(size_);
    message += ": ";
    message += p.operation;
    message += " of ";
    message += std::to_string(p.count);
    message += " elements ";
    message += what;
    (void)ncclCommAbort(comm_);
    aborted_ = true;
    throw DistError(message);
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t side_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  double timeout_seconds_ = 300.0;
  bool aborted_ = false;
  Buffer<unsigned char, Cuda> host_staging_;
  std::function<void(const char*)> end_job_;  // the MPI world's abort, when there is one
};

}  // namespace dist
}  // namespace etnn
