// The gated-DeltaNet families' sanitize() for `convert --hf` (mlx_lm/models/qwen3_5.py,
// qwen3_5_moe.py, qwen3_next.py): the HF layout's depthwise conv1d [C,1,K] moved to MLX's
// [C,K,1] and its RMSNorm weights (stored minus one) given their +1.0 back, the multi-token
// prediction weights dropped; qwen3_5: the vision tower dropped and the text weights brought under
// "language_model." (qwen3_5_moe: its fused experts split into switch_mlp); qwen3_next: its
// per-expert tensors stacked into switch_mlp.
#include "artifacts/hf_sanitize_qwen3_5.h"

#include <algorithm>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "artifacts/hf_sanitize.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

using ojson = nlohmann::ordered_json;
using Weights = std::map<std::string, mx::array>;

bool has(const std::string& s, const char* frag) { return s.find(frag) != std::string::npos; }

bool unsanitized_conv(const std::string& name, const mx::array& v) { return has(name, "conv1d.weight") && v.shape(-1) != 1; }

// The loop both sanitize()s end with: conv1d to [C,K,1]; with `add_one`, the 1-D norm weights
// +1.0 (a scalar of the weight's own dtype, as Python's `v + 1.0` is).
void fix_conv_and_norms(Weights& weights, bool add_one) {
  static const std::vector<std::string> kNorms = {".input_layernorm.weight", ".post_attention_layernorm.weight",
                                                  "model.norm.weight", ".q_norm.weight", ".k_norm.weight"};
  for (auto& [k, v] : weights) {
    if (unsanitized_conv(k, v)) v = mx::moveaxis(v, 2, 1);
    const bool norm = std::any_of(kNorms.begin(), kNorms.end(), [&](const std::string& s) { return k.ends_with(s); });
    if (add_one && norm && v.ndim() == 1) v = mx::add(v, mx::array(1.0f, v.dtype()));
  }
}

void drop_mtp(Weights& weights) {
  std::erase_if(weights, [](const auto& kv) { return has(kv.first, "mtp."); });
}

mx::array take(Weights& weights, const std::string& name, const std::string& why) {
  auto it = weights.find(name);
  if (it == weights.end()) throw WeightError(fmt::format("tensor '{}' is missing ({})", name, why));
  mx::array v = it->second;
  weights.erase(it);
  return v;
}

// Model.sanitize: "model.language_model" -> "language_model.model", other text weights under
// "language_model.", the vision tower ("vision_tower*", "model.visual*") dropped.
Weights under_language_model(Weights& weights) {
  Weights out;
  for (auto& [k, v] : weights) {
    if (k.starts_with("vision_tower") || k.starts_with("model.visual")) continue;
    std::string key;
    if (k.starts_with("model.language_model")) {
      key = "language_model.model" + k.substr(std::string("model.language_model").size());
    } else if (k.starts_with("language_model.")) {
      key = k;
    } else {
      key = "language_model." + k;
    }
    out.insert_or_assign(key, v);
  }
  return out;
}

// qwen3_5_moe.py: experts.gate_up_proj [E, 2I, H] split on its middle axis into switch_mlp's
// gate_proj and up_proj; experts.down_proj renamed switch_mlp.down_proj.weight.
void split_fused_experts(Weights& weights, int num_layers) {
  for (int l = 0; l < num_layers; ++l) {
    const std::string prefix = fmt::format("language_model.model.layers.{}.mlp", l);
    auto it = weights.find(prefix + ".experts.gate_up_proj");
    if (it == weights.end()) continue;
    mx::array gate_up = it->second;
    weights.erase(it);
    if (gate_up.ndim() < 2) {
      throw WeightError(fmt::format("tensor '{}.experts.gate_up_proj': expected [experts, 2*intermediate, hidden], got {} dims",
                                    prefix, gate_up.ndim()));
    }
    const int axis = gate_up.ndim() - 2, mid = gate_up.shape(axis) / 2;
    mx::Shape start(gate_up.ndim(), 0), stop = gate_up.shape();
    stop[axis] = mid;
    weights.insert_or_assign(prefix + ".switch_mlp.gate_proj.weight", mx::slice(gate_up, start, stop));
    start[axis] = mid;
    weights.insert_or_assign(prefix + ".switch_mlp.up_proj.weight", mx::slice(gate_up, start, gate_up.shape()));
    weights.insert_or_assign(prefix + ".switch_mlp.down_proj.weight",
                             take(weights, prefix + ".experts.down_proj", "qwen3_5_moe: it goes with experts.gate_up_proj"));
  }
}

int int_field(const ojson& obj, const char* key, int fallback) {
  if (!obj.contains(key)) return fallback;
  if (!obj[key].is_number_integer()) throw ConfigError(fmt::format("config.json: field '{}': not an integer", key));
  return obj[key].get<int>();
}

}  // namespace

void sanitize_qwen3_5(const ojson& config, Weights& weights) {
  const std::string type = config.value("model_type", std::string());
  Weights w = under_language_model(weights);
  // TextModelArgs is text_config, or the whole config when it has none.
  const ojson& text = config.contains("text_config") && config["text_config"].is_object() ? config["text_config"] : config;
  if (type == "qwen3_5_moe") split_fused_experts(w, int_field(text, "num_hidden_layers", 32));
  // TextModel.sanitize: the norms are shifted only when a conv1d shows the HF layout.
  const bool hf_layout = std::any_of(w.begin(), w.end(), [](const auto& kv) { return unsanitized_conv(kv.first, kv.second); });
  drop_mtp(w);
  fix_conv_and_norms(w, hf_layout);
  weights = std::move(w);
}

void sanitize_qwen3_next(const ojson& config, Weights& weights) {
  // Only the HF layout (per-expert tensors) is touched; an MLX one passes as it is.
  const bool hf_layout = std::any_of(weights.begin(), weights.end(), [](const auto& kv) {
    return kv.first.starts_with("model.layers.") && kv.first.ends_with(".mlp.experts.0.up_proj.weight");
  });
  if (!hf_layout) return;
  drop_mtp(weights);
  const int num_experts = int_field(config, "num_experts", -1);
  if (num_experts < 0) throw ConfigError("config.json: field 'num_experts': missing (qwen3_next)");
  stack_experts(weights, num_experts, "qwen3_next");
  fix_conv_and_norms(weights, true);
}

}  // namespace mlxcpp
