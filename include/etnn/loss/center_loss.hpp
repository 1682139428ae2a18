#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// CenterLoss (Wen et al. 2016) with learnable centers, a parameter of the loss trained by its own
// optimizer (loss/parametric.hpp), as the PyTorch implementations do it (autograd gradient and a
// separate optimizer, not the paper's hand-written center update with alpha):
//   etnn::loss::CenterLoss<64, 10> center;
//   etnn::optim::SGD center_opt(center, {.lr = 0.5f});
//
//   x: (B, E) embeddings   c: (C, E) centers   y: B class indices
//   l_b = 1/2 ||x_b - c_{y_b}||^2       loss = r sum_b l_b      r = 1/B (mean) or 1 (sum)
//   dL/dx_b = r (x_b - c_{y_b})         dL/dc_k = -r sum_{b: y_b = k} (x_b - c_k)
// The mean is 0.5 * mean_b ||x_b - c_{y_b}||^2, jxgu1016/MNIST_center_loss_pytorch's
// (feature - centers_batch).pow(2).sum() / 2 / batch_size; KaiyangZhou/pytorch-center-loss omits
// the 1/2 (and clamps each distance to [1e-12, 1e12]). The embeddings are not normalised. The
// centers are initialised N(0, 1) (torch.randn) and saved as "centers".
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/device.hpp"
#include "checks.hpp"
#include "../nn/model.hpp"
#include "../tensor/tensor.hpp"
#include "parametric.hpp"
#include "target_loss.hpp"
#include "targets.hpp"

namespace etnn::loss {

struct CenterLossOptions {
  Reduction reduction = Reduction::mean;
};

template <int Embedding, int Classes, class T = float>
class CenterLoss : public detail::ParameterMatrix<CenterLoss<Embedding, Classes, T>, T, Classes, Embedding> {
  using Centers = detail::ParameterMatrix<CenterLoss<Embedding, Classes, T>, T, Classes, Embedding>;
  friend Centers;
  static constexpr std::size_t width = Embedding;

 public:
  using target_kind = ClassIndices;
  using Options = CenterLossOptions;
  using Centers::num_params;
  using Centers::flat_size;
  static constexpr const char* who = "etnn::loss::CenterLoss";
  static constexpr const char* tensor_name = "centers";

  explicit CenterLoss(Options options = {}, std::uint64_t seed = 0) : Centers(seed), options_(options) {}
  const Options& options() const noexcept { return options_; }

 private:
  // grad null: the value alone; otherwise grad receives dL/dx and center_grad gains gradient_scale() dL/dc.
  template <ShapeType S>
  T compute(TensorView<const T, S, Cpu> x, std::span<const int> labels, T* grad, T* center_grad) const {
    static_assert(check::embedding_width<S, Embedding>());
    const int batch = x.batch();
    detail::check_labels(labels, batch, Classes, who);
    const T r = detail::reduction_scale<T>(options_.reduction, static_cast<std::size_t>(batch));
    const T center_scale = -r * this->gradient_scale();
    T total = 0;
    for (int b = 0; b < batch; ++b) {
      const T* xb = x.sample(b);
      const std::size_t y = static_cast<std::size_t>(labels[static_cast<std::size_t>(b)]);
      const T* cy = this->parameters() + y * width;
      T sum = 0;
      for (std::size_t e = 0; e < width; ++e) {
        const T d = xb[e] - cy[e];
        sum += d * d;
        if (grad != nullptr) {
          grad[static_cast<std::size_t>(b) * width + e] = r * d;
          center_grad[y * width + e] += center_scale * d;
        }
      }
      total += sum / 2;
    }
    return total * r;
  }

  Options options_;
};

}  // namespace etnn::loss
