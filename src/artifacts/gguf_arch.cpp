// GGUF -> HF for the llama, qwen3, phi3, minicpm, olmo2, granite and gemma3 families (the sparse
// ones and glm4: gguf_arch_moe.cpp), and the one table of architectures. Sources: llama.cpp
// convert_hf_to_gguf.py (LlamaModel.permute for Q/K; Qwen3Model, a Qwen2Model, keeps HF's
// rotate-half Q/K rows; Phi3MiniModel keeps qkv_proj and gate_up_proj fused and writes
// longrope's factors as rope_factors_long/short tensors; Gemma3Model adds 1 to every
// "norm.weight"), gguf-py tensor_mapping.py (names), mlx-lm models/llama.py, qwen3.py, phi3.py
// and gemma3_text.py (config fields).
#include "artifacts/gguf_arch.h"
#include "artifacts/gguf_arch_detail.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/errors.h"

namespace mlxcpp {

using nlohmann::json;

namespace gguf_detail {

namespace {

int64_t vocab_size(const GgufFile& g, const Keys& k) {
  if (auto v = g.opt_int(k.k("vocab_size"))) return *v;
  if (const auto* t = g.find_tensor("token_embd.weight"); t && t->ne.size() == 2) return t->ne[1];
  return static_cast<int64_t>(g.req_strings("tokenizer.ggml.tokens").size());
}

// Sizes shared by both families.
json common_config(const GgufFile& g, const Keys& k) {
  json c;
  const int64_t hidden = k.req("embedding_length");
  const int64_t heads = k.req("attention.head_count");
  if (heads <= 0 || hidden % heads != 0) {
    g.fail_key(k.k("attention.head_count"), fmt::format("{} does not divide embedding_length {}", heads, hidden));
  }
  c["hidden_size"] = hidden;
  c["intermediate_size"] = k.req("feed_forward_length");
  c["num_hidden_layers"] = k.req("block_count");
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = k.get("attention.head_count_kv", heads);
  c["head_dim"] = k.get("attention.key_length", hidden / heads);
  c["rms_norm_eps"] = k.num("attention.layer_norm_rms_epsilon", 1e-6);
  c["max_position_embeddings"] = k.get("context_length", 2048);
  c["vocab_size"] = vocab_size(g, k);
  c["tie_word_embeddings"] = g.find_tensor("output.weight") == nullptr;
  if (auto bos = g.opt_int("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *bos;
  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    auto id = g.opt_int(key);
    if (id && std::find(eos.begin(), eos.end(), json(*id)) == eos.end()) eos.push_back(*id);
  }
  // Like llama.cpp's vocab loader: control tokens that end a turn also stop generation (a Gemma
  // GGUF may name only <eos> while the chat turns end with <end_of_turn>).
  if (g.has("tokenizer.ggml.tokens")) {
    const auto& tokens = g.req_strings("tokenizer.ggml.tokens");
    std::vector<int64_t> types;
    if (g.has("tokenizer.ggml.token_type")) types = g.req_ints("tokenizer.ggml.token_type");
    static const std::set<std::string> kEot = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>",
                                               "<|end_of_text|>"};
    for (size_t i = 0; i < tokens.size(); ++i) {
      bool control = i < types.size() && types[i] == 3;
      if (control && kEot.count(tokens[i]) && std::find(eos.begin(), eos.end(), json(i)) == eos.end()) {
        eos.push_back(i);
      }
    }
  }
  if (eos.size() == 1) c["eos_token_id"] = eos[0];
  if (eos.size() > 1) c["eos_token_id"] = eos;
  return c;
}

const BlockNames& attention_and_mlp() {
  static const BlockNames kNames = {
      {"attn_norm", "input_layernorm"},  {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},    {"attn_output", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},         {"ffn_down", "mlp.down_proj"},   {"attn_rot_embd", ""}};
  return kNames;
}

}  // namespace

std::optional<json> rope_scaling(const GgufFile& g, const Keys& k) {
  auto type = g.opt_string(k.k("rope.scaling.type"));
  if (!type || *type == "none") return std::nullopt;
  double factor = k.num("rope.scaling.factor", 1.0);
  if (*type == "linear") return json{{"type", "linear"}, {"rope_type", "linear"}, {"factor", factor}};
  if (*type == "yarn") {
    return json{{"type", "yarn"}, {"rope_type", "yarn"}, {"factor", factor},
                {"original_max_position_embeddings", k.get("rope.scaling.original_context_length", 0)}};
  }
  g.fail_key(k.k("rope.scaling.type"), fmt::format("'{}' is not supported (known: none, linear, yarn)", *type));
}

int block_index(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int layer = -1;
  const char* end = name.data() + name.size();
  auto [p, ec] = std::from_chars(name.data() + 4, end, layer);
  return ec == std::errc() && p != end && *p == '.' ? layer : -1;
}

std::optional<std::string> map_name(const GgufFile& g, const std::string& name, const BlockNames& block) {
  static const std::map<std::string, std::string> kTop = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
  auto unknown = [&]() -> std::optional<std::string> {
    throw WeightError(fmt::format("{}: tensor '{}': no HF name for it in this architecture", g.path().string(), name));
  };
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return unknown();
  std::string stem = name.substr(0, dot), suffix = name.substr(dot);
  if (suffix != ".weight" && suffix != ".bias") return unknown();
  if (stem == "rope_freqs") return std::nullopt;
  if (auto it = kTop.find(stem); it != kTop.end()) return it->second + suffix;
  const int layer = block_index(stem);
  if (layer < 0) return unknown();
  auto it = block.find(stem.substr(stem.find('.', 4) + 1));
  if (it == block.end()) return unknown();
  if (it->second.empty()) return std::nullopt;
  return fmt::format("model.layers.{}.{}{}", layer, it->second, suffix);
}

BlockNames block_names(std::initializer_list<std::pair<const std::string, std::string>> extra) {
  auto m = attention_and_mlp();
  for (const auto& [gguf, hf] : extra) m[gguf] = hf;
  return m;
}

json family_config(const GgufFile& g, const Keys& k, const char* cls, const char* model_type, double theta) {
  json c = common_config(g, k);
  c["architectures"] = {cls};
  c["model_type"] = model_type;
  c["rope_theta"] = k.num("rope.freq_base", theta);
  return c;
}


}  // namespace gguf_detail

namespace {

using namespace gguf_detail;

bool ends_with(const std::string& s, const std::string& tail) { return s.ends_with(tail); }

// family_config plus what LlamaModel-style converters leave implicit: SiLU, no biases, the
// GGUF's rope scaling.
json llama_like_config(const GgufFile& g, const Keys& k, const char* cls, const char* model_type) {
  json c = family_config(g, k, cls, model_type, 10000.0);
  c["hidden_act"] = "silu";
  c["attention_bias"] = false;
  c["mlp_bias"] = false;
  if (auto rs = rope_scaling(g, k)) c["rope_scaling"] = *rs;
  return c;
}

// A required positive number "<arch>.<key>" (the scales minicpm and granite store).
double positive_number(const GgufFile& g, const Keys& k, const char* key) {
  auto v = g.opt_number(k.k(key));
  if (!v || !(*v > 0)) g.fail_key(k.k(key), "missing or not a positive number");
  return *v;
}

// llama's block names (ffn_norm is the post-attention norm), shared by its derivatives.
std::optional<std::string> llama_block_name(const GgufFile& g, const std::string& name) {
  static const auto kBlock = block_names({{"ffn_norm", "post_attention_layernorm"}});
  return map_name(g, name, kBlock);
}

// llama.cpp permutes Q/K rows from HF's rotate-half layout to interleaved pairs (LlamaModel.permute).
GgufTensorFix permuted_qk(const Keys& k, const std::string& hf) {
  if (ends_with(hf, "self_attn.q_proj.weight")) return {static_cast<int>(k.req("attention.head_count")), 0.0f};
  if (ends_with(hf, "self_attn.k_proj.weight")) {
    return {static_cast<int>(k.get("attention.head_count_kv", k.req("attention.head_count"))), 0.0f};
  }
  return {};
}

class LlamaArch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "llama"};
    if (g.find_tensor("rope_freqs.weight")) {
      throw WeightError(fmt::format("{}: tensor 'rope_freqs.weight': llama3-style rope scaling is not supported yet",
                                    g.path().string()));
    }
    return llama_like_config(g, k, "LlamaForCausalLM", "llama");
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    return llama_block_name(g, name);
  }
  GgufTensorFix fix(const GgufFile& g, const std::string& hf) const override {
    return permuted_qk(Keys{g, "llama"}, hf);
  }
};

// MiniCPMModel (conversion/minicpm.py): llama's tensors and Q/K permutation, plus
// embedding_scale = scale_emb, residual_scale = scale_depth / sqrt(layers) and logit_scale =
// hidden / dim_model_base. Without output.weight the head is token_embd (llama.cpp's fallback):
// mlx-lm's minicpm is never tied (its sanitize copies the embedding to lm_head), so we write
// that copy, quantized like the embedding.
class MiniCpmArch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "minicpm"};
    for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
      if (g.find_tensor(t)) {
        throw WeightError(fmt::format("{}: tensor '{}': minicpm longrope is not supported yet", g.path().string(), t));
      }
    }
    json c = family_config(g, k, "MiniCPMForCausalLM", "minicpm", 10000.0);
    c["hidden_act"] = "silu";
    c["tie_word_embeddings"] = false;
    c["scale_emb"] = positive_number(g, k, "embedding_scale");
    c["scale_depth"] = positive_number(g, k, "residual_scale") * std::sqrt(c["num_hidden_layers"].get<double>());
    const double base = c["hidden_size"].get<double>() / positive_number(g, k, "logit_scale");
    const double rounded = std::round(base);
    if (std::abs(base - rounded) <= 1e-6 * base) c["dim_model_base"] = static_cast<int64_t>(rounded);
    else c["dim_model_base"] = base;
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    return llama_block_name(g, name);
  }
  GgufTensorFix fix(const GgufFile& g, const std::string& hf) const override {
    return permuted_qk(Keys{g, "minicpm"}, hf);
  }
  std::optional<std::string> also_as(const GgufFile& g, const std::string& hf) const override {
    if (hf == "model.embed_tokens.weight" && !g.find_tensor("output.weight")) return "lm_head.weight";
    return std::nullopt;
  }
};

class Qwen3Arch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "qwen3"};
    json c = family_config(g, k, "Qwen3ForCausalLM", "qwen3", 1000000.0);
    c["hidden_act"] = "silu";
    c["rope_scaling"] = rope_scaling(g, k).value_or(json(nullptr));
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    static const auto kBlock = block_names({{"attn_q_norm", "self_attn.q_norm"},
                                            {"attn_k_norm", "self_attn.k_norm"},
                                            {"ffn_norm", "post_attention_layernorm"}});
    return map_name(g, name, kBlock);
  }
  GgufTensorFix fix(const GgufFile&, const std::string&) const override { return {}; }
};

// Olmo2Model (convert_hf_to_gguf.py): HF's rotate-half Q/K rows kept (llama.cpp ropes olmo2 NeoX
// style), q/k norms over the whole projection, post-attention / post-feedforward norms only.
class Olmo2Arch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    return llama_like_config(g, Keys{g, "olmo2"}, "Olmo2ForCausalLM", "olmo2");
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    static const auto kBlock = block_names({{"attn_q_norm", "self_attn.q_norm"},
                                            {"attn_k_norm", "self_attn.k_norm"},
                                            {"post_attention_norm", "post_attention_layernorm"},
                                            {"post_ffw_norm", "post_feedforward_layernorm"}});
    return map_name(g, name, kBlock);
  }
  GgufTensorFix fix(const GgufFile&, const std::string&) const override { return {}; }
};

// GraniteModel (a LlamaModel: Q/K permuted): embedding_scale, attention.scale, residual_scale
// and logit_scale are granite.py's embedding/attention/residual multipliers and logits_scaling.
class GraniteArch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "granite"};
    json c = llama_like_config(g, k, "GraniteForCausalLM", "granite");
    c["attention_bias"] = g.find_tensor("blk.0.attn_q.bias") != nullptr;
    c["mlp_bias"] = g.find_tensor("blk.0.ffn_up.bias") != nullptr;
    c["embedding_multiplier"] = positive_number(g, k, "embedding_scale");
    c["attention_multiplier"] = positive_number(g, k, "attention.scale");
    c["residual_multiplier"] = positive_number(g, k, "residual_scale");
    c["logits_scaling"] = positive_number(g, k, "logit_scale");
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    return llama_block_name(g, name);
  }
  GgufTensorFix fix(const GgufFile& g, const std::string& hf) const override {
    return permuted_qk(Keys{g, "granite"}, hf);
  }
};

// A float32 vector tensor (phi3's rope factors) as a JSON list.
json float_list(const GgufFile& g, const GgufTensorInfo& t) {
  if (t.type != GgmlType::F32 || t.ne.size() != 1) {
    throw WeightError(fmt::format("{}: tensor '{}': expected a float32 vector", g.path().string(), t.name));
  }
  auto bytes = g.tensor_data(t);
  json out = json::array();
  for (int64_t i = 0; i < t.ne[0]; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + i * sizeof(float), sizeof(float));
    out.push_back(static_cast<double>(f));
  }
  return out;
}

class Phi3Arch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "phi3"};
    json c = family_config(g, k, "Phi3ForCausalLM", "phi3", 10000.0);
    const int64_t head_dim = c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
    const int64_t rope_dims = k.get("rope.dimension_count", head_dim);
    if (rope_dims != head_dim) c["partial_rotary_factor"] = static_cast<double>(rope_dims) / static_cast<double>(head_dim);
    if (auto orig = g.opt_int(k.k("rope.scaling.original_context_length"))) c["original_max_position_embeddings"] = *orig;
    // Phi3MiniModel writes these two only for su/longrope scaling (mlx-lm reads long_factor).
    const auto* lf = g.find_tensor("rope_factors_long.weight");
    const auto* sf = g.find_tensor("rope_factors_short.weight");
    if (lf || sf) {
      if (!lf || !sf) {
        throw WeightError(fmt::format("{}: tensor 'rope_factors_{}.weight': missing (the other factors are there)",
                                      g.path().string(), lf ? "short" : "long"));
      }
      c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", float_list(g, *lf)},
                           {"short_factor", float_list(g, *sf)}};
    }
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    if (name == "rope_factors_long.weight" || name == "rope_factors_short.weight") return std::nullopt;  // in config
    static const auto kBlock = block_names({{"attn_qkv", "self_attn.qkv_proj"},
                                            {"ffn_up", "mlp.gate_up_proj"},
                                            {"ffn_norm", "post_attention_layernorm"}});
    return map_name(g, name, kBlock);
  }
  GgufTensorFix fix(const GgufFile&, const std::string&) const override { return {}; }
};

class Gemma3Arch : public GgufArch {
 public:
  json config(const GgufFile& g) const override {
    Keys k{g, "gemma3"};
    json c = family_config(g, k, "Gemma3ForCausalLM", "gemma3_text", 1000000.0);
    c["hidden_activation"] = "gelu_pytorch_tanh";
    // llama.cpp hard-codes both for gemma3 (llama-model.cpp): local rope base 10k, every 6th
    // layer global.
    c["rope_local_base_freq"] = 10000.0;
    c["sliding_window_pattern"] = 6;
    c["sliding_window"] = k.get("attention.sliding_window", 512);
    // llama.cpp: attention scale 1/sqrt(head_dim), except the 62-layer 27B (hidden/heads).
    const int64_t layers = c["num_hidden_layers"];
    c["query_pre_attn_scalar"] = layers == 62 ? c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>()
                                               : c["head_dim"].get<int64_t>();
    c["rope_scaling"] = rope_scaling(g, k).value_or(json(nullptr));
    return c;
  }
  std::optional<std::string> hf_name(const GgufFile& g, const std::string& name) const override {
    static const auto kBlock = block_names({{"attn_q_norm", "self_attn.q_norm"},
                                            {"attn_k_norm", "self_attn.k_norm"},
                                            {"post_attention_norm", "post_attention_layernorm"},
                                            {"ffn_norm", "pre_feedforward_layernorm"},
                                            {"post_ffw_norm", "post_feedforward_layernorm"}});
    return map_name(g, name, kBlock);
  }
  GgufTensorFix fix(const GgufFile&, const std::string& hf) const override {
    // Gemma's RMSNorm computes x * (1 + w); convert_hf_to_gguf stores w + 1.
    if (ends_with(hf, "norm.weight")) return {0, 1.0f};
    return {};
  }
};

// The one list of GGUF architectures we import, by general.architecture.
const std::vector<std::pair<std::string, const GgufArch*>>& arch_table() {
  static const LlamaArch kLlama;
  static const Gemma3Arch kGemma3;
  static const Qwen3Arch kQwen3;
  static const Phi3Arch kPhi3;
  static const MiniCpmArch kMiniCpm;
  static const Olmo2Arch kOlmo2;
  static const GraniteArch kGranite;
  static const std::vector<std::pair<std::string, const GgufArch*>> kTable = {
      {"gemma3", &kGemma3}, {"glm4", &glm4_arch()}, {"glm4moe", &glm4moe_arch()}, {"granite", &kGranite},
      {"llama", &kLlama},   {"minicpm", &kMiniCpm}, {"olmo2", &kOlmo2},           {"phi3", &kPhi3},
      {"qwen3", &kQwen3},   {"qwen3moe", &qwen3moe_arch()}};
  return kTable;
}

}  // namespace

std::vector<std::string> supported_gguf_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, arch] : arch_table()) names.push_back(name);
  return names;
}

const GgufArch& gguf_arch_for(const GgufFile& g) {
  const std::string arch = g.req_string("general.architecture");
  for (const auto& [name, a] : arch_table()) {
    if (name == arch) return *a;
  }
  g.fail_key("general.architecture", fmt::format("unsupported architecture '{}' (supported: {})", arch,
                                                 fmt::join(supported_gguf_architectures(), ", ")));
}

}  // namespace mlxcpp
