// The part of mlx-lm's Model.sanitize() that `convert --hf` applies to the weights it reads:
// rotary_emb.inv_freq dropped, a tied model's lm_head.weight dropped (minicpm: the embedding
// copied as a missing head), gemma3/mistral3's vision tower and projector dropped (mistral3's HF
// names brought under language_model.), and for qwen3_moe and glm4_moe the HF layout's
// per-expert tensors stacked into switch_mlp (glm4_moe: its multi-token-prediction layer
// dropped); the gated-DeltaNet families' HF layouts as hf_sanitize_qwen3_5.h says, Gemma 4's
// as hf_sanitize_gemma4.h says. Other families' per-expert tensors are refused.
#pragma once

#include <map>
#include <string>

#include <mlx/array.h>
#include <nlohmann/json.hpp>

namespace mlxcpp {

// WeightError naming the tensor for a layout it cannot bring to MLX names.
void sanitize_weights(const nlohmann::ordered_json& config, std::map<std::string, mlx::core::array>& weights);

// qwen3_moe.py / glm4_moe.py / qwen3_next.py sanitize: "<layer>.mlp.experts.<e>.<proj>.<param>"
// for e < num_experts becomes "<layer>.mlp.switch_mlp.<proj>.<param>", the experts stacked on a
// new first axis; WeightError naming a missing expert's tensor.
void stack_experts(std::map<std::string, mlx::core::array>& weights, int num_experts, const std::string& model_type);

}  // namespace mlxcpp
