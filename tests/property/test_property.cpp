// Property tests on generated instantiations (shapes.inc): linear layers, pooling and elementwise
// expressions against naive references. Conv2d is in test_property_conv.cpp (compile time).
#include "property/property.hpp"

namespace etnn::test::property {

#define ETNN_LINEAR_CASE ETNN_PROPERTY_LINEAR
#define ETNN_CONV_CASE(...)
#define ETNN_POOL_CASE ETNN_PROPERTY_POOL
#define ETNN_EXPR_CASE(...)
TEST_CASE("property: linear and pooling layers of generated shapes equal the naive references, gradients check") {
#include "shapes.inc"
}
#undef ETNN_LINEAR_CASE
#undef ETNN_POOL_CASE
#undef ETNN_EXPR_CASE

#define ETNN_LINEAR_CASE(...)
#define ETNN_POOL_CASE(...)
#define ETNN_EXPR_CASE ETNN_PROPERTY_EXPR
TEST_CASE("property: generated elementwise expressions evaluate in one pass to what scalar code computes") {
#include "shapes.inc"
}
#undef ETNN_LINEAR_CASE
#undef ETNN_CONV_CASE
#undef ETNN_POOL_CASE
#undef ETNN_EXPR_CASE

}  // namespace etnn::test::property
