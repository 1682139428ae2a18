// EXPECT: ETNN_REDUCER: the reducer has no `bool poll\(Pending&\)` member
#include <etnn/etnn.hpp>
#include <cstddef>
namespace nn = etnn::nn;
struct World {
  struct Pending {};
  int rank() const { return 0; }
  int size() const { return 1; }
  template <class T> void broadcast(T*, std::size_t, int) {}
  template <class T> Pending start_allreduce_sum(T*, std::size_t) { return {}; }
#ifdef ETNN_CONTROL
  bool poll(Pending&) { return true; }
#endif
  void wait(Pending&) {}
  void abort(const char*) {}
};
int main() {
  etnn::Model<decltype(nn::input<3> >> nn::linear<2>)> model(0);
  World world;
  etnn::optim::SGD opt(model, {.lr = 0.1f}, world);
}
