#pragma once
// Private to train/: include <etnn/train/train.hpp> or <etnn/etnn.hpp>.
// A live one-line progress bar for a training epoch:
//   epoch 3/10 [=========>          ] 28160/60000  loss 0.4123  51234 samples/s
// Redrawn at most 10 times a second, only when the stream is a terminal (logs stay clean).
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace etnn {

class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressBar(std::string label, std::size_t total, std::FILE* stream = stderr)
      : label_(std::move(label)), total_(total), stream_(stream), live_(::isatty(::fileno(stream)) != 0),
        start_(Clock::now()), last_draw_(start_) {}

  // `done` samples processed so far, `loss` a running mean.
  void update(std::size_t done, double loss) {
    const auto now = Clock::now();
    if (!live_ || (now - last_draw_ < std::chrono::milliseconds(100) && done < total_)) return;
    last_draw_ = now;
    constexpr int width = 30;
    const double fraction = total_ == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total_);
    const int filled = static_cast<int>(fraction * width);
    std::string bar(static_cast<std::size_t>(width), ' ');
    for (int i = 0; i < filled && i < width; ++i) bar[static_cast<std::size_t>(i)] = '=';
    if (filled < width) bar[static_cast<std::size_t>(filled)] = '>';
    std::fprintf(stream_, "\r%s [%s] %zu/%zu  loss %.4f  %.0f samples/s ", label_.c_str(), bar.c_str(), done,
                 total_, loss, static_cast<double>(done) / seconds());
    std::fflush(stream_);
  }

  // Erases the bar so that a summary line can take its place.
  void finish() {
    if (live_) std::fprintf(stream_, "\r%*s\r", 100, "");
  }

  double seconds() const {
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    return s > 0 ? s : 1e-9;
  }

 private:
  std::string label_;
  std::size_t total_;
  std::FILE* stream_;
  bool live_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
};

}  // namespace etnn
