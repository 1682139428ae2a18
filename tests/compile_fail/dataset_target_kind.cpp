// EXPECT: ETNN_DATASET_TARGET
// A dataset whose target kind is none of class indices, a Shape of real values or MultiHot<K>.
#include <etnn/etnn.hpp>
#include <vector>
int main() {
#ifdef ETNN_CONTROL
  etnn::data::Dataset<etnn::Shape<2>, etnn::Shape<1>> data(std::vector<float>{1, 2}, std::vector<float>{0.5f});
#else
  etnn::data::Dataset<etnn::Shape<2>, float> data(std::vector<float>{1, 2}, std::vector<float>{0.5f});
#endif
  return static_cast<int>(data.size()) - 1;
}
