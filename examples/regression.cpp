// Robust regression: the same MLP trained twice on data whose training targets hold gross
// outliers, once with the mean squared error and once with the Huber loss, then both scored on a
// clean test set.
//   regression [--samples 20000] [--outliers 0.15] [--epochs 20] [--batch 64] [--lr 0.001]
//              [--threads 1] [--seed 0]
// One thread by default: batches of a 4801-parameter MLP are too small to share between cores.
//
// Data (synthetic, from etnn::Rng seeded with --seed; --samples training and --samples / 4 test
// samples):
//   x ~ U(-1, 1)^8
//   f(x) = sin(pi x0) + 0.5 cos(pi x1) + x2 x3 + 0.5 x4^2 + 0.3 (x5 - x6 + x7)
//   t = f(x) + e,  e ~ N(0, 0.1^2)                               (clean target)
// and for a fraction --outliers of the TRAINING samples t is replaced by
//   t = f(x) + s m,  s = +-1 with equal probability,  m ~ U(10, 30) sigma_f
// (sigma_f = 0.92 is the standard deviation of f: an outlier is 9 to 28 off, against noise of
// 0.1). The test targets are the clean t.
//
// Why Huber wins: with residual d = y - t,
//   MSE:   l = d^2,                                   dl/dy = 2 d         (unbounded)
//   Huber: l = d^2 / 2 if |d| < delta, else delta (|d| - delta / 2),
//          dl/dy = clamp(d, -delta, delta)                                 (bounded by delta)
// An outlier pulls an MSE fit in proportion to its size, about 20 times harder than an ordinary
// sample, so every batch's gradient is dominated by its few outliers; under Huber an outlier
// pulls no harder than a sample that is off by delta, and the fit follows the bulk of the data.
//
// The data is a Dataset<Shape<8>, Shape<1>>: each sample carries its real-valued target, so the
// DataLoader's batches go straight to the Trainer, and etnn::evaluate scores the test set.
#include <cmath>
#include <cstdio>
#include <numbers>
#include <vector>

#include "support/cli.hpp"
#include "support/training.hpp"

namespace nn = etnn::nn;

// PyTorch: Linear(8, 64), ReLU, Linear(64, 64), ReLU, Linear(64, 1)
constexpr auto mlp = nn::input<8> >> nn::linear<64> >> nn::relu >> nn::linear<64> >> nn::relu >> nn::linear<1>;
using Mlp = decltype(mlp);
using Features = etnn::Shape<8>;
using Target = etnn::Shape<1>;

namespace {

constexpr const char* usage =
    "usage: regression [--samples N] [--outliers FRACTION] [--epochs N] [--batch N] [--lr X]\n"
    "                  [--threads N] [--seed N]\n";

struct Options {
  long samples = 20000;  // training samples; the test set has samples / 4
  float outliers = 0.15f;
  int epochs = 20;
  int batch = 64;
  float lr = 1e-3f;
  int threads = 1;  // 0: the default (OMP_NUM_THREADS, else one per core)
  std::uint64_t seed = 0;
};

constexpr double noise_sigma = 0.1;

// f(x) above; x points at 8 values.
double target_function(const float* x) {
  constexpr double pi = std::numbers::pi;
  return std::sin(pi * x[0]) + 0.5 * std::cos(pi * x[1]) + x[2] * x[3] + 0.5 * x[4] * x[4] +
         0.3 * (x[5] - x[6] + x[7]);
}

// A standard normal draw: Box-Muller, z = sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1].
double normal(etnn::Rng& rng) {
  const double u1 = 1.0 - rng.uniform();
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// n samples: features (n, 8) and targets (n, 1).
struct Split {
  etnn::data::Dataset<Features, Target> data;
  long corrupted = 0;
};

// sigma_f: the standard deviation of f over x ~ U(-1, 1)^8, computed in closed form:
//   Var sin(pi x0) = 1/2, Var 0.5 cos(pi x1) = 1/8, Var x2 x3 = 1/9, Var 0.5 x4^2 = 1/45,
//   Var 0.3 (x5 - x6 + x7) = 0.09 * 3 / 3 = 0.09; the terms are independent.
const double sigma_f = std::sqrt(0.5 + 0.125 + 1.0 / 9.0 + 1.0 / 45.0 + 0.09);

Split make_split(long n, double outlier_fraction, etnn::Rng& rng) {
  std::vector<float> features(static_cast<std::size_t>(n) * Features::size);
  std::vector<float> targets(static_cast<std::size_t>(n));
  long corrupted = 0;
  for (long i = 0; i < n; ++i) {
    float* x = features.data() + static_cast<std::size_t>(i) * Features::size;
    for (std::size_t j = 0; j < Features::size; ++j) x[j] = static_cast<float>(rng.uniform(-1.0, 1.0));
    double t = target_function(x) + noise_sigma * normal(rng);
    if (rng.uniform() < outlier_fraction) {
      const double sign = rng.uniform() < 0.5 ? -1.0 : 1.0;
      t = target_function(x) + sign * rng.uniform(10.0, 30.0) * sigma_f;
      ++corrupted;
    }
    targets[static_cast<std::size_t>(i)] = static_cast<float>(t);
  }
  return {etnn::data::Dataset<Features, Target>(std::move(features), std::move(targets)), corrupted};
}

struct Errors {
  double mae, rmse, r2;
};

// Test errors against the clean targets: MAE = mean |y - t|, RMSE = sqrt(mean (y - t)^2), and
// R^2 = 1 - SS_res / SS_tot.
template <class Model>
Errors test_errors(Model& model, const Split& test) {
  namespace metrics = etnn::metrics;
  return {etnn::evaluate(model, test.data, metrics::mean_absolute_error),
          std::sqrt(etnn::evaluate(model, test.data, metrics::mean_squared_error)),
          etnn::evaluate(model, test.data, metrics::r2_score)};
}

// Trains a fresh model (initialised from --seed, batches shuffled from --seed: the same for every
// loss) and returns its test errors.
template <class Loss>
Errors fit(const char* name, Loss& loss, const Split& train, const Split& test, const Options& opt) {
  etnn::Model<Mlp> model(opt.seed);
  etnn::optim::Adam adam(model, {.lr = opt.lr});
  etnn::Trainer trainer(model, loss, adam);
  etnn::data::DataLoader loader(train.data, {.batch = opt.batch, .shuffle = true, .seed = opt.seed});
  example::EpochStats last;
  double seconds = 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    last = example::run_epoch(loader, epoch, opt.epochs, train.data.size(),
                              [&](const auto& batch) { return trainer.step(batch); });
    seconds += last.seconds;
  }
  const Errors e = test_errors(model, test);
  std::printf("%-5s test MAE %.4f  RMSE %.4f  R2 %.4f   (last epoch train loss %.4f, %.1f s)\n", name, e.mae,
              e.rmse, e.r2, last.mean_loss(), seconds);
  std::fflush(stdout);
  return e;
}

// Makes the data, fits the MLP with each loss and says which did better on the clean test set.
int run(const Options& opt) {
  etnn::Rng rng(etnn::derive_seed(opt.seed, 1));
  const Split train = make_split(opt.samples, opt.outliers, rng);
  const Split test = make_split(opt.samples / 4, 0.0, rng);

  std::printf("etnn regression: %s, %zu parameters\n", Mlp::describe().c_str(), Mlp::num_params);
  std::fputs(etnn::summary<Mlp>().c_str(), stdout);
  std::printf("data: %zu train (%ld targets replaced by outliers, %.1f%%), %zu clean test; noise sigma %.2f, "
              "sigma_f %.3f\n",
              train.data.size(), train.corrupted, 100.0 * static_cast<double>(train.corrupted) / opt.samples,
              test.data.size(), noise_sigma, sigma_f);
  std::printf("%d epochs, batch %d, Adam lr %g, %d threads\n", opt.epochs, opt.batch, opt.lr, etnn::num_threads());
  {  // For scale: the errors of predicting 0, the mean of f, everywhere.
    double abs_sum = 0, square_sum = 0;
    for (const float t : test.data.targets()) abs_sum += std::abs(t), square_sum += static_cast<double>(t) * t;
    const auto n = static_cast<double>(test.data.size());
    std::printf("zero  test MAE %.4f  RMSE %.4f   (predicting 0 everywhere)\n", abs_sum / n, std::sqrt(square_sum / n));
  }

  etnn::loss::MSE mse;
  etnn::loss::Huber huber({.delta = 1.0f});
  const Errors a = fit("MSE", mse, train, test, opt);
  const Errors b = fit("Huber", huber, train, test, opt);
  // Better: lower on both errors by more than 5%.
  if (a.mae > 1.05 * b.mae && a.rmse > 1.05 * b.rmse) {
    std::printf("Huber is better: test MAE %.2fx and RMSE %.2fx lower than MSE's\n", a.mae / b.mae, a.rmse / b.rmse);
  } else if (b.mae > 1.05 * a.mae && b.rmse > 1.05 * a.rmse) {
    std::printf("MSE is better: test MAE %.2fx and RMSE %.2fx lower than Huber's\n", b.mae / a.mae, b.rmse / a.rmse);
  } else {
    std::printf("MSE and Huber are about as good (test errors within 5%%)\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  example::parse_flags(argc, argv, usage,
                       {{"--samples", &opt.samples}, {"--outliers", &opt.outliers}, {"--epochs", &opt.epochs},
                        {"--batch", &opt.batch}, {"--lr", &opt.lr}, {"--threads", &opt.threads},
                        {"--seed", &opt.seed}});
  if (opt.samples < 4 || opt.samples > 100'000'000 || !(opt.outliers >= 0.0f && opt.outliers < 1.0f) ||
      opt.epochs < 1 || opt.batch < 1)
    example::exit_with_usage(usage, 2);
  etnn::set_num_threads(opt.threads);
  return example::run_reporting_errors("regression", [&] { return run(opt); });
}
