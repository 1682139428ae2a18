// EXPECT: ETNN_DEVICE_UNAVAILABLE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
using Device = etnn::Cpu;
#else
using Device = etnn::Cuda;
#endif
int main() { etnn::Model<decltype(nn::input<3> >> nn::linear<2>), float, Device> model(0); }
