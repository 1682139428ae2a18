#pragma once
// Private to optim/: include <etnn/optim/optim.hpp> or <etnn/etnn.hpp>.
// Where a data-parallel optimizer keeps its model's gradients. When the reducer offers memory it
// sums in place (dist::Mpi with every rank on one machine: Mpi::shared_storage) and the parameter
// set can keep its gradients elsewhere (Model::keep_gradients_in), the gradients move into that
// memory for the optimizer's life, as PyTorch's DistributedDataParallel makes them views of its
// buckets with gradient_as_bucket_view: backward writes straight into memory every rank reads,
// and each bucket's allreduce is one read and one write per value and rank, with no copy into a
// transport buffer and back (half the memory traffic), and the model's own buffer is released
// meanwhile. When the optimizer goes, the model gets its gradients back in a buffer of its own.
// Otherwise nothing changes.
#include <cstddef>
#include <utility>

#include "../dist/reducer.hpp"
#include "parameter_set.hpp"

namespace etnn::optim::detail {

template <class R, class P>
concept SumsInPlace = requires(R& r, P& p, typename P::value_type* storage) {
  { r.template shared_storage<typename P::value_type>(std::size_t{1}).data() } -> std::same_as<decltype(storage)>;
  p.keep_gradients_in(storage);
};

// The reducer's storage type (dist::SharedStorage<T>), or nothing.
template <class R, class P>
struct StorageOf {
  struct type {};
};
template <class R, class P>
  requires SumsInPlace<R, P>
struct StorageOf<R, P> {
  using type = decltype(std::declval<R&>().template shared_storage<typename P::value_type>(std::size_t{}));
};

template <dist::Reducer R, ParameterSet P>
class GradientStorage {
 public:
  GradientStorage() = default;
  GradientStorage(const GradientStorage&) = delete;
  GradientStorage& operator=(const GradientStorage&) = delete;
  // Brings the gradients back into the parameter set's own memory, unless another optimizer has
  // taken them into its storage since. The parameter set outlives its optimizer.
  ~GradientStorage() {
    if constexpr (SumsInPlace<R, P>)
      if (in_reducer_memory()) params_->keep_gradients_in(nullptr);
  }

  // Moves params' gradients into memory the reducer sums in place, where it has some (collective:
  // every rank calls this with the same parameter set type).
  void keep_in(R& reducer, P& params) {
    if constexpr (SumsInPlace<R, P>) {
      storage_ = reducer.template shared_storage<typename P::value_type>(P::flat_size);
      if (!storage_) return;
      params.keep_gradients_in(storage_.data());
      params_ = &params;
    }
  }

  // True while the gradients live in this storage.
  bool in_reducer_memory() const noexcept {
    if constexpr (SumsInPlace<R, P>)
      return params_ != nullptr && params_->gradients() == storage_.data();
    else
      return false;
  }

 private:
  typename StorageOf<R, P>::type storage_{};
  P* params_ = nullptr;
};

}  // namespace etnn::optim::detail
