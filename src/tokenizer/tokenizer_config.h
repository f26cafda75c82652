// tokenizer_config.json as transformers (v5) reads it: the tokenizer class, named special tokens
// (strings or AddedToken objects), added_tokens_decoder, chat templates, decode options.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlxcpp {

// One entry of `added_tokens` / `added_tokens_decoder` (tokenizers' AddedToken).
struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken&) const = default;
};

struct TokenizerConfig {
  std::string file;             // path, for error messages
  nlohmann::json raw;           // the whole document ({} when the file is absent)
  std::string tokenizer_class;  // "" when absent
  // Named special tokens in transformers' order (bos, eos, unk, sep, pad, cls, mask, then the
  // model-specific names of a dict `extra_special_tokens`). nullopt = explicitly null.
  std::vector<std::pair<std::string, std::optional<AddedToken>>> named_special;
  std::vector<AddedToken> extra_special;  // additional_special_tokens / extra_special_tokens list
  std::optional<std::map<int64_t, AddedToken>> added_tokens_decoder;
  std::map<std::string, std::string> chat_templates;  // "default" for a single template
  bool clean_up_tokenization_spaces = false;
  std::optional<bool> add_prefix_space;
  std::optional<bool> legacy;
  bool split_special_tokens = false;

  // Reads `<dir>/tokenizer_config.json` (absent file = empty config) and, like transformers,
  // `<dir>/chat_template.jinja` / `chat_template.json`, which take priority over the config.
  static TokenizerConfig load(const std::filesystem::path& dir);

  // The value of a named special token as given (nullopt when absent or null).
  std::optional<AddedToken> named(const std::string& key) const;
  bool has_named(const std::string& key) const;
};

}  // namespace mlxcpp
