#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// nn::residual(block): y = x + block(x), the block keeping its input's shape (checked at compile
// time). The PyTorch equivalent is a module holding the block as nn.Sequential `block`:
//   class Residual(nn.Module):
//       def __init__(self, *layers): super().__init__(); self.block = nn.Sequential(*layers)
//       def forward(self, x): return x + self.block(x)
// so a residual at index 2 names its parameters "2.block.0.weight", ...
//   constexpr auto net = nn::input<64> >> nn::residual(nn::linear<64> >> nn::relu >> nn::linear<64>) >> nn::linear<10>;
#include <string>

#include "block.hpp"
#include "checks.hpp"

namespace etnn::nn {

template <ShapeType In, class Chain, int Index>
struct ResidualLayer {
  using block = detail::BlockOf<In, Chain>;
  using program = typename block::program;
  using run = detail::BlockRun<program>;
  static_assert(check::residual_shape<In, typename block::out_shape>());
  static constexpr char prefix[] = "block";

  using in_shape = In;
  using out_shape = In;
  static constexpr int module_index = Index;
  static constexpr std::size_t num_params = program::flat_size;
  static constexpr auto params = detail::NestedInfos<program, false, prefix>::infos;
  static constexpr std::size_t num_buffers = program::num_buffers;
  static constexpr auto buffers = detail::NestedInfos<program, true, prefix>::infos;
  static constexpr std::size_t saved_per_sample = program::workspace_per_sample;  // the block's workspace
  static constexpr bool output_aliases_input = false;
  static constexpr bool backward_in_place = true;
  static constexpr bool cuda_kernels = program::template runs_on<Cuda>;  // the sum is an expression
  static constexpr bool draws_random = program::draws_random;
  template <class Device>
  static constexpr std::size_t scratch_values(int batch) {
    return run::template scratch_values<Device>(batch);
  }

  template <class T>
  static void init(T* p, Rng& rng) {
    program::init_params(p, rng.next());
  }
  template <class T>
  static void init_buffers(T* b) {
    program::init_buffers(b);
  }

  template <class T, class Device>
  static void forward(Device device, const Pass<T>& pass, const T* p, const T* x, T* y, T* saved, int batch) {
    const T* inner = run::forward(device, pass, p, x, saved, y, batch);
    const std::size_t n = elements(batch);
    assign(device, y, expr::ref(x, n) + expr::ref(inner, n));
  }

  // dx = dy + block'(x)^T dy; the block's parameter gradients accumulate.
  template <class T, class Device>
  static void backward(Device device, const Pass<T>& pass, const T* p, T* g, const T* x, const T*, const T* saved,
                       T* dy, T* dx, int batch) {
    T* workspace = const_cast<T*>(saved);  // the block's own workspace, which its backward reuses
    const std::size_t n = elements(batch);
    assign(device, run::output_gradient(workspace, batch), expr::ref(dy, n));
    if (dx == nullptr) {
      run::template backward<false>(device, pass, p, g, x, workspace, batch);
    } else {
      const T* inner_dx = run::template backward<true>(device, pass, p, g, x, workspace, batch);
      assign(device, dx, expr::ref(dy, n) + expr::ref(inner_dx, n));
    }
  }

 private:
  static std::size_t elements(int batch) { return static_cast<std::size_t>(batch) * In::size; }
};

template <class Chain>
struct Residual : LayerSpec {
  template <ShapeType In, int Index>
  using bind = ResidualLayer<In, Chain, Index>;
  static std::string describe() { return "residual(" + detail::ChainDescription<Chain>::describe() + ")"; }
};

template <class Block>
  requires(Spec<Block> || detail::IsSequential<Block>::value)
constexpr auto residual(Block) {
  return Residual<typename detail::AsChain<Block>::type>{};
}

}  // namespace etnn::nn
