// EXPECT: ETNN_LOSS_SHAPE
#include <etnn/etnn.hpp>
#include <vector>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<2, 3> >> nn::flatten >> nn::relu);
#else
using Net = decltype(nn::input<2, 3> >> nn::relu);
#endif
int main() {
  etnn::Model<Net> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<2, 3>> x(1);
  std::vector<int> y{0};
  trainer.step(x, y);
}
