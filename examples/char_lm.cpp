// A character-level GPT: 4 causal transformer blocks of width 128 with 4 heads over 128 characters,
// trained with AdamW and a cosine schedule on a text corpus, then sampled.
//   char_lm [--data PATH] [--epochs 4] [--steps 120] [--batch 32] [--lr 0.002] [--threads 0]
//           [--seed 0] [--sample 400] [--save PATH]
// PATH is a text file, or a directory whose files are read in name order (the default, Debian's
// fortunes: /usr/share/games/fortunes, without its .dat and .u8 index files; about 2.6 MB of
// English). The last tenth is held out. Each byte value is a token; the corpus may use at most 128
// of them. An epoch is --steps optimizer steps on windows of 129 characters drawn at random from the
// training text (the model predicts each next character); after it the validation loss (nats per
// character) is printed beside the unigram model's, the entropy of the training text's character
// frequencies measured on the held-out text.
#include "char_lm_model.hpp"
#include "support/cli.hpp"
#include "support/training.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using char_lm::context, char_lm::vocabulary, char_lm::Gpt, char_lm::Tokens;

namespace {

struct Options {
  fs::path data = "/usr/share/games/fortunes";
  int epochs = 4;
  int steps = 120;  // optimizer steps per epoch
  int batch = 32;
  float lr = 2e-3f;
  int threads = 0;
  std::uint64_t seed = 0;
  int sample = 400;  // characters sampled at the end
  fs::path save;
};

constexpr const char* usage =
    "usage: char_lm [--data FILE|DIR] [--epochs N] [--steps N] [--batch N] [--lr X] [--threads N]\n"
    "               [--seed N] [--sample N] [--save PATH]\n";

// The corpus: a file, or a directory's files in name order (leaving out fortune's index files).
std::string read_corpus(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::directory_iterator(path)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && ext != ".dat" && ext != ".u8") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path)) {
    files.push_back(path);
  }
  std::string text;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw etnn::IoError("char_lm: cannot read '" + file.string() + "'");
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}

// Byte values numbered densely in byte order: id[byte] and byte_of[id].
struct Alphabet {
  std::array<int, 256> id{};
  std::vector<unsigned char> byte_of;

  explicit Alphabet(const std::string& text) {
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[static_cast<std::size_t>(c)]) {
        id[static_cast<std::size_t>(c)] = static_cast<int>(byte_of.size());
        byte_of.push_back(static_cast<unsigned char>(c));
      }
    if (byte_of.size() > static_cast<std::size_t>(vocabulary))
      throw etnn::ShapeError("char_lm: the corpus uses " + std::to_string(byte_of.size()) + " distinct bytes; the model's "
                             "vocabulary holds " + std::to_string(vocabulary) + " (change `vocabulary` and rebuild)");
  }
  std::vector<int> encode(const std::string& text) const {
    std::vector<int> ids(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) ids[i] = id[static_cast<unsigned char>(text[i])];
    return ids;
  }
};

// Windows of context + 1 ids starting at `starts`: inputs are the first T, labels the last T.
etnn::data::Dataset<Tokens, etnn::data::SequenceLabels<context>> windows(const std::vector<int>& ids,
                                                                        const std::vector<std::size_t>& starts) {
  std::vector<float> x;
  std::vector<int> y;
  x.reserve(starts.size() * context);
  y.reserve(starts.size() * context);
  for (std::size_t s : starts) {
    for (int t = 0; t < context; ++t) {
      x.push_back(static_cast<float>(ids[s + static_cast<std::size_t>(t)]));
      y.push_back(ids[s + static_cast<std::size_t>(t) + 1]);
    }
  }
  return {std::move(x), std::move(y)};
}

// Cross-entropy in nats per character of the unigram model fitted to `train`, measured on `held_out`.
double unigram_nats(const std::vector<int>& train, const std::vector<int>& held_out) {
  std::vector<double> count(vocabulary, 1.0);  // add-one, so that a character unseen in training is finite
  for (int id : train) count[static_cast<std::size_t>(id)] += 1;
  double total = 0;
  for (double c : count) total += c;
  double nats = 0;
  for (int id : held_out) nats -= std::log(count[static_cast<std::size_t>(id)] / total);
  return nats / static_cast<double>(held_out.size());
}

template <class Model, class Loss, class Data>
double mean_loss(Model& model, const Loss& loss, const Data& data) {
  model.eval();
  etnn::data::DataLoader loader(data, {.batch = 32});
  double sum = 0, samples = 0;
  for (auto batch : loader) {
    const auto logits = model.forward(batch.x);
    sum += static_cast<double>(loss.value(etnn::Cpu{}, etnn::const_view(logits), batch.y)) * batch.x.batch();
    samples += batch.x.batch();
  }
  model.train();
  return sum / samples;
}

// Continues `prompt` (its last T ids are the context) by `count` characters drawn from the
// model's distribution at temperature 0.8.
template <class Model>
std::string sample_text(Model& model, const Alphabet& alphabet, std::vector<int> prompt, int count,
                        std::uint64_t seed) {
  model.eval();
  etnn::Rng rng(seed);
  etnn::Tensor<float, Tokens> x(1);
  std::string out;
  std::vector<double> p(vocabulary);
  for (int i = 0; i < count; ++i) {
    std::copy(prompt.end() - context, prompt.end(), x.data());
    const auto logits = model.forward(x);
    const float* last = logits.data() + static_cast<std::size_t>(context - 1) * vocabulary;
    const int used = static_cast<int>(alphabet.byte_of.size());
    const double top = *std::max_element(last, last + used);
    double sum = 0;
    for (int v = 0; v < used; ++v) sum += (p[static_cast<std::size_t>(v)] = std::exp((last[v] - top) / 0.8));
    double r = rng.uniform() * sum;
    int next = used - 1;
    for (int v = 0; v < used; ++v)
      if ((r -= p[static_cast<std::size_t>(v)]) < 0) {
        next = v;
        break;
      }
    prompt.push_back(next);
    out.push_back(static_cast<char>(alphabet.byte_of[static_cast<std::size_t>(next)]));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  example::parse_flags(argc, argv, usage,
                       {{"--data", &opt.data}, {"--epochs", &opt.epochs}, {"--steps", &opt.steps},
                        {"--batch", &opt.batch}, {"--lr", &opt.lr}, {"--threads", &opt.threads},
                        {"--seed", &opt.seed}, {"--sample", &opt.sample}, {"--save", &opt.save}});
  if (opt.epochs < 0 || opt.steps <= 0 || opt.batch <= 0 || opt.sample < 0) example::exit_with_usage(usage, 2);
  etnn::set_num_threads(opt.threads);
  try {
    const std::string text = read_corpus(opt.data);
    if (text.size() < 20 * (context + 1)) {
      std::fprintf(stderr,
                   "char_lm: no corpus at '%s' (%zu bytes; at least %d needed): install Debian's fortunes "
                   "(apt-get install fortunes) for the default, or pass --data FILE\n",
                   opt.data.c_str(), text.size(), 20 * (context + 1));
      return 2;
    }
    const Alphabet alphabet(text);
    const std::vector<int> ids = alphabet.encode(text);
    const std::size_t split = ids.size() - ids.size() / 10;
    const std::vector<int> train_ids(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
    const std::vector<int> val_ids(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
    std::vector<std::size_t> val_starts;
    for (std::size_t s = 0; s + context + 1 <= val_ids.size() && val_starts.size() < 512; s += context)
      val_starts.push_back(s);
    const auto validation = windows(val_ids, val_starts);

    etnn::Model<Gpt> model(opt.seed);
    etnn::loss::SequenceCrossEntropy loss;
    etnn::optim::AdamW adamw(model, char_lm::optimizer_options(opt.lr));
    char_lm::set_schedule(adamw, static_cast<std::int64_t>(opt.epochs) * opt.steps);
    etnn::Trainer trainer(model, loss, adamw);
    const double unigram = unigram_nats(train_ids, val_ids);
    std::printf("etnn char_lm: %s\n%zu parameters; corpus %s: %zu characters (%zu distinct), %zu train / %zu "
                "validation; batch %d x %d characters, AdamW lr %g with cosine decay, %d threads\n",
                Gpt::describe().c_str(), Gpt::num_params, opt.data.c_str(), text.size(), alphabet.byte_of.size(),
                train_ids.size(), val_ids.size(), opt.batch, context, opt.lr, etnn::num_threads());
    std::printf("unigram model: %.4f nats/char on the validation text\n", unigram);
    std::fflush(stdout);

    etnn::Rng rng(opt.seed + 1);
    double val_loss = mean_loss(model, loss, validation);
    std::printf("before training: validation loss %.4f nats/char\n", val_loss);
    for (int epoch = 0; epoch < opt.epochs; ++epoch) {
      std::vector<std::size_t> starts(static_cast<std::size_t>(opt.steps) * static_cast<std::size_t>(opt.batch));
      for (auto& s : starts) s = static_cast<std::size_t>(rng.below(train_ids.size() - context - 1));
      const auto train = windows(train_ids, starts);
      etnn::data::DataLoader loader(train, {.batch = opt.batch, .shuffle = false});
      auto stats = example::run_epoch(loader, epoch, opt.epochs, train.size(),
                                      [&](const auto& batch) { return trainer.step(batch); });
      val_loss = mean_loss(model, loss, validation);
      std::printf("epoch %2d/%d  train loss %.4f  validation loss %.4f nats/char (unigram %.4f: %.1f%% lower)  "
                  "%.0f characters/s  %.1f s\n",
                  epoch + 1, opt.epochs, stats.mean_loss(), val_loss, unigram, 100 * (1 - val_loss / unigram),
                  stats.samples_per_second() * context, stats.seconds);
      std::fflush(stdout);
    }
    std::vector<int> prompt(val_ids.begin(), val_ids.begin() + context);
    std::string prompt_text;
    for (int id : prompt) prompt_text.push_back(static_cast<char>(alphabet.byte_of[static_cast<std::size_t>(id)]));
    std::printf("--- prompt (the validation text's first %d characters) ---\n%s\n--- sampled continuation ---\n%s\n",
                context, prompt_text.c_str(), sample_text(model, alphabet, prompt, opt.sample, opt.seed + 2).c_str());
    if (!opt.save.empty()) {
      etnn::io::save(model, opt.save);
      std::printf("saved %s\n", opt.save.c_str());
    }
  } catch (const etnn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
