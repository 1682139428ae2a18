// Standalone check of etnn::cuda::FusedMlp (bf16 and fp16; ReLU, tanh and SiLU between the layers)
// against double-precision CPU references.
//   exit 0: every case passed; 1: a failure; 77: skipped (no usable CUDA device).
// Build: nvcc -std=c++20 -O3 -arch=sm_80 -gencode arch=compute_90,code=sm_90 -I include
//        tests/cuda/fused_mlp_check.cu -o fused_mlp_check
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <etnn/cuda/fused_mlp.hpp>
#include <exception>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                                             \
  do {                                                                                                               \
    const cudaError_t status_ = (call);                                                                              \
    if (status_ != cudaSuccess) {                                                                                    \
      std::fprintf(stderr, "CUDA error: %s at %s:%d: %s\n", #call, __FILE__, __LINE__, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                                  \
    }                                                                                                                \
  } while (0)

// After every launch (the header's launchers already check the launch itself).
void check_device(const char* what) {
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t run = cudaDeviceSynchronize();
  if (launch != cudaSuccess || run != cudaSuccess) {
    std::fprintf(stderr, "CUDA error after %s: %s / %s\n", what, cudaGetErrorString(launch), cudaGetErrorString(run));
    std::exit(1);
  }
}

// Against the exact reference (16-bit rounding error included): the brief's bound
//   max |diff| <= 2e-2 * max(1, max |ref|).
// Against the reference that models the kernel's 16-bit roundings, only accumulation order and the
// odd one-ulp rounding difference remain, so the bound is relative to the tensor's own scale:
//   max |diff| <= 1e-2 * max |ref|.
constexpr double exact_tolerance = 2e-2;
constexpr double modelled_tolerance = 1e-2;
constexpr float sentinel = 12345.0f;
constexpr std::size_t guard_floats = 256;
constexpr std::size_t guard_bytes = 4096;
constexpr unsigned char guard_byte = 0xA5;
constexpr float grad_prefill = 0.25f;

struct Comparison {
  double max_diff = 0;
  double max_ref = 0;
  bool finite = true;
};

Comparison compare(const float* got, const double* ref, std::size_t n) {
  Comparison c;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) c.finite = false;
    c.max_diff = std::max(c.max_diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
    c.max_ref = std::max(c.max_ref, std::fabs(ref[i]));
  }
  return c;
}

enum class Bound { exact, modelled };

bool report(const std::string& label, const Comparison& c, Bound bound) {
  const double rel = c.max_diff / std::max(1.0, c.max_ref);
  const double rel_to_max = c.max_diff / std::max(c.max_ref, 1e-30);
  const bool pass = c.finite && (bound == Bound::exact ? rel <= exact_tolerance : rel_to_max <= modelled_tolerance);
  std::printf("  %-9s max|diff| %.3e  max|ref| %.3e  diff/max(1,ref) %.3e  diff/ref %.3e  %s%s\n", label.c_str(),
              c.max_diff, c.max_ref, rel, rel_to_max, pass ? "PASS" : "FAIL", c.finite ? "" : " (non-finite values)");
  return pass;
}

// Rounds to the nearest bf16 (ties to even), as __float2bfloat16 does; finite inputs only.
float round_to_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// Rounds to the nearest fp16 (ties to even, subnormals kept), as __float2half_rn does.
float round_to_fp16(float v) { return __half2float(__float2half_rn(v)); }

template <class Half>
constexpr auto round_to_half = std::is_same_v<Half, __half> ? round_to_fp16 : round_to_bf16;

template <class Half>
constexpr const char* format_name = std::is_same_v<Half, __half> ? "fp16" : "bf16";

using etnn::fn::Relu, etnn::fn::Silu, etnn::fn::Tanh;
template <class Act>
constexpr const char* activation_name = std::is_same_v<Act, Relu>   ? "relu"
                                        : std::is_same_v<Act, Tanh> ? "tanh"
                                                                    : "silu";

// Naive double-precision reference: forward y and backward parameter gradients (same layout as
// params, not accumulated).
//   Precision::exact:         every value as given, all arithmetic in double.
//   Precision::half_operands: the kernel's roundings modelled (x, W, hidden activations, dy and
//                             every dZ rounded to the 16-bit format by round_half, ReLU masks and
//                             tanh's derivatives from the rounded activations, SiLU's derivatives
//                             rounded as the kernel keeps them),
//                             arithmetic in double. Without this, a pre-activation within rounding
//                             error of 0 gets a different ReLU mask on the device and the reference,
//                             which moves one dZ element by a whole dA: a large, legitimate
//                             difference in the gradients of a small batch.
enum class Precision { exact, half_operands };

struct Reference {
  std::vector<double> y;
  std::vector<double> grads;
  std::vector<double> dx;  // dL/dx (batch, w_0)
};

enum class Pass { forward, forward_and_backward };

// Where layer l's weight and bias start in the flat parameters: each from a multiple of 64 values,
// zeros between, as etnn's linear layers lay them out (expr::detail::MlpLayout); size: the length.
struct Offsets {
  std::vector<std::size_t> weight, bias;
  std::size_t size = 0;
};
Offsets offsets_of(const std::vector<int>& widths) {
  Offsets at;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    at.weight.push_back(at.size);
    at.bias.push_back(at.size + etnn::aligned_values(static_cast<std::size_t>(widths[l + 1]) * widths[l]));
    at.size = at.bias.back() + etnn::aligned_values(static_cast<std::size_t>(widths[l + 1]));
  }
  return at;
}

// Act: the hidden layers' activation (the CPU's functor, evaluated in double).
template <class Act>
Reference reference(const std::vector<int>& widths, const std::vector<float>& params, const std::vector<float>& x,
                    const std::vector<float>& dy, int batch, Precision precision, Pass pass,
                    float (*round_half)(float)) {
  auto operand = [&](double v) {
    return precision == Precision::half_operands ? static_cast<double>(round_half(static_cast<float>(v))) : v;
  };
  const int layers = static_cast<int>(widths.size()) - 1;
  // Parameters as the arithmetic uses them: weights as operands, biases exact.
  const Offsets at = offsets_of(widths);
  std::vector<double> used(params.begin(), params.end());
  for (int l = 0; l < layers; ++l) {
    const std::size_t weights = static_cast<std::size_t>(widths[l + 1]) * widths[l];
    for (std::size_t i = 0; i < weights; ++i) used[at.weight[l] + i] = operand(params[at.weight[l] + i]);
  }
  auto weight = [&](int l, int o, int i) { return used[at.weight[l] + static_cast<std::size_t>(o) * widths[l] + i]; };
  auto bias = [&](int l, int o) { return used[at.bias[l] + o]; };

  // Forward: act[l] = A_l (batch, w_l); Z_l = A_l W_l^T + b_l; A_{l+1} = f(Z_l), y = Z_{L-1};
  // kept[l + 1] = f'(Z_l) where f' needs Z.
  const Act f{};
  std::vector<std::vector<double>> act(layers + 1), kept(layers + 1);
  act[0].resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) act[0][i] = operand(x[i]);
  for (int l = 0; l < layers; ++l) {
    const int in = widths[l], out = widths[l + 1];
    act[l + 1].resize(static_cast<std::size_t>(batch) * out);
    kept[l + 1].resize(act[l + 1].size());
    for (int b = 0; b < batch; ++b)
      for (int o = 0; o < out; ++o) {
        double z = bias(l, o);
        for (int i = 0; i < in; ++i) z += act[l][static_cast<std::size_t>(b) * in + i] * weight(l, o, i);
        const std::size_t at = static_cast<std::size_t>(b) * out + o;
        act[l + 1][at] = (l + 1 < layers) ? operand(f(z)) : z;
        if constexpr (Act::derivative_needs_input) kept[l + 1][at] = operand(f.derivative(z, 0.0));
      }
  }

  Reference ref;
  ref.y = act[layers];
  if (pass == Pass::forward) return ref;
  ref.grads.assign(params.size(), 0.0);
  std::vector<double> dz(dy.size());  // dZ_{L-1} = dy
  for (std::size_t i = 0; i < dy.size(); ++i) dz[i] = operand(dy[i]);
  for (int l = layers - 1; l >= 0; --l) {
    const int in = widths[l], out = widths[l + 1];
    double* grad_w = ref.grads.data() + at.weight[l];  // dW_l = dZ_l^T A_l   (out, in)
    double* grad_b = ref.grads.data() + at.bias[l];    // db_l = sum over rows of dZ_l
    for (int b = 0; b < batch; ++b)
      for (int o = 0; o < out; ++o) {
        const double g = dz[static_cast<std::size_t>(b) * out + o];
        for (int i = 0; i < in; ++i)
          grad_w[static_cast<std::size_t>(o) * in + i] += g * act[l][static_cast<std::size_t>(b) * in + i];
        grad_b[o] += g;
      }
    if (l == 0) {  // dX = dZ_0 W_0
      ref.dx.assign(static_cast<std::size_t>(batch) * in, 0.0);
      for (int b = 0; b < batch; ++b)
        for (int i = 0; i < in; ++i)
          for (int o = 0; o < out; ++o)
            ref.dx[static_cast<std::size_t>(b) * in + i] += dz[static_cast<std::size_t>(b) * out + o] * weight(0, o, i);
      break;
    }
    // dZ_{l-1} = (dZ_l W_l) (.) f'(Z_{l-1}): from A_l (ReLU: [A_l > 0], tanh: 1 - A_l^2), or kept
    std::vector<double> dz_prev(static_cast<std::size_t>(batch) * in);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < in; ++i) {
        double s = 0;
        for (int o = 0; o < out; ++o) s += dz[static_cast<std::size_t>(b) * out + o] * weight(l, o, i);
        const std::size_t at = static_cast<std::size_t>(b) * in + i;
        const double slope = Act::derivative_needs_input ? kept[l][at] : f.derivative(act[l][at], act[l][at]);
        dz_prev[at] = operand(s * slope);
      }
    dz.swap(dz_prev);
  }
  return ref;
}

template <class Half, class Act, int... W>
bool run_case(int batch, std::mt19937& rng) {
  using Mlp = etnn::cuda::FusedMlp<Half, Act, W...>;
  const std::vector<int> widths = {W...};
  const int layers = Mlp::layers;
  const int in = widths.front(), out = widths.back();
  std::string name;
  for (int w : widths) {
    if (!name.empty()) name += '-';
    name += std::to_string(w);
  }
  std::printf("[%s %s %s] batch %d\n", format_name<Half>, activation_name<Act>, name.c_str(), batch);

  // Parameters uniform in +-1/sqrt(in) per layer, zeros between tensors; x and dy uniform in [-1, 1].
  const Offsets at = offsets_of(widths);
  if (at.size != Mlp::num_params) {
    std::printf("  the kernels' parameter layout (%zu values) is not the linear layers' (%zu): FAIL\n",
                static_cast<std::size_t>(Mlp::num_params), at.size);
    return false;
  }
  std::vector<float> params(Mlp::num_params, 0.0f);
  for (int l = 0; l < layers; ++l) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(widths[l]));
    std::uniform_real_distribution<float> dist(-bound, bound);
    for (std::size_t i = 0; i < static_cast<std::size_t>(widths[l + 1]) * widths[l]; ++i) params[at.weight[l] + i] = dist(rng);
    for (int o = 0; o < widths[l + 1]; ++o) params[at.bias[l] + o] = dist(rng);
  }
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(batch) * in), dy(static_cast<std::size_t>(batch) * out);
  for (float& v : x) v = unit(rng);
  for (float& v : dy) v = unit(rng);

  const std::size_t y_count = static_cast<std::size_t>(batch) * out;
  const std::size_t saved_bytes = Mlp::saved_bytes(batch);
  float *d_params = nullptr, *d_x = nullptr, *d_dy = nullptr, *d_y = nullptr, *d_grads = nullptr, *d_grads2 = nullptr;
  float* d_dx = nullptr;
  void* d_saved = nullptr;
  CHECK_CUDA(cudaMalloc(&d_params, params.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_x, x.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_dy, dy.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_y, (y_count + guard_floats) * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_grads, (params.size() + guard_floats) * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_grads2, (params.size() + guard_floats) * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_saved, saved_bytes + guard_bytes));
  CHECK_CUDA(cudaMalloc(&d_dx, (x.size() + guard_floats) * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(d_params, params.data(), params.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_dy, dy.data(), dy.size() * sizeof(float), cudaMemcpyHostToDevice));

  // y: NaN everywhere (0xFF bytes) so an unwritten row fails, then sentinels past its end;
  // grads: grad_prefill (to check +=) then sentinels; saved: guard bytes past saved_bytes.
  std::vector<float> y_init(y_count + guard_floats, sentinel);
  std::memset(y_init.data(), 0xFF, y_count * sizeof(float));
  std::vector<float> grads_init(params.size() + guard_floats, sentinel);
  std::fill(grads_init.begin(), grads_init.begin() + static_cast<std::ptrdiff_t>(params.size()), grad_prefill);
  std::vector<unsigned char> saved_guard(guard_bytes, guard_byte);
  CHECK_CUDA(cudaMemcpy(d_y, y_init.data(), y_init.size() * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> dx_init(x.size() + guard_floats, sentinel);  // NaN where dx goes, sentinels past it
  std::memset(dx_init.data(), 0xFF, x.size() * sizeof(float));
  CHECK_CUDA(cudaMemcpy(d_dx, dx_init.data(), dx_init.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_grads, grads_init.data(), grads_init.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_grads2, grads_init.data(), grads_init.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(static_cast<unsigned char*>(d_saved) + saved_bytes, saved_guard.data(), guard_bytes,
                        cudaMemcpyHostToDevice));

  Mlp::forward(d_params, d_x, d_y, d_saved, batch, nullptr);
  check_device("forward");
  Mlp::backward(d_params, d_grads, d_x, d_saved, d_dy, batch, nullptr, d_dx);
  check_device("backward");
  // Again, without dL/dx: same saved, fresh grads, the same bits.
  Mlp::backward(d_params, d_grads2, d_x, d_saved, d_dy, batch, nullptr);
  check_device("second backward");

  std::vector<float> y(y_count + guard_floats), grads(params.size() + guard_floats), grads2(grads.size());
  std::vector<float> dx(x.size() + guard_floats);
  CHECK_CUDA(cudaMemcpy(y.data(), d_y, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(dx.data(), d_dx, dx.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(grads.data(), d_grads, grads.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(grads2.data(), d_grads2, grads2.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(saved_guard.data(), static_cast<unsigned char*>(d_saved) + saved_bytes, guard_bytes,
                        cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(d_params));
  CHECK_CUDA(cudaFree(d_x));
  CHECK_CUDA(cudaFree(d_dy));
  CHECK_CUDA(cudaFree(d_y));
  CHECK_CUDA(cudaFree(d_grads));
  CHECK_CUDA(cudaFree(d_grads2));
  CHECK_CUDA(cudaFree(d_saved));
  CHECK_CUDA(cudaFree(d_dx));

  // y against both references (forward has no ReLU-mask sensitivity); gradients against the
  // 16-bit-modelling one.
  const Reference exact = reference<Act>(widths, params, x, dy, batch, Precision::exact, Pass::forward, nullptr);
  const Reference ref = reference<Act>(widths, params, x, dy, batch, Precision::half_operands,
                                       Pass::forward_and_backward, round_to_half<Half>);
  bool ok = report("y (exact)", compare(y.data(), exact.y.data(), y_count), Bound::exact);
  ok &= report("y", compare(y.data(), ref.y.data(), y_count), Bound::modelled);
  std::vector<double> expected(ref.grads);
  for (double& g : expected) g += grad_prefill;
  for (int l = 0; l < layers; ++l) {
    const std::size_t weights = static_cast<std::size_t>(widths[l + 1]) * widths[l];
    const std::string layer = std::to_string(l);
    ok &= report(std::string("grad W") += layer,
                 compare(grads.data() + at.weight[l], expected.data() + at.weight[l], weights), Bound::modelled);
    ok &= report(std::string("grad b") += layer,
                 compare(grads.data() + at.bias[l], expected.data() + at.bias[l], widths[l + 1]), Bound::modelled);
  }
  ok &= report("dx", compare(dx.data(), ref.dx.data(), x.size()), Bound::modelled);
  // Between tensors the gradients are untouched: the prefill.
  std::vector<bool> in_tensor(params.size(), false);
  for (int l = 0; l < layers; ++l) {
    std::fill_n(in_tensor.begin() + static_cast<std::ptrdiff_t>(at.weight[l]),
                static_cast<std::size_t>(widths[l + 1]) * widths[l], true);
    std::fill_n(in_tensor.begin() + static_cast<std::ptrdiff_t>(at.bias[l]), widths[l + 1], true);
  }
  bool gaps_untouched = true;
  for (std::size_t i = 0; i < params.size(); ++i) gaps_untouched &= in_tensor[i] || grads[i] == grad_prefill;
  std::printf("  %-24s %s\n", "zeros between tensors", gaps_untouched ? "PASS" : "FAIL");
  ok &= gaps_untouched;

  const bool y_guard =
      std::all_of(y.begin() + static_cast<std::ptrdiff_t>(y_count), y.end(), [](float v) { return v == sentinel; }) &&
      std::all_of(dx.begin() + static_cast<std::ptrdiff_t>(x.size()), dx.end(), [](float v) { return v == sentinel; });
  const auto grads_tail = static_cast<std::ptrdiff_t>(params.size());
  const bool grads_guard =
      std::all_of(grads.begin() + grads_tail, grads.end(), [](float v) { return v == sentinel; }) &&
      std::all_of(grads2.begin() + grads_tail, grads2.end(), [](float v) { return v == sentinel; });
  const bool saved_ok =
      std::all_of(saved_guard.begin(), saved_guard.end(), [](unsigned char b) { return b == guard_byte; });
  const bool same = std::memcmp(grads.data(), grads2.data(), params.size() * sizeof(float)) == 0;
  std::printf("  %-24s %s\n", "writes stay in bounds", y_guard && grads_guard && saved_ok ? "PASS" : "FAIL");
  std::printf("  %-24s %s\n", "backward repeats bitwise", same ? "PASS" : "FAIL");
  return ok && y_guard && grads_guard && saved_ok && same;
}

// Informational timing (no pass/fail): mean of `reps` forward and backward calls.
template <class Half, class Act, int... W>
void time_case(int batch) {
  using Mlp = etnn::cuda::FusedMlp<Half, Act, W...>;
  const std::vector<int> widths = {W...};
  const int in = widths.front(), out = widths.back();
  double flops = 0;  // forward multiply-adds x 2
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) flops += 2.0 * batch * widths[l] * widths[l + 1];
  float *params = nullptr, *x = nullptr, *y = nullptr, *dy = nullptr, *grads = nullptr;
  void* saved = nullptr;
  CHECK_CUDA(cudaMalloc(&params, Mlp::num_params * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&grads, Mlp::num_params * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&x, static_cast<std::size_t>(batch) * in * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&y, static_cast<std::size_t>(batch) * out * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dy, static_cast<std::size_t>(batch) * out * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&saved, Mlp::saved_bytes(batch)));
  CHECK_CUDA(cudaMemset(params, 0x3C, Mlp::num_params * sizeof(float)));  // every float about 0.0115
  CHECK_CUDA(cudaMemset(grads, 0, Mlp::num_params * sizeof(float)));
  CHECK_CUDA(cudaMemset(x, 0x3C, static_cast<std::size_t>(batch) * in * sizeof(float)));
  CHECK_CUDA(cudaMemset(dy, 0x3C, static_cast<std::size_t>(batch) * out * sizeof(float)));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  constexpr int reps = 20;
  float forward_ms = 0, backward_ms = 0;
  Mlp::forward(params, x, y, saved, batch, nullptr);  // warm-up
  Mlp::backward(params, grads, x, saved, dy, batch, nullptr);
  check_device("timing warm-up");
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) Mlp::forward(params, x, y, saved, batch, nullptr);
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaEventElapsedTime(&forward_ms, start, stop));
  check_device("timed forward");
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) Mlp::backward(params, grads, x, saved, dy, batch, nullptr);
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  CHECK_CUDA(cudaEventElapsedTime(&backward_ms, start, stop));
  check_device("timed backward");
  forward_ms /= reps;
  backward_ms /= reps;
  std::string name;
  for (int w : widths) {
    if (!name.empty()) name += '-';
    name += std::to_string(w);
  }
  std::printf("timing [%s %s %s] batch %d: forward %.4f ms (%.1f TFLOP/s), backward %.4f ms, saved %.1f MiB\n",
              format_name<Half>, activation_name<Act>, name.c_str(), batch, forward_ms,
              flops / (forward_ms * 1e-3) / 1e12, backward_ms,
              static_cast<double>(Mlp::saved_bytes(batch)) / (1 << 20));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  for (void* p : {static_cast<void*>(params), static_cast<void*>(grads), static_cast<void*>(x), static_cast<void*>(y),
                  static_cast<void*>(dy), saved})
    CHECK_CUDA(cudaFree(p));
}

// Host-side check of the row-chunk plan of the weight-gradient split.
bool chunk_plan_ok() {
  namespace d = etnn::cuda::detail::fused_mlp;
  for (int batch = 1; batch <= (1 << 19); batch = batch < 4096 ? batch + 1 : batch + 997) {
    const d::ChunkPlan plan = d::plan_chunks(batch);
    const bool ok = plan.chunks >= 1 && plan.chunks <= d::max_chunks && plan.chunk_rows % d::tile_rows == 0 &&
                    static_cast<long long>(plan.chunks - 1) * plan.chunk_rows < batch &&
                    static_cast<long long>(plan.chunks) * plan.chunk_rows >= batch;
    if (!ok) {
      std::printf("chunk plan FAIL at batch %d: %d chunks of %d rows\n", batch, plan.chunks, plan.chunk_rows);
      return false;
    }
  }
  std::printf("chunk plan: PASS\n");
  return true;
}

}  // namespace

int main() {
  if (!chunk_plan_ok()) return 1;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 8) {
    std::printf("skipped: no usable CUDA device (compute capability %d.%d < 8.0)\n", prop.major, prop.minor);
    return 77;
  }
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

  std::mt19937 rng(12345);
  bool ok = true;
  try {
    for (int batch : {1, 37, 128, 1000, 4096, 20000}) {  // 20000: chunks of 2 tiles, a short last one
      ok &= run_case<__nv_bfloat16, Relu, 64, 64, 64, 64, 64, 16>(batch, rng);
      ok &= run_case<__nv_bfloat16, Relu, 32, 128, 16>(batch, rng);
      ok &= run_case<__nv_bfloat16, Relu, 16, 16>(batch, rng);
      ok &= run_case<__nv_bfloat16, Relu, 128, 128, 128, 128>(batch, rng);
      ok &= run_case<__half, Relu, 64, 64, 64, 64, 64, 16>(batch, rng);
      ok &= run_case<__half, Relu, 32, 128, 16>(batch, rng);
      ok &= run_case<__nv_bfloat16, Tanh, 64, 64, 64, 16>(batch, rng);
      ok &= run_case<__nv_bfloat16, Silu, 32, 128, 64, 16>(batch, rng);
      ok &= run_case<__half, Silu, 64, 64, 64, 16>(batch, rng);
    }
    time_case<__nv_bfloat16, Relu, 64, 64, 64, 64, 64, 16>(1 << 14);
    time_case<__nv_bfloat16, Relu, 64, 64, 64, 64, 64, 16>(1 << 18);
    time_case<__nv_bfloat16, Relu, 128, 128, 128, 128>(1 << 18);
    time_case<__half, Relu, 64, 64, 64, 64, 64, 16>(1 << 18);
    time_case<__nv_bfloat16, Silu, 64, 64, 64, 64, 64, 16>(1 << 18);
  } catch (const std::exception& e) {
    std::printf("exception: %s\nFAIL\n", e.what());
    return 1;
  }
  std::printf(ok ? "ALL PASS\n" : "SOME FAILED\n");
  return ok ? 0 : 1;
}
