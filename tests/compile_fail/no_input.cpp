// EXPECT: ETNN_NO_INPUT
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<4> >> nn::linear<5> >> nn::relu);
#else
using Net = decltype(nn::linear<5> >> nn::relu);
#endif
int main() { etnn::Model<Net> model(0); }
