// EXPECT: ETNN_LOSS_OPTIMIZER
// The Trainer's fourth argument is an optimizer of another parameter set than the loss's own.
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<4>)> model(0);
  etnn::loss::CosFace<4, 3> cosface;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
#ifdef ETNN_CONTROL
  etnn::optim::SGD head_opt(cosface, {.lr = 0.1f});
#else
  etnn::optim::SGD head_opt(model, {.lr = 0.1f});  // the model's again, not the head's
#endif
  etnn::Trainer trainer(model, cosface, opt, head_opt);
  etnn::Tensor<float, etnn::Shape<2>> x(1);
  std::vector<int> y{0};
  trainer.step(x, y);
}
