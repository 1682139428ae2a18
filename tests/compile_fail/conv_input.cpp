// EXPECT: ETNN_SHAPE_MISMATCH: conv2d and pooling expect a \(C, H, W\) input
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<1, 28, 28> >> nn::conv2d<6, 5>);
#else
using Net = decltype(nn::input<784> >> nn::conv2d<6, 5>);
#endif
int main() { etnn::Model<Net> model(0); }
