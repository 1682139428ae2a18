// EXPECT: ETNN_LOSS_SHAPE
// A margin head declared for embeddings of another width than the network's output.
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<8>)> model(0);
#ifdef ETNN_CONTROL
  etnn::loss::CosFace<8, 3> cosface;
#else
  etnn::loss::CosFace<4, 3> cosface;
#endif
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::optim::SGD head_opt(cosface, {.lr = 0.1f});
  etnn::Trainer trainer(model, cosface, opt, head_opt);
  etnn::Tensor<float, etnn::Shape<2>> x(1);
  std::vector<int> y{0};
  trainer.step(x, y);
}
