#pragma once
// Private to cuda/fused_mlp.hpp: the fused MLP's geometry: widths and parameter offsets, block and
// fragment sizes, the shared-memory layouts and their sizes, the layout of `saved` and the row-chunk
// plan of the weight-gradient split.
#include <cstddef>

#include "../../expr/fused_mlp_padding.hpp"
#include "../half.hpp"

namespace etnn::cuda {

template <int... W>
inline constexpr bool fused_mlp_widths_ok = ((W == 16 || W == 32 || W == 64 || W == 128) && ...);

namespace detail::fused_mlp {

// half_bytes comes from the enclosing etnn::cuda::detail (cuda/half.hpp): the layouts below count
// on 2-byte values.

inline constexpr int frag = 16;                   // WMMA fragment edge: 16x16x16 tiles
inline constexpr int warps = 8;                   // per block
inline constexpr int threads = warps * 32;        // per block
inline constexpr int tile_rows = warps * frag;    // batch rows per block: 16 per warp
inline constexpr int smem_pad = 8;                // 16-bit elements (16 bytes) added to each shared row:
                                                  // keeps ldm a multiple of 8 and staggers banks
inline constexpr int max_chunks = 128;            // row chunks of the weight-gradient split
inline constexpr std::size_t region_align = 256;  // bytes; alignment of every region of `saved`

// Every WMMA pointer below is base + (16 i) * ld + 16 j elements with ld a multiple of 8, so it is
// 32-byte aligned whenever its base is; every shared base is a multiple of 256 bytes from the
// (128-byte aligned) start of dynamic shared memory.

template <int... W>
__host__ __device__ constexpr int width_at(int i) {
  constexpr int list[] = {W...};
  return list[i];
}

template <int... W>
__host__ __device__ constexpr int max_width_of() {
  int widest = 0;
  for (int i = 0; i < static_cast<int>(sizeof...(W)); ++i)
    widest = width_at<W...>(i) > widest ? width_at<W...>(i) : widest;
  return widest;
}

// Largest shared copy of one layer's weights: w_{l+1} rows of (w_l + smem_pad) 16-bit values.
template <int... W>
__host__ __device__ constexpr std::size_t max_weight_elems() {
  std::size_t most = 0;
  for (int l = 0; l + 1 < static_cast<int>(sizeof...(W)); ++l) {
    const std::size_t n = static_cast<std::size_t>(width_at<W...>(l + 1)) * (width_at<W...>(l) + smem_pad);
    most = n > most ? n : most;
  }
  return most;
}

// Largest shared footprint of the weight-gradient kernel: a dZ_l tile (128, w_{l+1}) and an A_l
// tile (128, w_l), both 16-bit with padded rows, plus one float per thread for the bias sums.
template <int... W>
__host__ __device__ constexpr std::size_t max_weight_grad_smem() {
  std::size_t most = 0;
  for (int l = 0; l + 1 < static_cast<int>(sizeof...(W)); ++l) {
    const std::size_t n =
        static_cast<std::size_t>(tile_rows) * (width_at<W...>(l + 1) + smem_pad + width_at<W...>(l) + smem_pad);
    most = n > most ? n : most;
  }
  return most * half_bytes + threads * sizeof(float);
}

// Device pointers into `saved` (unused slots are null).
template <class Half, int Layers>
struct SavedBuffers {
  Half* activation[Layers + 1];  // activation[h] = A_h (batch, w_h) for 1 <= h < Layers
  Half* kept[Layers + 1];        // kept[h] = f'(Z_{h-1}) (batch, w_h) likewise, where f' needs Z (SiLU)
  Half* dz[Layers];              // dz[l] = dZ_l (batch, w_{l+1}) for 0 <= l < Layers - 1 (dZ_{Layers-1} is dy)
  float* partial;                // (chunks, num_params): chunk c's parameter gradients, params' layout
  int chunks;                    // row chunks of the weight-gradient split
  int chunk_rows;                // rows per chunk, a multiple of tile_rows
};

inline int ceil_div(int a, int b) { return a / b + (a % b != 0 ? 1 : 0); }

inline std::size_t round_up(std::size_t n, std::size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

struct ChunkPlan {
  int chunks;
  int chunk_rows;
};

// At most max_chunks chunks of whole tiles covering rows [0, batch); every chunk holds at least one
// row: (chunks - 1) * chunk_rows < batch <= chunks * chunk_rows.
inline ChunkPlan plan_chunks(int batch) {
  const int tiles = ceil_div(batch, tile_rows);
  const int tiles_per_chunk = ceil_div(tiles, max_chunks);
  return {ceil_div(tiles, tiles_per_chunk), tiles_per_chunk * tile_rows};
}

// One network's layers and layouts, shared by its device code (Net) and its host driver (FusedMlp).
// Act: the hidden layers' activation (expr::detail::fused_hidden).
template <class Half, class Act, int... W>
struct Geometry {
  static constexpr int layers = static_cast<int>(sizeof...(W)) - 1;
  // The flat parameters, as etnn's linear layers lay them out (expr::detail::MlpLayout): each
  // tensor 256-byte aligned, zeros between; num_params is their length.
  using layout = expr::detail::MlpLayout<W...>;
  static constexpr std::size_t num_params = layout::size;
  using Buffers = SavedBuffers<Half, layers>;

  template <int l>
  struct Layer {
    static constexpr int in = width_at<W...>(l);
    static constexpr int out = width_at<W...>(l + 1);
    static constexpr bool hidden = l + 1 < layers;  // Act, and its output (and kept f') saved
    static constexpr std::size_t weight_offset = layout::weight_at(l);
    static constexpr std::size_t bias_offset = layout::bias_at(l);
    static constexpr int weight_ld = in + smem_pad;  // shared row pitch of W_l (out, in)
  };

  // Shared layout of the forward and chain kernels: a (128, max width) Half activation/gradient
  // tile, one layer's weights, and a 16x16 fp32 scratch per warp.
  static constexpr int tile_ld = max_width_of<W...>() + smem_pad;
  static constexpr std::size_t tile_elems = static_cast<std::size_t>(tile_rows) * tile_ld;
  static constexpr std::size_t weight_elems = max_weight_elems<W...>();
  static constexpr std::size_t tile_smem_bytes =
      (tile_elems + weight_elems) * half_bytes + static_cast<std::size_t>(warps) * frag * frag * sizeof(float);
  static_assert(tile_elems * half_bytes % 256 == 0 && weight_elems * half_bytes % 256 == 0,
                "shared regions must keep 256-byte alignment");

  static constexpr std::size_t weight_grad_smem_bytes = max_weight_grad_smem<W...>();

  struct SavedLayout {
    std::size_t bytes;
    Buffers buffers;  // null pointers when laid out without a base
  };

  // Regions in order, each starting on a region_align boundary:
  //   A_h (batch, w_h) Half for 1 <= h < L;  where Act' needs Z, K_h = f'(Z_{h-1}) (batch, w_h)
  //   Half for 1 <= h < L;  dZ_l (batch, w_{l+1}) Half for 0 <= l < L-1;  partial (chunks,
  //   num_params) fp32.
  static SavedLayout saved_layout(int batch, void* base) {
    constexpr int widths[] = {W...};
    unsigned char* bytes = static_cast<unsigned char*>(base);
    std::size_t offset = 0;
    auto take = [&](std::size_t size) -> unsigned char* {
      unsigned char* at = bytes == nullptr ? nullptr : bytes + offset;
      offset = round_up(offset + size, region_align);
      return at;
    };
    const std::size_t rows = static_cast<std::size_t>(batch);
    Buffers buffers{};
    for (int h = 1; h < layers; ++h)
      buffers.activation[h] = reinterpret_cast<Half*>(take(rows * widths[h] * sizeof(Half)));
    if constexpr (Act::derivative_needs_input)
      for (int h = 1; h < layers; ++h)
        buffers.kept[h] = reinterpret_cast<Half*>(take(rows * widths[h] * sizeof(Half)));
    for (int l = 0; l + 1 < layers; ++l)
      buffers.dz[l] = reinterpret_cast<Half*>(take(rows * widths[l + 1] * sizeof(Half)));
    const ChunkPlan plan = plan_chunks(batch < 1 ? 1 : batch);
    buffers.chunks = plan.chunks;
    buffers.chunk_rows = plan.chunk_rows;
    buffers.partial =
        reinterpret_cast<float*>(take(static_cast<std::size_t>(plan.chunks) * num_params * sizeof(float)));
    return {offset, buffers};
  }
};

}  // namespace detail::fused_mlp

}  // namespace etnn::cuda
