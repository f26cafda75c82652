// The gated-DeltaNet families' sanitize() (qwen3_5, qwen3_5_moe, qwen3_next) for `convert --hf`.
#pragma once

#include <map>
#include <string>

#include <mlx/array.h>
#include <nlohmann/json.hpp>

namespace mlxcpp {

// qwen3_5.py / qwen3_5_moe.py Model.sanitize: names under "language_model.", vision and MTP
// tensors dropped, fused experts split, an HF conv1d moved to [C,K,1] and the norms +1.0.
void sanitize_qwen3_5(const nlohmann::ordered_json& config, std::map<std::string, mlx::core::array>& weights);
// qwen3_next.py sanitize: for the HF layout, MTP dropped, experts stacked, conv moved, norms +1.0.
void sanitize_qwen3_next(const nlohmann::ordered_json& config, std::map<std::string, mlx::core::array>& weights);

}  // namespace mlxcpp
