#pragma once
// Naive references for the layers, written out loop by loop in double whatever the scalar types of
// their arguments (inputs and parameters may differ): what the layer tests and the property tests
// (tests/property) compare against.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace etnn::test {

// y[b][o] = bias[o] + sum_i w[o][i] x[b][i]   x: (B, IN)  w: (OUT, IN)  y: (B, OUT)
template <class X, class W>
std::vector<double> naive_linear(const X* x, const W* w, const W* bias, int batch, int in, int out) {
  std::vector<double> y(static_cast<std::size_t>(batch * out));
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < out; ++o) {
      double s = static_cast<double>(bias[o]);
      for (int i = 0; i < in; ++i) s += static_cast<double>(w[o * in + i]) * static_cast<double>(x[b * in + i]);
      y[static_cast<std::size_t>(b * out + o)] = s;
    }
  return y;
}

// y[b][o][oh][ow] = bias[o] + sum_{c,ki,kj} w[o][c][ki][kj] x[b][c][oh S - P + ki][ow S - P + kj]
template <class X, class W>
std::vector<double> naive_conv(const X* x, const W* w, const W* bias, int batch, int c_in, int h, int wd, int out,
                               int k, int stride, int pad) {
  const int oh_n = (h + 2 * pad - k) / stride + 1, ow_n = (wd + 2 * pad - k) / stride + 1;
  std::vector<double> y(static_cast<std::size_t>(batch * out * oh_n * ow_n));
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < out; ++o)
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow) {
          double s = static_cast<double>(bias[o]);
          for (int c = 0; c < c_in; ++c)
            for (int ki = 0; ki < k; ++ki)
              for (int kj = 0; kj < k; ++kj) {
                const int ih = oh * stride - pad + ki, iw = ow * stride - pad + kj;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                s += static_cast<double>(w[((o * c_in + c) * k + ki) * k + kj]) *
                     static_cast<double>(x[((b * c_in + c) * h + ih) * wd + iw]);
              }
          y[static_cast<std::size_t>(((b * out + o) * oh_n + oh) * ow_n + ow)] = s;
        }
  return y;
}

// max or mean over each window of each of `planes` (H, W) planes (padding excluded from max,
// counted as zero in the mean, as PyTorch's count_include_pad).
template <class X>
std::vector<double> naive_pool(const X* x, int planes, int h, int wd, int k, int stride, int pad, bool max) {
  const int oh_n = (h + 2 * pad - k) / stride + 1, ow_n = (wd + 2 * pad - k) / stride + 1;
  std::vector<double> y;
  for (int p = 0; p < planes; ++p)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int ki = 0; ki < k; ++ki)
          for (int kj = 0; kj < k; ++kj) {
            const int ih = oh * stride - pad + ki, iw = ow * stride - pad + kj;
            if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
            const double v = static_cast<double>(x[(p * h + ih) * wd + iw]);
            acc = max ? std::max(acc, v) : acc + v;
          }
        y.push_back(max ? acc : acc / (k * k));
      }
  return y;
}

}  // namespace etnn::test
