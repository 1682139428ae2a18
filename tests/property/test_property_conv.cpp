// Property tests on generated instantiations (shapes.inc): conv2d against the naive convolution,
// and gradient checks. In a file of its own to keep each file's compile time short.
#include "property/property.hpp"

namespace etnn::test::property {

#define ETNN_LINEAR_CASE(...)
#define ETNN_CONV_CASE ETNN_PROPERTY_CONV
#define ETNN_POOL_CASE(...)
#define ETNN_EXPR_CASE(...)
TEST_CASE("property: conv2d layers of generated shapes equal the naive convolution, gradients check") {
#include "shapes.inc"
}
#undef ETNN_LINEAR_CASE
#undef ETNN_CONV_CASE
#undef ETNN_POOL_CASE
#undef ETNN_EXPR_CASE

}  // namespace etnn::test::property
