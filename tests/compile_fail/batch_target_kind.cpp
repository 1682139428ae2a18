// EXPECT: ETNN_TARGET_KIND
// A DataLoader batch of real-valued targets given to a loss that takes class indices.
#include <etnn/etnn.hpp>
#include <vector>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<3>)> model(0);
#ifdef ETNN_CONTROL
  etnn::loss::MSE loss;
#else
  etnn::loss::CrossEntropy loss;
#endif
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  const etnn::data::Dataset<etnn::Shape<2>, etnn::Shape<3>> data(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3});
  etnn::data::DataLoader loader(data, {.batch = 1});
  for (auto batch : loader) trainer.step(batch);
}
