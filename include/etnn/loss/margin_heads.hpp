#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Face-recognition margin heads: a softmax cross-entropy over scaled cosines between L2-normalised
// embeddings and L2-normalised class weight rows, with a margin on the target class's cosine. The
// weight matrix is a parameter of the loss (loss/parametric.hpp), trained by its own optimizer.
//   etnn::loss::ArcFace<64, 10> arcface({.scale = 64, .margin = 0.5f}, /*seed=*/0);
//   etnn::optim::SGD head_opt(arcface, {.lr = 0.01f});
//   etnn::Trainer trainer(model, arcface, opt, head_opt);
//
//   x: (B, E) embeddings   W: (C, E) class weights   y: B class indices
//   x^_b = x_b / ||x_b||   W^_c = W_c / ||W_c||   (F.normalize: norms below 1e-12 count as 1e-12)
//   cos_bc = x^_b . W^_c
//   z_bc = s cos_bc for c != y_b,   z_by = s psi(cos_by)       s: scale, psi: the margin policy
//   loss = r sum_b CE(z_b, y_b)      r = 1/B (mean) or 1 (sum); CE as loss::CrossEntropy
// Gradients, with G_bc = dL/dcos_bc = s dL/dz_bc (times psi'(cos_by) for c = y_b):
//   dL/dx_b = (sum_c G_bc W^_c - (sum_c G_bc cos_bc) x^_b) / ||x_b||
//   dL/dW_c = (sum_b G_bc x^_b - (sum_b G_bc cos_bc) W^_c) / ||W_c||
// (through the normalisation, assuming norms above 1e-12).
//
// The margin policies, pytorch-metric-learning's CosFaceLoss, ArcFaceLoss and SphereFaceLoss with
// margins in radians (pml takes ArcFace's in degrees: 28.6 there is 0.5 here):
//   CosFace    (additive cosine)         psi(c) = c - m                          m = 0.35, s = 64
//   ArcFace    (additive angular)        psi(c) = cos(acos(clamp(c, -1 + 1e-7, 1 - 1e-7)) + m)
//                                                                                m = 0.5,  s = 64
//              no "easy margin" and no fallback where theta + m > pi: psi is cos(theta + m) throughout;
//              the clamp keeps psi' = sin(theta + m) / sin(theta) finite (0 outside it, as torch.clamp)
//   SphereFace (multiplicative angular)  psi(c) = (-1)^k cos(m theta) - 2k,  theta = acos(clamp(c, -1, 1)),
//              k = floor(m theta / pi) (constant in the gradient), integer m = 4, s = 64. A-Softmax's
//              psi; cos(m theta) and its derivative are Chebyshev polynomials of c. Unlike SphereFace
//              and pml, the embedding is normalised too (the logits are s psi, not ||x|| psi), and the
//              original's annealing of the softmax with lambda is left out.
// The weight is (C, E), torch.nn.Linear's layout (pml stores its transpose), initialised N(0, 1)
// as pml does; saved as "weight".
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "../core/device.hpp"
#include "../core/error.hpp"
#include "checks.hpp"
#include "../nn/model.hpp"
#include "../tensor/tensor.hpp"
#include "cross_entropy.hpp"
#include "parametric.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace margin {

// psi(c) of the target class's cosine and dpsi/dc.
template <class T>
struct Target {
  T value;
  T derivative;
};

// CosFace: psi(c) = c - m.
struct AdditiveCosine {
  static constexpr const char* name = "etnn::loss::CosFace";
  static constexpr float default_scale = 64.0f;
  static constexpr float default_margin = 0.35f;
  static void validate(float, const char*) {}

  template <class T>
  static Target<T> target(T c, T m) {
    return {c - m, T(1)};
  }
};

// ArcFace: psi(c) = cos(theta + m), theta = acos(c) with c clamped to [-1 + 1e-7, 1 - 1e-7].
struct AdditiveAngular {
  static constexpr const char* name = "etnn::loss::ArcFace";
  static constexpr float default_scale = 64.0f;
  static constexpr float default_margin = 0.5f;
  static void validate(float, const char*) {}

  template <class T>
  static Target<T> target(T c, T m) {
    const T lo = T(-1) + T(1e-7), hi = T(1) - T(1e-7);
    const T theta = std::acos(std::clamp(c, lo, hi));
    // d cos(theta + m) / dc = sin(theta + m) / sin(theta); torch.clamp passes the gradient on [lo, hi].
    const T derivative = c >= lo && c <= hi ? std::sin(theta + m) / std::sin(theta) : T(0);
    return {std::cos(theta + m), derivative};
  }
};

// SphereFace (A-Softmax): psi(c) = (-1)^k cos(m theta) - 2k, k = floor(m theta / pi), integer m.
struct MultiplicativeAngular {
  static constexpr const char* name = "etnn::loss::SphereFace";
  static constexpr float default_scale = 64.0f;
  static constexpr float default_margin = 4.0f;
  static void validate(float margin, const char* who) {
    if (!(margin >= 1.0f && margin <= 64.0f) || margin != std::floor(margin))
      throw Error(detail::message(who, "margin must be an integer in [1, 64] (the angle's multiplier), got ",
                                  std::to_string(margin)));
  }

  template <class T>
  static Target<T> target(T c, T margin) {
    const int m = static_cast<int>(margin);
    // cos(m theta) = T_m(c), d T_m / dc = m U_{m-1}(c): T_{n+1} = 2c T_n - T_{n-1} from T_0 = 1, T_1 = c;
    // U_{n+1} = 2c U_n - U_{n-1} from U_0 = 1, U_1 = 2c.
    T t_prev = 1, t = c, u_prev = 0, u = 1;  // T_0, T_1, U_{-1}, U_0
    for (int n = 1; n < m; ++n) {
      const T t_next = 2 * c * t - t_prev;
      const T u_next = 2 * c * u - u_prev;
      t_prev = t, t = t_next, u_prev = u, u = u_next;
    }
    const T theta = std::acos(std::clamp(c, T(-1), T(1)));
    const T k = std::floor(theta / (std::numbers::pi_v<T> / static_cast<T>(m)));
    const T sign = static_cast<long long>(k) % 2 == 0 ? T(1) : T(-1);
    return {sign * t - 2 * k, sign * static_cast<T>(m) * u};
  }
};

}  // namespace margin

template <class Margin>
struct MarginHeadOptions {
  float scale = Margin::default_scale;    // s
  float margin = Margin::default_margin;  // m: radians (ArcFace), a cosine (CosFace), a multiplier (SphereFace)
  Reduction reduction = Reduction::mean;
};
using CosFaceOptions = MarginHeadOptions<margin::AdditiveCosine>;
using ArcFaceOptions = MarginHeadOptions<margin::AdditiveAngular>;
using SphereFaceOptions = MarginHeadOptions<margin::MultiplicativeAngular>;

// A margin head for embeddings of width Embedding and Classes classes, in scalar type T (the
// model's).
template <class Margin, int Embedding, int Classes, class T = float>
class MarginHead : public detail::ParameterMatrix<MarginHead<Margin, Embedding, Classes, T>, T, Classes, Embedding> {
  using Weight = detail::ParameterMatrix<MarginHead<Margin, Embedding, Classes, T>, T, Classes, Embedding>;
  friend Weight;
  static constexpr std::size_t width = Embedding, classes = Classes;

 public:
  using target_kind = ClassIndices;
  using Options = MarginHeadOptions<Margin>;
  using Weight::num_params;
  using Weight::flat_size;
  static constexpr const char* who = Margin::name;
  static constexpr const char* tensor_name = "weight";

  explicit MarginHead(Options options = {}, std::uint64_t seed = 0)
      : Weight(seed), options_(validated(options)), scratch_(scratch_size) {}
  const Options& options() const noexcept { return options_; }

 private:
  // W^ (C, E), 1/||W_c|| (C), and per sample cos (C), z (C), dL/dz (C), sized once.
  static constexpr std::size_t scratch_size = (width + 4) * classes;

  static Options validated(Options options) {
    if (!(options.scale > 0.0f) || !std::isfinite(options.scale))
      throw Error(detail::message(who, "scale must be finite and > 0, got ", std::to_string(options.scale)));
    if (!std::isfinite(options.margin))
      throw Error(detail::message(who, "margin must be finite, got ", std::to_string(options.margin)));
    Margin::validate(options.margin, who);
    return options;
  }

  // 1 / max(||v||, 1e-12) of E values.
  static T inverse_norm(const T* v) {
    T sum = 0;
    for (std::size_t e = 0; e < width; ++e) sum += v[e] * v[e];
    return T(1) / std::max(std::sqrt(sum), T(1e-12));
  }

  // grad null: the value alone; otherwise grad receives dL/dx and weight_grad gains gradient_scale() dL/dW.
  template <ShapeType S>
  T compute(TensorView<const T, S, Cpu> x, std::span<const int> labels, T* grad, T* weight_grad) const {
    static_assert(check::embedding_width<S, Embedding>());
    const int batch = x.batch();
    detail::check_labels(labels, batch, Classes, who);
    const T* w = this->parameters();
    T* w_hat = scratch_.data();
    T* w_inv = w_hat + width * classes;
    T* cosine = w_inv + classes;
    T* z = cosine + classes;
    T* dz = z + classes;
    for (std::size_t c = 0; c < classes; ++c) {
      w_inv[c] = inverse_norm(w + c * width);
      for (std::size_t e = 0; e < width; ++e) w_hat[c * width + e] = w[c * width + e] * w_inv[c];
    }
    const T s = static_cast<T>(options_.scale);
    const T m = static_cast<T>(options_.margin);
    const T r = detail::reduction_scale<T>(options_.reduction, static_cast<std::size_t>(batch));
    const T weight_scale = this->gradient_scale();
    T total = 0;
    for (int b = 0; b < batch; ++b) {
      const T* xb = x.sample(b);
      const T x_inv = inverse_norm(xb);
      const auto y = static_cast<std::size_t>(labels[static_cast<std::size_t>(b)]);
      for (std::size_t c = 0; c < classes; ++c) {
        T dot = 0;
        for (std::size_t e = 0; e < width; ++e) dot += xb[e] * w_hat[c * width + e];
        cosine[c] = dot * x_inv;
        z[c] = s * cosine[c];
      }
      const margin::Target<T> target = Margin::template target<T>(cosine[y], m);
      z[y] = s * target.value;
      total += detail::cross_entropy_row(z, Classes, static_cast<int>(y), static_cast<const float*>(nullptr),
                                         T(classes), T(0), grad != nullptr ? dz : nullptr, r);
      if (grad == nullptr) continue;
      // dz becomes G = dL/dcos.
      T g_dot_cos = 0;
      for (std::size_t c = 0; c < classes; ++c) {
        dz[c] *= c == y ? s * target.derivative : s;
        g_dot_cos += dz[c] * cosine[c];
      }
      T* gx = grad + static_cast<std::size_t>(b) * width;
      for (std::size_t e = 0; e < width; ++e) {
        T sum = 0;
        for (std::size_t c = 0; c < classes; ++c) sum += dz[c] * w_hat[c * width + e];
        gx[e] = x_inv * (sum - g_dot_cos * xb[e] * x_inv);
      }
      for (std::size_t c = 0; c < classes; ++c) {
        const T f = weight_scale * dz[c] * w_inv[c];
        for (std::size_t e = 0; e < width; ++e)
          weight_grad[c * width + e] += f * (xb[e] * x_inv - cosine[c] * w_hat[c * width + e]);
      }
    }
    return total * r;
  }

  Options options_;
  mutable Buffer<T, Cpu> scratch_;
};

template <int Embedding, int Classes, class T = float>
using CosFace = MarginHead<margin::AdditiveCosine, Embedding, Classes, T>;
template <int Embedding, int Classes, class T = float>
using ArcFace = MarginHead<margin::AdditiveAngular, Embedding, Classes, T>;
template <int Embedding, int Classes, class T = float>
using SphereFace = MarginHead<margin::MultiplicativeAngular, Embedding, Classes, T>;

}  // namespace etnn::loss
