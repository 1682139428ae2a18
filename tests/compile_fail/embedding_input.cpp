// EXPECT: ETNN_EMBEDDING_INPUT
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input_tokens<16, 100> >> nn::embedding<8>);
#else
using Net = decltype(nn::input<16> >> nn::embedding<8>);
#endif
int main() { etnn::Model<Net> model(0); }
