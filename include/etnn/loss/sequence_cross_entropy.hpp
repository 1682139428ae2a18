#pragma once
// Private to loss/: include <etnn/loss/loss.hpp> or <etnn/etnn.hpp>.
// Softmax cross-entropy at every position of a sequence (a language model's loss): PyTorch's
// F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-100).
//   z: (B, T, V) logits   y: B T class indices, position t of sample b at y[b T + t]
//   loss = r sum over positions with y != ignore of -log softmax(z_bt)[y_bt]
//   r = 1 / #(positions with y != ignore) (mean) or 1 (sum)
//   dL/dz_bt = r (softmax(z_bt) - onehot(y_bt)), and 0 at an ignored position
// When every position is ignored the mean is 0/0 = NaN, as in PyTorch. Each position is one row
// of CrossEntropy's row (cross_entropy.hpp), so both devices run the rows as for CrossEntropy.
#include <cstddef>
#include <span>
#include <string>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "checks.hpp"
#include "cross_entropy.hpp"
#include "targets.hpp"

namespace etnn::loss {

namespace detail {
template <class T>
struct SequenceCrossEntropyRow {
  int ignore;
  ETNN_HD T operator()(const T* z, int classes, int label, const float*, T* g, T scale) const {
    if (label == ignore) {
      if (g != nullptr)
        for (int j = 0; j < classes; ++j) g[j] = T(0);
      return T(0);
    }
    return cross_entropy_row(z, classes, label, static_cast<const float*>(nullptr), static_cast<T>(classes), T(0), g,
                             scale);
  }
};
}  // namespace detail

struct SequenceCrossEntropyOptions {
  Reduction reduction = Reduction::mean;
  int ignore_index = loss::ignore_index;  // a position with this label adds nothing
};

class SequenceCrossEntropy {
 public:
  // One class index per position: B T labels for a batch of B sequences of T positions.
  using target_kind = ClassIndices;
  using Options = SequenceCrossEntropyOptions;

  explicit SequenceCrossEntropy(Options options = {}) : options_(options) {}
  const Options& options() const noexcept { return options_; }

  // Returns the loss (backend::LossValue: on a CUDA device, read when converted to T).
  template <class T, ShapeType S, class Device>
  backend::LossValue<T, Device> value_and_grad(Device, TensorView<const T, S, Device> output,
                                               std::span<const int> labels, T* grad) const {
    static_assert(check::sequence_scores<S>());
    constexpr int length = dim_or_one<S>(0), classes = dim_or_one<S>(1);
    const int rows = output.batch() * length;
    const std::size_t counted = checked_positions(labels, output.batch(), length, classes);
    const T scale = options_.reduction == Reduction::mean ? T(1) / static_cast<T>(counted) : T(1);
    return label_rows_loss(Device{}, scratch_, output.data(), rows, classes, labels, static_cast<const float*>(nullptr),
                           grad, scale, detail::SequenceCrossEntropyRow<T>{options_.ignore_index}, who);
  }
  template <class T, ShapeType S, class Device>
  T value(Device, TensorView<const T, S, Device> output, std::span<const int> labels) const {
    return value_and_grad(Device{}, output, labels, static_cast<T*>(nullptr));
  }

 private:
  static constexpr const char* who = "etnn::loss::SequenceCrossEntropy";

  // Throws unless there is one label per position, each a class or the ignore index; returns how
  // many are not ignored.
  std::size_t checked_positions(std::span<const int> labels, int batch, int length, int classes) const {
    const std::size_t rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(length);
    if (labels.size() != rows)
      throw ShapeError(detail::message(who, std::to_string(labels.size()), " labels for a batch of ",
                                       std::to_string(batch), " sequences of ", std::to_string(length),
                                       " positions; pass one class index per position (", std::to_string(rows), ")"));
    std::size_t counted = 0;
    for (std::size_t i = 0; i < rows; ++i) {
      const int y = labels[i];
      if (y == options_.ignore_index) continue;
      if (y < 0 || y >= classes)
        throw ShapeError(detail::message(who, "label ", std::to_string(y), " of sample ", std::to_string(i / length),
                                         ", position ", std::to_string(i % length), " is outside [0, ",
                                         std::to_string(classes), ") and is not the ignore_index ",
                                         std::to_string(options_.ignore_index)));
      ++counted;
    }
    return counted;
  }

  Options options_;
  // The device's copies of labels and row losses; nothing (and no size) in a host build.
  [[no_unique_address]] mutable backend::LabelRowsScratch scratch_;
};

}  // namespace etnn::loss
