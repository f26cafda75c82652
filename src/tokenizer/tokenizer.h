// The tokenizer of a model directory, as transformers' AutoTokenizer (and so mlx-lm) sees it:
// tokenizer.json through HF `tokenizers` (Rust bridge) after transformers' per-class rules
// (hf_compat.h), plus tokenizer_config.json's special tokens and chat templates.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlxcpp {

namespace detail {
struct TokenizerImpl;
}

class StreamDecoder;
class TokenEnv;

class Tokenizer {
 public:
  // Reads <dir>/tokenizer.json (+ tokenizer_config.json, chat_template.jinja when present).
  // Errors are TokenizerError naming the file (and field).
  static Tokenizer load(const std::filesystem::path& dir);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // A streaming detokenizer for this tokenizer (which it keeps alive).
  StreamDecoder stream_decoder(bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  size_t vocab_size(bool with_added_tokens = true) const;

  // Named special tokens (bos_token, eos_token, ...) as transformers' special_tokens_map.
  const std::vector<std::pair<std::string, std::string>>& special_tokens_map() const;
  std::optional<std::string> special_token(const std::string& name) const;  // e.g. "bos_token"
  std::optional<std::string> bos_token() const { return special_token("bos_token"); }
  std::optional<std::string> eos_token() const { return special_token("eos_token"); }
  // Ids of eos_token (config.json / generation_config.json may add more; see artifacts/).
  std::vector<int32_t> eos_token_ids() const;
  const std::vector<std::string>& all_special_tokens() const;

  // Chat templates by name ("default" for a single one); empty when the model has none.
  const std::map<std::string, std::string>& chat_templates() const;
  // transformers' get_chat_template: a named one, else "tool_use" when tools are given, else
  // "default". Throws TemplateError when there is none.
  const std::string& chat_template(const std::string& name = "", bool with_tools = false) const;

  const std::string& backend_class() const;  // "TokenizersBackend", "LlamaTokenizer", ...
  // The loaded pipeline as tokenizer.json text (to compare with transformers' backend).
  std::string pipeline_json() const;
  const std::filesystem::path& dir() const;
  // tokenizer.json's "decoder" as the file has it (before transformers' rules), as JSON text;
  // empty when the file has none.
  const std::string& file_decoder_json() const;
  // A top-level string of tokenizer_config.json (e.g. "tool_parser_type"); nullopt when absent
  // or not a string.
  std::optional<std::string> config_string(const std::string& key) const;

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const detail::TokenizerImpl> impl_;  // shared with StreamDecoders
  friend class StreamDecoder;
  friend class TokenEnv;
};

// Incremental detokenization (tokenizers' DecodeStream): push ids, get text pieces that hold only
// whole UTF-8 characters; the pieces concatenate to decode(all ids).
class StreamDecoder {
 public:
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;
  ~StreamDecoder();

  // The text completed by this id ("" while inside a character or a merged piece).
  std::string push(int32_t id);

 private:
  StreamDecoder(std::shared_ptr<const detail::TokenizerImpl> impl, bool skip_special_tokens);
  struct State;
  std::unique_ptr<State> state_;
  friend class Tokenizer;
};

}  // namespace mlxcpp
