#include "artifacts/hf_sanitize.h"

#include <regex>

#include <fmt/format.h>
#include <mlx/ops.h>

#include "artifacts/hf_sanitize_gemma4.h"
#include "artifacts/hf_sanitize_qwen3_5.h"
#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

void stack_experts(std::map<std::string, mx::array>& weights, int num_experts, const std::string& model_type) {
  static const std::regex kExpert(R"(^(.*)\.experts\.0\.(.+)$)");
  std::vector<std::pair<std::string, std::string>> groups;  // (prefix, rest)
  for (const auto& [name, _] : weights) {
    std::smatch m;
    if (std::regex_match(name, m, kExpert)) groups.emplace_back(m[1], m[2]);
  }
  for (const auto& [prefix, rest] : groups) {
    std::vector<mx::array> parts;
    for (int e = 0; e < num_experts; ++e) {
      const std::string name = fmt::format("{}.experts.{}.{}", prefix, e, rest);
      auto it = weights.find(name);
      if (it == weights.end()) {
        throw WeightError(fmt::format("tensor '{}' is missing ({} has {} experts per layer)", name, model_type, num_experts));
      }
      parts.push_back(it->second);
      weights.erase(it);
    }
    weights.insert_or_assign(prefix + ".switch_mlp." + rest, mx::stack(parts));
  }
}

namespace {

using ojson = nlohmann::ordered_json;

int config_int(const ojson& config, const char* key) {
  if (!config.contains(key) || !config[key].is_number_integer()) {
    throw ConfigError(fmt::format("config.json: field '{}': missing or not an integer", key));
  }
  return config[key].get<int>();
}

// gemma3.py / mistral3.py: the vision tower and projector dropped; mistral3's text weights,
// "model.language_model.*" or "[language_model.]*", brought under "language_model.".
void sanitize_multimodal(const std::string& type, std::map<std::string, mx::array>& weights) {
  std::erase_if(weights, [](const auto& kv) {
    return kv.first.find("vision_tower") != std::string::npos || kv.first.find("multi_modal_projector") != std::string::npos;
  });
  if (type != "mistral3") return;
  std::map<std::string, mx::array> renamed;
  for (auto& [k, v] : weights) {
    std::string key = k;
    if (key.rfind("model.language_model.", 0) == 0) {
      key = "model." + key.substr(std::string("model.language_model.").size());
    } else if (key.rfind("language_model.", 0) == 0) {
      key = key.substr(std::string("language_model.").size());
    }
    renamed.insert_or_assign("language_model." + key, v);
  }
  weights = std::move(renamed);
}

}  // namespace

void sanitize_weights(const ojson& config, std::map<std::string, mx::array>& weights) {
  const std::string type = config.value("model_type", std::string());
  if (type == "qwen3_moe") stack_experts(weights, config_int(config, "num_experts"), type);
  if (type == "glm4_moe") {
    stack_experts(weights, config_int(config, "n_routed_experts"), type);
    const std::string mtp = fmt::format("model.layers.{}", config_int(config, "num_hidden_layers"));
    std::erase_if(weights, [&](const auto& kv) { return kv.first.rfind(mtp, 0) == 0; });
  }
  if (type == "gemma3" || type == "mistral3") sanitize_multimodal(type, weights);
  if (type == "qwen3_5" || type == "qwen3_5_moe") sanitize_qwen3_5(config, weights);
  if (type == "qwen3_next") sanitize_qwen3_next(config, weights);
  if (type == "gemma4" || type == "gemma4_text") sanitize_gemma4(config, weights);
  // minicpm.py: a checkpoint without a head gets the embedding as its head.
  if (type == "minicpm" && !weights.count("lm_head.weight") && weights.count("model.embed_tokens.weight")) {
    weights.insert_or_assign("lm_head.weight", weights.at("model.embed_tokens.weight"));
  }
  static const std::regex kPerExpert(R"(\.experts\.[0-9]+\.)");
  // The text model's tie decides for a nested one (mistral3: its language_model.lm_head).
  const bool nested = type == "mistral3";
  const ojson& text = nested && config.contains("text_config") ? config["text_config"] : config;
  const bool tied = text.value("tie_word_embeddings", false) == true;
  const std::string head = nested ? "language_model.lm_head.weight" : "lm_head.weight";
  for (auto it = weights.begin(); it != weights.end();) {
    const std::string& name = it->first;
    if (std::regex_search(name, kPerExpert)) {
      throw WeightError(fmt::format("tensor '{}': per-expert tensors (the HF layout) are stacked for qwen3_moe, "
                                    "glm4_moe and qwen3_next only, not {} (use mlx_lm.convert for this one)", name, type));
    }
    const bool drop = name.find("rotary_emb.inv_freq") != std::string::npos || (tied && name == head);
    it = drop ? weights.erase(it) : std::next(it);
  }
}

}  // namespace mlxcpp
