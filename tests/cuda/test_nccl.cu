// etnn::dist::Nccl in one process (world size 1 on one GPU): its collectives on device and host
// memory, and a training run through it equal to one through dist::Local. Multi-rank runs need one
// GPU per rank and MPI (mpirun -np N); the collectives are the same calls.
#include <doctest/doctest.h>

#include <etnn/dist/nccl.hpp>
#include <etnn/etnn.hpp>

#include <vector>

namespace nn = etnn::nn;

namespace {
bool gpu() {
  static const bool usable = etnn::cuda::detail::cuda_unavailable_reason().empty();
  return usable;
}
using Net = decltype(nn::input<16> >> nn::linear<32> >> nn::relu >> nn::linear<4>);
}  // namespace

TEST_CASE("each reducer takes models on the memory it sums") {
  static_assert(std::is_same_v<etnn::dist::Nccl::memory, etnn::Cuda>);
  static_assert(etnn::dist::Reducer<etnn::dist::Nccl>);
  CHECK(true);
}

TEST_CASE("NCCL collectives on one rank leave device and host values as they are" * doctest::skip(!gpu())) {
  etnn::dist::Nccl nccl;
  CHECK(nccl.rank() == 0);
  CHECK(nccl.size() == 1);
  std::vector<float> values{1.5f, -2.0f, 3.25f};
  etnn::Buffer<float, etnn::Cuda> on_device(values.size());
  etnn::copy_from_host(etnn::Cuda{}, on_device.data(), values.data(), values.size());
  auto pending = nccl.start_allreduce_sum(on_device.data(), values.size());
  nccl.wait(pending);
  nccl.broadcast(on_device.data(), values.size(), 0);
  std::vector<float> back(values.size());
  etnn::copy_to_host(etnn::Cuda{}, back.data(), on_device.data(), back.size());
  CHECK(back == values);
  double flag = 1.0;  // the Trainer reduces a host count this way
  auto flag_pending = nccl.start_allreduce_sum(&flag, 1);
  while (!nccl.poll(flag_pending)) {
  }
  CHECK(flag == 1.0);
}

TEST_CASE("training through NCCL on one rank equals training without it" * doctest::skip(!gpu())) {
  const int batch = 24;
  etnn::Rng rng(3);
  std::vector<float> x(16 * batch);
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  std::vector<int> y(batch);
  for (int i = 0; i < batch; ++i) y[static_cast<std::size_t>(i)] = i % 4;
  auto train = [&](auto& reducer) {
    etnn::Model<Net, float, etnn::Cuda> model(1);
    etnn::loss::CrossEntropy ce;
    etnn::optim::SGD opt(model, {.lr = 0.1f, .momentum = 0.9f}, reducer);
    etnn::Trainer trainer(model, ce, opt);
    for (int s = 0; s < 5; ++s) trainer.step(etnn::TensorView<const float, etnn::Shape<16>>(x.data(), batch), y);
    std::vector<float> params(Net::flat_size);
    etnn::copy_to_host(etnn::Cuda{}, params.data(), model.parameters(), params.size());
    return params;
  };
  etnn::dist::Nccl nccl;
  etnn::dist::Local local;
  CHECK(train(nccl) == train(local));
}
