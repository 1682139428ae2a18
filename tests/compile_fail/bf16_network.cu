// EXPECT: ETNN_BF16_NETWORK
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
constexpr int in = 64;
#else
constexpr int in = 784;  // not a width the fused kernels take
#endif
int main() { etnn::Model<decltype(nn::input<in> >> nn::linear<64> >> nn::relu >> nn::linear<16>), etnn::bf16, etnn::Cuda> m(0); }
