// EXPECT: ETNN_INPUT_TYPE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Data = double;
#else
using Data = float;
#endif
int main() {
  etnn::Model<decltype(nn::input<4> >> nn::linear<2>), double> model(0);
  etnn::Tensor<Data, etnn::Shape<4>> x(2);
  auto y = model.forward(x);
  (void)y;
}
