// The default example: a 784-512-10 ReLU MLP trained with SGD on Fashion-MNIST.
//   mnist_mlp [--data DIR] [--epochs 10] [--batch 64] [--lr 0.01] [--momentum 0] [--threads 0]
//             [--seed 0] [--limit N] [--dist local|mpi|nccl] [--save PATH] [--load PATH]
//             [--resume PATH] [--log FILE.csv] [--device auto|cpu|cuda]
// --load PATH starts from saved weights (with --epochs 0 it only evaluates them); --save PATH
// writes the trained weights (safetensors, PyTorch state_dict names). --resume PATH continues
// from the training state in PATH if it exists and saves the state there after every epoch, so
// a run that stops resumes where it was. --log appends a CSV row per epoch (scripts/plot_training.py
// draws it).
// Data parallel: mpirun -np 2 mnist_mlp --dist mpi --threads 1   (--batch is per rank; rank 0 prints)
// On GPUs: mpirun -np 2 mnist_mlp_cuda --dist nccl                 (one GPU per rank, NCCL reduces)
// --device: built by nvcc (mnist_mlp_cuda), auto trains on the GPU when one is usable and says why
// not otherwise; cuda insists (exit 2 without a GPU). The MPI reducer works on the CPU.
// DIR holds the four MNIST-format files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), raw or .gz. Pixels are scaled to [0, 1],
// then normalised with the training set's mean and standard deviation.
#include "support/cli.hpp"
#include "support/training.hpp"
#if defined(ETNN_WITH_MPI)
#include <etnn/dist/mpi.hpp>
#endif
#if defined(ETNN_WITH_NCCL)
#include <etnn/dist/nccl.hpp>
#endif

#include <cstdio>
#include <filesystem>
#include <string>
#include <type_traits>

namespace nn = etnn::nn;
namespace fs = std::filesystem;

constexpr auto mlp = nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>;
using Mlp = decltype(mlp);

namespace {

struct Options {
  fs::path data = example::default_data_dir;
  int epochs = 10;
  int batch = 64;
  float lr = 0.01f;
  float momentum = 0.0f;
  int threads = 0;  // 0: the default (OMP_NUM_THREADS, else one per core)
  std::uint64_t seed = 0;
  long limit = 0;   // train on the first N samples only (0: all)
  std::string dist = "local";
  fs::path save, load;  // checkpoints (empty: none)
  fs::path resume;      // training state, read if present and written after every epoch
  fs::path log;         // CSV of per-epoch metrics
  std::string device = "auto";
};

constexpr const char* usage =
    "usage: mnist_mlp [--data DIR] [--epochs N] [--batch N] [--lr X] [--momentum X]\n"
    "                 [--threads N] [--seed N] [--limit N] [--dist local|mpi|nccl]\n"
    "                 [--save PATH] [--load PATH] [--resume PATH] [--log FILE.csv]\n"
    "                 [--device auto|cpu|cuda]\n";

}  // namespace

// Loads the data, trains and evaluates; `world` is dist::Local or dist::Mpi (ranks, data shares,
// the epoch's statistics), `reducer` what sums the gradients: the world itself, or dist::Nccl on
// GPUs. Every rank trains on its share; rank 0 prints.
template <class Device, class World, class Reducer>
int run(const Options& opt, const std::array<fs::path, 4>& files, World& world, Reducer& reducer) {
  const bool root = world.rank() == 0;
  auto [train, test, mean, stddev] = example::load_mnist<etnn::Shape<784>>(files, opt.limit);

  etnn::Model<Mlp, float, Device> model{opt.seed};
  if (!opt.load.empty()) etnn::io::load(model, opt.load);  // every rank; the optimizer broadcasts rank 0's anyway
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD sgd(model, {.lr = opt.lr, .momentum = opt.momentum}, reducer);
  etnn::Trainer trainer(model, loss, sgd);
  etnn::data::DataLoader loader(
      train, {.batch = opt.batch,
              .sampler = etnn::data::DistributedSampler(world, {.shuffle = true, .seed = opt.seed})});

  if (root) {
    std::printf("etnn mnist_mlp: %s, %zu parameters\n", Mlp::describe().c_str(), Mlp::num_params);
    std::fputs(etnn::summary<Mlp>().c_str(), stdout);
    std::printf("data %s: %zu train, %zu test (normalised with mean %.4f, std %.4f); batch %d, lr %g, "
                "momentum %g, on %s",
                opt.data.c_str(), train.size(), test.size(), mean, stddev, opt.batch, opt.lr, opt.momentum,
                Device::name.data());
    if constexpr (std::is_same_v<Device, etnn::Cpu>) std::printf(" with %d threads", etnn::num_threads());
    if (world.size() > 1) std::printf(" x %d ranks (batch per rank)", world.size());
    std::printf("\n");
  }
  if (!opt.resume.empty() && fs::exists(opt.resume)) {
    etnn::io::load_state(trainer, loader, opt.resume);
    if (root) std::printf("resumed from %s at epoch %d\n", opt.resume.c_str(), loader.epoch() + 1);
  }
  std::FILE* log = nullptr;
  if (root && !opt.log.empty()) {
    const bool fresh = !fs::exists(opt.log);
    log = std::fopen(opt.log.c_str(), "a");
    if (log == nullptr) throw etnn::IoError("mnist_mlp: cannot open the log file '" + opt.log.string() + "'");
    if (fresh) std::fputs("epoch,step,loss,accuracy,samples_per_s\n", log);
  }
  double accuracy = etnn::evaluate(model, test, etnn::metrics::accuracy);
  for (int epoch = loader.epoch(); epoch < opt.epochs; ++epoch) {
    auto stats = example::run_epoch(
        loader, epoch, opt.epochs, train.size() / static_cast<std::size_t>(world.size()),
        [&](const auto& batch) { return trainer.step(batch); }, /*show_progress=*/root);
    double totals[2] = {stats.loss_sum, stats.samples};  // this rank's; summed over ranks
    auto pending = world.start_allreduce_sum(totals, 2);
    world.wait(pending);
    stats.loss_sum = totals[0], stats.samples = totals[1];
    accuracy = etnn::evaluate(model, test, etnn::metrics::accuracy);
    if (root) {
      example::print_epoch(epoch, opt.epochs, stats, accuracy);
      if (log != nullptr) {
        std::fprintf(log, "%d,%lld,%.6f,%.6f,%.1f\n", epoch + 1, static_cast<long long>(sgd.steps()),
                     stats.mean_loss(), accuracy, stats.samples_per_second());
        std::fflush(log);
      }
      if (!opt.resume.empty()) etnn::io::save_state(trainer, loader, opt.resume);
    }
  }
  if (log != nullptr) std::fclose(log);
  if (root) std::printf("final test accuracy %.4f\n", accuracy);
  if (root && !opt.save.empty()) {
    etnn::io::save(model, opt.save);
    std::printf("saved %s\n", opt.save.c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  Options opt;
  example::parse_flags(argc, argv, usage,
                       {{"--data", &opt.data}, {"--epochs", &opt.epochs}, {"--batch", &opt.batch},
                        {"--lr", &opt.lr}, {"--momentum", &opt.momentum}, {"--threads", &opt.threads},
                        {"--seed", &opt.seed}, {"--limit", &opt.limit}, {"--dist", &opt.dist},
                        {"--save", &opt.save}, {"--load", &opt.load}, {"--resume", &opt.resume},
                        {"--log", &opt.log}, {"--device", &opt.device}});
  if (opt.epochs < 0 || opt.batch <= 0 || opt.limit < 0 ||
      (opt.dist != "local" && opt.dist != "mpi" && opt.dist != "nccl"))
    example::exit_with_usage(usage, 2);
  etnn::set_num_threads(opt.threads);
  if ((opt.dist == "mpi" && opt.device == "cuda") || (opt.dist == "nccl" && opt.device == "cpu")) {
    std::fprintf(stderr, "mnist_mlp: --dist mpi trains on the CPU and --dist nccl on GPUs; leave out --device\n");
    return 2;
  }
  // --dist nccl needs a usable GPU (else it exits 2 saying why), --dist mpi the CPU.
  const etnn::DeviceKind device = opt.dist == "mpi"    ? etnn::DeviceKind::cpu
                                  : opt.dist == "nccl" ? example::parse_device("cuda", "mnist_mlp", usage)
                                                       : example::parse_device(opt.device, "mnist_mlp", usage);
  return example::run_with_mnist_files("mnist_mlp", opt.data, [&](const auto& files) {
    if (opt.dist == "mpi") {
#if defined(ETNN_WITH_MPI)
      etnn::dist::Mpi world(argc, argv);
      return run<etnn::Cpu>(opt, files, world, world);
#else
      std::fprintf(stderr, "mnist_mlp: --dist mpi needs a build with MPI (install libopenmpi-dev and rebuild)\n");
      return 2;
#endif
    }
    if (opt.dist == "nccl") {
#if defined(ETNN_WITH_MPI) && defined(ETNN_WITH_NCCL)
      etnn::dist::Mpi world(argc, argv);
      etnn::dist::Nccl nccl(world);  // before the model: picks this rank's GPU
      return run<etnn::Cuda>(opt, files, world, nccl);
#else
      std::fprintf(stderr, "mnist_mlp: --dist nccl needs the nvcc build (mnist_mlp_cuda) with MPI and NCCL\n");
      return 2;
#endif
    }
    etnn::dist::Local local;
    return etnn::dispatch(device, [&]<class Device>(Device) { return run<Device>(opt, files, local, local); });
  });
}
