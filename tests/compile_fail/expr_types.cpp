// EXPECT: ETNN_EXPR_TYPES
#include <etnn/etnn.hpp>
#include <vector>
int main() {
  std::vector<float> a(4, 1.0f), out(4);
  std::vector<double> b(4, 2.0);
#ifdef ETNN_CONTROL
  etnn::assign(etnn::Cpu{}, out.data(), etnn::expr::ref(a.data(), 4) + etnn::expr::ref(a.data(), 4));
#else
  etnn::assign(etnn::Cpu{}, out.data(), etnn::expr::ref(a.data(), 4) + etnn::expr::ref(b.data(), 4));
#endif
}
