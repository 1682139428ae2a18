// EXPECT: ETNN_DEVICE_LAYER
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Device = etnn::Cpu;
#else
using Device = etnn::Cuda;
#endif
int main() { etnn::Model<decltype(nn::input<4> >> nn::linear<4> >> nn::dropout >> nn::linear<2>), float, Device> m(0); }
