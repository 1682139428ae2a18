// EXPECT: ETNN_RESIDUAL_SHAPE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<16> >> nn::residual(nn::linear<8> >> nn::relu >> nn::linear<16>));
#else
using Net = decltype(nn::input<16> >> nn::residual(nn::linear<8> >> nn::relu >> nn::linear<8>));
#endif
int main() { etnn::Model<Net> model(0); }
