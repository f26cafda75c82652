// `mlxcpp tokenize`: text -> token ids with the snapshot's tokenizer (as transformers encodes).
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  std::optional<std::string> text;
  std::optional<std::string> file;
  bool json = false;
  bool add_special = false;
};

std::string format_ids(const std::vector<int32_t>& ids, bool json) {
  if (json) return nlohmann::json(ids).dump();
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

int run(const TokenizeArgs& a) {
  auto tok = Tokenizer::load(resolve_model_dir(a.model, /*require_config=*/false).string());
  if (a.text) {
    std::cout << format_ids(tok.encode(*a.text, a.add_special), a.json) << "\n";
    return 0;
  }
  std::ifstream in(*a.file, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("--file: cannot open '{}'", *a.file));
  // One array per line: the line without its "\n" (a "\r" stays part of the text).
  for (std::string line; std::getline(in, line);) {
    std::cout << format_ids(tok.encode(line, a.add_special), true) << "\n";
  }
  if (in.bad()) throw ConfigError(fmt::format("--file: read error in '{}'", *a.file));
  return 0;
}

}  // namespace

Action add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand("tokenize", "Print the token ids of a text");
  sub->add_option("--model", a->model, "Folder with tokenizer.json (+ tokenizer_config.json), or a name `mlxcpp ls` shows")->required();
  auto* text = sub->add_option("--text", a->text, "The text to encode");
  auto* file = sub->add_option("--file", a->file, "Encode each line of this file (one JSON array per line)");
  text->excludes(file);
  sub->add_flag("--json", a->json, "Print a JSON array instead of space-separated ids");
  sub->add_flag("--add-special", a->add_special, "Add the tokenizer's special tokens (e.g. BOS)");
  return [a] {
    if (!a->text && !a->file) throw ConfigError("tokenize: give --text TEXT or --file FILE");
    return run(*a);
  };
}

}  // namespace mlxcpp::cli
