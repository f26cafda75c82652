// Gemma 4's sanitize() (gemma4, gemma4_text) for `convert --hf`.
#pragma once

#include <map>
#include <string>

#include <mlx/array.h>
#include <nlohmann/json.hpp>

namespace mlxcpp {

// gemma4.py Model.sanitize (gemma4: "model.language_model.*" -> "language_model.model.*", the
// vision/audio towers and embedders dropped), then gemma4_text.py's: rotary_emb and clipping
// bounds (input_max ...) dropped, the KV-shared layers' k_proj/v_proj/k_norm dropped, the fused
// experts.gate_up_proj split into experts.switch_glu gate/up, experts.down_proj renamed.
void sanitize_gemma4(const nlohmann::ordered_json& config, std::map<std::string, mlx::core::array>& weights);

}  // namespace mlxcpp
