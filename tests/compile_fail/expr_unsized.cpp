// EXPECT: ETNN_EXPR_UNSIZED
#include <etnn/etnn.hpp>
#include <vector>
int main() {
  std::vector<float> a(4, 1.0f), out(4);
#ifdef ETNN_CONTROL
  etnn::assign(etnn::Cpu{}, out.data(), etnn::expr::ref(a.data(), 4) + 2.0f);
#else
  etnn::assign(etnn::Cpu{}, out.data(), etnn::expr::scalar(1.0f) + 2.0f);
#endif
}
