#pragma once
// Private to data/: include <etnn/data/data.hpp> or <etnn/etnn.hpp>.
// Compile-time checks of datasets: the kind of their targets.
// Each check is a consteval function whose static_assert message starts with a grep-able key
// (ETNN_...) and says how to fix it; the node that needs it writes
// `static_assert(check::something<...>());`. tests/compile_fail/ holds one program per message.

namespace etnn::data::check {

template <bool Known>
consteval bool target_kind() {
  static_assert(Known,
                "ETNN_DATASET_TARGET: Dataset<X, Y>'s Y must be etnn::data::ClassIndices (the default: one int "
                "per sample), an etnn::Shape<K...> (real-valued target rows) or etnn::data::MultiHot<K> "
                "(K values of 0 or 1) or etnn::data::SequenceLabels<T> (a class index per position)");
  return true;
}

template <int K>
consteval bool labels_per_sample() {
  static_assert(K > 0, "ETNN_DATASET_TARGET: MultiHot<K> and SequenceLabels<K> need K > 0 labels per sample");
  return true;
}

}  // namespace etnn::data::check
