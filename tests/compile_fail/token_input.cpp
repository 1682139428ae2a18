// EXPECT: ETNN_TOKEN_INPUT
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input_tokens<16, 100> >> nn::embedding<8> >> nn::flatten >> nn::linear<4>);
#else
using Net = decltype(nn::input_tokens<16, 100> >> nn::linear<4>);
#endif
int main() { etnn::Model<Net> model(0); }
