// EXPECT: ETNN_TARGET_KIND
// Class indices given to a loss that takes targets of the output's shape (multi-hot here).
#include <etnn/etnn.hpp>
#include <vector>
namespace nn = etnn::nn;
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<4>)> model(0);
  etnn::loss::MultiLabelSoftMargin loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<2>> x(1);
#ifdef ETNN_CONTROL
  etnn::Tensor<float, etnn::Shape<4>> y(1);
#else
  std::vector<int> y{3};
#endif
  trainer.step(x, y);
}
