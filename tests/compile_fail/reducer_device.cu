// EXPECT: ETNN_REDUCER_DEVICE
#include <etnn/etnn.hpp>
namespace nn = etnn::nn;
// A reducer of host memory (as etnn::dist::Mpi) given a CUDA model.
struct HostReducer : etnn::dist::Local {
#ifdef ETNN_CONTROL
  using memory = etnn::Cuda;
#else
  using memory = etnn::Cpu;
#endif
};
int main() {
  etnn::Model<decltype(nn::input<4> >> nn::linear<2>), float, etnn::Cuda> model(0);
  HostReducer reducer;
  etnn::optim::SGD opt(model, {.lr = 0.1f}, reducer);
}
