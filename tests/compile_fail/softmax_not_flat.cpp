// EXPECT: ETNN_SHAPE_MISMATCH: softmax
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Net = decltype(nn::input<2, 5> >> nn::flatten >> nn::softmax);
#else
using Net = decltype(nn::input<2, 5> >> nn::softmax);
#endif
int main() { etnn::Model<Net> model(0); }
