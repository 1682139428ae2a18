#pragma once
// Private to expr/: include <etnn/expr/expr.hpp> or <etnn/etnn.hpp>.
// The geometry of a sliding window (convolution kernel or pooling window) over a (C, H, W) image,
// as PyTorch defines it: out = floor((in + 2 pad - kernel) / stride) + 1, padding is virtual.
// Device-neutral: the CPU and CUDA convolution and pooling kernels and the nn layers share it.
namespace etnn::expr {

// The two kinds of pooling window (nn::max_pool2d, nn::avg_pool2d).
struct MaxPooling {};
struct AveragePooling {};

template <int Channels, int Height, int Width, int Kernel, int Stride, int Pad>
struct Window {
  static constexpr int channels = Channels;
  static constexpr int height = Height;
  static constexpr int width = Width;
  static constexpr int kernel = Kernel;
  static constexpr int stride = Stride;
  static constexpr int pad = Pad;
  static constexpr int out_height = (Height + 2 * Pad - Kernel) / Stride + 1;
  static constexpr int out_width = (Width + 2 * Pad - Kernel) / Stride + 1;
  static constexpr int out_pixels = out_height * out_width;
  static constexpr int in_pixels = Height * Width;

  // Input row of window row ki at output row oh (may be outside [0, height): padding).
  static constexpr int in_row(int oh, int ki) { return oh * Stride - Pad + ki; }
  static constexpr int in_col(int ow, int kj) { return ow * Stride - Pad + kj; }
  static constexpr bool inside(int row, int col) { return row >= 0 && row < Height && col >= 0 && col < Width; }
};

}  // namespace etnn::expr
