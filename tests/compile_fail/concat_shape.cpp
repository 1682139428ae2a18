// EXPECT: ETNN_CONCAT_SHAPE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<1, 6, 6> >> nn::concat(nn::flatten, nn::conv2d<2, 3> >> nn::flatten));
#else
using Net = decltype(nn::input<1, 6, 6> >> nn::concat(nn::flatten, nn::conv2d<2, 3>));
#endif
int main() { etnn::Model<Net> model(0); }
