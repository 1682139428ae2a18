// Failure modes of a 2-rank job, one per argument; each must end every rank with a non-zero exit
// (expect_failure.sh checks the exit, the time it took and the message):
//   kill      rank 1 kills itself with SIGKILL during training
//   train     every rank trains for up to 100 s, saying so on standard error after 5 steps, for
//             faults injected from outside (multihost_fault.sh: a cut link, a killed or stopped
//             host); ending without an error is a failure
//   stall     rank 1 stops taking part; rank 0's allreduce times out (ETNN_DIST_TIMEOUT)
//   stall-large  the same with a buffer large enough for the shared-memory sum
//   mismatch  rank 1 reduces one element more than rank 0 (caught with ETNN_DIST_DEBUG=1)
//   abort     rank 1 meets an ordinary error (a bad label) and ends the job with world.abort()
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

#include <etnn/dist/mpi.hpp>
#include <etnn/etnn.hpp>

namespace nn = etnn::nn;

int main(int argc, char** argv) {
  etnn::dist::Mpi world(argc, argv);
  const std::string_view mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "kill" || mode == "train") {
      // 50k parameters: gradients large enough to be summed through shared memory on one machine.
      etnn::Model<decltype(nn::input<784> >> nn::linear<64> >> nn::relu >> nn::linear<10>)> model(0);
      etnn::loss::CrossEntropy loss;
      etnn::optim::SGD opt(model, {.lr = 0.01f}, world);
      etnn::Trainer trainer(model, loss, opt);
      etnn::Tensor<float, etnn::Shape<784>> x(16);
      std::fill(x.data(), x.data() + x.size(), 0.5f);
      const std::vector<int> y(16, 1);
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(100);
      for (int step = 0; std::chrono::steady_clock::now() < end; ++step) {
        if (step == 5 && mode == "kill" && world.rank() == 1) std::raise(SIGKILL);
        if (step == 5 && mode == "train") {
          std::fprintf(stderr, "dist_failure: rank %d of %d training\n", world.rank(), world.size());
          std::fflush(stderr);
        }
        trainer.step(x, y);
      }
    } else if (mode == "stall" || mode == "stall-large") {
      std::vector<float> g(mode == "stall" ? 10 : 1 << 20, 1.0f);
      if (world.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
      world.allreduce_sum(g.data(), g.size());
    } else if (mode == "abort") {
      std::vector<float> g(10, 1.0f);
      if (world.rank() == 1) {
        try {
          etnn::Tensor<float, etnn::Shape<3>> logits(1);
          const std::vector<int> bad_label{7};
          std::vector<float> grad(3);
          etnn::loss::CrossEntropy{}.value_and_grad(etnn::Cpu{}, etnn::const_view(logits), std::span<const int>(bad_label),
                                                    grad.data());
        } catch (const etnn::ShapeError& e) {
          world.abort(e.what());
        }
      }
      world.allreduce_sum(g.data(), g.size());
    } else if (mode == "mismatch") {
      std::vector<float> g(11, 1.0f);
      world.allreduce_sum(g.data(), world.rank() == 1 ? 11 : 10);
    }
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "dist_failure: mode '%.*s' ended without an error\n", static_cast<int>(mode.size()), mode.data());
  return 0;
}
