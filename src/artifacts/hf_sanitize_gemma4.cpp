// mlx_lm/models/gemma4.py and gemma4_text.py sanitize(), for `convert --hf`. Reads config.json's
// model_type, text_config (gemma4), num_hidden_layers and num_kv_shared_layers (ModelArgs'
// defaults 35 and 20 when absent).
#include "artifacts/hf_sanitize_gemma4.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

using ojson = nlohmann::ordered_json;
using Weights = std::map<std::string, mx::array>;

bool has(const std::string& s, std::string_view frag) { return s.find(frag) != std::string::npos; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
  return s;
}

// gemma4.py: "model." stripped; towers dropped; a stripped "language_model.*" name gets its
// "model." back after "language_model." (str.replace: every occurrence); other names kept.
Weights multimodal_names(Weights& weights) {
  static const std::array<std::string_view, 6> kTowers = {"vision_tower", "multi_modal_projector", "audio_tower",
                                                          "embed_audio", "embed_vision", "vision_embedder"};
  Weights out;
  for (auto& [name, v] : weights) {
    const bool under_model = name.starts_with("model.");
    std::string k = under_model ? name.substr(6) : name;
    if (std::any_of(kTowers.begin(), kTowers.end(), [&](std::string_view t) { return k.starts_with(t); })) continue;
    if (!under_model) {
      out.insert_or_assign(name, v);
      continue;
    }
    if (k.starts_with("language_model")) k = replace_all(k, "language_model.", "language_model.model.");
    out.insert_or_assign(k, v);
  }
  return out;
}

int int_or(const ojson& obj, const char* key, int fallback) {
  if (!obj.contains(key)) return fallback;
  if (!obj[key].is_number_integer()) throw ConfigError(fmt::format("config.json: field '{}': not an integer", key));
  return obj[key].get<int>();
}

// "…layers.<i>.…": i (Python's int(k.split("layers.")[1].split(".")[0])), or -1.
int layer_index(const std::string& k) {
  auto at = k.find("layers.");
  if (at == std::string::npos) return -1;
  const std::string rest = k.substr(at + 7, k.find('.', at + 7) - (at + 7));
  if (rest.empty() || !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoi(rest);
}

// gemma4_text.py Model.sanitize.
Weights text_sanitize(const ojson& text, Weights& weights) {
  static const std::array<std::string_view, 5> kDropped = {"self_attn.rotary_emb", "input_max", "input_min", "output_max",
                                                           "output_min"};
  static const std::array<std::string_view, 3> kSharedKv = {".self_attn.k_proj", ".self_attn.v_proj", ".self_attn.k_norm"};
  const int first_kv_shared = int_or(text, "num_hidden_layers", 35) - int_or(text, "num_kv_shared_layers", 20);
  Weights out;
  for (auto& [k, v] : weights) {
    if (std::any_of(kDropped.begin(), kDropped.end(), [&](std::string_view s) { return has(k, s); })) continue;
    if (std::any_of(kSharedKv.begin(), kSharedKv.end(), [&](std::string_view s) { return has(k, s); })) {
      const int layer = layer_index(k);
      if (layer >= 0 && layer >= first_kv_shared) continue;  // the layer reads an earlier layer's K/V
    }
    if (k.ends_with(".experts.gate_up_proj")) {
      const std::string base = k.substr(0, k.size() - std::string(".gate_up_proj").size());
      if (v.ndim() < 2 || v.shape(-2) % 2 != 0) {
        throw WeightError(fmt::format("tensor '{}': expected [experts, 2*moe_intermediate, hidden], got shape [{}]", k,
                                      fmt::join(v.shape(), ", ")));
      }
      auto halves = mx::split(v, 2, v.ndim() - 2);
      out.insert_or_assign(base + ".switch_glu.gate_proj.weight", halves[0]);
      out.insert_or_assign(base + ".switch_glu.up_proj.weight", halves[1]);
      continue;
    }
    if (k.ends_with(".experts.down_proj")) {
      out.insert_or_assign(k.substr(0, k.size() - std::string(".down_proj").size()) + ".switch_glu.down_proj.weight", v);
      continue;
    }
    out.insert_or_assign(k, v);
  }
  return out;
}

}  // namespace

void sanitize_gemma4(const ojson& config, Weights& weights) {
  const bool nested = config.value("model_type", std::string()) == "gemma4";
  if (nested) weights = multimodal_names(weights);
  // gemma4's TextModelArgs is text_config (an empty one when absent).
  static const ojson kEmpty = ojson::object();
  const ojson& text = !nested ? config : config.contains("text_config") && config["text_config"].is_object() ? config["text_config"] : kEmpty;
  weights = text_sanitize(text, weights);
}

}  // namespace mlxcpp
