// EXPECT: ETNN_METRIC_TARGET
// etnn::evaluate with a class-index metric over a dataset of real-valued targets.
#include <etnn/etnn.hpp>
#include <vector>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<3>)> model(0);
  const etnn::data::Dataset<etnn::Shape<2>, etnn::Shape<3>> data(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3});
#ifdef ETNN_CONTROL
  return etnn::evaluate(model, data, etnn::metrics::mean_absolute_error) >= 0 ? 0 : 1;
#else
  return etnn::evaluate(model, data, etnn::metrics::accuracy) >= 0 ? 0 : 1;
#endif
}
