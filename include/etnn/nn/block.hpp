#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// A block: a chain of layer specs without nn::input, run as a network of its own inside a
// combinator layer (residual, concat). The combinator's input is the block's input.
//   nn::linear<64> >> nn::relu >> nn::linear<64>            a Sequential without input
// Its parameters and buffers are the block's flat arrays, named as a PyTorch module holding the
// block as an nn.Sequential attribute would name them: "<prefix>.<index>.<name>" ("block.0.weight").
#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "checks.hpp"
#include "../backend/executor.hpp"
#include "program.hpp"
#include "sequential.hpp"

namespace etnn::nn::detail {

// A block given as one spec or as a chain.
template <class B>
struct AsChain {
  using type = Sequential<B>;
};
template <class... S>
struct AsChain<Sequential<S...>> {
  using type = Sequential<S...>;
};

template <ShapeType In, class Chain>
struct BlockOf;

template <ShapeType In, class... Specs>
struct BlockOf<In, Sequential<Specs...>> {
  static_assert(check::block_without_input<!Sequential<Specs...>::is_network>());
  using plan = Plan<In, 0, Specs...>;
  using program = Program<typename plan::layers>;
  using out_shape = typename plan::out_shape;
};

// "linear<64> >> relu >> linear<64>"
template <class Chain>
struct ChainDescription;
template <class... Specs>
struct ChainDescription<Sequential<Specs...>> {
  static std::string describe() {
    std::string s;
    ((s += (s.empty() ? "" : " >> ") + Specs::describe()), ...);
    return s;
  }
};

constexpr std::size_t decimal_digits(int v) { return v < 10 ? 1 : 1 + decimal_digits(v / 10); }

// Parameter (or, with Buffers, buffer) descriptions of program P for an enclosing layer: names
// "Prefix.<index>.<name>" stored at compile time, offsets shifted by Base.
template <class P, bool Buffers, const char* Prefix, std::size_t Base = 0>
struct NestedInfos {
  template <std::size_t I>
  static constexpr auto infos_of() {
    using L = typename P::template layer<I>;
    if constexpr (!Buffers) return L::params;
    else if constexpr (num_buffers_of<L>() > 0) return L::buffers;
    else return std::array<ParamInfo, 0>{};
  }
  template <std::size_t I>
  static constexpr std::size_t offset_of() {
    return Base + (Buffers ? P::buffer_offset[I] : P::param_offset[I]);
  }
  template <class F>
  static constexpr void for_each(F&& f) {  // f(module index, info, offset of the layer's slice)
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ([&] {
        for (const ParamInfo& info : infos_of<I>()) f(P::template layer<I>::module_index, info, offset_of<I>());
      }(), ...);
    }(std::make_index_sequence<P::count>{});
  }
  static constexpr std::size_t name_length(int index, const ParamInfo& info) {
    return std::string_view(Prefix).size() + 1 + decimal_digits(index) + 1 + info.name.size();
  }

  static constexpr std::size_t count = [] {
    std::size_t n = 0;
    for_each([&](int, const ParamInfo&, std::size_t) { ++n; });
    return n;
  }();
  static constexpr std::size_t chars = [] {
    std::size_t n = 0;
    for_each([&](int index, const ParamInfo& info, std::size_t) { n += name_length(index, info); });
    return n;
  }();
  // All names back to back: "block.0.weightblock.0.bias..."
  static constexpr std::array<char, chars> storage = [] {
    std::array<char, chars> s{};
    std::size_t at = 0;
    for_each([&](int index, const ParamInfo& info, std::size_t) {
      for (char c : std::string_view(Prefix)) s[at++] = c;
      s[at++] = '.';
      const std::size_t digits = decimal_digits(index);
      for (std::size_t d = digits; d > 0; --d, index /= 10) s[at + d - 1] = static_cast<char>('0' + index % 10);
      at += digits;
      s[at++] = '.';
      for (char c : info.name) s[at++] = c;
    });
    return s;
  }();
  static constexpr std::array<ParamInfo, count> infos = [] {
    std::array<ParamInfo, count> out{};
    std::size_t k = 0, at = 0;
    for_each([&](int index, const ParamInfo& info, std::size_t offset) {
      const std::size_t length = name_length(index, info);
      out[k++] = {std::string_view(storage.data() + at, length), info.rank, info.shape, offset + info.offset};
      at += length;
    });
    return out;
  }();
};

template <std::size_t A, std::size_t B>
constexpr std::array<ParamInfo, A + B> join(const std::array<ParamInfo, A>& a, const std::array<ParamInfo, B>& b) {
  std::array<ParamInfo, A + B> out{};
  std::copy(a.begin(), a.end(), out.begin());
  std::copy(b.begin(), b.end(), out.begin() + A);
  return out;
}

// Running block P inside a combinator layer, with the combinator's pass (its buffers are the
// block's, its seed the block's random stream). The block's training workspace is the combinator's
// saved values (P::workspace_values(batch) values, laid out for `batch` rows); in inference its
// ping-pong buffers come first in the scratch, and its layers' scratch follows.
template <class P>
struct BlockRun {
  template <class Device>
  static constexpr std::size_t scratch_values(int batch) {
    return P::inference_values(batch) + P::template scratch_values<Device>(batch);
  }

  template <class T>
  static Run<T> run_of(const Pass<T>& pass, const T* params, int batch) {
    return {params,    pass.buffers, pass.scratch + P::inference_values(batch), pass.training,
            pass.seed, pass.sync,    pass.products};
  }

  // The block's output for x: in its workspace when training (workspace not null), else in `out`.
  template <class T, class Device>
  static const T* forward(Device device, const Pass<T>& pass, const T* params, const T* x, T* workspace, T* out,
                          int batch) {
    const Run<T> run = run_of(pass, params, batch);
    if (workspace == nullptr) {
      P::forward_infer(device, run, x, pass.scratch, out, batch);
      return out;
    }
    typename P::template Activations<T> act;
    P::forward_train(device, run, x, workspace, batch, batch, act);
    return act.back();
  }

  // Where backward expects dL/d(block output).
  template <class T>
  static T* output_gradient(T* workspace, int batch) {
    return P::output_gradient(workspace, batch);
  }

  // Accumulates the block's parameter gradients; returns dL/dx when InputGradient, else null.
  template <bool InputGradient, class T, class Device>
  static const T* backward(Device device, const Pass<T>& pass, const T* params, T* grads, const T* x, T* workspace,
                           int batch) {
    return P::template backward<InputGradient>(device, run_of(pass, params, batch), grads, workspace, batch, batch,
                                               P::locate(x, workspace, batch), [](std::size_t) {});
  }
};

}  // namespace etnn::nn::detail
