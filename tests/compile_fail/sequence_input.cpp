// EXPECT: ETNN_SEQUENCE_INPUT
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<16, 8> >> nn::multi_head_attention<2, true>);
#else
using Net = decltype(nn::input<128> >> nn::multi_head_attention<2, true>);
#endif
int main() { etnn::Model<Net> model(0); }
