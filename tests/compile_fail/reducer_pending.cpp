// EXPECT: ETNN_REDUCER: the reducer has no `Pending` type
#include <etnn/etnn.hpp>
#include <cstddef>
namespace nn = etnn::nn;
struct Handle {};
struct World {
#ifdef ETNN_CONTROL
  using Pending = Handle;
#endif
  int rank() const { return 0; }
  int size() const { return 1; }
  template <class T> void broadcast(T*, std::size_t, int) {}
  template <class T> Handle start_allreduce_sum(T*, std::size_t) { return {}; }
  bool poll(Handle&) { return true; }
  void wait(Handle&) {}
  void abort(const char*) {}
};
int main() {
  etnn::Model<decltype(nn::input<3> >> nn::linear<2>)> model(0);
  World world;
  etnn::optim::SGD opt(model, {.lr = 0.1f}, world);
}
