// Writes the fuzzers' seed corpora with etnn's own writers (etnn::io::save, write_safetensors), the
// IDX layout that load_idx reads, raw and gzipped, the .npy/.npz files numpy writes
// (tests/support/numpy_files.hpp) and CSV tables:
//   make_seeds DIR   ->  DIR/idx/*  (fuzz_idx's input layout, see fuzz_idx.cpp)
//                        DIR/safetensors/*.safetensors
//                        DIR/npy/*  (fuzz_npy's input layout)
//                        DIR/csv/*  (fuzz_csv's input layout)
#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <etnn/etnn.hpp>

#include "../tests/support/numpy_files.hpp"
#include "fuzz_models.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

void put_be32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(v >> shift));
}

// An IDX file: 0x00 0x00 type ndims, the dims big-endian, then count * item values.
Bytes idx(unsigned char type, const std::vector<std::uint32_t>& dims, std::uint32_t seed) {
  Bytes out{0, 0, type, static_cast<unsigned char>(dims.size())};
  std::uint64_t values = 1;
  for (std::uint32_t d : dims) {
    put_be32(out, d);
    values *= d;
  }
  for (std::uint64_t v = 0; v < values; ++v) {
    if (type == 0x0D) {
      put_be32(out, std::bit_cast<std::uint32_t>(static_cast<float>(v + seed) / 8.0f));
    } else {
      out.push_back(static_cast<unsigned char>((v * 37 + seed) % (dims.size() == 1 ? 10 : 256)));
    }
  }
  return out;
}

// bytes compressed by zlib: a gzip stream (what gzip(1) and zlib's gzwrite produce) with window_bits
// 15 + 16, raw deflate (a ZIP member's data) with -15.
Bytes deflated(const Bytes& bytes, int window_bits) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, bytes.size()) + 32);
  z.next_in = const_cast<unsigned char*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Bytes gzip(const Bytes& bytes) { return deflated(bytes, 15 + 16); }

void write(const fs::path& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

// fuzz_idx's input: shape selector, image file length (little-endian), image file, label file.
Bytes idx_input(unsigned char shape, const Bytes& images, const Bytes& labels) {
  Bytes out{shape};
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(images.size() >> (8 * i)));
  out.insert(out.end(), images.begin(), images.end());
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void idx_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  struct Case {
    const char* name;
    unsigned char shape;  // fuzz_idx's selector: 0 Shape<1>, 1 Shape<4>, 2 Shape<2, 3>, 3 Shape<1, 28, 28>
    std::vector<std::uint32_t> item;
  };
  const std::vector<Case> cases{{"scalar", 0, {}},      {"flat4", 1, {4}},     {"square2x2", 1, {2, 2}},
                                {"cube1x2x2", 1, {1, 2, 2}}, {"2x3", 2, {2, 3}}, {"mnist1x28x28", 3, {28, 28}}};
  int written = 0;
  for (const auto& c : cases) {
    for (std::uint32_t count : {1u, 3u}) {
      for (unsigned char type : {0x08, 0x0D}) {
        std::vector<std::uint32_t> dims{count};
        dims.insert(dims.end(), c.item.begin(), c.item.end());
        const Bytes images = idx(type, dims, count);
        const Bytes labels = idx(0x08, {count}, count);
        const std::string stem = std::string(c.name) + "_n" + std::to_string(count) + (type == 0x0D ? "_f32" : "_u8");
        write(dir / (stem + "_raw"), idx_input(c.shape, images, labels));
        write(dir / (stem + "_gz"), idx_input(c.shape, gzip(images), gzip(labels)));
        write(dir / (stem + "_gz_images"), idx_input(c.shape, gzip(images), labels));
        written += 3;
      }
    }
  }
  std::printf("%d IDX seeds in %s\n", written, dir.c_str());
}

// Little-endian bytes of n values of dtype d: 1, 2, 3, ... (I64), or 0.5, 1.5, ... in each float format.
Bytes values(etnn::io::Dtype d, std::size_t n) {
  Bytes out;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(i) + 0.5;
    std::uint64_t bits = 0;
    switch (d) {
      case etnn::io::Dtype::f64: bits = std::bit_cast<std::uint64_t>(v); break;
      case etnn::io::Dtype::f32: bits = std::bit_cast<std::uint32_t>(static_cast<float>(v)); break;
      case etnn::io::Dtype::bf16: bits = std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16; break;
      case etnn::io::Dtype::f16: bits = 0x3800u + (i << 8); break;  // 0.5, then larger halves
      case etnn::io::Dtype::i64: bits = i + 1; break;
    }
    for (std::size_t b = 0; b < etnn::io::dtype_size(d); ++b) out.push_back(static_cast<unsigned char>(bits >> (8 * b)));
  }
  return out;
}

void safetensors_seeds(const fs::path& dir) {
  using etnn::io::Dtype;
  fs::create_directories(dir);
  etnn::io::save(fuzz::FloatModel{1}, dir / "float_mlp.safetensors");
  etnn::io::save(fuzz::DoubleModel{2}, dir / "double_batch_norm.safetensors");
  int written = 2;
  // One tensor of each dtype and several shapes, with and without metadata.
  const std::vector<std::vector<std::int64_t>> shapes{{}, {0}, {3}, {2, 3}, {1, 2, 1, 2}};
  for (Dtype d : {Dtype::f64, Dtype::f32, Dtype::f16, Dtype::bf16, Dtype::i64}) {
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      std::size_t n = 1;
      for (auto e : shapes[s]) n *= static_cast<std::size_t>(e);
      const Bytes bytes = values(d, n);
      const std::vector<etnn::io::TensorBytes> tensors{{"0.weight", d, shapes[s], bytes}};
      const std::map<std::string, std::string, std::less<>> metadata =
          s % 2 ? std::map<std::string, std::string, std::less<>>{}
                : std::map<std::string, std::string, std::less<>>{{"format", "etnn"}, {"note", "caf\xc3\xa9 \\\"q\"\n"}};
      etnn::io::write_safetensors(dir / (std::string(etnn::io::dtype_name(d)) + "_shape" + std::to_string(s) + ".safetensors"),
                                  tensors, metadata);
      ++written;
    }
  }
  // Several tensors of mixed dtypes, and none at all.
  const Bytes a = values(Dtype::f32, 6), b = values(Dtype::i64, 1), c = values(Dtype::f16, 4);
  const std::vector<etnn::io::TensorBytes> mixed{
      {"0.weight", Dtype::f32, {3, 2}, a}, {"1.num_batches_tracked", Dtype::i64, {}, b}, {"2.bias", Dtype::f16, {4}, c}};
  etnn::io::write_safetensors(dir / "mixed.safetensors", mixed, {{"format", "pt"}});
  etnn::io::write_safetensors(dir / "empty.safetensors", {}, {});
  written += 2;
  std::printf("%d safetensors seeds in %s\n", written, dir.c_str());
}

// fuzz_npy's inputs: for each case a .npy pair, and .npz archives of it stored (np.savez), deflated
// by zlib (np.savez_compressed), in deflate's stored blocks, and with zip64 records.
void npy_seeds(const fs::path& dir) {
  using etnn_test::le_bytes;
  using etnn_test::npy;
  fs::create_directories(dir);
  struct Case {
    const char* name;
    unsigned char pair;  // fuzz_npy's (X, Y) selector, see fuzz_npy.cpp
    Bytes x, y;
  };
  const std::vector<float> twelve{0.5f, -1, 2, 3.25f, 4, 5, 6, 7, 8, 9, 10, 1e-3f};
  const std::vector<Case> cases{
      {"class_f4_i8", 0, npy("<f4", "(3, 2)", le_bytes<float>({0, 1, 2, 3, 4, 5})),
       npy("<i8", "(3,)", le_bytes<std::int64_t>({2, 0, 1}))},
      {"class_f8_u1_v2_v3", 0, npy("<f8", "(3, 2)", le_bytes<double>({0.1, 1, 2, 3, 4, 5}), 2),
       npy("|u1", "(3,)", Bytes{1, 0, 1}, 3)},
      {"class_i2_b1", 0, npy("<i2", "(3, 2)", le_bytes<std::int16_t>({-1, 1, 2, 3, 4, 5})),
       npy("|b1", "(3, 1)", Bytes{1, 0, 1})},
      {"real_2x2x3_f4", 1, npy("<f4", "(2, 2, 3)", le_bytes<float>(twelve)), npy("<f4", "(2,)", le_bytes<float>({1, 2}))},
      {"real_2x6_f4_f8", 1, npy("<f4", "(2, 6)", le_bytes<float>(twelve)), npy("<f8", "(2, 1)", le_bytes<double>({1, 2}))},
      {"multihot_b1", 2, npy("<f4", "(3,)", le_bytes<float>({1, 2, 3})), npy("|b1", "(3, 2)", Bytes{1, 0, 0, 1, 1, 1})},
      {"multihot_u8", 2, npy("<u8", "(3, 1)", le_bytes<std::uint64_t>({1, 2, 3})),
       npy("<u8", "(3, 2)", le_bytes<std::uint64_t>({1, 0, 0, 1, 1, 1}))},
      {"rows_2x2", 3, npy("<i4", "(2, 4)", le_bytes<std::int32_t>({1, 2, 3, 4, 5, 6, 7, 8})),
       npy("<f8", "(2, 2, 2)", le_bytes<double>({1, 2, 3, 4, 5, 6, 7, 8}))},
      {"empty", 0, npy("<f4", "(0, 2)", {}), npy("<i8", "(0,)", {})},
  };
  int written = 0;
  for (const Case& c : cases) {
    const auto input = [&](bool archive, const Bytes& file) {
      Bytes out{static_cast<unsigned char>(c.pair << 1 | (archive ? 1 : 0))};
      out.insert(out.end(), file.begin(), file.end());
      ++written;
      return out;
    };
    Bytes pair;
    etnn_test::put_le(pair, c.x.size(), 4);
    pair.insert(pair.end(), c.x.begin(), c.x.end());
    pair.insert(pair.end(), c.y.begin(), c.y.end());
    write(dir / (std::string(c.name) + "_npy"), input(false, pair));
    write(dir / (std::string(c.name) + "_npz"), input(true, etnn_test::zip({{"x.npy", c.x}, {"y.npy", c.y}})));
    write(dir / (std::string(c.name) + "_npz_zlib"),
          input(true, etnn_test::zip({{"x.npy", c.x, true, deflated(c.x, -15)}, {"y.npy", c.y, true, deflated(c.y, -15)}})));
    write(dir / (std::string(c.name) + "_npz_stored_blocks"),
          input(true, etnn_test::zip({{"y.npy", c.y, true}, {"x.npy", c.x, true}})));
    write(dir / (std::string(c.name) + "_npz64"), input(true, etnn_test::zip({{"x.npy", c.x}, {"y.npy", c.y}}, true)));
  }
  std::printf("%d npy seeds in %s\n", written, dir.c_str());
}

// fuzz_csv's inputs: a table for each of its choices, in several dialects.
void csv_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  struct Case {
    const char* name;
    unsigned char choice;  // fuzz_csv's selector, see fuzz_csv.cpp
    std::string table;
  };
  const std::vector<Case> cases{
      {"class", 0, "a,b,y\n1,2,0\n-3.5,4e2,1\n"},
      {"class_quoted_crlf", 0, "\xEF\xBB\xBF\"a\", b ,\"y\"\r\n \"1\" , 2 ,3\r\n0.25,1e-3,0\r\n\r\n"},
      {"class_no_final_newline", 0, "y,a,b\n7,1,2"},
      {"real", 1, "z,x,y\n0.5,1,-2\n1e30,2,3\n"},
      {"multi_hot_semicolon", 2, "a;y;b;z\n1;0;2;1\n3;1;4;1\n"},
      {"non_finite", 3, "a,b,c,y\nnan,inf,-inf,1\n1,2,3,0\n"},
      {"quoted_names", 3, "\"a,1\",\"b\"\"2\",\"c\n3\",y\n1,2,3,4\n"},
  };
  for (const Case& c : cases) {
    Bytes input{c.choice};
    input.insert(input.end(), c.table.begin(), c.table.end());
    write(dir / c.name, input);
  }
  std::printf("%zu CSV seeds in %s\n", cases.size(), dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  idx_seeds(dir / "idx");
  safetensors_seeds(dir / "safetensors");
  npy_seeds(dir / "npy");
  csv_seeds(dir / "csv");
  return 0;
}
