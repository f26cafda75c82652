#include "tokenizer/tokenizer.h"

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/files.h"
#include "tokenizer/bridge_util.h"
#include "tokenizer/hf_compat.h"
#include "tokenizer/tokenizer_config.h"

namespace mlxcpp {

namespace fs = std::filesystem;
using nlohmann::json;

namespace detail {
struct TokenizerImpl {
  fs::path dir;
  std::string file;  // tokenizer.json path, for messages
  bridge::TokenizerHandle handle;
  TokenizerConfig config;
  EffectiveTokenizer effective;  // .json (the skeleton) emptied after loading
  bool cleanup_spaces = false;   // transformers' clean_up_tokenization (never for BPE)
  std::string file_decoder;      // tokenizer.json's "decoder" as written in the file ("" if none)
};

const MlxcppTokenizer* bridge_handle(const TokenizerImpl& impl) { return impl.handle.get(); }
}  // namespace detail

namespace {

using bridge::TokJsonHandle;

// tokenizer.json parsed once, in the bridge, which keeps model.vocab and model.merges (the bulk
// of the file); C++ gets the rest as a small skeleton to edit.
TokJsonHandle parse_tokenizer_json(const fs::path& file) {
  auto text = read_file(file);
  if (!text) {
    throw TokenizerError(file.string() + (fs::exists(file) ? ": cannot open file" : ": file not found"));
  }
  bridge::Status st;
  MlxcppTokJson* raw = nullptr;
  st.rc = mlxcpp_tokjson_parse(bridge::bytes(*text), text->size(), &raw, &st.err);
  if (!st.ok()) throw TokenizerError(file.string() + ": invalid JSON: " + st.message());
  return TokJsonHandle(raw);
}

json skeleton_json(const MlxcppTokJson* h, const std::string& file) {
  bridge::Status st;
  MlxcppBuf out{nullptr, 0};
  st.rc = mlxcpp_tokjson_skeleton(h, &out, &st.err);
  if (!st.ok()) throw TokenizerError(file + ": " + st.message());
  return json::parse(bridge::take(out));  // the bridge wrote it: valid
}

// model.vocab as the bridge holds it.
class BridgeVocab : public VocabLookup {
 public:
  explicit BridgeVocab(const MlxcppTokJson* h) : h_(h) {}
  std::optional<int64_t> size() const override {
    int64_t n = mlxcpp_tokjson_vocab_size(h_);
    return n < 0 ? std::nullopt : std::optional<int64_t>(n);
  }
  std::optional<int64_t> id(const std::string& token) const override {
    int64_t id = 0;
    // Tokens come from parsed JSON (valid UTF-8), so -1 cannot happen; treat it as absent.
    if (mlxcpp_tokjson_vocab_id(h_, bridge::bytes(token), token.size(), &id) != 1) return std::nullopt;
    return id;
  }

 private:
  const MlxcppTokJson* h_;
};

// transformers' PreTrainedTokenizerBase.clean_up_tokenization.
std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    std::string out;
    std::string_view f(from);
    size_t pos = 0;
    for (size_t hit; (hit = s.find(f, pos)) != std::string::npos; pos = hit + f.size()) {
      out.append(s, pos, hit - pos).append(to);
    }
    out.append(s, pos, std::string::npos);
    s = std::move(out);
  }
  return s;
}

}  // namespace

Tokenizer Tokenizer::load(const fs::path& dir) {
  auto impl = std::make_shared<detail::TokenizerImpl>();
  impl->dir = dir;
  fs::path file = dir / "tokenizer.json";
  impl->file = file.string();
  if (!fs::exists(file)) throw TokenizerError(impl->file + ": file not found");
  impl->config = TokenizerConfig::load(dir);
  TokJsonHandle parsed = parse_tokenizer_json(file);
  json skeleton = skeleton_json(parsed.get(), impl->file);
  if (skeleton.is_object() && skeleton.contains("decoder")) impl->file_decoder = skeleton["decoder"].dump();
  impl->effective = effective_tokenizer(std::move(skeleton), BridgeVocab(parsed.get()), impl->config, impl->file);
  std::string text = impl->effective.json.dump(-1, ' ', false, json::error_handler_t::strict);
  std::string model_type = impl->effective.json["model"].value("type", "");
  impl->effective.json = json();  // the bridge has the document from here on
  impl->cleanup_spaces = impl->config.clean_up_tokenization_spaces && model_type != "BPE";

  bridge::Status st;
  MlxcppTokenizer* raw = nullptr;
  st.rc = mlxcpp_tokenizer_from_tokjson(parsed.get(), bridge::bytes(text), text.size(), &raw, &st.err);
  if (!st.ok()) throw TokenizerError(impl->file + ": " + st.message());
  impl->handle.reset(raw);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  bridge::Status st;
  MlxcppIds ids{nullptr, 0};
  st.rc = mlxcpp_tokenizer_encode(impl_->handle.get(), bridge::bytes(text), text.size(), add_special_tokens,
                                  &ids, &st.err);
  if (!st.ok()) throw TokenizerError(impl_->file + ": " + st.message());
  return bridge::take(ids);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<uint32_t> u;
  u.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0) throw TokenizerError(impl_->file + ": decode: negative token id " + std::to_string(id));
    u.push_back(static_cast<uint32_t>(id));
  }
  bridge::Status st;
  MlxcppBuf out{nullptr, 0};
  st.rc = mlxcpp_tokenizer_decode(impl_->handle.get(), u.data(), u.size(), skip_special_tokens, &out, &st.err);
  if (!st.ok()) throw TokenizerError(impl_->file + ": " + st.message());
  std::string text = bridge::take(out);
  return impl_->cleanup_spaces ? clean_up_tokenization(std::move(text)) : text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  uint32_t id = 0;
  int rc = mlxcpp_tokenizer_token_to_id(impl_->handle.get(), bridge::bytes(token), token.size(), &id);
  if (rc < 0) throw TokenizerError(impl_->file + ": token_to_id: the token is not valid UTF-8");
  if (rc == 0) return std::nullopt;
  return static_cast<int32_t>(id);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0) return std::nullopt;
  MlxcppBuf out{nullptr, 0};
  int rc = mlxcpp_tokenizer_id_to_token(impl_->handle.get(), static_cast<uint32_t>(id), &out);
  if (rc <= 0) return std::nullopt;
  return bridge::take(out);
}

size_t Tokenizer::vocab_size(bool with_added_tokens) const {
  return mlxcpp_tokenizer_vocab_size(impl_->handle.get(), with_added_tokens);
}

const std::string& Tokenizer::file_decoder_json() const { return impl_->file_decoder; }

const std::vector<std::pair<std::string, std::string>>& Tokenizer::special_tokens_map() const {
  return impl_->effective.special_tokens_map;
}

std::optional<std::string> Tokenizer::special_token(const std::string& name) const {
  for (const auto& [k, v] : impl_->effective.special_tokens_map) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::vector<int32_t> Tokenizer::eos_token_ids() const {
  std::vector<int32_t> out;
  if (auto eos = eos_token()) {
    if (auto id = token_to_id(*eos)) out.push_back(*id);
  }
  return out;
}

const std::vector<std::string>& Tokenizer::all_special_tokens() const { return impl_->effective.all_special_tokens; }

const std::map<std::string, std::string>& Tokenizer::chat_templates() const { return impl_->config.chat_templates; }

std::optional<std::string> Tokenizer::config_string(const std::string& key) const {
  const auto& raw = impl_->config.raw;
  auto it = raw.is_object() ? raw.find(key) : raw.end();
  if (it == raw.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

const std::string& Tokenizer::chat_template(const std::string& name, bool with_tools) const {
  const auto& all = impl_->config.chat_templates;
  auto pick = [&](const std::string& n) { return all.find(n); };
  auto it = all.end();
  if (!name.empty()) {
    it = pick(name);
    if (it == all.end()) throw TemplateError(impl_->config.file + ": no chat template named '" + name + "'");
  } else if (with_tools && pick("tool_use") != all.end()) {
    it = pick("tool_use");
  } else {
    it = pick("default");
  }
  if (it == all.end()) {
    throw TemplateError(impl_->config.file + ": field 'chat_template': the tokenizer has no " +
                        (all.empty() ? std::string("chat template") : "default chat template (named ones only)"));
  }
  return it->second;
}

const std::string& Tokenizer::backend_class() const { return impl_->effective.backend_class; }

std::string Tokenizer::pipeline_json() const {
  bridge::Status st;
  MlxcppBuf out{nullptr, 0};
  st.rc = mlxcpp_tokenizer_to_json(impl_->handle.get(), &out, &st.err);
  if (!st.ok()) throw TokenizerError(impl_->file + ": " + st.message());
  return bridge::take(out);
}

const fs::path& Tokenizer::dir() const { return impl_->dir; }

// --- streaming ---------------------------------------------------------------------------------

struct StreamDecoder::State {
  std::shared_ptr<const detail::TokenizerImpl> impl;
  bridge::DecodeStreamHandle stream;
};

StreamDecoder Tokenizer::stream_decoder(bool skip_special_tokens) const { return StreamDecoder(impl_, skip_special_tokens); }

StreamDecoder::StreamDecoder(std::shared_ptr<const detail::TokenizerImpl> impl, bool skip_special_tokens)
    : state_(std::make_unique<State>()) {
  state_->impl = std::move(impl);
  state_->stream.reset(mlxcpp_decode_stream_new(skip_special_tokens));
}
StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;
StreamDecoder::~StreamDecoder() = default;

std::string StreamDecoder::push(int32_t id) {
  if (id < 0) throw TokenizerError(state_->impl->file + ": stream decode: negative token id " + std::to_string(id));
  bridge::Status st;
  MlxcppBuf piece{nullptr, 0};
  st.rc = mlxcpp_decode_stream_step(state_->stream.get(), state_->impl->handle.get(), static_cast<uint32_t>(id),
                                    &piece, &st.err);
  if (!st.ok()) throw TokenizerError(state_->impl->file + ": " + st.message());
  return bridge::take(piece);
}

}  // namespace mlxcpp
