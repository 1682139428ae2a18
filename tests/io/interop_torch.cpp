// The C++ half of interop_torch.py (PyTorch on the other side), for the networks below:
//   interop_torch MODEL export DIR   a seeded model trained 3 SGD steps (so batch norm's running
//                                    statistics move) -> DIR/etnn.safetensors; DIR/etnn_io.safetensors
//                                    holds inputs x, eval-mode logits, train-mode logits (a forward in
//                                    training mode, which then updates the running statistics) and
//                                    DIR/etnn_after.safetensors the model after that forward
//   interop_torch MODEL import DIR   loads DIR/torch.safetensors, writes the eval-mode logits of
//                                    DIR/torch_io.safetensors' x to DIR/etnn_logits.safetensors
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
namespace fs = std::filesystem;

using Mlp784 = decltype(nn::input<784> >> nn::linear<512> >> nn::relu >> nn::linear<10>);
using Lenet = decltype(nn::input<1, 28, 28> >> nn::conv2d<6, 5, nn::pad<2>> >> nn::relu >> nn::max_pool2d<2> >>
                       nn::conv2d<16, 5> >> nn::relu >> nn::max_pool2d<2> >> nn::flatten >> nn::linear<120> >>
                       nn::relu >> nn::linear<84> >> nn::relu >> nn::linear<10>);
using LenetBn = decltype(nn::input<1, 28, 28> >> nn::conv2d<6, 5, nn::pad<2>> >> nn::batch_norm >> nn::relu >>
                         nn::max_pool2d<2> >> nn::conv2d<16, 5> >> nn::batch_norm >> nn::relu >> nn::max_pool2d<2> >>
                         nn::flatten >> nn::linear<120> >> nn::relu >> nn::linear<84> >> nn::relu >> nn::linear<10>);
using ResMlp = decltype(nn::input<64> >> nn::linear<64> >> nn::residual(nn::linear<64> >> nn::relu >> nn::linear<64>) >>
                        nn::relu >> nn::layer_norm >> nn::linear<10>);
// A causal transformer block over token ids, read by a flat classifier head.
using Gpt = decltype(nn::input_tokens<16, 20> >> nn::embedding<16> >> nn::positional_embedding >>
                     nn::residual(nn::layer_norm >> nn::multi_head_attention<4, true>) >>
                     nn::residual(nn::layer_norm >> nn::linear<64> >> nn::gelu >> nn::linear<16>) >> nn::layer_norm >>
                     nn::flatten >> nn::linear<10>);
// Two 1-d convolutions over token embeddings (the second strided: 16 -> 8 positions).
using Conv1d = decltype(nn::input_tokens<16, 20> >> nn::embedding<12> >> nn::conv1d<16, 3, nn::pad<1>> >> nn::gelu >>
                        nn::conv1d<8, 4, nn::stride<2>, nn::pad<1>> >> nn::flatten >> nn::linear<10>);

namespace {

// Inputs in [-1, 2), or ids for a network of token ids.
template <class T, class S>
void fill_random(etnn::Tensor<T, S>& x, etnn::Rng& rng) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    if constexpr (etnn::TokenShape<S>) x.data()[i] = static_cast<T>(rng.below(S::vocabulary));
    else x.data()[i] = static_cast<T>(rng.uniform(-1, 2));
  }
}

template <class T, class S>
etnn::io::TensorBytes tensor_bytes(const char* name, const etnn::Tensor<T, S>& t) {
  std::vector<std::int64_t> shape{t.batch()};
  for (int d : S::dims) shape.push_back(d);
  return {name, etnn::io::Dtype::f32, shape, {reinterpret_cast<const unsigned char*>(t.data()), t.size() * sizeof(T)}};
}

template <class Net>
int export_model(const fs::path& dir) {
  using In = typename Net::input_shape;
  etnn::Model<Net> model(7);
  etnn::loss::CrossEntropy loss;
  etnn::optim::SGD sgd(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, sgd);
  etnn::Rng rng(11);
  etnn::Tensor<float, In> batch(16);
  std::vector<int> labels(16);
  for (int step = 0; step < 3; ++step) {
    fill_random(batch, rng);
    for (auto& y : labels) y = static_cast<int>(rng.below(10));
    trainer.step(batch, labels);
  }
  etnn::io::save(model, dir / "etnn.safetensors");
  etnn::Tensor<float, In> x(5);
  fill_random(x, rng);
  model.eval();
  const auto eval_logits = model.forward(x);
  model.train();
  const auto train_logits = model.forward(x);
  etnn::io::save(model, dir / "etnn_after.safetensors");
  const std::vector<etnn::io::TensorBytes> io{tensor_bytes("x", x), tensor_bytes("eval_logits", eval_logits),
                                              tensor_bytes("train_logits", train_logits)};
  etnn::io::write_safetensors(dir / "etnn_io.safetensors", io, {});
  return 0;
}

template <class Net>
int import_model(const fs::path& dir) {
  using In = typename Net::input_shape;
  etnn::Model<Net> model(0);
  etnn::io::load(model, dir / "torch.safetensors");
  const auto file = etnn::io::read_safetensors(dir / "torch_io.safetensors");
  const auto* record = file.find("x");
  if (record == nullptr || record->dtype != etnn::io::Dtype::f32) return 2;
  etnn::Tensor<float, In> x(static_cast<int>(record->shape[0]));
  std::memcpy(x.data(), file.data.data() + record->begin, x.size() * sizeof(float));
  model.eval();
  const auto logits = model.forward(x);
  const std::vector<etnn::io::TensorBytes> out{tensor_bytes("logits", logits)};
  etnn::io::write_safetensors(dir / "etnn_logits.safetensors", out, {});
  return 0;
}

template <class Net>
int run(std::string_view mode, const fs::path& dir) {
  if (mode == "export") return export_model<Net>(dir);
  if (mode == "import") return import_model<Net>(dir);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string_view model = argv[1];
  try {
    if (model == "mlp784") return run<Mlp784>(argv[2], argv[3]);
    if (model == "lenet") return run<Lenet>(argv[2], argv[3]);
    if (model == "lenet_bn") return run<LenetBn>(argv[2], argv[3]);
    if (model == "resmlp") return run<ResMlp>(argv[2], argv[3]);
    if (model == "gpt") return run<Gpt>(argv[2], argv[3]);
    if (model == "conv1d") return run<Conv1d>(argv[2], argv[3]);
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 2;
}
