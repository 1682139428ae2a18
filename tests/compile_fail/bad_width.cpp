// EXPECT: ETNN_BAD_WIDTH
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
#ifdef ETNN_CONTROL
constexpr int width = 1;
#else
constexpr int width = 0;
#endif
int main() { etnn::Model<decltype(nn::input<3> >> nn::linear<width>)> model(0); }
