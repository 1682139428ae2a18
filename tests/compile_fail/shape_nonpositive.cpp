// EXPECT: ETNN_SHAPE_NONPOSITIVE
#include <etnn/etnn.hpp>
#ifdef ETNN_CONTROL
using S = etnn::Shape<2, 3>;
#else
using S = etnn::Shape<0, 3>;
#endif
int main() { return static_cast<int>(S::size); }
