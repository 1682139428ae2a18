// EXPECT: ETNN_INPUT_SHAPE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Data = etnn::Shape<784>;
#else
using Data = etnn::Shape<100>;
#endif
int main() {
  etnn::Model<decltype(nn::input<784> >> nn::linear<10>)> model(0);
  etnn::Tensor<float, Data> x(2);
  auto y = model.forward(x);
  (void)y;
}
