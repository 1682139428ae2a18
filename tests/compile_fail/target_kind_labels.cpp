// EXPECT: ETNN_TARGET_KIND
// A tensor of targets given to a loss that takes class indices.
#include <etnn/etnn.hpp>
#include <vector>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<4>)> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<2>> x(1);
#ifdef ETNN_CONTROL
  std::vector<int> y{3};
#else
  etnn::Tensor<float, etnn::Shape<4>> y(1);
#endif
  trainer.step(x, y);
}
