#include "artifacts/convert_family.h"
#include "artifacts/module_path.h"

#include <algorithm>
#include <map>

namespace mlxcpp {

namespace {

using Order = std::vector<std::string>;
using ojson = nlohmann::ordered_json;

// mlx-lm's llama layout (llama.py), which most families share; siblings that never meet in one
// model (q_proj / qkv_proj, gate_proj / gate_up_proj, model / language_model) sit side by side.
const std::map<std::string, Order>& shared_layout() {
  static const std::map<std::string, Order> kLayout = {
      {"", {"language_model", "model", "lm_head"}},
      {"language_model", {"model", "lm_head"}},
      {"model", {"embed_tokens", "layers", "norm"}},
      {"layers",
       {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
        "post_feedforward_layernorm", "post_self_attn_layernorm", "post_mlp_layernorm"}},
      {"self_attn", {"q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "q_norm", "k_norm"}},
      {"mlp", {"gate_proj", "gate_up_proj", "down_proj", "up_proj"}},
  };
  return kLayout;
}

// A module's own parameters, in the order nn.Linear / QuantizedLinear / MoEGate assign them.
const Order& leaf_order() {
  static const Order kLeaves = {"weight", "scales", "biases", "bias", "e_score_correction_bias"};
  return kLeaves;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// gemma3.py / gemma4.py ModelArgs.__post_init__: text_config gets the model's vocab_size (its
// default when absent) and default head counts, in the dict mlx-lm later saves.
std::function<void(ojson&)> text_config_defaults(int vocab, int heads, int kv_heads) {
  return [=](ojson& c) {
    if (!c.contains("text_config") || !c["text_config"].is_object()) return;
    ojson& t = c["text_config"];
    t["vocab_size"] = c.value("vocab_size", ojson(vocab));
    t["num_attention_heads"] = t.value("num_attention_heads", ojson(heads));
    t["num_key_value_heads"] = t.value("num_key_value_heads", ojson(kv_heads));
  };
}

}  // namespace

struct ConvertFamilyTable {
  // qwen3_5.py / qwen3_5_moe.py / qwen3_next.py: GatedDeltaNet's parameters (dt_bias and A_log
  // sit between its modules), the decoder layer's attention first and mlp last, Qwen3NextMLP's
  // gate/down/up, the sparse block's gate, switch_mlp, shared_expert, shared_expert_gate; the
  // router and shared-expert gate at 8 bits (quant_predicate; no such modules in a dense model).
  template <class Add>
  static void add_gated_deltanet(Add& add) {
    const ConvertFamily::Children layers{"layers", {"linear_attn", "self_attn", "input_layernorm", "post_attention_layernorm", "mlp"}};
    const ConvertFamily::Children mlp{"mlp", {"gate", "switch_mlp", "shared_expert", "shared_expert_gate", "gate_proj", "down_proj", "up_proj"}};
    const ConvertFamily::Children switch_mlp{"switch_mlp", {"gate_proj", "up_proj", "down_proj"}};
    const ConvertFamily::Children shared{"shared_expert", {"gate_proj", "down_proj", "up_proj"}};
    const ConvertFamily::Children qwen3_5_attn{
        "linear_attn", {"conv1d", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "dt_bias", "A_log", "norm", "out_proj"}};
    const ConvertFamily::Children next_attn{"linear_attn", {"conv1d", "in_proj_qkvz", "in_proj_ba", "dt_bias", "A_log", "norm", "out_proj"}};
    for (const char* type : {"qwen3_5", "qwen3_5_moe", "qwen3_next"}) {
      ConvertFamily& f = add(type);
      const bool next = std::string(type) == "qwen3_next";
      f.children_ = {layers, next ? next_attn : qwen3_5_attn, mlp, switch_mlp, shared};
      f.eight_bit_ = {"mlp.gate", "shared_expert_gate"};
      if (next) continue;  // qwen3_next has no cast_predicate: its A_log is cast like the rest
      f.no_cast_ = {"A_log"};
      // TextModelArgs.__post_init__ renames rope_parameters' rope_type to type in the dict the
      // config holds (text_config, or the config itself when flat), and mlx-lm saves that dict.
      f.patch_ = [](ojson& c) {
        ojson& text = c.contains("text_config") && c["text_config"].is_object() ? c["text_config"] : c;
        if (!text.contains("rope_parameters") || !text["rope_parameters"].is_object()) return;
        ojson& rope = text["rope_parameters"];
        if (rope.contains("type") || !rope.contains("rope_type")) return;
        ojson v = rope["rope_type"];
        rope.erase("rope_type");
        rope["type"] = v;
      };
    }
  }

  // gemma4_text.py: the text model's per-layer-input modules after its norm; the decoder layer's
  // MoE block (router: proj, scale, per_expert_scale; experts.switch_glu) and per-layer-input
  // gate after its four norms, layer_scalar last; the router's proj at 8 bits (quant_predicate).
  // gemma4's ModelArgs writes vocab_size (default 262144) and the head counts (8 and 1) into
  // text_config.
  template <class Add>
  static void add_gemma4(Add& add) {
    for (const char* type : {"gemma4_text", "gemma4"}) {
      ConvertFamily& f = add(type);
      f.children_ = {
          {"model", {"embed_tokens", "layers", "norm", "embed_tokens_per_layer", "per_layer_model_projection", "per_layer_projection_norm"}},
          {"layers", {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm", "router", "experts", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                      "pre_feedforward_layernorm_2", "per_layer_input_gate", "per_layer_projection", "post_per_layer_input_norm",
                      "layer_scalar"}},
          {"router", {"proj", "scale", "per_expert_scale"}},
          {"experts", {"switch_glu"}},
          {"switch_glu", {"gate_proj", "up_proj", "down_proj"}}};
      f.eight_bit_ = {"router.proj"};
    }
    add("gemma4").patch_ = text_config_defaults(262144, 8, 1);
  }

  static std::map<std::string, ConvertFamily> build() {
    std::map<std::string, ConvertFamily> t;
    auto add = [&](const std::string& type) -> ConvertFamily& {
      ConvertFamily& f = t[type];
      f.model_type_ = type;
      return f;
    };
    for (const char* type : {"llama", "mistral", "smollm3", "qwen2", "qwen3", "gemma3_text", "phi3", "olmo2", "ministral3", "glm4"}) {
      add(type);
    }
    add("gemma3").patch_ = text_config_defaults(262208, 8, 4);
    add("mistral3").patch_ = [](ojson& c) {
      if (c.contains("text_config") && c["text_config"].is_object() && !c["text_config"].contains("tie_word_embeddings")) {
        c["text_config"]["tie_word_embeddings"] = false;
      }
    };
    add("minicpm").children_ = {{"mlp", {"gate_proj", "up_proj", "down_proj"}}};
    auto& granite = add("granite");
    granite.eight_bit_ = {"self_attn.o_proj", "mlp.down_proj", "=lm_head"};
    auto& qwen3_moe = add("qwen3_moe");
    qwen3_moe.children_ = {{"layers", {"self_attn", "input_layernorm", "post_attention_layernorm", "mlp"}},
                           {"mlp", {"gate", "switch_mlp", "gate_proj", "down_proj", "up_proj"}},
                           {"switch_mlp", {"gate_proj", "up_proj", "down_proj"}}};
    qwen3_moe.eight_bit_ = {"mlp.gate"};
    auto& glm4_moe = add("glm4_moe");
    glm4_moe.children_ = {{"mlp", {"switch_mlp", "gate", "shared_experts", "gate_proj", "up_proj", "down_proj"}},
                          {"switch_mlp", {"gate_proj", "up_proj", "down_proj"}},
                          {"shared_experts", {"gate_proj", "up_proj", "down_proj"}}};
    glm4_moe.no_cast_ = {"e_score_correction_bias"};
    add_gated_deltanet(add);
    add_gemma4(add);
    return t;
  }
};

namespace {

const std::map<std::string, ConvertFamily>& family_table() {
  static const std::map<std::string, ConvertFamily> kTable = ConvertFamilyTable::build();
  return kTable;
}

}  // namespace

const ConvertFamily& ConvertFamily::for_model_type(const std::string& model_type) {
  auto it = family_table().find(model_type);
  return it != family_table().end() ? it->second : family_table().at("llama");
}

bool ConvertFamily::known(const std::string& model_type) { return family_table().count(model_type) != 0; }

int ConvertFamily::rank(const std::string& parent, const std::string& child) const {
  auto index_in = [&](const Order& order) -> std::optional<int> {
    auto it = std::find(order.begin(), order.end(), child);
    if (it == order.end()) return std::nullopt;
    return static_cast<int>(it - order.begin());
  };
  for (const auto& c : children_) {
    if (c.parent != parent) continue;
    if (auto i = index_in(c.order)) return *i;
  }
  const auto& shared = shared_layout();
  if (auto it = shared.find(parent); it != shared.end()) {
    if (auto i = index_in(it->second)) return *i;
  }
  if (auto i = index_in(leaf_order())) return 1000 + *i;  // own parameters after submodules
  return 2000;                                            // unknown: after all known, by name
}

void ConvertFamily::sort_parameters(std::vector<std::string>& names) const {
  struct Key {
    std::vector<std::pair<long, std::string>> parts;  // (rank or index, name)
  };
  std::map<std::string, Key> keys;
  for (const auto& n : names) {
    Key k;
    std::string parent;
    for (const auto& p : split_module_path(n)) {
      if (is_index_component(p)) {
        k.parts.emplace_back(std::stol(p), "");
      } else {
        k.parts.emplace_back(rank(parent, p), p);
        parent = p;
      }
    }
    keys.emplace(n, std::move(k));
  }
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return keys.at(a).parts < keys.at(b).parts;
  });
}

std::optional<nlohmann::ordered_json> ConvertFamily::quant_override(const std::string& path) const {
  for (const auto& s : eight_bit_) {
    const bool hit = s[0] == '=' ? path == s.substr(1) : ends_with(path, s);
    if (hit) return nlohmann::ordered_json{{"group_size", 64}, {"bits", 8}};
  }
  return std::nullopt;
}

bool ConvertFamily::casts(const std::string& name) const {
  return std::none_of(no_cast_.begin(), no_cast_.end(),
                      [&](const std::string& frag) { return name.find(frag) != std::string::npos; });
}

}  // namespace mlxcpp
