// EXPECT: ETNN_WINDOW_TOO_LARGE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<1, 8, 8> >> nn::conv2d<4, 5> >> nn::max_pool2d<4>);
#else
using Net = decltype(nn::input<1, 8, 8> >> nn::conv2d<4, 5> >> nn::max_pool2d<5>);
#endif
int main() { etnn::Model<Net> model(0); }
