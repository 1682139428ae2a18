// EXPECT: ETNN_INPUT_NOT_FIRST
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
constexpr auto net = nn::input<3> >> nn::linear<2>;
#else
constexpr auto net = nn::input<3> >> nn::linear<2> >> nn::input<2>;
#endif
int main() { (void)net; }
