// EXPECT: ETNN_SCALAR_TYPE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Scalar = double;
#else
using Scalar = int;
#endif
int main() { etnn::Model<decltype(nn::input<3> >> nn::linear<2>), Scalar> model(0); }
