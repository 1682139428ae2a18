#pragma once
// Private to dist/: include <etnn/dist/mpi.hpp>, which uses it.
// A shared memory window over the ranks of one machine (MPI_Win_allocate_shared): a segment of
// `bytes` per rank, page-aligned each (alloc_shared_noncontig: no two ranks' data share a cache
// line), which every rank reads and writes with plain loads and stores through the segments'
// addresses as it sees them. The window stays locked (lock_all) for its life; sync() orders this
// rank's loads and stores against a barrier, which is the caller's. Past each segment's `bytes`
// lies a cache line of its own (note(r)), for a few values that ranks exchange between barriers.
#include <mpi.h>
#include <sys/statvfs.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace etnn::dist::detail {

// Whether the machine's shared memory file system (/dev/shm, where MPI libraries back shared
// windows) has room for `bytes` more and a quarter of itself still free after: past its end a
// window would end the program with SIGBUS at the first touch of a page instead of an error (a
// container's /dev/shm is often 64 MB). True where there is no /dev/shm to ask.
inline bool shared_memory_has_room(std::size_t bytes) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return true;
  const double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  const double total_bytes = static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize);
  return static_cast<double>(bytes) <= free_bytes - 0.25 * total_bytes;
}

class SharedWindow {
 public:
  SharedWindow() = default;
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  // Collective over `node` (ranks on one machine). False on every rank, with nothing held, where
  // the MPI library or the machine cannot give the window, or /dev/shm has no room for it on some
  // rank's count: every rank takes the same path.
  bool allocate(MPI_Comm node, std::size_t bytes) {
    int rank = 0, size = 1;
    MPI_Comm_rank(node, &rank);
    MPI_Comm_size(node, &size);
    rank_ = rank;
    int room = shared_memory_has_room(bytes * static_cast<std::size_t>(size)) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &room, 1, MPI_INT, MPI_MIN, node);
    if (room != 1) return false;
    MPI_Info info = MPI_INFO_NULL;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void* base = nullptr;
    const std::size_t with_note = note_offset(bytes) + note_bytes;
    bool usable =
        MPI_Win_allocate_shared(static_cast<MPI_Aint>(with_note), 1, info, node, &base, &window_) == MPI_SUCCESS;
    MPI_Info_free(&info);
    if (usable) {
      MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN);
      MPI_Win_lock_all(MPI_MODE_NOCHECK, window_);
      locked_ = true;
      segments_.assign(static_cast<std::size_t>(size), nullptr);
    } else {
      window_ = MPI_WIN_NULL;
    }
    for (int r = 0; usable && r < size; ++r) {
      MPI_Aint segment_bytes = 0;
      int unit = 0;
      void* segment = nullptr;
      usable = MPI_Win_shared_query(window_, r, &segment_bytes, &unit, &segment) == MPI_SUCCESS &&
               static_cast<std::size_t>(segment_bytes) >= with_note;
      segments_[static_cast<std::size_t>(r)] = static_cast<unsigned char*>(segment);
    }
    int everywhere = usable ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &everywhere, 1, MPI_INT, MPI_MIN, node);
    if (everywhere != 1) {
      free();
      return false;
    }
    bytes_ = bytes;
    return true;
  }

  // Collective; before MPI_Finalize. Nothing happens where nothing is held.
  void free() {
    if (locked_) MPI_Win_unlock_all(window_);
    locked_ = false;
    if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
    window_ = MPI_WIN_NULL;
    segments_.clear();
    bytes_ = 0;
  }

  bool held() const noexcept { return !segments_.empty(); }
  int ranks() const noexcept { return static_cast<int>(segments_.size()); }
  int rank() const noexcept { return rank_; }
  std::size_t bytes() const noexcept { return bytes_; }
  // Rank r's segment, as this rank addresses it.
  unsigned char* segment(int r) const noexcept { return segments_[static_cast<std::size_t>(r)]; }
  unsigned char* mine() const noexcept { return segment(rank_); }
  // Rank r's note: note_bytes past its segment's bytes, a cache line no other data shares.
  static constexpr std::size_t note_bytes = 64;
  unsigned char* note(int r) const noexcept { return segment(r) + note_offset(bytes_); }
  // True when [p, p + bytes) lies in this rank's segment.
  bool holds(const void* p, std::size_t bytes) const noexcept {
    if (!held()) return false;
    const auto at = reinterpret_cast<std::uintptr_t>(p), begin = reinterpret_cast<std::uintptr_t>(mine());
    return at >= begin && bytes <= bytes_ && at - begin <= bytes_ - bytes;
  }

  // A memory barrier for the window's loads and stores (MPI_Win_sync), on each side of a barrier.
  void sync() const { MPI_Win_sync(window_); }

 private:
  static constexpr std::size_t note_offset(std::size_t bytes) { return (bytes + note_bytes - 1) / note_bytes * note_bytes; }

  MPI_Win window_ = MPI_WIN_NULL;
  bool locked_ = false;
  int rank_ = 0;
  std::size_t bytes_ = 0;
  std::vector<unsigned char*> segments_;
};

}  // namespace etnn::dist::detail
