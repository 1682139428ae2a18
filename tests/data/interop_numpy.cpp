// The C++ half of interop_numpy.py (numpy on the other side): loads what numpy wrote, prints every
// value, then trains a small MLP on it through DataLoader + Trainer and prints the loss of each step.
//   interop_numpy npy FEATURES.npy LABELS.npy   class indices, cross-entropy
//   interop_numpy npz ARCHIVE.npz               arrays x and y, class indices, cross-entropy
//   interop_numpy csv TABLE.csv                 features f0..f3, real target "price", MSE
// Output lines: "x V" per feature value, "y V" per target value (C order), "loss L" per step.
#include <cstdio>
#include <string_view>

#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
using Features = etnn::Shape<4>;

template <class Net, class Y, class Loss>
void print_and_train(const etnn::data::Dataset<Features, Y>& data, Loss loss) {
  for (float v : data.features()) std::printf("x %.9g\n", v);
  for (auto v : data.targets()) std::printf("y %.9g\n", static_cast<double>(v));
  etnn::Model<Net> model(7);
  etnn::optim::SGD opt(model, {.lr = 0.05f, .momentum = 0.9f});
  etnn::Trainer trainer(model, loss, opt);
  etnn::data::DataLoader loader(data, {.batch = 16, .shuffle = true, .seed = 3});
  for (int epoch = 0; epoch < 20; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) std::printf("loss %.9g\n", trainer.step(batch));
  }
}

int main(int argc, char** argv) {
  using Classifier = decltype(nn::input<4> >> nn::linear<16> >> nn::relu >> nn::linear<3>);
  using Regressor = decltype(nn::input<4> >> nn::linear<16> >> nn::tanh >> nn::linear<1>);
  if (argc < 3) return 2;
  const std::string_view mode = argv[1];
  try {
    if (mode == "npy" && argc == 4) {
      print_and_train<Classifier>(etnn::data::load_npy<Features>(argv[2], argv[3]), etnn::loss::CrossEntropy{});
    } else if (mode == "npz") {
      print_and_train<Classifier>(etnn::data::load_npz<Features>(argv[2]), etnn::loss::CrossEntropy{});
    } else if (mode == "csv") {
      print_and_train<Regressor>(etnn::data::load_csv<Features, etnn::Shape<1>>(argv[2], {.targets = {"price"}}),
                                 etnn::loss::MSE{});
    } else {
      return 2;
    }
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
