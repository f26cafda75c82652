// The part of mlx-lm's Model.sanitize() that `convert --hf` applies to the weights it reads:
// rotary_emb.inv_freq dropped, a tied model's lm_head.weight dropped, and for qwen3_moe and
// glm4_moe the HF layout's per-expert tensors stacked into switch_mlp (glm4_moe: its
// multi-token-prediction layer dropped). Other families' per-expert tensors are refused.
#pragma once

#include <map>
#include <string>

#include <mlx/array.h>
#include <nlohmann/json.hpp>

namespace mlxcpp {

// WeightError naming the tensor for a layout it cannot bring to MLX names.
void sanitize_weights(const nlohmann::ordered_json& config, std::map<std::string, mlx::core::array>& weights);

}  // namespace mlxcpp
