#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::concat(a, b): two blocks applied to the same input, their flat outputs joined per sample:
//   y = [a(x), b(x)]      a(x): (B, N)  b(x): (B, M)  y: (B, N + M)
// The PyTorch equivalent holds the branches as nn.ModuleList `branches` of two nn.Sequential:
//   def forward(self, x): return torch.cat([self.branches[0](x), self.branches[1](x)], dim=1)
// so parameters are named "<index>.branches.0.0.weight", "<index>.branches.1.0.weight", ...
//   constexpr auto net = nn::input<16> >> nn::concat(nn::linear<8> >> nn::relu, nn::linear<4>) >> nn::linear<2>;
#include <algorithm>
#include <string>

#include "../backend/memory.hpp"
#include "block.hpp"
#include "checks.hpp"

namespace etnn::nn {

template <ShapeType In, class ChainA, class ChainB, int Index>
struct ConcatLayer {
  using block_a = detail::BlockOf<In, ChainA>;
  using block_b = detail::BlockOf<In, ChainB>;
  using program_a = typename block_a::program;
  using program_b = typename block_b::program;
  using run_a = detail::BlockRun<program_a>;
  using run_b = detail::BlockRun<program_b>;
  static_assert(check::concat_shapes<typename block_a::out_shape, typename block_b::out_shape>());
  static constexpr std::size_t width_a = block_a::out_shape::size, width_b = block_b::out_shape::size;
  static constexpr char prefix_a[] = "branches.0";
  static constexpr char prefix_b[] = "branches.1";

  using in_shape = In;
  using out_shape = Shape<static_cast<int>(width_a + width_b)>;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = program_a::flat_size + program_b::flat_size;
  static constexpr auto params =
      detail::join(detail::NestedInfos<program_a, false, prefix_a>::infos,
                   detail::NestedInfos<program_b, false, prefix_b, program_a::flat_size>::infos);
  static constexpr std::size_t num_buffers = program_a::num_buffers + program_b::num_buffers;
  static constexpr auto buffers =
      detail::join(detail::NestedInfos<program_a, true, prefix_a>::infos,
                   detail::NestedInfos<program_b, true, prefix_b, program_a::num_buffers>::infos);
  // Both branches' workspaces, a's first (laid out for the batch's rows).
  static constexpr std::size_t saved_per_sample = program_a::workspace_per_sample + program_b::workspace_per_sample;
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = false;
  static constexpr bool cuda_kernels = program_a::template runs_on<Cuda> && program_b::template runs_on<Cuda>;
  static constexpr bool draws_random = program_a::draws_random || program_b::draws_random;
  // Inference: both outputs, then the larger branch's own scratch.
  template <class Device>
  static constexpr std::size_t scratch_values(int batch) {
    return (aligned_values(width_a) + aligned_values(width_b)) * static_cast<std::size_t>(batch) +
           std::max(run_a::template scratch_values<Device>(batch), run_b::template scratch_values<Device>(batch));
  }

  template <class T>
  static void init(T* p, Rng& rng) {
    program_a::init_params(p, rng.next());
    program_b::init_params(p + program_a::flat_size, rng.next());
  }
  template <class T>
  static void init_buffers(T* b) {
    program_a::init_buffers(b);
    program_b::init_buffers(b + program_a::num_buffers);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    const auto rows = static_cast<std::size_t>(batch);
    // Inference outputs go to the scratch; the branches' own scratch follows them.
    T* out_a = pass.scratch;
    T* out_b = out_a + aligned_values(width_a) * rows;  // each output region aligned
    Pass<T> pass_a = pass;
    pass_a.scratch = out_b + aligned_values(width_b) * rows;
    T* workspace_b = saved != nullptr ? saved + program_a::workspace_values(batch) : nullptr;
    const T* a = run_a::forward(device, pass_a, p, x, saved, out_a, batch);
    const T* b = run_b::forward(device, branch_b(pass_a), p + program_a::flat_size, x, workspace_b, out_b, batch);
    copy_rows(device, a, width_a, y, out_shape::size, width_a, rows);
    copy_rows(device, b, width_b, y + width_a, out_shape::size, width_b, rows);
  }

  // dx = a'(x)^T dy_a + b'(x)^T dy_b, dy split by columns; both branches' gradients accumulate.
  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T*, const T* saved,
                       T* dy, T* dx, int batch) {
    const auto rows = static_cast<std::size_t>(batch);
    T* workspace_a = const_cast<T*>(saved);  // the branches' own workspaces, which their backward reuses
    T* workspace_b = workspace_a + program_a::workspace_values(batch);
    T* dy_a = run_a::output_gradient(workspace_a, batch);
    T* dy_b = run_b::output_gradient(workspace_b, batch);
    copy_rows(device, dy, out_shape::size, dy_a, width_a, width_a, rows);
    copy_rows(device, dy + width_a, out_shape::size, dy_b, width_b, width_b, rows);
    const T* p_b = p + program_a::flat_size;
    T* g_b = g + program_a::flat_size;
    if (dx == nullptr) {
      run_a::template backward<false>(device, pass, p, g, x, workspace_a, batch);
      run_b::template backward<false>(device, branch_b(pass), p_b, g_b, x, workspace_b, batch);
    } else {
      const T* dx_a = run_a::template backward<true>(device, pass, p, g, x, workspace_a, batch);
      const T* dx_b = run_b::template backward<true>(device, branch_b(pass), p_b, g_b, x, workspace_b, batch);
      const std::size_t n = rows * In::size;
      assign(device, dx, expr::ref(dx_a, n) + expr::ref(dx_b, n));
    }
  }

 private:
  // Branch b's pass: its buffers follow a's, and its random stream differs from a's.
  template <class T>
  static Pass<T> branch_b(Pass<T> pass) {
    if (pass.buffers != nullptr) pass.buffers += program_a::num_buffers;
    pass.seed = derive_seed(pass.seed, 1);
    return pass;
  }
};

template <class ChainA, class ChainB>
struct Concat : LayerSpec {
  template <ShapeType In, int Index>
  using bind = ConcatLayer<In, ChainA, ChainB, Index>;
  static std::string describe() {
    return "concat(" + detail::ChainDescription<ChainA>::describe() + ", " +
           detail::ChainDescription<ChainB>::describe() + ")";
  }
};

template <class A, class B>
  requires((Spec<A> || detail::IsSequential<A>::value) && (Spec<B> || detail::IsSequential<B>::value))
constexpr auto concat(A, B) {
  return Concat<typename detail::AsChain<A>::type, typename detail::AsChain<B>::type>{};
}

}  // namespace etnn::nn
