// EXPECT: ETNN_LEAKY_SLOPE
#include <etnn/etnn.hpp>
#include <ratio>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Slope = std::ratio<1, 5>;
#else
using Slope = std::ratio<-1, 5>;
#endif
int main() { etnn::Model<decltype(nn::input<3> >> nn::linear<2> >> nn::leaky_relu_with<Slope>)> model(0); }
