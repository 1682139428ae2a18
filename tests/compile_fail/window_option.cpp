// EXPECT: ETNN_WINDOW_OPTION
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<3, 8, 8> >> nn::conv2d<4, 3, nn::stride<2>>);
#else
using Net = decltype(nn::input<3, 8, 8> >> nn::conv2d<4, 3, etnn::Shape<2>>);
#endif
int main() { etnn::Model<Net> model(0); }
