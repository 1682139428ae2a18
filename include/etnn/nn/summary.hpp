#pragma once
// Private to nn/: include <etnn/nn/nn.hpp> or <etnn/etnn.hpp>.
// etnn::summary<Net>(): a table of the network's modules, as torchinfo prints for PyTorch:
//   #  layer          output shape  params  parameters
//      input<784>     (784)              0
//   0  linear<512>    (512)         401920  0.weight (512, 784), 0.bias (512)
//   1  relu           (512)              0
//   2  linear<10>     (10)            5130  2.weight (10, 512), 2.bias (10)
//   total: 407050 parameters (1.55 MiB in float32)
// Rows are the modules as written (before fusion), numbered as torch.nn.Sequential numbers them.
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "checks.hpp"
#include "model.hpp"

namespace etnn {

namespace nn::detail {

struct SummaryRow {
  std::string index, layer, shape, params, names;
};

template <ShapeType In, int Index>
void summary_rows(std::vector<SummaryRow>&, nn::Sequential<>) {}

template <ShapeType In, int Index, class S, class... Rest>
void summary_rows(std::vector<SummaryRow>& rows, nn::Sequential<S, Rest...>) {
  using L = typename S::template bind<In, Index>;
  std::string names;
  for (const auto& p : L::params) {
    names += (names.empty() ? "" : ", ") + std::to_string(Index) + "." + std::string(p.name) + " (";
    for (int d = 0; d < p.rank; ++d) names += (d ? ", " : "") + std::to_string(p.shape[static_cast<std::size_t>(d)]);
    names += ")";
  }
  rows.push_back({std::to_string(Index), S::describe(), L::out_shape::to_string(), std::to_string(tensor_values(L::params)), names});
  summary_rows<typename L::out_shape, Index + 1>(rows, nn::Sequential<Rest...>{});
}

template <class Net>
struct SummaryOf;
template <nn::InputSpecType First, class... Rest>
struct SummaryOf<nn::Sequential<First, Rest...>> {
  static std::vector<SummaryRow> rows() {
    std::vector<SummaryRow> out{{"", First::describe(), First::shape::to_string(), "0", ""}};
    summary_rows<typename First::shape, 0>(out, nn::Sequential<Rest...>{});
    return out;
  }
};

}  // namespace nn::detail

// The table as text, one line per module and a total.
template <class NetSpelled>
std::string summary() {
  using Net = std::remove_cv_t<NetSpelled>;
  static_assert(nn::check::network_has_input<nn::Network<Net>>());
  std::vector<nn::detail::SummaryRow> rows = nn::detail::SummaryOf<Net>::rows();
  rows.insert(rows.begin(), {"#", "layer", "output shape", "params", "parameters"});
  std::size_t w[4] = {0, 0, 0, 0};
  for (const auto& r : rows) {
    w[0] = std::max(w[0], r.index.size());
    w[1] = std::max(w[1], r.layer.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.params.size());
  }
  const auto pad = [](const std::string& s, std::size_t width, bool right) {
    const std::string fill(width - s.size(), ' ');
    return right ? fill + s : s + fill;
  };
  std::string out;
  for (const auto& r : rows) {
    std::string line = pad(r.index, w[0], true) + "  " + pad(r.layer, w[1], false) + "  " + pad(r.shape, w[2], false) +
                       "  " + pad(r.params, w[3], true) + "  " + r.names;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  char total[128];
  std::snprintf(total, sizeof total, "total: %zu parameters (%.2f MiB in float32)\n", Net::num_params,
                static_cast<double>(Net::num_params) * 4.0 / (1 << 20));
  return out + total;
}

}  // namespace etnn
