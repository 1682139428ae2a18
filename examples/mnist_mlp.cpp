// The default example: a 784-512-10 ReLU MLP trained with SGD on Fashion-MNIST.
//   mnist_mlp [--data DIR] [--epochs 10] [--batch 64] [--lr 0.01] [--momentum 0] [--threads 0]
//             [--seed 0] [--limit N] [--dist local|mpi] [--save PATH] [--load PATH]
//             [--resume PATH] [--log FILE.csv]
// --load PATH starts from saved weights (with --epochs 0 it only evaluates them); --save PATH
// writes the trained weights (safetensors, PyTorch state_dict names). --resume PATH continues
// from the training state in PATH if it exists and saves the state there after every epoch, so
// a run that stops resumes where it was. --log appends a CSV row per epoch (scripts/plot_training.py
// draws it).
// Data parallel: mpirun -np 2 mnist_mlp --dist mpi --threads 1   (--batch is per rank; rank 0 prints)
// DIR holds the four MNIST-format files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), raw or .gz. Pixels are scaled to [0, 1],
// then normalised with the training set's mean and standard deviation.
#include <etnn/etnn.hpp>
#if defined(ETNN_WITH_MPI)
#include <etnn/dist/mpi.hpp>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace nn = etnn::nn;
namespace fs = std::filesystem;

constexpr auto mlp = nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>;
using Mlp = decltype(mlp);

namespace {

struct Options {
  fs::path data = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  int batch = 64;
  float lr = 0.01f;
  float momentum = 0.0f;
  int threads = 0;  // 0: OpenMP's default
  std::uint64_t seed = 0;
  long limit = 0;   // train on the first N samples only (0: all)
  std::string dist = "local";
  fs::path save, load;  // checkpoints (empty: none)
  fs::path resume;      // training state, read if present and written after every epoch
  fs::path log;         // CSV of per-epoch metrics
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: mnist_mlp [--data DIR] [--epochs N] [--batch N] [--lr X] [--momentum X]\n"
               "                 [--threads N] [--seed N] [--limit N] [--dist local|mpi]\n"
               "                 [--save PATH] [--load PATH] [--resume PATH] [--log FILE.csv]\n");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") usage(0);
    if (i + 1 >= argc) usage(2);
    const char* value = argv[++i];
    try {
      if (flag == "--data") o.data = value;
      else if (flag == "--epochs") o.epochs = std::stoi(value);
      else if (flag == "--batch") o.batch = std::stoi(value);
      else if (flag == "--lr") o.lr = std::stof(value);
      else if (flag == "--momentum") o.momentum = std::stof(value);
      else if (flag == "--threads") o.threads = std::stoi(value);
      else if (flag == "--seed") o.seed = std::stoull(value);
      else if (flag == "--limit") o.limit = std::stol(value);
      else if (flag == "--dist") o.dist = value;
      else if (flag == "--save") o.save = value;
      else if (flag == "--load") o.load = value;
      else if (flag == "--resume") o.resume = value;
      else if (flag == "--log") o.log = value;
      else usage(2);
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "mnist_mlp: %s needs a number, got '%s'\n", argv[i - 1], value);
      std::exit(2);
    }
  }
  if (o.epochs < 0 || o.batch <= 0 || o.limit < 0 || (o.dist != "local" && o.dist != "mpi")) usage(2);
  return o;
}

// DIR/name or DIR/name.gz, whichever exists.
std::optional<fs::path> find_file(const fs::path& dir, const std::string& name) {
  for (const fs::path& candidate : {dir / name, dir / (name + ".gz")})
    if (fs::exists(candidate)) return candidate;
  return std::nullopt;
}

}  // namespace

// Loads the data, trains and evaluates; `world` is dist::Local or dist::Mpi. Every rank trains on
// its share; rank 0 prints.
template <class World>
int run(const Options& opt, const fs::path (&files)[4], World& world) {
  const bool root = world.rank() == 0;
  auto train = etnn::data::load_idx<etnn::Shape<784>>(files[0], files[1], /*num_classes=*/10);
  auto test = etnn::data::load_idx<etnn::Shape<784>>(files[2], files[3], /*num_classes=*/10);
  if (opt.limit > 0 && static_cast<std::size_t>(opt.limit) < train.size())
    train = train.subset(0, static_cast<std::size_t>(opt.limit));
  const float mean = static_cast<float>(etnn::data::mean(train));
  const float stddev = static_cast<float>(etnn::data::stddev(train));
  train.normalize(mean, stddev);
  test.normalize(mean, stddev);

  etnn::Model<Mlp, float, etnn::Cpu> model{opt.seed};
  if (!opt.load.empty()) etnn::io::load(model, opt.load);  // every rank; the optimizer broadcasts rank 0's anyway
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD sgd(model, {.lr = opt.lr, .momentum = opt.momentum}, world);
  etnn::Trainer trainer(model, loss, sgd);
  etnn::data::DataLoader loader(
      train, {.batch = opt.batch,
              .sampler = etnn::data::DistributedSampler(world, {.shuffle = true, .seed = opt.seed})});

  if (root) {
    std::printf("etnn mnist_mlp: %s, %zu parameters\n", Mlp::describe().c_str(), Mlp::num_params);
    std::fputs(etnn::summary<Mlp>().c_str(), stdout);
    std::printf("data %s: %zu train, %zu test (normalised with mean %.4f, std %.4f); batch %d, lr %g, "
                "momentum %g, %d threads",
                opt.data.c_str(), train.size(), test.size(), mean, stddev, opt.batch, opt.lr, opt.momentum,
                etnn::num_threads());
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
    loader.set_epoch(epoch);
    etnn::ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(opt.epochs),
                          train.size() / static_cast<std::size_t>(world.size()));
    double totals[2] = {0, 0};  // loss * samples, samples; summed over ranks after the epoch
    for (auto batch : loader) {
      totals[0] += static_cast<double>(trainer.step(batch)) * batch.x.batch();
      totals[1] += batch.x.batch();
      if (root) bar.update(static_cast<std::size_t>(totals[1]), totals[0] / totals[1]);
    }
    const double seconds = bar.seconds();
    bar.finish();
    auto pending = world.start_allreduce_sum(totals, 2);
    world.wait(pending);
    accuracy = etnn::evaluate(model, test, etnn::metrics::accuracy);
    if (root) {
      std::printf("epoch %2d/%d  train loss %.4f  test accuracy %.4f  %.0f samples/s  %.2f s\n", epoch + 1,
                  opt.epochs, totals[0] / totals[1], accuracy, totals[1] / seconds, seconds);
      std::fflush(stdout);
      if (log != nullptr) {
        std::fprintf(log, "%d,%lld,%.6f,%.6f,%.1f\n", epoch + 1, static_cast<long long>(sgd.steps()),
                     totals[0] / totals[1], accuracy, totals[1] / seconds);
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
  const Options opt = parse(argc, argv);
  etnn::set_num_threads(opt.threads);

  const char* names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                         "t10k-labels-idx1-ubyte"};
  fs::path files[4];
  for (int i = 0; i < 4; ++i) {
    const auto found = find_file(opt.data, names[i]);
    if (!found) {
      std::fprintf(stderr,
                   "mnist_mlp: %s[.gz] not found in %s\n"
                   "  install Fashion-MNIST with: sudo apt-get install dataset-fashion-mnist\n"
                   "  or pass --data DIR with the four MNIST-format files (raw or .gz)\n",
                   names[i], opt.data.c_str());
      return 2;
    }
    files[i] = *found;
  }

  try {
    if (opt.dist == "mpi") {
#if defined(ETNN_WITH_MPI)
      etnn::dist::Mpi world(argc, argv);
      return run(opt, files, world);
#else
      std::fprintf(stderr, "mnist_mlp: --dist mpi needs a build with MPI (install libopenmpi-dev and rebuild)\n");
      return 2;
#endif
    }
    etnn::dist::Local local;
    return run(opt, files, local);
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "mnist_mlp: %s\n", e.what());
    return 1;
  }
}
