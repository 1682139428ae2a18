#pragma once
// Private to dist/: include <etnn/dist/mpi.hpp>.
// A sum across ranks built from MPI point-to-point messages, for dist::Mpi's
// MpiOptions::allreduce = Allreduce::ring or Allreduce::parameter_server: the two designs users
// weigh for data parallelism, next to MPI's own MPI_Iallreduce. For n values on N ranks:
//
//   ring              the values in N chunks; N - 1 steps of reduce-scatter (each rank sends one
//                     chunk to the next rank and adds the chunk that arrives from the previous one),
//                     after which rank r holds the sum of chunk r + 1; then N - 1 steps of
//                     allgather pass the summed chunks on around the ring. Every rank sends and
//                     receives 2 (N - 1) / N * n values: at most twice the data, however many ranks.
//   parameter_server  every rank sends its n values to rank 0 (the server), which adds them in
//                     rank order and sends the sum back to each: the server's link carries
//                     (N - 1) * n values each way, so its time grows with N (and the server
//                     keeps (N - 1) * n values of scratch to receive them into).
//
// Either way one rank computes each sum and the others receive its bits, so every rank ends with
// the same bits, and a run gives the same bits every time (the order of the additions is fixed by
// the ranks, not by timing). A sum is non-blocking: advance() posts a step's messages and returns;
// the next call that finds them complete does the step's additions and posts the next step.
// Sums started in the same order on every rank may be in flight together: each has its own tag.
// The scratch (received chunks) is kept from sum to sum: nothing is allocated once a job's largest
// sums have run.
#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace etnn::dist {

// How dist::Mpi sums float and double buffers across machines (on one machine, large ones go
// through shared memory whatever this says).
enum class Allreduce {
  automatic,         // the ring from ring_from_bytes up, MPI's own allreduce below
  mpi,               // MPI's own MPI_Iallreduce (its library picks the algorithm)
  ring,              // etnn's ring: reduce-scatter, then allgather, over point-to-point messages
  parameter_server,  // gather to rank 0, which adds and sends the sum back to every rank
};

// Allreduce::automatic's threshold. Measured with Open MPI 4.1 over TCP between 2 and 3 hosts on a
// 1 Gbit/s link (scripts/bench_dist.sh): MPI's allreduce is faster up to 16 KiB (4 KiB: 12 against
// 30 us on 2 hosts), the ring from 64 KiB (481 against 562 us; 3.4 against 7.1 ms at 256 KiB;
// 1.6x on wide's 23.3 MB across 3 hosts), and on one machine without shared memory the ring is 2.3
// to 3.3x faster from 1.6 MB (Open MPI's non-blocking allreduce is slow there).
inline constexpr std::size_t ring_from_bytes = std::size_t{64} << 10;

namespace detail {

class PointToPointSum {
 public:
  // Begins data = sum over ranks of data: n values of T, MPI type `type` (MPI_FLOAT for float,
  // MPI_DOUBLE for double), as messages on `comm` with `tag`. Returns an MPI error code.
  template <class T>
  int start(Allreduce algorithm, T* data, std::size_t n, MPI_Datatype type, MPI_Comm comm, int tag) {
    algorithm_ = algorithm;
    data_ = data;
    n_ = n;
    value_bytes_ = sizeof(T);
    type_ = type;
    add_ = [](void* into, const void* from, std::size_t count) {
      T* a = static_cast<T*>(into);
      const T* b = static_cast<const T*>(from);
      for (std::size_t i = 0; i < count; ++i) a[i] += b[i];
    };
    comm_ = comm;
    tag_ = tag;
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    step_ = 0;
    posted_ = 0;
    const std::size_t scratch_values =
        algorithm == Allreduce::ring ? (n + static_cast<std::size_t>(size_) - 1) / static_cast<std::size_t>(size_)
        : rank_ == 0                 ? n * static_cast<std::size_t>(size_ - 1)
                                     : 0;
    if (scratch_.size() < scratch_values * value_bytes_) scratch_.resize(scratch_values * value_bytes_);
    if (requests_.size() < static_cast<std::size_t>(2 * size_)) requests_.resize(static_cast<std::size_t>(2 * size_));
    busy_ = true;
    return post();
  }

  // Moves the sum on as far as its messages allow; done = true once data holds the sum.
  int advance(bool& done) {
    done = false;
    while (step_ < steps()) {
      int complete = 0;
      if (const int code = MPI_Testall(posted_, requests_.data(), &complete, MPI_STATUSES_IGNORE); code != MPI_SUCCESS)
        return code;
      if (!complete) return MPI_SUCCESS;
      finish_step();
      ++step_;
      if (const int code = post(); code != MPI_SUCCESS) return code;
    }
    done = true;
    busy_ = false;
    return MPI_SUCCESS;
  }

  bool busy() const noexcept { return busy_; }

 private:
  int steps() const noexcept {
    if (size_ == 1) return 0;
    return algorithm_ == Allreduce::ring ? 2 * (size_ - 1) : 2;
  }

  // Chunk c of the ring: values [c n / N, (c + 1) n / N).
  std::size_t chunk_begin(int c) const noexcept {
    return n_ * static_cast<std::size_t>(c) / static_cast<std::size_t>(size_);
  }
  std::size_t chunk_size(int c) const noexcept { return chunk_begin(c + 1) - chunk_begin(c); }
  int wrap(int r) const noexcept { return ((r % size_) + size_) % size_; }
  unsigned char* at(std::size_t value) const noexcept { return static_cast<unsigned char*>(data_) + value * value_bytes_; }

  // The ring's step s sends chunk `sent` to the next rank and receives chunk `received` from the
  // previous one: reduce-scatter (s < N - 1) into scratch, to be added; allgather into place.
  int ring_sent(int s) const noexcept { return s < size_ - 1 ? wrap(rank_ - s) : wrap(rank_ + 1 - (s - (size_ - 1))); }
  int ring_received(int s) const noexcept { return s < size_ - 1 ? wrap(rank_ - s - 1) : wrap(rank_ - (s - (size_ - 1))); }

  int post() {
    posted_ = 0;
    if (step_ >= steps()) return MPI_SUCCESS;
    if (algorithm_ == Allreduce::ring) {
      const int sent = ring_sent(step_), received = ring_received(step_);
      void* into = step_ < size_ - 1 ? static_cast<void*>(scratch_.data()) : static_cast<void*>(at(chunk_begin(received)));
      if (const int code = receive(into, chunk_size(received), wrap(rank_ - 1)); code != MPI_SUCCESS) return code;
      return send(at(chunk_begin(sent)), chunk_size(sent), wrap(rank_ + 1));
    }
    // The parameter server: step 0 gathers at rank 0, step 1 sends the sum back.
    for (int r = 1; r < size_; ++r) {
      const bool mine = rank_ == 0 || rank_ == r;
      if (!mine) continue;
      int code = MPI_SUCCESS;
      if (step_ == 0)
        code = rank_ == 0 ? receive(scratch_.data() + static_cast<std::size_t>(r - 1) * n_ * value_bytes_, n_, r)
                          : send(data_, n_, 0);
      else
        code = rank_ == 0 ? send(data_, n_, r) : receive(data_, n_, 0);
      if (code != MPI_SUCCESS) return code;
    }
    return MPI_SUCCESS;
  }

  // The additions of a completed step.
  void finish_step() {
    if (algorithm_ == Allreduce::ring) {
      if (step_ < size_ - 1) {
        const int received = ring_received(step_);
        add_(at(chunk_begin(received)), scratch_.data(), chunk_size(received));
      }
    } else if (step_ == 0 && rank_ == 0) {
      for (int r = 1; r < size_; ++r)  // in rank order
        add_(data_, scratch_.data() + static_cast<std::size_t>(r - 1) * n_ * value_bytes_, n_);
    }
  }

  int send(const void* from, std::size_t count, int to) {
    return MPI_Isend(from, static_cast<int>(count), type_, to, tag_, comm_, &requests_[static_cast<std::size_t>(posted_++)]);
  }
  int receive(void* into, std::size_t count, int from) {
    return MPI_Irecv(into, static_cast<int>(count), type_, from, tag_, comm_, &requests_[static_cast<std::size_t>(posted_++)]);
  }

  Allreduce algorithm_ = Allreduce::mpi;
  void* data_ = nullptr;
  std::size_t n_ = 0;
  std::size_t value_bytes_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  void (*add_)(void*, const void*, std::size_t) = nullptr;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int tag_ = 0;
  int rank_ = 0;
  int size_ = 1;
  int step_ = 0;
  int posted_ = 0;  // requests_[0, posted_) belong to the current step
  bool busy_ = false;
  std::vector<unsigned char> scratch_;
  std::vector<MPI_Request> requests_;
};

}  // namespace detail
}  // namespace etnn::dist
