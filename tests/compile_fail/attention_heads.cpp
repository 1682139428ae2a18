// EXPECT: ETNN_ATTENTION_HEADS
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<16, 10> >> nn::multi_head_attention<2>);
#else
using Net = decltype(nn::input<16, 10> >> nn::multi_head_attention<3>);
#endif
int main() { etnn::Model<Net> model(0); }
