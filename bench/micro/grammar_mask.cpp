// What one grammar mask costs alone: every valid instance of every realistic schema
// (tests/structured/schemas) written out as JSON, fed token by token to a fresh matcher with each
// mask timed (the last of --reps passes, the earlier ones warm the caches as a long generation
// would). --thrash-mb N sweeps N MiB between masks, as a forward pass does beside them in
// generation. Prints mean, p50, p90, p99, max, and the --top slowest masks with where they fell.
//   build/bench/grammar_mask MODEL_DIR [SCHEMAS_JSON] [--indent N] [--reps N] [--top N] [--thrash-mb N]
// --indent -1 (default) writes instances as json.dumps does ({"a": 1, "b": 2}); N >= 0 indents by N.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/grammar.h"
#include "tokenizer/tokenizer.h"

using clk = std::chrono::steady_clock;

namespace {

struct Options {
  std::string model;
  std::string schemas = "tests/structured/schemas/realistic.json";
  int indent = -1, reps = 3, top = 10;
  size_t thrash_mb = 0;
};

struct Sample {
  double us;
  std::string where;
};

// An instance as text: json.dumps's ", " / ": " separators, or indented by `indent`.
std::string instance_text(const nlohmann::json& data, int indent) {
  const std::string text = data.dump(indent);
  if (indent >= 0) return text;
  std::string out;
  bool in_str = false, esc = false;
  for (char ch : text) {
    out += ch;
    if (in_str) {
      if (esc) esc = false;
      else if (ch == '\\') esc = true;
      else if (ch == '"') in_str = false;
    } else if (ch == '"') {
      in_str = true;
    } else if (ch == ',' || ch == ':') {
      out += ' ';
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? argv[++i] : "0"; };
    if (!std::strcmp(argv[i], "--indent")) o.indent = std::atoi(next());
    else if (!std::strcmp(argv[i], "--reps")) o.reps = std::max(1, std::atoi(next()));
    else if (!std::strcmp(argv[i], "--top")) o.top = std::atoi(next());
    else if (!std::strcmp(argv[i], "--thrash-mb")) o.thrash_mb = std::strtoul(next(), nullptr, 10);
    else if (o.model.empty()) o.model = argv[i];
    else o.schemas = argv[i];
  }
  if (o.model.empty()) {
    std::fprintf(stderr, "usage: grammar_mask MODEL_DIR [SCHEMAS_JSON] [--indent N] [--reps N] [--top N] [--thrash-mb N]\n");
    return 2;
  }
  auto tok = mlxcpp::Tokenizer::load(o.model);
  const auto t0 = clk::now();
  mlxcpp::TokenEnv env(tok, tok.eos_token_ids());
  std::printf("token env: %zu tokens, %.0f ms\n", env.vocab_size(),
              std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  std::ifstream in(o.schemas);
  if (!in) {
    std::fprintf(stderr, "grammar_mask: cannot read %s\n", o.schemas.c_str());
    return 2;
  }
  const auto cases = nlohmann::json::parse(in);
  std::vector<Sample> samples;
  std::vector<uint32_t> words(env.mask_words());
  std::vector<unsigned char> thrash(o.thrash_mb << 20);
  int skipped = 0;
  for (const auto& c : cases) {
    std::optional<mlxcpp::Grammar> g;
    try {
      g.emplace(env.compile({mlxcpp::GrammarKind::kJsonSchema, c["schema"].dump(), mlxcpp::kDefaultJsonWhitespace}));
    } catch (const std::exception&) {
      ++skipped;  // the ratchet's (tests/structured/ratchet.txt)
      continue;
    }
    for (const auto& t : c["tests"]) {
      if (!t.value("valid", false)) continue;
      const std::string text = instance_text(t["data"], o.indent);
      const auto ids = tok.encode(text, false);
      for (int r = 0; r < o.reps; ++r) {
        auto m = g->matcher();
        for (size_t i = 0; i <= ids.size(); ++i) {
          for (size_t k = 0; k < thrash.size(); k += 64) thrash[k] += 1;
          const auto a = clk::now();
          m.compute_mask(words.data());
          const double us = std::chrono::duration<double, std::micro>(clk::now() - a).count();
          if (r == o.reps - 1) {
            samples.push_back({us, c.value("description", "?") + " @" + std::to_string(i) + " after '" +
                                       tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + i)) + "'"});
          }
          if (i == ids.size() || !mlxcpp::mask_allows(words, ids[i]) || !m.consume(ids[i])) break;
        }
      }
    }
  }
  if (samples.empty()) {
    std::fprintf(stderr, "grammar_mask: no instance to feed\n");
    return 1;
  }
  std::vector<double> us;
  for (const auto& s : samples) us.push_back(s.us);
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  auto pct = [&](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * (us.size() - 1) + 0.5))]; };
  std::printf("%zu masks: mean %.1f us, p50 %.1f, p90 %.1f, p99 %.1f, max %.1f (%d schemas not compiled)\n", us.size(),
              sum / us.size(), pct(0.5), pct(0.9), pct(0.99), us.back(), skipped);
  std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.us > b.us; });
  for (int i = 0; i < o.top && i < static_cast<int>(samples.size()); ++i) {
    std::printf("  %7.1f us  %s\n", samples[i].us, samples[i].where.c_str());
  }
  return 0;
}
