// mlx-lm's mixed-bit recipes (convert.py mixed_quant_predicate_builder: mixed_2_6, mixed_3_4,
// mixed_3_6, mixed_4_6): low bits everywhere, high bits for lm_head and for v_proj / down_proj
// in the first and last eighth of the layers and every third layer between.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlxcpp {

class QuantRecipe {
 public:
  // `module_paths`: every module path of the model (to find where the layer index sits and how
  // many layers there are); `group_size`: --q-group-size as given (mlx-lm writes null without it).
  // ConfigError for an unknown recipe or a model without down_proj.
  QuantRecipe(const std::string& name, const std::vector<std::string>& module_paths, std::optional<int> group_size);

  static const std::vector<std::string>& names();

  // The dict mixed_quant_predicate returns for `path`: {group_size, bits, mode}.
  nlohmann::ordered_json params(const std::string& path) const;

 private:
  int low_bits_ = 4, high_bits_ = 6;
  size_t layer_location_ = 0;
  int num_layers_ = 0;
  std::optional<int> group_size_;
};

}  // namespace mlxcpp
