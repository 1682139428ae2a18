// EXPECT: ETNN_TARGET_SHAPE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Target = etnn::Shape<4>;
#else
using Target = etnn::Shape<3>;
#endif
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<4>)> model(0);
  etnn::loss::MSE loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<2>> x(1);
  etnn::Tensor<float, Target> y(1);
  trainer.step(x, y);
}
