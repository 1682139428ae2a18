#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// The network executor of a mixed-precision model on CUDA whose first linear layer is too wide for
// the fully fused kernels but whose tail fits them (784 -> 64 -> relu -> 64 -> relu -> 10): the
// first layer runs on the per-layer path (its product through cuBLASLt from 16-bit copies, the
// bias in its epilogue, the activation one kernel after it), the tail as the fused kernels
// (nn/fused_mlp_program.hpp), whose input gradient (dL/dx, FusedMlp::backward's dx) is written
// straight into the first layer's output gradient. The parameter layout, names and initialisation are Program's, so checkpoints
// and optimizers do not change.
//
// Training workspace: [ the head's (Program of the first layer) | the tail's ]; the head's output
// is the tail's input. Scratch likewise: [ the head's | the tail's ].
#include <cstddef>
#include <tuple>

#include "../core/alignment.hpp"
#include "../core/device.hpp"
#include "../core/type_list.hpp"
#include "fused_mlp_program.hpp"
#include "program.hpp"

namespace etnn::nn::detail {

// A linear first layer over a flat input, followed by a tail the fused kernels take.
template <class L0, class... Ls>
consteval bool splits_into_fused_tail() {
  if constexpr (sizeof...(Ls) == 0 || !FusedLayer<L0>::dense)
    return false;
  else
    return fusable_mlp<Ls...>();
}

// Half: __nv_bfloat16 or __half.
template <class Layers, class Half>
struct SplitMlpProgram;

template <Layer L0, Layer... Ls, class Half>
struct SplitMlpProgram<TypeList<L0, Ls...>, Half> : Program<TypeList<L0, Ls...>> {
  using base = Program<TypeList<L0, Ls...>>;
  using head = Program<TypeList<L0>>;
  using tail = FusedMlpProgram<TypeList<Ls...>, Half>;
  static_assert(splits_into_fused_tail<L0, Ls...>(),
                "etnn: ProgramFor chooses SplitMlpProgram only for networks it takes");
  // The tail's parameters, as the fused kernels read them, from the second layer's offset.
  static constexpr std::size_t tail_offset = base::param_offset[1];
  static_assert(tail_offset == head::flat_size && tail_offset + tail::flat_size == base::flat_size,
                "etnn: the split reads the parameters where the linear layers lay them out");

  static constexpr std::size_t workspace_values(int capacity) {
    return head::workspace_values(capacity) + tail::workspace_values(capacity);
  }
  template <class Device>
  static constexpr bool runs_on = std::is_same_v<Device, Cuda>;
  template <class Device>
  static std::size_t scratch_values(int batch) {
    return head_scratch_values(batch) + tail::template scratch_values<Device>(batch);
  }

  template <class T>
  using Activations = typename base::template Activations<T>;

  template <class T>
  static T* output_gradient(T* workspace, int capacity) {
    return tail::output_gradient(tail_workspace(workspace, capacity), capacity);
  }

  // act[0] = input, act[1] = the head's output (the tail's input), act[count] = output; the tail's
  // hidden activations live in its kernels' scratch.
  template <class T>
  static Activations<T> locate(const T* x, T* workspace, int capacity) {
    Activations<T> act{};
    act.front() = x;
    act[1] = head::locate(x, workspace, capacity).back();
    act.back() = tail::locate(act[1], tail_workspace(workspace, capacity), capacity).back();
    return act;
  }

  static void forward_train(Cuda, const Run<float>& run, const float* x, float* workspace, int capacity, int batch,
                            Activations<float>& act) {
    typename head::template Activations<float> head_act;
    head::forward_train(Cuda{}, run, x, workspace, capacity, batch, head_act);
    typename tail::template Activations<float> tail_act;
    tail::forward_train(Cuda{}, tail_run(run, batch), head_act.back(), tail_workspace(workspace, capacity), capacity,
                        batch, tail_act);
    act = locate(x, workspace, capacity);
  }

  // The tail's gradients with dL/d(its input) written as the head's output gradient, then the head's:
  // layer_done(tail_offset), then layer_done(0).
  template <bool InputGradient = false, class LayerDone>
  static const float* backward(Cuda, const Run<float>& run, float* grads, float* workspace, int capacity, int batch,
                               const Activations<float>& act, LayerDone&& layer_done) {
    static_assert(!InputGradient, "a split MLP computes no input gradient (it is not a block inside another)");
    float* tail_space = tail_workspace(workspace, capacity);
    tail::backward_to(Cuda{}, tail_run(run, batch), grads + tail_offset, tail_space, capacity, batch,
                      tail::locate(act[1], tail_space, capacity), head::output_gradient(workspace, capacity));
    layer_done(tail_offset);
    head::backward(Cuda{}, run, grads, workspace, capacity, batch, head::locate(act.front(), workspace, capacity),
                   layer_done);
    return nullptr;
  }

  // Inference: the head's output in the first part of `scratch`, its own ping-pong after it.
  static constexpr std::size_t inference_values(int batch) {
    return head_output_values(batch) + head::inference_values(batch);
  }
  static void forward_infer(Cuda, const Run<float>& run, const float* x, float* scratch, float* out, int batch) {
    float* head_out = scratch;
    head::forward_infer(Cuda{}, run, x, scratch + head_output_values(batch), head_out, batch);
    tail::forward_infer(Cuda{}, tail_run(run, batch), head_out, nullptr, out, batch);
  }

 private:
  static float* tail_workspace(float* workspace, int capacity) { return workspace + head::workspace_values(capacity); }
  static constexpr std::size_t head_output_values(int batch) {
    return aligned_values(L0::out_shape::size * static_cast<std::size_t>(batch));
  }
  // The head's share of the scratch, aligned so that the tail's starts aligned.
  static std::size_t head_scratch_values(int batch) {
    return aligned_values(head::template scratch_values<Cuda>(batch));
  }
  // The tail's parameters and scratch (after the head's).
  static Run<float> tail_run(const Run<float>& run, int batch) {
    Run<float> r = run;
    r.params = run.params + tail_offset;
    r.scratch = run.scratch + head_scratch_values(batch);
    return r;
  }
};

}  // namespace etnn::nn::detail
