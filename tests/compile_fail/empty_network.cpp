// EXPECT: ETNN_EMPTY_NETWORK
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = nn::Sequential<nn::Input<3>, nn::ReLU>;
#else
using Net = nn::Sequential<nn::Input<3>>;
#endif
int main() { etnn::Model<Net> model(0); }
