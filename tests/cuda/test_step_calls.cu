// The calls CUDA models make into the CUDA runtime and cuBLASLt, checked on a machine without a
// GPU: etnn's runtime layer (cuda/runtime_api.hpp) is answered by a runtime emulated in host
// memory (emulated_runtime.hpp), so the models' host code runs in full while no kernel does. A
// call that bypassed the layer would reach the real runtime, which fails without a GPU (a
// DeviceError); the layering check (tests/layering) finds such calls in the source too.
#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <type_traits>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_test_support.hpp"
#include "cuda/emulated_runtime.hpp"

using cuda_test::EmulatedRuntime;

namespace {

// Installed for the whole process before etnn's first CUDA call.
EmulatedRuntime& emulated() {
  static EmulatedRuntime runtime;
  static const etnn::cuda::ReplaceRuntime installed(runtime);
  return runtime;
}

// A few steps of Net on the device (Adam, the gradient norm clipped: a device reduction), with the
// step recorded as graphs or not, then evaluation and a checkpoint.
template <class Net, class Precision, class Loss>
void train_and_save(bool graphs) {
  using Model = etnn::Model<Net, Precision, etnn::Cuda>;
  using T = typename Model::value_type;
  const int batch = 8;
  std::vector<T> x(Net::input_shape::size * batch);
  etnn::test::fill_input<typename Net::input_shape>(x.data(), x.size(), 3);
  const etnn::TensorView<const T, typename Net::input_shape> inputs(x.data(), batch);
  std::vector<int> labels(batch, 1);
  Model model(2);
  Loss loss;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  opt.set_max_grad_norm(1.0f);
  etnn::Trainer trainer(model, loss, opt, {.cuda_graphs = graphs});
  for (int s = 0; s < 3; ++s) {
    if constexpr (std::is_same_v<Loss, etnn::loss::MSE>) {
      std::vector<T> t(Net::output_shape::size * batch, T(0.25));
      trainer.step(inputs, etnn::TensorView<const T, typename Net::output_shape>(t.data(), batch));
    } else {
      trainer.step(inputs, std::span<const int>(labels));
    }
  }
  model.eval();
  (void)etnn::to_host(model.forward(inputs));
  const auto path = std::filesystem::temp_directory_path() / "etnn_step_calls.safetensors";
  etnn::io::save(model, path);
  etnn::io::load(model, path);
  std::filesystem::remove(path);
}

// The calls made while recording no graph that make the host wait, each with what it waits after.
std::vector<std::string> waits(const std::vector<EmulatedRuntime::Call>& calls) {
  std::vector<std::string> found;
  for (const auto& c : calls)
    if (c.waits && !c.recorded) found.push_back(c.name + " after " + c.after);
  return found;
}

std::size_t count(const std::vector<EmulatedRuntime::Call>& calls, const std::string& name, bool recorded) {
  std::size_t n = 0;
  for (const auto& c : calls) n += c.name == name && c.recorded == recorded;
  return n;
}

std::string listing(const std::vector<EmulatedRuntime::Call>& calls) {
  std::string all;
  for (const auto& c : calls) all += c.name + (c.recorded ? " (recorded)" : "") + (c.waits ? " (waits)" : "") + "\n";
  return all;
}

using Mlp = decltype(nn::input<64> >> nn::linear<128> >> nn::relu >> nn::linear<64> >> nn::tanh >> nn::linear<10>);

// A batch of 32 samples for Mlp, in host memory, and its labels.
struct MlpBatch {
  static constexpr int batch = 32;
  std::vector<float> inputs = std::vector<float>(std::size_t{64} * batch, 0.5f);
  std::vector<int> classes = std::vector<int>(batch, 3);
  etnn::TensorView<const float, etnn::Shape<64>> x() const { return {inputs.data(), batch}; }
  std::span<const int> labels() const { return classes; }
};

// Stands in for the guard's kernels, which do not run here: while `when` is set, every verdict
// Model's optimizer sends to the host says that a loss was non-finite and that the step skips.
template <class Model>
void send_non_finite_loss_verdicts(EmulatedRuntime& runtime, const bool& when) {
  const std::size_t tensors = etnn::optim::tensors_in_flat_order<Model>().size();
  runtime.device_results = [&when, tensors](void* dst, std::size_t bytes, const std::string&) {
    if (!when || bytes != etnn::cuda::StepVerdict::words_for(tensors) * sizeof(unsigned long long)) return;
    auto* word = static_cast<unsigned long long*>(dst);
    word[tensors] = word[tensors + 1] = 1;
  };
}

}  // namespace

TEST_CASE("every call of training, evaluating and saving any network on the device goes through the runtime layer") {
  EmulatedRuntime& runtime = emulated();
  REQUIRE(etnn::best_device() == etnn::DeviceKind::cuda);
  for (const bool graphs : {true, false}) {
    train_and_save<cuda_test::EveryLayer, float, etnn::loss::NLL>(graphs);
    train_and_save<cuda_test::Normalised, double, etnn::loss::NLL>(graphs);
    train_and_save<cuda_test::SequenceLayers, float, etnn::loss::NLL>(graphs);
    train_and_save<cuda_test::TokenLayers, double, etnn::loss::NLL>(graphs);
    train_and_save<Mlp, float, etnn::loss::CrossEntropy>(graphs);
    // Mixed precision: the fused 16-bit MLP kernels (widths padded; ReLU, tanh, SiLU), and bf16 products
    // layer by layer.
    train_and_save<decltype(nn::input<20> >> nn::linear<48> >> nn::relu >> nn::linear<10>), etnn::bf16,
                   etnn::loss::MSE>(graphs);
    train_and_save<decltype(nn::input<32> >> nn::linear<64> >> nn::tanh >> nn::linear<16>), etnn::bf16,
                   etnn::loss::MSE>(graphs);
    train_and_save<decltype(nn::input<20> >> nn::linear<48> >> nn::silu >> nn::linear<64> >> nn::silu >>
                            nn::linear<10>),
                   etnn::fp16, etnn::loss::MSE>(graphs);
    train_and_save<Mlp, etnn::fp16, etnn::loss::MSE>(graphs);
    // Split: a first layer the fused kernels cannot take (too wide, or another activation), the tail fused.
    train_and_save<decltype(nn::input<784> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >>
                            nn::linear<10>),
                   etnn::bf16, etnn::loss::CrossEntropy>(graphs);
    train_and_save<decltype(nn::input<100> >> nn::linear<64> >> nn::relu >> nn::linear<32> >> nn::silu >>
                            nn::linear<10>),
                   etnn::fp16, etnn::loss::MSE>(graphs);
  }
  // What ran: kernels, products and graphs (none would have, had the calls gone around the layer).
  CHECK(runtime.count("cublasLtMatmul") > 0);
  CHECK(runtime.count("launch fused_mlp_forward_kernel") > 0);
  CHECK(runtime.count("launch etnn::conv2d_forward im2col") > 0);
  CHECK(runtime.count("cudaGraphLaunch") > 0);
}

TEST_CASE("the fused MLP's saved regions: aligned, apart, and f'(z) kept beside the activations where f' needs z") {
  namespace fused = etnn::cuda::detail::fused_mlp;
  const auto check = []<class Act>(Act, bool keeps) {
    using Net = fused::Net<__nv_bfloat16, Act, 32, 64, 128, 16>;
    for (const int batch : {1, 37, 300}) {
      const auto layout = Net::saved_layout(batch, reinterpret_cast<void*>(std::uintptr_t{1} << 20));
      const auto& b = layout.buffers;
      // [begin, end) of every region, in bytes from the base.
      std::vector<std::pair<std::uintptr_t, std::uintptr_t>> regions;
      const auto add = [&](const void* p, std::size_t bytes) {
        const auto at = reinterpret_cast<std::uintptr_t>(p) - (std::uintptr_t{1} << 20);
        CHECK(at % fused::region_align == 0);
        regions.emplace_back(at, at + bytes);
      };
      const int widths[] = {32, 64, 128, 16};
      for (int h = 1; h < 3; ++h) {
        add(b.activation[h], std::size_t{2} * batch * widths[h]);
        CHECK((b.kept[h] != nullptr) == keeps);
        if (keeps) add(b.kept[h], std::size_t{2} * batch * widths[h]);
        add(b.dz[h - 1], std::size_t{2} * batch * widths[h]);
      }
      add(b.partial, std::size_t{4} * b.chunks * Net::num_params);
      std::sort(regions.begin(), regions.end());
      for (std::size_t i = 0; i + 1 < regions.size(); ++i) CHECK(regions[i].second <= regions[i + 1].first);
      CHECK(regions.back().second <= layout.bytes);
    }
  };
  check(etnn::fn::Relu{}, false);
  check(etnn::fn::Tanh{}, false);
  check(etnn::fn::Silu{}, true);
}

TEST_CASE("the fused MLP's backward computes dL/dx only when asked: the chain kernel, padded columns dropped") {
  EmulatedRuntime& runtime = emulated();
  // One layer, 20 -> 10 run as 32 -> 16: without dL/dx its backward needs no chain kernel.
  using Kernels = etnn::cuda::PaddedFusedMlp<__nv_bfloat16, etnn::fn::Relu, 20, 10>;
  const int batch = 5;
  etnn::Buffer<float, etnn::Cuda> params(Kernels::padding::num_params), grads(Kernels::padding::num_params),
      x(std::size_t{20} * batch), y(std::size_t{10} * batch), dy(std::size_t{10} * batch), dx(std::size_t{20} * batch),
      scratch(Kernels::scratch_floats(batch));
  Kernels::forward(params.data(), x.data(), y.data(), scratch.data(), batch);
  const auto launches = [&](float* input_gradient) {
    runtime.clear();
    Kernels::backward(params.data(), grads.data(), x.data(), dy.data(), scratch.data(), batch, input_gradient);
    std::vector<std::string> launched;
    for (const auto& c : runtime.calls)
      if (c.name.starts_with("launch ")) launched.push_back(c.name.substr(7));
    return launched;
  };
  // dy padded in, the kernels, the true gradients out; and with dL/dx, its true columns out.
  const std::string columns = "etnn fused MLP copy_columns_kernel";
  const std::string true_grads = "etnn fused MLP add_true_gradients_kernel";
  const std::string weight_grads = "fused_mlp_weight_grad_kernel", reduce = "fused_mlp_reduce_kernel";
  CHECK(launches(nullptr) == std::vector<std::string>{columns, weight_grads, reduce, true_grads});
  CHECK(launches(dx.data()) ==
        std::vector<std::string>{columns, "fused_mlp_chain_kernel", weight_grads, reduce, true_grads, columns});
}

TEST_CASE("a split MLP's step: the wide first layer through cuBLASLt, the tail fused, dL/dx between them") {
  EmulatedRuntime& runtime = emulated();
  using Wide = decltype(nn::input<784> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >> nn::linear<10>);
  using Model = etnn::Model<Wide, etnn::bf16, etnn::Cuda>;
  static_assert(std::is_same_v<Model::program, nn::detail::SplitMlpProgram<Wide::layers, __nv_bfloat16>>);
  const int batch = 16;
  std::vector<float> x(std::size_t{784} * batch, 0.5f);
  std::vector<int> y(batch, 3);
  Model model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.05f});
  etnn::Trainer trainer(model, ce, opt, {.cuda_graphs = false});
  const etnn::TensorView<const float, etnn::Shape<784>> xs(x.data(), batch);
  trainer.step(xs, std::span<const int>(y));
  runtime.clear();
  trainer.step(xs, std::span<const int>(y));
  // Eager, every step launches the fused kernels; their shared-memory attribute and the device's
  // compute capability were asked once, before.
  for (const char* once : {"cudaFuncSetAttribute", "cudaGetDevice", "cudaDeviceGetAttribute"})
    CHECK_MESSAGE(count(runtime.calls, once, false) == 0, once);
  std::vector<std::string> work;  // kernels and products, in order
  for (const auto& c : runtime.calls)
    if (c.name.starts_with("launch ") || c.name == "cublasLtMatmul") work.push_back(c.name);
  std::string listed;
  for (const auto& w : work) listed += w + "\n";
  INFO("launched:\n" << listed);
  // The output, 10, runs padded to 16: the tail's parameters and columns are copied around its kernels.
  const std::string columns = "launch etnn fused MLP copy_columns_kernel";
  CHECK(work == std::vector<std::string>{
                    // forward: the first layer's product from bf16 copies, the bias in its epilogue, relu
                    // after it (cuBLASLt's would drop NaN), then the tail
                    "launch etnn::dense to_half", "launch etnn::dense to_half", "cublasLtMatmul",
                    "launch etnn::dense_forward bias_activation",
                    "launch etnn fused MLP pad_parameters_kernel", columns, "launch fused_mlp_forward_kernel", columns,
                    // the loss, zeroing the gradients
                    "launch etnn::loss::CrossEntropy", "launch etnn::fill",
                    // backward: the tail with dL/dx into the first layer's output gradient, then the first
                    // layer's weight gradient only (no input gradient below it)
                    columns, "launch fused_mlp_chain_kernel", "launch fused_mlp_weight_grad_kernel",
                    "launch fused_mlp_reduce_kernel", "launch etnn fused MLP add_true_gradients_kernel", columns,
                    "launch etnn::dense_backward activation_gradient", "launch etnn::dense_backward add_chunk_sums",
                    "launch etnn::dense to_half", "launch etnn::dense to_half", "cublasLtMatmul",
                    // the guard's verdict on the loss and the gradients, and the update predicated on it
                    "launch etnn::optim mark_non_finite_loss", "launch etnn::optim mark_non_finite_gradients",
                    "launch etnn::for_each_index"});
}

TEST_CASE("a CUDA training step after warm-up: no allocation, no recording, forward and backward replayed as graphs") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.05f});
  etnn::Trainer trainer(model, ce, opt);
  const auto step = [&] { return trainer.step(data.x(), data.labels()); };

  runtime.clear();
  step();
  const auto first = runtime.calls;
  // The first step records the forward (3 products) and the backward (3 dW and 2 dX products).
  CHECK(count(first, "cudaStreamBeginCapture", false) == 2);
  CHECK(count(first, "cublasLtMatmul", true) == 8);
  CHECK(count(first, "cudaGraphLaunch", false) == 2);

  for (int s = 0; s < 2; ++s) {
    runtime.clear();
    step();
    const auto& calls = runtime.calls;
    INFO("the step's calls:\n" << listing(calls));
    for (const char* none : {"cudaMallocAsync", "cudaFreeAsync", "cudaStreamCreateWithFlags",
                             "cudaEventCreateWithFlags", "cudaHostAlloc", "cudaStreamBeginCapture",
                             "cudaGraphInstantiate", "cublasLtMatmulDescCreate", "cublasLtMatmul"})
      CHECK_MESSAGE(count(calls, none, false) == 0, none);
    CHECK(count(calls, "cudaGraphLaunch", false) == 2);
    // Between and after the graphs: the loss, zeroing the gradients (backward adds), the guard's
    // tests of the loss's values and of the gradients, and SGD's update predicated on the verdict,
    // launched one by one.
    std::vector<std::string> launched;
    for (const auto& c : calls)
      if (c.name.starts_with("launch ")) launched.push_back(c.name);
    CHECK(launched == std::vector<std::string>{"launch etnn::loss::CrossEntropy", "launch etnn::fill",
                                               "launch etnn::optim mark_non_finite_loss",
                                               "launch etnn::optim mark_non_finite_gradients",
                                               "launch etnn::for_each_index"});
    // The input and the labels are sent from pinned memory, and the row losses and the verdict come
    // back into pinned memory, each transfer followed by its event, without waiting; the verdict is
    // zeroed on the device.
    CHECK(count(calls, "cudaMemcpyAsync host to device", false) == 2);
    CHECK(count(calls, "cudaMemcpyAsync device to host", false) == 2);
    CHECK(count(calls, "cudaEventRecord", false) == 4);
    CHECK(count(calls, "cudaMemsetAsync", false) == 1);
    // Nothing waits: the last step's verdict, read before this step's update, had arrived.
    CHECK(waits(calls).empty());
  }
}

TEST_CASE("cross-entropy's class weights reach the device once, not every step") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::loss::CrossEntropy ce({.weight = std::vector<float>(10, 0.5f)});
  etnn::optim::SGD opt(model, {.lr = 0.05f});
  etnn::Trainer trainer(model, ce, opt);
  (void)trainer.step(data.x(), data.labels());  // sends the weights
  runtime.clear();
  (void)trainer.step(data.x(), data.labels());
  INFO("the step's calls:\n" << listing(runtime.calls));
  CHECK(count(runtime.calls, "cudaMemcpyAsync host to device", false) == 2);  // input, labels
}

TEST_CASE("without the non-finite guard a warmed-up CUDA step never waits for the device; its loss is read when asked") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  etnn::Trainer trainer(model, ce, opt, {.skip_non_finite = false});
  (void)trainer.step(data.x(), data.labels());
  const cuda_test::LaggingDevice lagging(runtime);  // the host runs ahead: nothing it has sent has arrived
  for (int step = 0; step < 3; ++step) {
    runtime.clear();
    const auto loss = trainer.step(data.x(), data.labels());
    INFO("the step's calls:\n" << listing(runtime.calls));
    CHECK(waits(runtime.calls).empty());
    CHECK(count(runtime.calls, "cudaGraphLaunch", false) == 2);
    if (step == 2) {  // like loss.item(): the one wait is the loss's own copy
      runtime.clear();
      CHECK(static_cast<float>(loss) == 0.0f);
      CHECK(waits(runtime.calls).size() == 1);
      CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 1);
    }
  }
}

TEST_CASE("Hinge's and MultiLabelSoftMargin's host targets are checked on the host: their steps do not wait; BCE's inputs do without the guard's verdict") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  std::vector<float> signs(std::size_t{10} * MlpBatch::batch), hot(signs.size());
  for (std::size_t i = 0; i < signs.size(); ++i) {
    signs[i] = i % 3 == 0 ? -1.0f : 1.0f;
    hot[i] = i % 4 == 1 ? 1.0f : 0.0f;
  }
  using Targets = etnn::TensorView<const float, etnn::Shape<10>>;
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::optim::SGD opt(model, {.lr = 0.01f});
  // Each loss's warmed-up step, the device lagging, without the guard (whose verdict has its own
  // wait): the calls that wait.
  const auto waits_of_step = [&](auto& loss, Targets targets) {
    etnn::Trainer trainer(model, loss, opt, {.skip_non_finite = false});
    (void)trainer.step(data.x(), targets);
    const cuda_test::LaggingDevice lagging(runtime);
    runtime.clear();
    (void)trainer.step(data.x(), targets);
    return waits(runtime.calls);
  };
  etnn::loss::Hinge hinge;
  etnn::loss::MultiLabelSoftMargin multi_label;
  // Its domain is its inputs' (probabilities), on the device; with no verdict of the guard's to take
  // the answer in, it is waited for.
  etnn::loss::BCE bce;
  CHECK(waits_of_step(hinge, Targets(signs.data(), MlpBatch::batch)).empty());
  const etnn::loss::Hinge const_hinge;  // a Trainer of a const loss stages the same way
  CHECK(waits_of_step(const_hinge, Targets(signs.data(), MlpBatch::batch)).empty());
  CHECK(waits_of_step(multi_label, Targets(hot.data(), MlpBatch::batch)).empty());
  // One copy back of the kernel's answer: the copy and the stream's synchronisation.
  const std::vector<std::string> bce_waits{"cudaMemcpyAsync device to host after etnn::loss elementwise",
                                           "cudaStreamSynchronize after etnn::loss elementwise"};
  const auto bce_step_waits = waits_of_step(bce, Targets(hot.data(), MlpBatch::batch));
  CHECK(bce_step_waits == bce_waits);
  // Targets already on the device are checked there: one kernel, and a wait for its answer.
  etnn::Buffer<float, etnn::Cuda> on_device(signs.size());
  etnn::copy_from_host(etnn::Cuda{}, on_device.data(), signs.data(), signs.size());
  const etnn::TensorView<const float, etnn::Shape<10>, etnn::Cuda> device_signs(on_device.data(), MlpBatch::batch);
  etnn::Buffer<float, etnn::Cuda> scores(signs.size());
  const etnn::TensorView<const float, etnn::Shape<10>, etnn::Cuda> device_scores(scores.data(), MlpBatch::batch);
  {
    const cuda_test::LaggingDevice lagging(runtime);
    runtime.clear();
    (void)hinge.value_and_grad(etnn::Cuda{}, device_scores, device_signs, static_cast<float*>(nullptr));
    const std::vector<std::string> check_waits{"cudaMemcpyAsync device to host after etnn::loss target_domain",
                                               "cudaStreamSynchronize after etnn::loss target_domain"};
    INFO("the calls:\n" << listing(runtime.calls));
    CHECK(waits(runtime.calls) == check_waits);
  }
  // A bad host target stops the step before anything reaches the device, with the host's message.
  signs[13] = 0.5f;
  etnn::Trainer trainer(model, hinge, opt, {.skip_non_finite = false});
  runtime.clear();
  CHECK_THROWS_WITH_AS((void)trainer.step(data.x(), Targets(signs.data(), MlpBatch::batch)),
                       doctest::Contains("target element 13 is 0.500000; this loss takes targets of -1"), etnn::Error);
  CHECK(count(runtime.calls, "cudaGraphLaunch", false) == 1);  // the forward pass; no backward, no update
}

TEST_CASE("with the guard's verdict on the device BCE's input check stays there; a bad input is thrown once it arrives, the steps meanwhile skipped") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  std::vector<float> hot(std::size_t{10} * MlpBatch::batch);
  for (std::size_t i = 0; i < hot.size(); ++i) hot[i] = i % 4 == 1 ? 1.0f : 0.0f;
  const etnn::TensorView<const float, etnn::Shape<10>> targets(hot.data(), MlpBatch::batch);
  using Model = etnn::Model<Mlp, float, etnn::Cuda>;
  Model model(1);
  etnn::loss::BCE bce;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  etnn::Trainer trainer(model, bce, opt);  // max_non_finite_in_a_row = 3
  const std::size_t tensors = etnn::optim::tensors_in_flat_order<Model>().size();
  // The kernels do not run here: the verdicts as the device would send them for a step whose
  // input 13 is 1.5 (its check taken in: the step skips), and for the steps after it, which skip
  // while that error is owed.
  enum class Fake { none, bad_input, after_bad_input } fake = Fake::none;
  runtime.device_results = [&](void* dst, std::size_t bytes, const std::string& after) {
    if (fake == Fake::none || after != "etnn::for_each_index") return;  // the verdict follows the update
    REQUIRE(bytes == etnn::cuda::StepVerdict::words_for(tensors) * sizeof(unsigned long long));
    auto* words = static_cast<unsigned long long*>(dst) + tensors;
    words[1] = 1;
    if (fake == Fake::after_bad_input) {
      words[5] = 1;
      return;
    }
    words[2] = ~13ull;
    words[3] = std::bit_cast<unsigned long long>(1.5);
    words[4] = std::bit_cast<unsigned long long>(0.0);
  };
  const auto step = [&](Fake verdict) {
    fake = verdict;
    runtime.clear();
    (void)trainer.step(data.x(), targets);
    fake = Fake::none;
  };
  step(Fake::none);
  const cuda_test::LaggingDevice lagging(runtime);  // nothing sent has arrived
  step(Fake::bad_input);
  INFO("the bad step's calls:\n" << listing(runtime.calls));
  CHECK(waits(runtime.calls).empty());  // the check's answer stays on the device
  CHECK(count(runtime.calls, "launch etnn::loss record_input_check", false) == 1);
  step(Fake::after_bad_input);
  CHECK(waits(runtime.calls).empty());
  step(Fake::after_bad_input);  // three on their way, the first step's the oldest: waited for
  CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 1);
  // Three on their way again could end a run: the oldest is waited for, and it holds the input
  // error, which the step throws before its forward, as the host's check would, with BCE's message.
  runtime.clear();
  std::string message;
  bool non_finite_error = false;
  try {
    (void)trainer.step(data.x(), targets);
  } catch (const etnn::NonFiniteError&) {
    non_finite_error = true;
  } catch (const etnn::Error& e) {
    message = e.what();
  }
  INFO("the throwing step's calls:\n" << listing(runtime.calls));
  CHECK_FALSE(non_finite_error);
  CHECK(message.find("input element 13 is 1.500000; BCE takes probabilities in [0, 1]") != std::string::npos);
  CHECK(count(runtime.calls, "cudaGraphLaunch", false) == 0);
  CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 1);
  // The device stops skipping for it: the steps enqueued from now on apply.
  CHECK(count(runtime.calls, "launch etnn::fill", false) == 1);
  // Neither the bad step nor those skipped after it count as skipped steps (the host's check
  // throws before its step, which never runs), and no update of theirs counted.
  CHECK(trainer.skipped_steps() == 0);
  CHECK(trainer.non_finite_in_a_row() == 0);
  CHECK(opt.steps() == 1);
  step(Fake::none);  // training goes on
  CHECK(opt.steps() == 2);
  // Clipping turned on within a window whose first micro-batch had a bad input: the host decides
  // the window, reads what the device marked in it, and throws before any update.
  Model windowed(1);
  etnn::optim::Adam windowed_opt(windowed, {.lr = 1e-3f});
  etnn::Trainer windows(windowed, bce, windowed_opt, {.accumulate = 2});
  bool window_bad = false;
  runtime.device_results = [&](void* dst, std::size_t bytes, const std::string& after) {
    if (!window_bad || after != "etnn::optim mark_non_finite_loss") return;  // the window's verdict, read now
    REQUIRE(bytes == etnn::cuda::StepVerdict::words_for(tensors) * sizeof(unsigned long long));
    auto* words = static_cast<unsigned long long*>(dst) + tensors;
    words[1] = 1;
    words[2] = ~7ull;
    words[3] = std::bit_cast<unsigned long long>(-0.25);
  };
  (void)windows.step(data.x(), targets);
  windowed_opt.set_max_grad_norm(1.0f);
  window_bad = true;
  CHECK_THROWS_WITH_AS((void)windows.step(data.x(), targets),
                       doctest::Contains("input element 7 is -0.250000; BCE takes probabilities"), etnn::Error);
  window_bad = false;
  CHECK(windowed_opt.steps() == 0);
  CHECK(windows.skipped_steps() == 0);
  CHECK(windows.micro_step() == 0);  // the window is lost with the error
  // A checkpoint taken inside such a window reads its verdict now: the error is owed, and the next
  // call throws it, once, the window lost with it; training then goes on.
  Model saved(1);
  etnn::optim::Adam saved_opt(saved, {.lr = 1e-3f});
  etnn::Trainer saving(saved, bce, saved_opt, {.accumulate = 2});
  (void)saving.step(data.x(), targets);
  window_bad = true;
  const etnn::train::GuardState state = saving.guard_state();
  window_bad = false;
  CHECK(state.owed_error.find("input element 7 is -0.250000") != std::string::npos);
  CHECK_THROWS_WITH_AS((void)saving.step(data.x(), targets), doctest::Contains("input element 7 is -0.250000"),
                       etnn::Error);
  CHECK(saving.micro_step() == 0);
  for (int call = 0; call < 4; ++call) CHECK_NOTHROW((void)saving.step(data.x(), targets));
  CHECK(saved_opt.steps() == 2);
  CHECK(saving.skipped_steps() == 0);
  runtime.device_results = nullptr;
}

TEST_CASE("with the non-finite guard a warmed-up CUDA step waits only when three verdicts are on their way, for the oldest") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  etnn::Trainer trainer(model, ce, opt);  // max_non_finite_in_a_row = 3
  (void)trainer.step(data.x(), data.labels());
  (void)trainer.step(data.x(), data.labels());
  const cuda_test::LaggingDevice lagging(runtime);  // nothing sent has arrived, the last step's verdict included
  for (int step = 0; step < 5; ++step) {
    runtime.clear();
    (void)trainer.step(data.x(), data.labels());
    INFO("step " << step << ":\n" << listing(runtime.calls));
    // The device picks the update's step number from the verdicts on their way: the host waits
    // only once three could end a run of skipped steps, for the oldest, by its event; the stream
    // is never synchronised.
    if (step < 2) {
      CHECK(waits(runtime.calls).empty());
    } else {
      REQUIRE(waits(runtime.calls).size() == 1);
      CHECK(waits(runtime.calls)[0].starts_with("cudaEventSynchronize after "));
    }
    CHECK(count(runtime.calls, "cudaStreamSynchronize", false) == 0);
    CHECK(count(runtime.calls, "launch etnn::for_each_index", false) == 1);  // the update, one kernel
  }
  runtime.clear();
  CHECK(opt.steps() == 7);  // reading the count waits for the verdicts on their way
  CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 3);
  runtime.clear();
  CHECK(trainer.skipped_steps() == 0);  // those arrived now: no second wait
  CHECK(waits(runtime.calls).empty());
}

TEST_CASE("verdicts on their way are counted in order as they arrive; a run they could end is read before the next forward") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  using Model = etnn::Model<Mlp, float, etnn::Cuda>;
  Model model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  etnn::Trainer trainer(model, ce, opt, {.max_non_finite_in_a_row = 3});
  const auto& tensors = etnn::optim::tensors_in_flat_order<Model>();
  // The verdict the device would send for a NaN in the first layer's bias (the kernels do not run
  // here), written as the update's verdict is copied to the host.
  bool nan = false;
  runtime.device_results = [&](void* dst, std::size_t bytes, const std::string& after) {
    if (!nan || after != "etnn::for_each_index") return;
    REQUIRE(bytes == etnn::cuda::StepVerdict::words_for(tensors.size()) * sizeof(unsigned long long));
    auto* words = static_cast<unsigned long long*>(dst);
    words[1] = ~static_cast<unsigned long long>(tensors[1].offset);
    words[tensors.size() + 1] = 1;
  };
  const auto step = [&](bool with_nan) {
    nan = with_nan;
    (void)trainer.step(data.x(), data.labels());
    nan = false;
  };
  step(false);
  {
    const cuda_test::LaggingDevice lagging(runtime);
    runtime.clear();
    step(true);  // skipped, applied: none counted while the host runs ahead
    step(false);
    CHECK(waits(runtime.calls).empty());
    // Three on their way could end a run (the host cannot know that one applied): the step waits
    // for the oldest, the first step's.
    runtime.clear();
    step(true);
    CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 1);
    CHECK(waits(runtime.calls).size() == 1);
  }
  CHECK(trainer.skipped_steps() == 2);
  CHECK(trainer.non_finite_in_a_row() == 1);
  CHECK(opt.steps() == 2);
  {
    const cuda_test::LaggingDevice lagging(runtime);
    step(true);  // with the one before: a run of three, none counted yet
    step(true);
    runtime.clear();
    std::string message;
    try {
      step(false);
    } catch (const etnn::NonFiniteError& e) {
      message = e.what();
    }
    INFO(listing(runtime.calls));
    // The step started with verdicts enough on their way to end the run: it read them, waiting for
    // each, and threw before its forward.
    CHECK(message.find("3 steps in a row with non-finite gradients") != std::string::npos);
    CHECK(message.find("'" + tensors[1].name + "'") != std::string::npos);
    CHECK(count(runtime.calls, "cudaGraphLaunch", false) == 0);
    CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 2);
  }
  CHECK(trainer.skipped_steps() == 4);
  CHECK(opt.steps() == 2);
  step(false);
  CHECK(opt.steps() == 3);
  runtime.device_results = nullptr;
}

TEST_CASE("SGD's first momentum step, an update of its own kind, is waited for instead of picked on the device") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  using Model = etnn::Model<Mlp, float, etnn::Cuda>;
  Model model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, ce, opt);
  bool skip = false;
  send_non_finite_loss_verdicts<Model>(runtime, skip);
  const auto step = [&](bool with_nan) {
    skip = with_nan;
    runtime.clear();
    (void)trainer.step(data.x(), data.labels());
    skip = false;
    return count(runtime.calls, "cudaEventSynchronize", false);
  };
  const cuda_test::LaggingDevice lagging(runtime);  // from the first step
  // The first step's update has no earlier verdict on its way. The second's step number is 1 or 2
  // as the first applied or not, and step 1 copies the gradient into the velocity while step 2
  // blends them: two kinds of update, so the host waits for the first verdict and launches one.
  CHECK(step(true) == 0);
  CHECK(step(false) == 1);
  CHECK(count(runtime.calls, "launch etnn::for_each_index", false) == 1);
  // The first was skipped, so the second was SGD's first step; until its verdict says it applied,
  // the third may be a first step too: it waits as well.
  CHECK(step(false) == 1);
  // Once a first step is counted as applied every candidate is of one kind: the fourth is picked
  // on the device, the third's verdict on its way.
  CHECK(step(false) == 0);
  CHECK(count(runtime.calls, "launch etnn::for_each_index", false) == 1);
  CHECK(opt.steps() == 3);
  CHECK(trainer.skipped_steps() == 1);
  runtime.device_results = nullptr;
}

TEST_CASE("with gradient accumulation the micro-batches' losses are tested on the device: no micro-batch waits") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  using Model = etnn::Model<Mlp, float, etnn::Cuda>;
  Model model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, ce, opt, {.accumulate = 3});
  const auto step = [&] { (void)trainer.step(data.x(), data.labels()); };
  // Warm-up: two windows. (SGD's first step with momentum is an update of its own: the second
  // window's update waits for the first's verdict when it is still on its way.)
  for (int call = 0; call < 6; ++call) step();
  {
    const cuda_test::LaggingDevice lagging(runtime);  // nothing sent has arrived
    for (int call = 0; call < 3; ++call) {
      runtime.clear();
      step();
      INFO("call " << call << ":\n" << listing(runtime.calls));
      CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_loss", false) == 1);
      // The window's first micro-batch zeroes the verdict; its last tests the gradients and
      // updates, the last window's verdict still on its way.
      const bool first = call == 0, last = call == 2;
      CHECK(count(runtime.calls, "cudaMemsetAsync", false) == (first ? 1 : 0));
      CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_gradients", false) == (last ? 1 : 0));
      CHECK(count(runtime.calls, "launch etnn::for_each_index", false) == (last ? 1 : 0));
      CHECK(waits(runtime.calls).empty());
    }
  }
  CHECK(opt.steps() == 3);
  // Clipping turned on within a window: the host decides its update, told what the device found
  // in the window's losses (here a non-finite one), and the next window is the host's.
  bool loss_non_finite = false;
  send_non_finite_loss_verdicts<Model>(runtime, loss_non_finite);
  step();
  opt.set_max_grad_norm(1.0f);
  step();
  loss_non_finite = true;
  runtime.clear();
  step();
  loss_non_finite = false;
  CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_loss", false) == 1);
  CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_gradients", false) == 0);
  CHECK(count(runtime.calls, "launch etnn::optim non_finite_index", false) == 1);
  CHECK(trainer.skipped_steps() == 1);
  CHECK(opt.steps() == 3);
  runtime.clear();
  step();
  CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_loss", false) == 0);
  runtime.device_results = nullptr;
}

TEST_CASE("a micro-batch whose backward fails leaves the window's verdict unmarked, as the host's guard does") {
  // The host's guard tests a micro-batch's loss once its backward has returned; the device's is
  // marked there too, so that a retried micro-batch's window is not skipped for the failed one's.
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  etnn::Model<Mlp, float, etnn::Cuda> model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.05f});
  etnn::Trainer trainer(model, ce, opt, {.accumulate = 2});
  const auto step = [&] { (void)trainer.step(data.x(), data.labels()); };
  for (int call = 0; call < 3; ++call) step();  // one window updated, the next begun
  REQUIRE(trainer.micro_step() == 1);
  REQUIRE(trainer.step_graphs().enabled());
  runtime.clear();
  runtime.graph_launches_until_failure = 2;  // the forward's graph launches, the backward's fails
  CHECK_THROWS_AS(step(), etnn::DeviceError);
  INFO("the failed micro-batch's calls:\n" << listing(runtime.calls));
  CHECK(count(runtime.calls, "cudaGraphLaunch", false) == 2);
  CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_loss", false) == 0);
  CHECK(trainer.micro_step() == 1);
  runtime.clear();
  step();  // the micro-batch again: its loss marked, the gradients tested, the update made
  CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_loss", false) == 1);
  CHECK(count(runtime.calls, "launch etnn::optim mark_non_finite_gradients", false) == 1);
  CHECK(opt.steps() == 2);
  CHECK(trainer.skipped_steps() == 0);
}

TEST_CASE("a training checkpoint inside a window the device decides keeps the loss the device marked") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  using Model = etnn::Model<Mlp, float, etnn::Cuda>;
  Model model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::SGD opt(model, {.lr = 0.05f});
  etnn::Trainer trainer(model, ce, opt, {.accumulate = 2});
  const auto step = [&] { (void)trainer.step(data.x(), data.labels()); };
  // The kernels do not run here: the verdict as the device would send it after a micro-batch with
  // an infinite loss (its loss word set).
  const std::size_t tensors = etnn::optim::tensors_in_flat_order<Model>().size();
  runtime.device_results = [&](void* dst, std::size_t bytes, const std::string&) {
    if (bytes == etnn::cuda::StepVerdict::words_for(tensors) * sizeof(unsigned long long))
      static_cast<unsigned long long*>(dst)[tensors] = 1;
  };
  step();
  REQUIRE(trainer.micro_step() == 1);
  runtime.clear();
  const etnn::train::GuardState state = trainer.guard_state();  // what io::save_state keeps
  INFO(listing(runtime.calls));
  CHECK(state.window_loss_non_finite);
  CHECK(count(runtime.calls, "cudaMemcpyAsync device to host", false) == 1);  // the window's verdict read now
  runtime.device_results = nullptr;
  // Resumed: the window's rest is decided on the host, which skips it for the saved flag alone.
  trainer.restore_micro_step(1);
  trainer.restore_guard_state(state);
  step();
  CHECK(trainer.skipped_steps() == 1);
  CHECK(opt.steps() == 0);
  // A state with a clean window: its update goes through.
  etnn::train::GuardState clean;
  clean.skipped_steps = 1;
  trainer.restore_micro_step(1);
  trainer.restore_guard_state(clean);
  step();
  CHECK(trainer.skipped_steps() == 1);
  CHECK(opt.steps() == 1);
}

TEST_CASE("the guard's verdict decided on the device is counted on the host once it arrives, as the host's guard counts it") {
  EmulatedRuntime& runtime = emulated();
  MlpBatch data;
  using Model = etnn::Model<Mlp, float, etnn::Cuda>;
  Model model(1);
  etnn::loss::CrossEntropy ce;
  etnn::optim::Adam opt(model, {.lr = 1e-3f});
  etnn::Trainer trainer(model, ce, opt, {.max_non_finite_in_a_row = 3});
  const auto& tensors = etnn::optim::tensors_in_flat_order<Model>();
  REQUIRE(tensors.size() == 6);
  // The kernels do not run here: the verdict the device would send for gradients with a NaN in the
  // second layer's weight (its 6th value) and bias (its 2nd), marked per tensor as
  // cuda::StepVerdict lays it out. The host's guard would name the weight: the first non-finite
  // gradient in the layer nearest the output with one.
  bool nan_in_second_layer = false;
  runtime.device_results = [&](void* dst, std::size_t bytes, const std::string& after) {
    if (!nan_in_second_layer || after != "etnn::for_each_index") return;  // the verdict follows the update
    REQUIRE(bytes == etnn::cuda::StepVerdict::words_for(tensors.size()) * sizeof(unsigned long long));
    auto* words = static_cast<unsigned long long*>(dst);
    words[2] = ~static_cast<unsigned long long>(tensors[2].offset + 5);
    words[3] = ~static_cast<unsigned long long>(tensors[3].offset + 1);
    words[tensors.size() + 1] = 1;
  };
  const auto step = [&] { (void)trainer.step(data.x(), data.labels()); };
  step();
  CHECK(opt.steps() == 1);
  nan_in_second_layer = true;
  step();
  CHECK(trainer.skipped_steps() == 1);
  CHECK(trainer.non_finite_in_a_row() == 1);
  CHECK(opt.steps() == 1);  // a skipped step does not move Adam's step or the schedule
  step();
  step();  // the third in a row: the error is owed to the next step
  CHECK(trainer.skipped_steps() == 3);
  CHECK(trainer.non_finite_in_a_row() == 0);
  nan_in_second_layer = false;
  // It is thrown at the start of that step, before its forward: the step's batch is not used.
  const auto error_of_next_step = [&] {
    std::string message;
    runtime.clear();
    try {
      step();
    } catch (const etnn::NonFiniteError& e) {
      message = e.what();
    }
    CHECK(count(runtime.calls, "cudaGraphLaunch", false) == 0);
    return message;
  };
  std::string message = error_of_next_step();
  INFO(message);
  CHECK(message.find("3 steps in a row with non-finite gradients") != std::string::npos);
  CHECK(message.find("'" + tensors[2].name + "'") != std::string::npos);
  CHECK(message.find("the loss was non-finite") == std::string::npos);
  step();
  step();
  CHECK(opt.steps() == 3);
  CHECK(trainer.skipped_steps() == 3);
  // Unread, a run's last verdict is read at the start of the next step, which throws.
  nan_in_second_layer = true;
  step();
  step();
  step();
  nan_in_second_layer = false;
  CHECK(error_of_next_step().find("'" + tensors[2].name + "'") != std::string::npos);
  step();
  CHECK(opt.steps() == 4);
  CHECK(trainer.skipped_steps() == 6);
  // Setting the micro step (as a training state's loading does) leaves an owed error owed; a
  // guard state carries it (checkpoints keep it), and one without it drops it.
  const auto run_of_three = [&] {
    nan_in_second_layer = true;
    step();
    step();
    step();
    nan_in_second_layer = false;
  };
  run_of_three();
  CHECK(trainer.skipped_steps() == 9);  // the run's last verdict counted: the error is owed
  trainer.restore_micro_step(0);
  trainer.restore_micro_step(0);
  CHECK(error_of_next_step().find("3 steps in a row") != std::string::npos);
  run_of_three();
  CHECK(trainer.skipped_steps() == 12);
  etnn::train::GuardState state = trainer.guard_state();
  CHECK(state.owed_error.find("3 steps in a row") != std::string::npos);
  trainer.restore_guard_state(state);
  CHECK(error_of_next_step() == state.owed_error);
  run_of_three();
  CHECK(trainer.skipped_steps() == 15);
  state = trainer.guard_state();
  state.owed_error.clear();
  trainer.restore_guard_state(state);
  CHECK_NOTHROW(step());
  runtime.device_results = nullptr;
}

TEST_CASE("host data reaches the device through a ring of pinned slots that never waits until the host is 4 sends ahead") {
  EmulatedRuntime& runtime = emulated();
  etnn::Buffer<int, etnn::Cuda> on_device(6);
  etnn::cuda::PinnedStaging staging;
  const auto send = [&](int first, std::size_t n) {
    staging.send(on_device.data(), n, [&](int* pinned) {
      for (std::size_t i = 0; i < n; ++i) pinned[i] = first + static_cast<int>(i);
    });
  };
  const auto arrived = [&](std::size_t n) {
    std::vector<int> host(n);
    etnn::copy_to_host(etnn::Cuda{}, host.data(), on_device.data(), n);
    return host;
  };

  SUBCASE("the device keeping up: one slot, reused, no waits") {
    runtime.clear();
    for (int s = 0; s < 5; ++s) send(10 * s, 4);
    CHECK(staging.slots() == 1);
    CHECK(count(runtime.calls, "cudaHostAlloc", false) == 1);
    CHECK(waits(runtime.calls).empty());
    CHECK(arrived(4) == std::vector<int>{40, 41, 42, 43});
  }
  SUBCASE("the device lagging: a slot per send in flight, then the oldest transfer waited for") {
    {
      const cuda_test::LaggingDevice lagging(runtime);
      runtime.clear();
      for (int s = 0; s < 4; ++s) send(10 * s, 4);
      CHECK(staging.slots() == etnn::cuda::PinnedStaging::max_slots);
      CHECK(count(runtime.calls, "cudaHostAlloc", false) == 4);
      CHECK(waits(runtime.calls).empty());
      runtime.clear();
      send(100, 4);
      CHECK(staging.slots() == etnn::cuda::PinnedStaging::max_slots);
      CHECK(count(runtime.calls, "cudaHostAlloc", false) == 0);
      // The fifth send waits for the first's transfer and reuses its slot.
      CHECK(waits(runtime.calls).size() == 1);
      CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 1);
    }
    CHECK(arrived(4) == std::vector<int>{100, 101, 102, 103});
  }
  SUBCASE("sends of two sizes through one ring (labels, class weights) settle into slots that fit them") {
    {
      const cuda_test::LaggingDevice lagging(runtime);
      send(0, 2);  // a slot of 8 bytes
      send(0, 6);  // and one of 24
    }
    runtime.clear();
    for (int s = 0; s < 3; ++s) {
      send(1, 6);
      send(2, 2);
    }
    CHECK(count(runtime.calls, "cudaFreeHost", false) == 0);
    CHECK(count(runtime.calls, "cudaHostAlloc", false) == 0);
    CHECK(arrived(2) == std::vector<int>{2, 3});
  }
  SUBCASE("a larger send grows the slot it takes") {
    send(0, 2);
    runtime.clear();
    send(7, 6);
    CHECK(count(runtime.calls, "cudaFreeHost", false) == 1);
    CHECK(count(runtime.calls, "cudaHostAlloc", false) == 1);
    CHECK(arrived(6) == std::vector<int>{7, 8, 9, 10, 11, 12});
  }
  SUBCASE("a send while etnn's stream is recorded is refused: a replay would copy whatever the slot held then") {
    etnn::cuda::RecordingStream recording;
    ETNN_CHECK_CUDA(etnn::cuda::runtime().cudaStreamBeginCapture(etnn::cuda::stream(), cudaStreamCaptureModeThreadLocal));
    CHECK_THROWS_WITH_AS(send(0, 2), doctest::Contains("being recorded into a CUDA graph"), etnn::DeviceError);
    cudaGraph_t graph = nullptr;
    ETNN_CHECK_CUDA(etnn::cuda::runtime().cudaStreamEndCapture(etnn::cuda::stream(), &graph));
  }
}

TEST_CASE("a loss computed on the device comes back without a wait, and is read when converted") {
  EmulatedRuntime& runtime = emulated();
  const int batch = 4;
  etnn::Buffer<float, etnn::Cuda> logits(std::size_t{10} * batch);
  const etnn::TensorView<const float, etnn::Shape<10>, etnn::Cuda> scores(logits.data(), batch);
  const std::vector<int> labels{1, 2, 3, 4};
  etnn::loss::CrossEntropy ce;
  runtime.clear();
  const auto pending = ce.value_and_grad(etnn::Cuda{}, scores, std::span<const int>(labels), static_cast<float*>(nullptr));
  static_assert(std::is_same_v<std::remove_const_t<decltype(pending)>, etnn::cuda::PendingLoss<float>>);
  CHECK(waits(runtime.calls).empty());

  SUBCASE("its copy done, reading it does not wait") {
    runtime.clear();
    CHECK(static_cast<float>(pending) == 0.0f);  // the emulated kernel wrote no row loss: they stay zero
    CHECK(waits(runtime.calls).empty());
    CHECK(count(runtime.calls, "cudaEventQuery", false) == 1);
  }
  SUBCASE("its copy still in flight, reading it waits for that copy alone, once") {
    {
      const cuda_test::LaggingDevice lagging(runtime);
      runtime.clear();
      CHECK(pending.value() == 0.0f);
      CHECK(pending.value() == 0.0f);
    }
    CHECK(count(runtime.calls, "cudaEventSynchronize", false) == 1);
    CHECK(count(runtime.calls, "cudaStreamSynchronize", false) == 0);
  }
  SUBCASE("read after another loss was computed on the device, it is an error rather than that loss's value") {
    (void)etnn::loss::NLL{}.value(etnn::Cuda{}, scores, std::span<const int>(labels));
    CHECK_THROWS_WITH_AS((void)pending.value(), doctest::Contains("convert it to a number before the next loss"),
                         etnn::Error);
  }
  SUBCASE("it outlives the loss that made it: its values arrive in the thread's readback") {
    const auto orphan = etnn::loss::NLL{}.value_and_grad(etnn::Cuda{}, scores, std::span<const int>(labels),
                                                          static_cast<float*>(nullptr));
    CHECK(orphan.value() == 0.0f);
  }
}
