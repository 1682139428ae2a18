// EXPECT: ETNN_BAD_WINDOW
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<3, 8, 8> >> nn::max_pool2d<3, nn::pad<1>>);
#else
using Net = decltype(nn::input<3, 8, 8> >> nn::max_pool2d<3, nn::pad<2>>);
#endif
int main() { etnn::Model<Net> model(0); }
