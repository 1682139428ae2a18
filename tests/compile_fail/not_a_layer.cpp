// EXPECT: ETNN_NOT_A_LAYER
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
constexpr auto net = nn::input<3> >> nn::relu;
#else
constexpr auto net = nn::input<3> >> 42;
#endif
int main() { (void)net; }
