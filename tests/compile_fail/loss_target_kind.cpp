// EXPECT: ETNN_LOSS_TARGET_KIND
// A user's loss whose target_kind is none of etnn::loss's kinds.
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
struct Sorted {};  // not a target kind the Trainer knows
struct MyLoss {
#ifdef ETNN_CONTROL
  using target_kind = etnn::loss::RealValues;
#else
  using target_kind = Sorted;
#endif
  template <class T, etnn::ShapeType S, etnn::ShapeType TS>
  T value_and_grad(etnn::Cpu, etnn::TensorView<const T, S, etnn::Cpu> out, etnn::TensorView<const T, TS, etnn::Cpu>,
                   T* grad) const {
    for (std::size_t i = 0; i < out.size(); ++i) grad[i] = T(0);
    return T(0);
  }
};
int main() {
  etnn::Model<decltype(nn::input<2> >> nn::linear<4>)> model(0);
  MyLoss loss;
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::Tensor<float, etnn::Shape<2>> x(1);
  etnn::Tensor<float, etnn::Shape<4>> y(1);
  trainer.step(x, y);
}
