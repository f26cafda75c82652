// `mlxcpp perplexity --model DIR --file TEXT [--ctx 512] [--chunks N] [--kl-base DIR]`: the
// quality check quantizations are judged by, computed as llama-perplexity does (see
// generate/perplexity.h). Prints the running perplexity after each window, then
// "Final estimate: PPL = X +/- E"; --json prints one JSON object instead.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/progress.h"
#include "core/errors.h"
#include "generate/perplexity.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::cli {

namespace {

struct PerplexityArgs {
  ModelArgs model;
  std::string file;
  int ctx = 512;
  int chunks = -1;
  std::optional<std::string> kl_base;
  bool json = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("--file: cannot open '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("--file: read error in '{}'", path));
  if (s.str().empty()) throw ConfigError(fmt::format("--file: '{}' is empty", path));
  return s.str();
}

// The BOS id where encoding with special tokens puts one first (llama-perplexity's add_bos).
std::optional<int> added_bos(const Tokenizer& tok) {
  auto bos = tok.bos_token();
  auto id = bos ? tok.token_to_id(*bos) : std::nullopt;
  if (!id) return std::nullopt;
  auto with = tok.encode("a", /*add_special_tokens=*/true);
  if (with.empty() || with.front() != *id) return std::nullopt;
  return *id;
}

std::string plus_minus(const MeanError& m, double scale, int digits) {
  return fmt::format("{:.{}f} +/- {:.{}f}", m.mean * scale, digits, m.error * scale, digits);
}

int run(const PerplexityArgs& a) {
  const auto text = read_text(a.file);
  auto tok = Tokenizer::load(a.model.model);
  auto enc = tok.encode(text, /*add_special_tokens=*/true);
  std::vector<int> tokens(enc.begin(), enc.end());
  const auto bos = added_bos(tok);
  if (tokens.size() < 2 * static_cast<size_t>(std::max(a.ctx, 0))) {  // before the model loads
    throw RequestError(fmt::format("--file: '{}' has {} tokens; --ctx {} needs at least {} (two windows)", a.file,
                                   tokens.size(), a.ctx, 2 * a.ctx));
  }
  auto loaded = load_model(a.model);
  std::optional<LoadedModel> base;
  if (a.kl_base) {
    ModelArgs b = a.model;
    b.model = *a.kl_base;
    resolve_model(b);
    base = load_model(b);
  }
  const int context = loaded.checkpoint.context_length();
  if (context > 0 && a.ctx > context) {
    std::cerr << fmt::format("warning: --ctx {} is over the model's context window of {} tokens\n", a.ctx, context);
  }
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (!a.json) {
    std::cerr << fmt::format("perplexity: {} tokens, {} per window{}\n", tokens.size(), a.ctx,
                             bos ? fmt::format(", BOS {} at each window's start", *bos) : "");
  }
  PerplexityOptions opts;
  opts.ctx = a.ctx;
  opts.chunks = a.chunks;
  auto progress = [&](int done, int total) {
    if (!tty) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress_bar(done, total, fmt::format("windows, {:.1f} s, about {:.0f} s left", s, s / done * (total - done)));
  };
  auto r = perplexity(*loaded.model, tokens, bos, opts, base ? base->model.get() : nullptr, progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.json) {
    nlohmann::json j{{"ppl", r.ppl},         {"ppl_error", r.ppl_error},     {"nll", r.nll.mean},
                     {"nll_error", r.nll.error}, {"ctx", r.ctx},              {"chunks", r.chunks},
                     {"scored", r.scored},   {"tokens", tokens.size()},      {"running_ppl", r.running_ppl},
                     {"bos", bos ? nlohmann::json(*bos) : nlohmann::json()}, {"seconds", seconds}};
    if (r.kl) {
      j["kl"] = r.kl->mean;
      j["kl_error"] = r.kl->error;
      j["top1"] = r.top1->mean;
      j["top1_error"] = r.top1->error;
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  for (size_t i = 0; i < r.running_ppl.size(); ++i) std::cout << fmt::format("[{}]{:.4f},", i + 1, r.running_ppl[i]);
  std::cout << "\n"
            << fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}  ({} windows of {}, {} tokens scored, {:.1f} s)\n",
                           r.ppl, r.ppl_error, r.chunks, r.ctx, r.scored, seconds);
  if (r.kl) {
    std::cout << fmt::format("Mean KLD: {}\n", plus_minus(*r.kl, 1.0, 6))
              << fmt::format("Same top p: {} %\n", plus_minus(*r.top1, 100.0, 3));
  }
  return 0;
}

}  // namespace

Action add_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  auto* sub = app.add_subcommand("perplexity", "Perplexity of a text file (llama-perplexity's windows and scoring)");
  add_model_options(sub, a->model);
  sub->add_option("--file,-f", a->file, "Text file to score")->required();
  sub->add_option("--ctx,-c", a->ctx, "Tokens a window (the second half of each is scored)")->capture_default_str();
  sub->add_option("--chunks", a->chunks, "Windows to score (-1: all the text fills)")->capture_default_str();
  sub->add_option("--kl-base", a->kl_base,
                  "Base model (same vocabulary): also print the mean KL divergence from it and top-1 agreement");
  sub->add_flag("--json", a->json, "Print one JSON object instead of the text report");
  return [a] {
    resolve_model(a->model);
    return run(*a);
  };
}

}  // namespace mlxcpp::cli
