#include "artifacts/gguf_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "artifacts/gguf_pretokenizers.h"
#include "core/errors.h"

namespace mlxcpp {

using nlohmann::json;

namespace {

const char* kSpace = "\xe2\x96\x81";  // U+2581 "▁", SentencePiece's space

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int> types;      // GgufTokenType per token
  std::vector<double> scores;  // empty when absent
  std::unordered_map<std::string, int> ids;
};

Vocab read_vocab(const GgufFile& g) {
  Vocab v;
  v.tokens = g.req_strings("tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();
  if (n == 0) g.fail_key("tokenizer.ggml.tokens", "the vocabulary is empty");
  if (g.has("tokenizer.ggml.token_type")) {
    auto t = g.req_ints("tokenizer.ggml.token_type");
    if (t.size() != n) {
      g.fail_key("tokenizer.ggml.token_type", fmt::format("{} entries for {} tokens", t.size(), n));
    }
    v.types.assign(t.begin(), t.end());
  } else {
    v.types.assign(n, static_cast<int>(GgufTokenType::Normal));
  }
  if (g.has("tokenizer.ggml.scores")) {
    v.scores = g.req_floats("tokenizer.ggml.scores");
    if (v.scores.size() != n) {
      g.fail_key("tokenizer.ggml.scores", fmt::format("{} entries for {} tokens", v.scores.size(), n));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (v.tokens[i].empty()) v.tokens[i] = fmt::format("[EMPTY_{}]", i);  // as llama.cpp does
    auto [it, inserted] = v.ids.emplace(v.tokens[i], static_cast<int>(i));
    if (!inserted) {
      g.fail_key("tokenizer.ggml.tokens", fmt::format("token '{}' appears twice (ids {} and {})", v.tokens[i], it->second, i));
    }
  }
  return v;
}

std::optional<int> special_id(const GgufFile& g, const Vocab& v, const std::string& what) {
  auto id = g.opt_int("tokenizer.ggml." + what + "_token_id");
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(v.tokens.size())) {
    g.fail_key("tokenizer.ggml." + what + "_token_id", fmt::format("{} is outside the vocabulary (size {})", *id, v.tokens.size()));
  }
  return static_cast<int>(*id);
}

bool is_added(int type) {
  return type == static_cast<int>(GgufTokenType::Control) || type == static_cast<int>(GgufTokenType::UserDefined) ||
         type == static_cast<int>(GgufTokenType::Unknown);
}

json added_token(int id, const std::string& content, bool special) {
  return json{{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
              {"rstrip", false},    {"normalized", false}, {"special", special}};
}

// Control and unknown tokens are special; user-defined ones are added but not special.
json added_tokens(const Vocab& v, const std::vector<int>& extra_special) {
  json out = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    bool listed = std::find(extra_special.begin(), extra_special.end(), static_cast<int>(i)) != extra_special.end();
    if (!is_added(v.types[i]) && !listed) continue;
    bool special = v.types[i] != static_cast<int>(GgufTokenType::UserDefined) || listed;
    out.push_back(added_token(static_cast<int>(i), v.tokens[i], special));
  }
  return out;
}

json vocab_json(const Vocab& v) {
  json out = json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) out[v.tokens[i]] = i;
  return out;
}

json bpe_model(const Vocab& v, json merges, bool byte_fallback, std::optional<std::string> unk, bool ignore_merges) {
  return json{{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", unk ? json(*unk) : json(nullptr)},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", byte_fallback},
              {"byte_fallback", byte_fallback},
              {"ignore_merges", ignore_merges},
              {"vocab", vocab_json(v)},
              {"merges", std::move(merges)}};
}

json gpt2_merges(const GgufFile& g) {
  json merges = json::array();
  const auto& list = g.req_strings("tokenizer.ggml.merges");
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& m = list[i];
    size_t pos = m.size() > 1 ? m.find(' ', 1) : std::string::npos;  // llama.cpp: first space after char 0
    if (pos == std::string::npos) {
      g.fail_key("tokenizer.ggml.merges", fmt::format("entry {} '{}' is not 'left right'", i, m));
    }
    merges.push_back(json::array({m.substr(0, pos), m.substr(pos + 1)}));
  }
  return merges;
}

size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xe) return 3;
  if ((c >> 3) == 0x1e) return 4;
  return 1;  // invalid lead byte: treat as one unit
}

// transformers' SentencePieceExtractor: every split of a token into two vocabulary pieces is a
// merge; merges are ordered by the merged token's score (highest first, stable), and within a
// token by the ids of the left then right piece.
json spm_merges(const Vocab& v) {
  struct Merge {
    int left, right;
    double score;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    std::vector<Merge> local;
    for (size_t pos = utf8_len(t[0]); pos < t.size(); pos += utf8_len(static_cast<unsigned char>(t[pos]))) {
      auto l = v.ids.find(t.substr(0, pos));
      if (l == v.ids.end()) continue;
      auto r = v.ids.find(t.substr(pos));
      if (r == v.ids.end()) continue;
      local.push_back({l->second, r->second, v.scores[id]});
    }
    std::sort(local.begin(), local.end(),
              [](const Merge& a, const Merge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json out = json::array();
  for (const auto& m : merges) out.push_back(json::array({v.tokens[m.left], v.tokens[m.right]}));
  return out;
}

json replace(const std::string& from, const std::string& to) {
  return json{{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

// Adds bos/eos the way the tokenizer_config flags say (HF LlamaTokenizerFast.update_post_processor).
json template_processor(const Vocab& v, std::optional<int> bos, std::optional<int> eos, bool add_bos, bool add_eos) {
  json single = json::array(), pair = json::array(), special = json::object();
  auto tok = [&](int id) {
    special[v.tokens[id]] = json{{"id", v.tokens[id]}, {"ids", {id}}, {"tokens", {v.tokens[id]}}};
    return json{{"SpecialToken", {{"id", v.tokens[id]}, {"type_id", 0}}}};
  };
  auto seq = [](const char* id) { return json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; };
  for (const char* s : {"A", "B"}) {
    if (add_bos && bos) pair.push_back(tok(*bos));
    pair.push_back(seq(s));
    if (add_eos && eos) pair.push_back(tok(*eos));
    if (s[0] == 'A') single = pair;
  }
  return json{{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
}

json gpt2_tokenizer(const GgufFile& g, const Vocab& v, bool ignore_merges) {
  std::string pre = g.opt_string("tokenizer.ggml.pre").value_or("");
  auto regexes = bpe_pre_tokenizer_regexes(pre);
  if (!regexes) {
    g.fail_key("tokenizer.ggml.pre", fmt::format("pre-tokenizer '{}' is not supported (known: {})", pre,
                                                 fmt::join(known_bpe_pre_tokenizers(), ", ")));
  }
  json pretoks = json::array();
  for (const auto& r : *regexes) {
    pretoks.push_back(json{{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  pretoks.push_back(json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
  json t;
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = json{{"type", "Sequence"}, {"pretokenizers", pretoks}};
  t["model"] = bpe_model(v, gpt2_merges(g), false, std::nullopt, ignore_merges);
  t["decoder"] = json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  return t;
}

json spm_tokenizer(const GgufFile& g, const Vocab& v, std::optional<int> unk) {
  if (v.scores.empty()) g.fail_key("tokenizer.ggml.scores", "missing (a 'llama' vocabulary needs scores)");
  bool add_space_prefix = g.opt_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  json t;
  json norms = json::array();
  if (add_space_prefix) norms.push_back(json{{"type", "Prepend"}, {"prepend", kSpace}});
  norms.push_back(replace(" ", kSpace));
  t["normalizer"] = json{{"type", "Sequence"}, {"normalizers", norms}};
  t["pre_tokenizer"] = nullptr;
  std::optional<std::string> unk_text;
  if (unk) unk_text = v.tokens[*unk];
  t["model"] = bpe_model(v, spm_merges(v), true, unk_text, false);
  json decoders = json::array({replace(kSpace, " "), json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}});
  if (add_space_prefix) decoders.push_back(json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  t["decoder"] = json{{"type", "Sequence"}, {"decoders", decoders}};
  return t;
}

}  // namespace

std::vector<std::string> supported_gguf_tokenizer_models() { return {"gpt2", "llama"}; }
std::vector<std::string> supported_gguf_pre_tokenizers() { return known_bpe_pre_tokenizers(); }

HfTokenizerFiles build_hf_tokenizer(const GgufFile& g) {
  const std::string model = g.req_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama") {
    g.fail_key("tokenizer.ggml.model", fmt::format("tokenizer model '{}' is not supported (supported: {})", model,
                                                   fmt::join(supported_gguf_tokenizer_models(), ", ")));
  }
  Vocab v = read_vocab(g);
  const bool spm = model == "llama";
  auto bos = special_id(g, v, "bos");
  auto eos = special_id(g, v, "eos");
  auto unk = special_id(g, v, "unknown");
  auto pad = special_id(g, v, "padding");
  if (spm && !unk && v.ids.count("<unk>")) unk = v.ids.at("<unk>");
  const std::string pre = g.opt_string("tokenizer.ggml.pre").value_or("");
  // llama.cpp's defaults: SPM adds bos; the llama3 family too; other BPE vocabularies do not.
  bool llama3 = pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3";
  bool add_bos = g.opt_bool("tokenizer.ggml.add_bos_token").value_or(spm || llama3);
  bool add_eos = g.opt_bool("tokenizer.ggml.add_eos_token").value_or(false);

  std::vector<int> specials;
  for (auto id : {bos, eos, unk, pad}) {
    if (id) specials.push_back(*id);
  }
  json t = spm ? spm_tokenizer(g, v, unk) : gpt2_tokenizer(g, v, llama3);
  json out = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  out["added_tokens"] = added_tokens(v, specials);
  out["normalizer"] = t["normalizer"];
  out["pre_tokenizer"] = t["pre_tokenizer"];
  if (add_bos || add_eos) {
    out["post_processor"] = template_processor(v, bos, eos, add_bos, add_eos);
  } else if (!spm) {
    out["post_processor"] = json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  } else {
    out["post_processor"] = nullptr;
  }
  out["decoder"] = t["decoder"];
  out["model"] = std::move(t["model"]);

  json cfg = json::object();
  cfg["add_bos_token"] = add_bos;
  cfg["add_eos_token"] = add_eos;
  json decoder = json::object();
  for (const auto& a : out["added_tokens"]) {
    decoder[std::to_string(a["id"].get<int>())] = json{{"content", a["content"]}, {"lstrip", false}, {"normalized", false},
                                                       {"rstrip", false}, {"single_word", false}, {"special", a["special"]}};
  }
  cfg["added_tokens_decoder"] = decoder;
  auto name = [&](std::optional<int> id) { return id ? json(v.tokens[*id]) : json(nullptr); };
  cfg["bos_token"] = name(bos);
  cfg["eos_token"] = name(eos);
  cfg["unk_token"] = name(unk);
  cfg["pad_token"] = name(pad);
  if (auto tmpl = g.opt_string("tokenizer.chat_template")) cfg["chat_template"] = *tmpl;
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["model_max_length"] = 1000000000000000019884624838656.0;  // transformers' "no limit" sentinel
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  return {std::move(out), std::move(cfg)};
}

void write_hf_tokenizer(const GgufFile& g, const std::filesystem::path& dir) {
  auto files = build_hf_tokenizer(g);
  auto write = [&](const std::string& name, const json& j) {
    auto path = dir / name;
    std::ofstream out(path, std::ios::trunc);
    out << j.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out) throw ConfigError(fmt::format("{}: cannot write", path.string()));
  };
  write("tokenizer.json", files.tokenizer);
  write("tokenizer_config.json", files.tokenizer_config);
}

}  // namespace mlxcpp
