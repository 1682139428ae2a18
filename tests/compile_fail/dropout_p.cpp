// EXPECT: ETNN_DROPOUT_P
#include <etnn/etnn.hpp>
#include <ratio>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<8> >> nn::dropout_with<std::ratio<9, 10>>);
#else
using Net = decltype(nn::input<8> >> nn::dropout_with<std::ratio<1, 1>>);
#endif
int main() { etnn::Model<Net> model(0); }
