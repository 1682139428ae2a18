#pragma once
// What the examples' training loops share: one epoch over a DataLoader behind a progress bar, and
// the line that reports it.
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>

#include <etnn/etnn.hpp>

namespace example {

// The sums over one epoch's batches. Sums rather than means so that data-parallel ranks can add
// theirs up before dividing.
struct EpochStats {
  double loss_sum = 0;  // sum over batches of (mean loss of the batch) * (samples in it)
  double samples = 0;
  double seconds = 0;

  double mean_loss() const { return loss_sum / samples; }
  double samples_per_second() const { return samples / seconds; }
};

// Epoch `epoch` (0-based) of `epochs`: reshuffles the loader for it, and for every batch calls
// step(batch), which trains on the batch and returns its mean loss. A progress bar "epoch 3/10"
// counts up to samples_per_epoch (this rank's share) with the running mean loss; show_progress
// false keeps it from drawing (ranks other than 0).
template <class Loader, class Step>
EpochStats run_epoch(Loader& loader, int epoch, int epochs, std::size_t samples_per_epoch, Step&& step,
                     bool show_progress = true) {
  loader.set_epoch(epoch);
  etnn::ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs), samples_per_epoch);
  EpochStats stats;
  for (auto batch : loader) {
    const int b = batch.x.batch();
    stats.loss_sum += static_cast<double>(step(batch)) * b;
    stats.samples += b;
    if (show_progress) bar.update(static_cast<std::size_t>(stats.samples), stats.mean_loss());
  }
  stats.seconds = bar.seconds();
  bar.finish();
  return stats;
}

// "epoch  3/10  train loss 0.4123  test accuracy 0.8512  51234 samples/s  1.17 s" (without the
// accuracy where there is none), flushed so that a piped log shows each epoch as it ends.
inline void print_epoch(int epoch, int epochs, const EpochStats& stats, std::optional<double> test_accuracy = {}) {
  std::printf("epoch %2d/%d  train loss %.4f", epoch + 1, epochs, stats.mean_loss());
  if (test_accuracy) std::printf("  test accuracy %.4f", *test_accuracy);
  std::printf("  %.0f samples/s  %.2f s\n", stats.samples_per_second(), stats.seconds);
  std::fflush(stdout);
}

}  // namespace example
