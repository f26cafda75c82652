#include "tokenizer/hf_compat.h"

#include <map>
#include <optional>
#include <unordered_map>

#include "core/errors.h"

namespace mlxcpp {

using nlohmann::json;

namespace {

// Qwen2Tokenizer's PRETOKENIZE_REGEX.
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A class whose __init__ rebuilds the backend, with the defaults of its named tokens.
struct ClassSpec {
  const char* name;
  std::vector<std::pair<const char*, const char*>> defaults;  // nullptr value = None
};

const ClassSpec* rebuilding_class(const std::string& name) {
  static const ClassSpec kSpecs[] = {
      {"LlamaTokenizer", {{"unk_token", "<unk>"}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}},
      {"GemmaTokenizer",
       {{"unk_token", "<unk>"}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"}, {"pad_token", "<pad>"},
        {"mask_token", "<mask>"}}},
      {"Qwen2Tokenizer",
       {{"unk_token", "<|endoftext|>"}, {"bos_token", nullptr}, {"eos_token", "<|endoftext|>"},
        {"pad_token", "<|endoftext|>"}}},
  };
  for (const auto& s : kSpecs) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

// AutoTokenizer's choice of class from tokenizer_config.json (config.json's model_type, which
// AutoTokenizer may also consult, is not used: the fixtures and common checkpoints agree).
std::string resolve_class(const TokenizerConfig& cfg, bool bytelevel) {
  std::string cls = cfg.tokenizer_class;
  if (cls == "PreTrainedTokenizerFast" || cls.empty()) return "TokenizersBackend";
  if (cls.size() > 4 && cls.ends_with("Fast")) cls.resize(cls.size() - 4);
  // Llama-3 style repos declare LlamaTokenizer but ship a ByteLevel tokenizer.json.
  if (cls == "LlamaTokenizer" && bytelevel) return "TokenizersBackend";
  return cls;
}

bool mentions_bytelevel(const json& j) {
  if (j.is_object()) {
    if (auto t = j.find("type"); t != j.end() && t->is_string() && *t == "ByteLevel") return true;
    for (const auto& [k, v] : j.items()) {
      if (k != "vocab" && k != "merges" && k != "added_tokens" && mentions_bytelevel(v)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (mentions_bytelevel(v)) return true;
    }
  }
  return false;
}

json token_json(int64_t id, const AddedToken& t) {
  return json{{"id", id},         {"content", t.content},       {"single_word", t.single_word},
              {"lstrip", t.lstrip}, {"rstrip", t.rstrip},       {"normalized", t.normalized},
              {"special", t.special}};
}

// tokenizers' AddedVocabulary::add_tokens: same content keeps its id (flags replaced unless
// identical), else the model vocab's id, else the next free id.
class AddedVocab {
 public:
  explicit AddedVocab(const VocabLookup& model) : model_(model), model_size_(model.size().value_or(0)) {}

  void load(const json& added, const std::string& file) {
    for (size_t i = 0; i < added.size(); ++i) {
      const json& e = added[i];
      std::string field = "added_tokens[" + std::to_string(i) + "]";
      if (!e.contains("id") || !e["id"].is_number_integer() || !e.contains("content") || !e["content"].is_string()) {
        throw TokenizerError(file + ": field '" + field + "': expected an integer 'id' and a string 'content'");
      }
      AddedToken t{e["content"], e.value("single_word", false), e.value("lstrip", false), e.value("rstrip", false),
                   e.value("normalized", true), e.value("special", false)};
      int64_t id = e["id"];
      by_id_[id] = t;
      by_content_[t.content] = id;
    }
  }

  void add(const AddedToken& t) {
    if (t.content.empty()) return;
    auto it = by_content_.find(t.content);
    if (it != by_content_.end() && by_id_[it->second] == t) return;
    int64_t id = 0;
    if (it != by_content_.end()) {
      id = it->second;
    } else if (auto v = model_.id(t.content)) {
      id = *v;
    } else {
      id = next_id();
    }
    by_content_[t.content] = id;
    by_id_[id] = t;
  }

  bool has_content(const std::string& s) const { return by_content_.count(s) != 0; }
  const AddedToken* find(const std::string& s) const {
    auto it = by_content_.find(s);
    return it == by_content_.end() ? nullptr : &by_id_.at(it->second);
  }

  json to_json() const {
    json out = json::array();
    for (const auto& [id, t] : by_id_) out.push_back(token_json(id, t));
    return out;
  }

 private:
  int64_t next_id() const {
    if (by_id_.empty()) return model_size_;
    int64_t max = by_id_.rbegin()->first;
    return (max >= model_size_ || model_size_ == 0) ? max + 1 : model_size_;
  }

  const VocabLookup& model_;
  int64_t model_size_;
  std::map<int64_t, AddedToken> by_id_;
  std::unordered_map<std::string, int64_t> by_content_;
};

json replace_norm(const char* from, const char* to) {
  return json{{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

// The pipeline pieces each rebuilding class sets in its __init__.
void rebuild(json& tj, const std::string& cls, const TokenizerConfig& cfg, const std::string& file) {
  json& model = tj["model"];
  if (!model.is_object() || model.value("type", "") != "BPE") {  // the vocab was checked before
    throw TokenizerError(file + ": field 'model.type': " + cls + " (tokenizer_class in " + cfg.file +
                         ") expects a BPE model with a vocab");
  }
  // The skeleton has no merges; the bridge puts the file's back over this if it has them.
  model["merges"] = json::array();
  model["dropout"] = nullptr;
  model["ignore_merges"] = false;
  const json sp_decoder = json::array({replace_norm("\xe2\x96\x81", " "), json{{"type", "ByteFallback"}},
                                       json{{"type", "Fuse"}}});
  if (cls == "LlamaTokenizer") {
    bool prefix = cfg.add_prefix_space.value_or(true);
    bool legacy = cfg.legacy.value_or(false);
    model["unk_token"] = nullptr;
    model["continuing_subword_prefix"] = nullptr;
    model["end_of_word_suffix"] = nullptr;
    model["fuse_unk"] = true;
    model["byte_fallback"] = true;
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = json{{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"},
                               {"prepend_scheme", prefix ? (legacy ? "always" : "first") : "never"},
                               {"split", false}};
    json dec = sp_decoder;
    if (prefix) dec.push_back(json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = json{{"type", "Sequence"}, {"decoders", dec}};
  } else if (cls == "GemmaTokenizer") {
    auto unk = cfg.named("unk_token");
    // GemmaTokenizer passes str(unk_token) to BPE: an explicit null becomes "None".
    model["unk_token"] = cfg.has_named("unk_token") ? (unk ? json(unk->content) : json("None")) : json("<unk>");
    model["continuing_subword_prefix"] = nullptr;
    model["end_of_word_suffix"] = nullptr;
    model["fuse_unk"] = true;
    model["byte_fallback"] = true;
    tj["normalizer"] = replace_norm(" ", "\xe2\x96\x81");
    tj["pre_tokenizer"] = json{{"type", "Split"}, {"pattern", {{"String", " "}}},
                               {"behavior", "MergedWithPrevious"}, {"invert", false}};
    tj["decoder"] = json{{"type", "Sequence"}, {"decoders", sp_decoder}};
  } else {  // Qwen2Tokenizer
    model["unk_token"] = nullptr;
    model["continuing_subword_prefix"] = "";
    model["end_of_word_suffix"] = "";
    model["fuse_unk"] = false;
    model["byte_fallback"] = false;
    tj["normalizer"] = json{{"type", "NFC"}};
    tj["pre_tokenizer"] = json{
        {"type", "Sequence"},
        {"pretokenizers",
         json::array({json{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Regex}}}, {"behavior", "Isolated"},
                           {"invert", false}},
                      json{{"type", "ByteLevel"}, {"add_prefix_space", cfg.add_prefix_space.value_or(false)},
                           {"trim_offsets", true}, {"use_regex", false}}})}};
    tj["decoder"] = json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                         {"use_regex", true}};
  }
}

}  // namespace

EffectiveTokenizer effective_tokenizer(json tj, const VocabLookup& model_vocab, const TokenizerConfig& cfg,
                                       const std::string& file) {
  if (!tj.is_object() || !tj.contains("model") || !tj["model"].is_object()) {
    throw TokenizerError(file + ": field 'model': missing or not an object");
  }
  if (!model_vocab.size()) throw TokenizerError(file + ": field 'model.vocab': missing");
  if (cfg.split_special_tokens) {
    throw TokenizerError(cfg.file + ": field 'split_special_tokens': true is not supported");
  }
  EffectiveTokenizer out;
  out.backend_class = resolve_class(cfg, mentions_bytelevel(tj));
  const ClassSpec* spec = rebuilding_class(out.backend_class);
  if (spec == nullptr) out.backend_class = "TokenizersBackend";  // other classes: the file as-is

  // Named special tokens: config values, else the class defaults.
  std::vector<std::pair<std::string, std::optional<AddedToken>>> named = cfg.named_special;
  if (spec != nullptr) {
    for (const auto& [key, dflt] : spec->defaults) {
      if (!cfg.has_named(key)) {
        named.emplace_back(key, dflt ? std::optional<AddedToken>(AddedToken{dflt, false, false, false, false, true})
                                    : std::nullopt);
      }
    }
  }
  const json empty = json::array();
  const json& file_added = tj.contains("added_tokens") && tj["added_tokens"].is_array() ? tj["added_tokens"] : empty;

  AddedVocab vocab(model_vocab);
  if (spec == nullptr) vocab.load(file_added, file);  // a rebuilt backend starts without them
  // added_tokens_decoder from the config, else (legacy) the file's added_tokens.
  std::map<int64_t, AddedToken> decoder;
  if (cfg.added_tokens_decoder) {
    decoder = *cfg.added_tokens_decoder;
  } else {
    AddedVocab tmp(model_vocab);
    tmp.load(file_added, file);
    for (const auto& e : tmp.to_json()) {
      decoder[e["id"]] = AddedToken{e["content"], e["single_word"], e["lstrip"], e["rstrip"], e["normalized"], e["special"]};
    }
  }
  // Named tokens whose content is a known added token take that token's flags.
  std::map<std::string, AddedToken> by_content;
  for (const auto& [id, t] : decoder) by_content[t.content] = t;
  for (auto& [key, tok] : named) {
    if (tok) {
      if (auto it = by_content.find(tok->content); it != by_content.end()) tok = it->second;
    }
  }
  if (spec != nullptr) rebuild(tj, out.backend_class, cfg, file);

  for (const auto& [id, t] : decoder) vocab.add(t);  // TokenizersBackend.__init__
  std::vector<AddedToken> specials;  // named + extra, special forced (tokenizers' add_special_tokens)
  for (const auto& [key, tok] : named) {
    if (!tok) continue;
    AddedToken t = *tok;
    t.special = true;
    specials.push_back(t);
    out.special_tokens_map.emplace_back(key, t.content);
  }
  for (AddedToken t : cfg.extra_special) {
    t.special = true;
    specials.push_back(t);
  }
  for (const auto& t : specials) {
    if (!vocab.has_content(t.content)) vocab.add(t);
    out.all_special_tokens.push_back(t.content);
  }
  if (out.backend_class == "Qwen2Tokenizer") {
    for (const auto& s : out.all_special_tokens) vocab.add(AddedToken{s, false, false, false, false, true});
  }
  for (const auto& t : specials) vocab.add(t);  // _post_init

  tj["added_tokens"] = vocab.to_json();
  if (!tj.contains("post_processor") || tj["post_processor"].is_null()) {
    // update_post_processor() with add_bos_token = add_eos_token = False (v5 ignores the config's).
    json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
    json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
    tj["post_processor"] = json{{"type", "TemplateProcessing"}, {"single", json::array({a})},
                                {"pair", json::array({a, b})}, {"special_tokens", json::object()}};
  }
  tj["truncation"] = nullptr;  // transformers' encode() runs without truncation/padding by default
  tj["padding"] = nullptr;
  out.json = std::move(tj);
  return out;
}

}  // namespace mlxcpp
