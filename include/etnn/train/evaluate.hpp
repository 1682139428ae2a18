#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// etnn::evaluate: runs the model over a whole dataset in inference mode and returns a metric.
// The model is in eval mode meanwhile (running statistics, no dropout) and back in its own after.
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../tensor/copy.hpp"
#include "../tensor/tensor.hpp"
#include "../backend/staging.hpp"

namespace etnn {

// dataset: anything with a shape, size(), labels() and either features() (all samples,
// contiguous, such as etnn::data::Dataset) or copy_sample(i, out) (etnn::data::IdxDataset).
// metric: etnn::metrics::accuracy or any type with update() and result().
template <class Model, class Dataset, class Metric>
double evaluate(Model& model, const Dataset& dataset, Metric metric, int batch = 256) {
  using T = typename Model::value_type;
  using Device = typename Model::device;
  using S = typename Dataset::shape;
  if (batch <= 0) throw ShapeError("etnn::evaluate: batch must be positive, got " + std::to_string(batch));
  Tensor<T, typename Model::output_shape, Device> out(batch);
  Buffer<T, Device> staging;
  Tensor<T, typename Model::output_shape, Cpu> out_on_host;  // a device model's outputs, for the metric
  struct ModeGuard {
    Model& m;
    bool was_training;
    ~ModeGuard() { m.train(was_training); }
  } guard{model, model.training()};
  model.eval();
  const auto labels = dataset.labels();
  if (labels.size() != dataset.size())
    throw ShapeError("etnn::evaluate: the dataset's labels do not hold size() samples");
  // Samples [first, first + n) as a view: in place when the dataset holds its features contiguously,
  // else copied (a dataset streamed from disk).
  std::vector<float> copied;
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
  for (std::size_t first = 0; first < dataset.size(); first += static_cast<std::size_t>(batch)) {
    const int n = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(batch), dataset.size() - first));
    out.resize(n);
    model.forward(backend::stage_as<T, Device>(samples(first, n), staging), out.view());
    const auto batch_labels = labels.subspan(first, static_cast<std::size_t>(n));
    if constexpr (std::is_same_v<Device, Cpu>) {
      metric.update(const_view(out), batch_labels);
    } else {  // metrics read host memory
      out_on_host.resize(n);
      copy_to_host(Device{}, out_on_host.data(), out.data(), out.size());
      metric.update(const_view(out_on_host), batch_labels);
    }
  }
  return metric.result();
}

}  // namespace etnn
