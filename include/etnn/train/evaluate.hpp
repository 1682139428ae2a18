#pragma once
// etnn::evaluate: runs the model over a whole dataset in inference mode and returns a metric.
// The model is in eval mode meanwhile (running statistics, no dropout) and back in its own after.
#include <algorithm>
#include <cstddef>
#include <string>

#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "staging.hpp"

namespace etnn {

// dataset: anything with a shape, size(), features() (all samples, contiguous) and labels(),
// such as etnn::data::Dataset. metric: etnn::metrics::accuracy or any type with update() and
// result().
template <class Model, class Dataset, class Metric>
double evaluate(Model& model, const Dataset& dataset, Metric metric, int batch = 256) {
  using T = typename Model::value_type;
  using Device = typename Model::device;
  using S = typename Dataset::shape;
  if (batch <= 0) throw ShapeError("etnn::evaluate: batch must be positive, got " + std::to_string(batch));
  Tensor<T, typename Model::output_shape, Device> out(batch);
  Buffer<T, Device> staging;
  struct ModeGuard {
    Model& m;
    bool was_training;
    ~ModeGuard() { m.train(was_training); }
  } guard{model, model.training()};
  model.eval();
  const auto labels = dataset.labels();
  const auto features = dataset.features();
  if (features.size() != dataset.size() * S::size || labels.size() != dataset.size())
    throw ShapeError("etnn::evaluate: the dataset's features and labels do not hold size() samples of " +
                     S::to_string());
  for (std::size_t first = 0; first < dataset.size(); first += static_cast<std::size_t>(batch)) {
    const int n = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(batch), dataset.size() - first));
    const TensorView<const float, S, Cpu> x(features.data() + first * S::size, n);
    out.resize(n);
    model.forward(detail::stage_as<T, Device>(x, staging), out.view());
    metric.update(const_view(out), labels.subspan(first, static_cast<std::size_t>(n)));
  }
  return metric.result();
}

}  // namespace etnn
