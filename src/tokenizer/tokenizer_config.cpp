#include "tokenizer/tokenizer_config.h"


#include "core/errors.h"
#include "core/files.h"

namespace mlxcpp {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order.
const char* const kNamedKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                  "pad_token", "cls_token", "mask_token"};

std::string read_text(const fs::path& file) {
  auto text = read_file(file);
  if (!text) throw TokenizerError(file.string() + ": cannot open file");
  return std::move(*text);
}

[[noreturn]] void bad(const std::string& file, const std::string& field, const std::string& what) {
  throw TokenizerError(file + ": field '" + field + "': " + what);
}

bool flag(const json& j, const char* key, bool dflt, const std::string& file, const std::string& field) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) bad(file, field + "." + key, "expected a boolean, got " + it->dump());
  return it->get<bool>();
}

}  // namespace

// A string (transformers makes it AddedToken(s, special=True, normalized=False)) or an
// AddedToken object ({"content": ..., flags}) with Python's AddedToken defaults.
AddedToken parse_added_token(const json& j, const std::string& file, const std::string& field) {
  AddedToken t;
  if (j.is_string()) {
    t.content = j.get<std::string>();
    t.normalized = false;
    t.special = true;
    return t;
  }
  if (!j.is_object() || !j.contains("content") || !j["content"].is_string()) {
    bad(file, field, "expected a string or an object with a string 'content', got " + j.dump());
  }
  t.content = j["content"].get<std::string>();
  t.single_word = flag(j, "single_word", false, file, field);
  t.lstrip = flag(j, "lstrip", false, file, field);
  t.rstrip = flag(j, "rstrip", false, file, field);
  t.special = flag(j, "special", false, file, field);
  t.normalized = flag(j, "normalized", !t.special, file, field);
  return t;
}

namespace {

std::optional<bool> opt_bool(const json& c, const char* key, const std::string& file) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad(file, key, "expected a boolean, got " + it->dump());
  return it->get<bool>();
}

void read_chat_templates(const json& v, const std::string& file, TokenizerConfig& cfg) {
  if (v.is_string()) {
    cfg.chat_templates["default"] = v.get<std::string>();
  } else if (v.is_array()) {  // [{"name": ..., "template": ...}, ...]
    for (size_t i = 0; i < v.size(); ++i) {
      const auto& e = v[i];
      std::string field = "chat_template[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string()) {
        bad(file, field, "expected {\"name\": str, \"template\": str}");
      }
      cfg.chat_templates[e["name"].get<std::string>()] = e["template"].get<std::string>();
    }
  } else if (!v.is_null()) {
    bad(file, "chat_template", "expected a string or a list of named templates");
  }
}

}  // namespace

TokenizerConfig TokenizerConfig::load(const fs::path& dir) {
  TokenizerConfig cfg;
  fs::path file = dir / "tokenizer_config.json";
  cfg.file = file.string();
  cfg.raw = json::object();
  if (fs::exists(file)) {
    try {
      cfg.raw = json::parse(read_text(file));
    } catch (const json::parse_error& e) {
      throw TokenizerError(cfg.file + ": invalid JSON: " + e.what());
    }
    if (!cfg.raw.is_object()) throw TokenizerError(cfg.file + ": expected a JSON object");
  }
  const json& c = cfg.raw;
  if (auto it = c.find("tokenizer_class"); it != c.end() && it->is_string()) cfg.tokenizer_class = *it;
  for (const char* key : kNamedKeys) {
    auto it = c.find(key);
    if (it == c.end()) continue;
    if (it->is_null()) {
      cfg.named_special.emplace_back(key, std::nullopt);
    } else {
      cfg.named_special.emplace_back(key, parse_added_token(*it, cfg.file, key));
    }
  }
  // v5: additional_special_tokens is the old name of extra_special_tokens; a dict holds
  // model-specific named tokens (e.g. Gemma's image_token).
  auto extra = c.find("extra_special_tokens");
  if (extra == c.end() || extra->is_null() || (extra->is_array() && extra->empty())) {
    if (auto add = c.find("additional_special_tokens"); add != c.end() && !add->is_null()) extra = add;
  }
  if (extra != c.end() && extra->is_object()) {
    for (const auto& [name, v] : extra->items()) {
      cfg.named_special.emplace_back(name, parse_added_token(v, cfg.file, "extra_special_tokens." + name));
    }
  } else if (extra != c.end() && extra->is_array()) {
    for (size_t i = 0; i < extra->size(); ++i) {
      cfg.extra_special.push_back(
          parse_added_token((*extra)[i], cfg.file, "extra_special_tokens[" + std::to_string(i) + "]"));
    }
  }
  if (auto it = c.find("added_tokens_decoder"); it != c.end() && it->is_object()) {
    std::map<int64_t, AddedToken> dec;
    for (const auto& [id, v] : it->items()) {
      std::string field = "added_tokens_decoder." + id;
      int64_t n = 0;
      try {
        size_t used = 0;
        n = std::stoll(id, &used);
        if (used != id.size()) throw std::invalid_argument(id);
      } catch (const std::exception&) {
        bad(cfg.file, field, "the key is not an integer id");
      }
      dec[n] = parse_added_token(v, cfg.file, field);
    }
    cfg.added_tokens_decoder = std::move(dec);
  }
  if (auto it = c.find("chat_template"); it != c.end()) read_chat_templates(*it, cfg.file, cfg);
  // Separate template files take priority over the config entry (transformers' order).
  if (fs::path jinja = dir / "chat_template.jinja"; fs::exists(jinja)) {
    cfg.chat_templates["default"] = read_text(jinja);
  } else if (fs::path cj = dir / "chat_template.json"; fs::exists(cj)) {
    try {
      json j = json::parse(read_text(cj));
      if (j.is_object() && j.contains("chat_template")) read_chat_templates(j["chat_template"], cj.string(), cfg);
    } catch (const json::parse_error& e) {
      throw TokenizerError(cj.string() + ": invalid JSON: " + e.what());
    }
  }
  cfg.clean_up_tokenization_spaces = opt_bool(c, "clean_up_tokenization_spaces", cfg.file).value_or(false);
  cfg.add_prefix_space = opt_bool(c, "add_prefix_space", cfg.file);
  cfg.legacy = opt_bool(c, "legacy", cfg.file);
  cfg.split_special_tokens = opt_bool(c, "split_special_tokens", cfg.file).value_or(false);
  return cfg;
}

std::optional<AddedToken> TokenizerConfig::named(const std::string& key) const {
  for (const auto& [k, v] : named_special) {
    if (k == key) return v;
  }
  return std::nullopt;
}

bool TokenizerConfig::has_named(const std::string& key) const {
  for (const auto& [k, v] : named_special) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace mlxcpp
