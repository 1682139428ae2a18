// The C++ half of interop_safetensors.py (the reference safetensors library on the other side):
//   interop save PATH     saves a seeded model; prints its parameters, one per line
//   interop load PATH     loads PATH into the same network; prints its parameters, one per line
#include <cstdio>
#include <string_view>

#include <etnn/etnn.hpp>

namespace nn = etnn::nn;
using Net = decltype(nn::input<6> >> nn::linear<5> >> nn::relu >> nn::linear<3>);

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string_view mode = argv[1];
  etnn::Model<Net> model(123);
  try {
    if (mode == "save") etnn::io::save(model, argv[2]);
    else if (mode == "load") etnn::io::load(model, argv[2]);
    else return 2;
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  for (const auto& p : etnn::Model<Net>::named_parameters())
    for (std::size_t i = 0; i < p.numel; ++i) std::printf("%s %.9g\n", p.name.c_str(), model.parameters()[p.offset + i]);
  return 0;
}
