// EXPECT: ETNN_SHAPE_MISMATCH
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<1, 28, 28> >> nn::flatten >> nn::linear<10>);
#else
using Net = decltype(nn::input<1, 28, 28> >> nn::linear<10>);
#endif
int main() { etnn::Model<Net> model(0); }
