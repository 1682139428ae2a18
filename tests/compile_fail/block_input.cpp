// EXPECT: ETNN_BLOCK_INPUT
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<4> >> nn::residual(nn::linear<4>));
#else
using Net = decltype(nn::input<4> >> nn::residual(nn::input<4> >> nn::linear<4>));
#endif
int main() { etnn::Model<Net> model(0); }
