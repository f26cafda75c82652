// Loads a tiny checkpoint built by tools/oracle/tiny_models.py and the logits mlx-lm
// recorded for it (tools/oracle/model_goldens.py).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <mlx/array.h>

namespace mlxcpp::test {

// The checkpoints every parity suite runs over.
const std::vector<std::string>& tiny_model_names();
std::string tiny_model_dir(const std::string& name);
// Arrays of <golden>/<folder>/<name>.safetensors (logits: model_goldens.py, long_prompts:
// long_prompt_goldens.py); a missing file fails with a clear message.
std::map<std::string, mlx::core::array> model_golden(const std::string& name, const std::string& folder = "logits");
std::vector<int> to_ints(const mlx::core::array& a);

}  // namespace mlxcpp::test
