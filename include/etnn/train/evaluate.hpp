#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// etnn::evaluate: runs the model over a whole dataset in inference mode and returns a metric.
// The model is in eval mode meanwhile (running statistics, no dropout) and back in its own after.
//   double acc = etnn::evaluate(model, test, etnn::metrics::accuracy);               // class indices
//   double r2 = etnn::evaluate(model, test, etnn::metrics::r2_score);                // Shape<K...> targets
//   double f1 = etnn::evaluate(model, test, etnn::metrics::multilabel_macro_f1);     // MultiHot<K> targets
// Each batch of outputs (B, output_shape) goes to metric.update(outputs, targets) with the batch's
// targets as a DataLoader batch carries them (data/targets.hpp): B class indices, or B target rows.
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../data/data_loader.hpp"
#include "../tensor/copy.hpp"
#include "../tensor/tensor.hpp"
#include "../backend/staging.hpp"
#include "checks.hpp"

namespace etnn {

// dataset: any data::DatasetType (etnn::data::Dataset, IdxDataset, ...).
// metric: etnn::metrics::accuracy or any type with update(outputs, targets) and result().
template <class Model, data::DatasetType Dataset, class Metric>
double evaluate(Model& model, const Dataset& dataset, Metric metric, int batch = 256) {
  using T = typename Model::value_type;
  using Device = typename Model::device;
  using S = typename Dataset::shape;
  using Y = data::dataset_targets<Dataset>;
  static_assert(train::check::metric_targets<requires(Metric& m, TensorView<const T, typename Model::output_shape, Cpu> out,
                                                      data::target_batch<Y> targets) { m.update(out, targets); }>());
  if (batch <= 0) throw ShapeError("etnn::evaluate: batch must be positive, got " + std::to_string(batch));
  Tensor<T, typename Model::output_shape, Device> out(batch);
  backend::Staging<T, Device> staging;
  Tensor<T, typename Model::output_shape, Cpu> out_on_host;  // a device model's outputs, for the metric
  struct ModeGuard {
    Model& m;
    bool was_training;
    ~ModeGuard() { m.train(was_training); }
  } guard{model, model.training()};
  model.eval();
  // Samples [first, first + n) as a view: in place when the dataset holds its features contiguously,
  // else copied (a dataset streamed from disk); their targets gathered as a DataLoader batch holds them.
  std::vector<float> copied;
  std::vector<data::target_value<Y>> targets(static_cast<std::size_t>(batch) * data::target_size<Y>);
  const auto samples = [&](std::size_t first, int n) {
    if constexpr (requires { dataset.features(); }) {
      const auto features = dataset.features();
      if (features.size() != dataset.size() * S::size)
        throw ShapeError("etnn::evaluate: the dataset's features do not hold size() samples of " + S::to_string());
      return TensorView<const float, S, Cpu>(features.data() + first * S::size, n);
    } else {
      copied.resize(static_cast<std::size_t>(n) * S::size);
      for (int r = 0; r < n; ++r) dataset.copy_sample(first + static_cast<std::size_t>(r), copied.data() + r * S::size);
      return TensorView<const float, S, Cpu>(copied.data(), n);
    }
  };
  const auto batch_targets = [&](std::size_t first, int n) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      if constexpr (data::class_targets<Y>)
        targets[r] = dataset.label(first + r);
      else
        std::copy_n(dataset.target(first + r), data::target_size<Y>, targets.data() + r * data::target_size<Y>);
    }
    return data::target_rows<Y>(targets.data(), n);
  };
  for (std::size_t first = 0; first < dataset.size(); first += static_cast<std::size_t>(batch)) {
    const int n = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(batch), dataset.size() - first));
    out.resize(n);
    model.forward(backend::stage_as<T, Device>(samples(first, n), staging), out.view());
    const auto y = batch_targets(first, n);
    if constexpr (std::is_same_v<Device, Cpu>) {
      metric.update(const_view(out), y);
    } else {  // metrics read host memory
      out_on_host.resize(n);
      copy_to_host(Device{}, out_on_host.data(), out.data(), out.size());
      metric.update(const_view(out_on_host), y);
    }
  }
  return metric.result();
}

}  // namespace etnn
