// EXPECT: ETNN_LOSS_OPTIMIZER
// A loss with parameters of its own (ArcFace's class weights) trained without an optimizer for them.
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<4>)> model(0);
  etnn::loss::ArcFace<4, 3> arcface;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
#ifdef ETNN_CONTROL
  etnn::optim::SGD head_opt(arcface, {.lr = 0.1f});
  etnn::Trainer trainer(model, arcface, opt, head_opt);
#else
  etnn::Trainer trainer(model, arcface, opt);
#endif
  etnn::Tensor<float, etnn::Shape<2>> x(1);
  std::vector<int> y{0};
  trainer.step(x, y);
}
