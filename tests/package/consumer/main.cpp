#include <etnn/etnn.hpp>

#include <cstdio>
#include <vector>

namespace nn = etnn::nn;

int main() {
  etnn::Model<decltype(nn::input<4> >> nn::linear<8> >> nn::relu >> nn::linear<2>)> model(0);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<4>> x(2);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(i) / 8;
  const std::vector<int> y{0, 1};
  const float first = trainer.step(x, y);
  float last = first;
  for (int i = 0; i < 50; ++i) last = trainer.step(x, y);
  std::printf("consumer: loss %.4f -> %.4f\n", first, last);
  return last < first ? 0 : 1;
}
