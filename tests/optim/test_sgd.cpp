// SGD against PyTorch's torch.optim.SGD update, written out by hand for one parameter.
#include <doctest/doctest.h>

#include <etnn/etnn.hpp>

namespace nn = etnn::nn;

namespace {
using Tiny = decltype(nn::input<1> >> nn::linear<1>);  // two parameters: w, b

// Runs `steps` updates with a constant gradient on every parameter; returns w.
double run(const etnn::optim::SgdOptions& options, int steps, double w0, double g) {
  etnn::Model<Tiny, double> model(0);
  model.parameters()[0] = w0;
  etnn::optim::SGD opt(model, options);
  for (int s = 0; s < steps; ++s) {
    model.gradients()[0] = g;
    opt.step();
  }
  return model.parameters()[0];
}

// The reference: PyTorch's algorithm for one scalar.
double reference(const etnn::optim::SgdOptions& o, int steps, double w, double g) {
  double v = 0;
  for (int s = 0; s < steps; ++s) {
    double d = g + o.weight_decay * w;
    if (o.momentum != 0) {
      v = s == 0 ? d : o.momentum * v + (1 - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * v : v;
    }
    w -= o.lr * d;
  }
  return w;
}
}  // namespace

TEST_CASE("SGD matches torch.optim.SGD for every option") {
  const etnn::optim::SgdOptions cases[] = {
      {.lr = 0.1f},
      {.lr = 0.1f, .momentum = 0.9f},
      {.lr = 0.05f, .momentum = 0.9f, .dampening = 0.5f},
      {.lr = 0.1f, .momentum = 0.8f, .weight_decay = 0.01f},
      {.lr = 0.1f, .momentum = 0.9f, .nesterov = true},
      {.lr = 0.01f, .momentum = 0.5f, .weight_decay = 0.1f, .nesterov = true},
  };
  for (const auto& o : cases) {
    INFO("lr ", o.lr, " momentum ", o.momentum, " dampening ", o.dampening, " wd ", o.weight_decay,
         " nesterov ", o.nesterov);
    CHECK(run(o, 5, 0.7, 0.3) == doctest::Approx(reference(o, 5, 0.7, 0.3)).epsilon(1e-12));
  }
}

TEST_CASE("SGD rejects invalid options with a clear message") {
  etnn::Model<Tiny> model(0);
  using O = etnn::optim::SgdOptions;
  CHECK_THROWS_WITH_AS(etnn::optim::SGD(model, O{.lr = -1.0f}), doctest::Contains("lr must be >= 0"), etnn::Error);
  CHECK_THROWS_WITH_AS(etnn::optim::SGD(model, O{.lr = 0.1f, .nesterov = true}), doctest::Contains("nesterov needs momentum"), etnn::Error);
  etnn::optim::SGD opt(model, {.lr = 0.1f});
  static_assert(std::is_same_v<decltype(opt), etnn::optim::SGD<etnn::Model<Tiny>, etnn::dist::Local>>);
  static_assert(std::is_base_of_v<etnn::optim::Optimizer<etnn::optim::rules::Sgd, etnn::Model<Tiny>, etnn::dist::Local>, decltype(opt)>);
  CHECK(opt.steps() == 0);
  opt.set_options({.lr = 0.5f, .weight_decay = 0.1f});  // a schedule changing hyper-parameters
  CHECK(opt.options().lr == 0.5f);
  CHECK_THROWS_WITH_AS(opt.set_options({.lr = 0.1f, .momentum = 0.9f}), doctest::Contains("build a new optimizer"),
                       etnn::Error);
  CHECK(opt.options().lr == 0.5f);
}
