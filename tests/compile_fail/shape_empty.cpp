// EXPECT: ETNN_SHAPE_EMPTY
#include <etnn/etnn.hpp>
#ifdef ETNN_CONTROL
using S = etnn::Shape<1>;
#else
using S = etnn::Shape<>;
#endif
int main() { return static_cast<int>(S::size); }
