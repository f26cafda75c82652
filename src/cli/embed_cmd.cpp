// `mlxcpp embed`: texts (or token ids) -> embeddings, one JSON object per input and line:
// {"index", "tokens" (the ids embedded), "embedding"}. Last-token pooling + L2 normalization, as
// Qwen3-Embedding is used (generate/embedder.h); texts are encoded as transformers does by default
// (with the tokenizer's special tokens: Qwen3-Embedding's tokenizer appends <|endoftext|>).
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/errors.h"
#include "generate/embedder.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::cli {

namespace {

struct EmbedArgs {
  ModelArgs model;
  std::vector<std::string> texts;
  std::optional<std::string> file;
  std::vector<std::string> ids;
  int dimensions = 0;
  bool no_normalize = false;
};

struct Input {
  std::string source;  // for messages: "--text 2", "--file line 3", "--ids 1"
  std::vector<int> ids;
};

std::vector<Input> read_inputs(const EmbedArgs& a) {
  std::vector<Input> out;
  for (size_t i = 0; i < a.ids.size(); ++i) {
    auto source = fmt::format("--ids {}", i + 1);
    out.push_back({source, parse_ids(a.ids[i], source)});
  }
  if (a.texts.empty() && !a.file) return out;
  auto tok = Tokenizer::load(a.model.model);
  auto add = [&](std::string source, const std::string& text) {
    if (text.empty()) throw RequestError(source + " is empty");
    auto enc = tok.encode(text, /*add_special_tokens=*/true);
    out.push_back({std::move(source), {enc.begin(), enc.end()}});
  };
  for (size_t i = 0; i < a.texts.size(); ++i) add(fmt::format("--text {}", i + 1), a.texts[i]);
  if (a.file) {
    std::ifstream in(*a.file, std::ios::binary);
    if (!in) throw ConfigError(fmt::format("--file: cannot open '{}'", *a.file));
    int line_no = 0;
    for (std::string line; std::getline(in, line);) add(fmt::format("--file line {}", ++line_no), line);
    if (in.bad()) throw ConfigError(fmt::format("--file: read error in '{}'", *a.file));
  }
  return out;
}

int run(const EmbedArgs& a) {
  auto inputs = read_inputs(a);  // tokenizer errors before the model loads
  auto loaded = load_model(a.model);
  const int context = loaded.checkpoint.context_length();
  std::vector<std::vector<int>> ids;
  for (const auto& in : inputs) {
    if (in.ids.empty()) throw RequestError(in.source + ": no tokens");
    if (context > 0 && static_cast<int>(in.ids.size()) > context) {
      throw RequestError(fmt::format("{}: {} tokens, over the model's context window of {} tokens", in.source,
                                     in.ids.size(), context));
    }
    ids.push_back(in.ids);
  }
  const int hidden = loaded.model->hidden_size();
  if (a.dimensions < 0 || a.dimensions > hidden) {
    throw ConfigError(fmt::format("--dimensions: must be in [1, {}] (the model's hidden size), got {}", hidden,
                                  a.dimensions));
  }
  EmbedOptions opts;
  opts.normalize = !a.no_normalize;
  opts.dimensions = a.dimensions;
  auto vectors = embed(*loaded.model, ids, opts);
  for (size_t i = 0; i < vectors.size(); ++i) {
    nlohmann::json line{{"index", i}, {"tokens", ids[i]}, {"embedding", vectors[i]}};
    std::cout << line.dump() << "\n";
  }
  return 0;
}

}  // namespace

Action add_embed(CLI::App& app) {
  auto a = std::make_shared<EmbedArgs>();
  auto* sub = app.add_subcommand("embed", "Embed texts (last-token pooling, L2-normalized; one JSON object per line)");
  add_model_options(sub, a->model);
  sub->add_option("--text", a->texts, "A text to embed (repeatable)");
  sub->add_option("--file", a->file, "Embed each line of this file (after the --text inputs)");
  sub->add_option("--ids", a->ids, "Comma-separated token ids of one input, embedded as given (repeatable; first)");
  sub->add_option("--dimensions", a->dimensions, "Keep the first N values, then normalize (Matryoshka; 0 = all)")
      ->capture_default_str();
  sub->add_flag("--no-normalize", a->no_normalize, "Print the last token's hidden state without L2 normalization");
  return [a] {
    if (a->texts.empty() && !a->file && a->ids.empty()) {
      throw ConfigError("embed: give --text TEXT, --file FILE or --ids IDS");
    }
    resolve_model(a->model);
    return run(*a);
  };
}

}  // namespace mlxcpp::cli
