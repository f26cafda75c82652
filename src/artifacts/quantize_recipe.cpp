#include "artifacts/quantize_recipe.h"

#include <algorithm>

#include <fmt/format.h>

#include "artifacts/module_path.h"
#include "core/errors.h"

namespace mlxcpp {

namespace {

bool has(const std::string& s, const char* frag) { return s.find(frag) != std::string::npos; }

}  // namespace

const std::vector<std::string>& QuantRecipe::names() {
  static const std::vector<std::string> kNames = {"mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6"};
  return kNames;
}

QuantRecipe::QuantRecipe(const std::string& name, const std::vector<std::string>& module_paths,
                         std::optional<int> group_size)
    : group_size_(group_size) {
  if (name == "mixed_2_6") {
    low_bits_ = 2;
  } else if (name == "mixed_3_4") {
    low_bits_ = 3;
    high_bits_ = 4;
  } else if (name == "mixed_3_6") {
    low_bits_ = 3;
  } else if (name == "mixed_4_6") {
    low_bits_ = 4;
  } else {
    throw ConfigError(fmt::format("--quant-predicate: '{}' is not a recipe (known: mixed_2_6, mixed_3_4, mixed_3_6, mixed_4_6)", name));
  }
  auto down = std::find_if(module_paths.begin(), module_paths.end(), [](const std::string& p) { return has(p, "down_proj"); });
  if (down == module_paths.end()) {
    throw ConfigError(fmt::format("--quant-predicate {}: the model has no down_proj module (mlx-lm: 'Model does not have expected keys for mixed quant.')", name));
  }
  // Where the first numeric component sits (the for/break of mlx-lm: the last index if none).
  const auto parts = split_module_path(*down);
  layer_location_ = parts.size() - 1;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (is_index_component(parts[i])) {
      layer_location_ = i;
      break;
    }
  }
  // len(model.layers): the layer indices the modules carry at that position.
  for (const auto& p : module_paths) {
    auto ps = split_module_path(p);
    if (ps.size() > layer_location_ && is_index_component(ps[layer_location_])) {
      num_layers_ = std::max(num_layers_, std::stoi(ps[layer_location_]) + 1);
    }
  }
}

nlohmann::ordered_json QuantRecipe::params(const std::string& path) const {
  const auto parts = split_module_path(path);
  int index = 0;
  if (parts.size() > layer_location_) {
    if (!is_index_component(parts[layer_location_])) {
      throw ConfigError(fmt::format("--quant-predicate: module '{}' has no layer index at position {} (mlx-lm fails the same way)",
                                    path, layer_location_));
    }
    index = std::stoi(parts[layer_location_]);
  }
  const int n = num_layers_;
  const bool more = index < n / 8 || index >= 7 * n / 8 || (index - n / 8) % 3 == 2;
  int bits = low_bits_;
  if (((has(path, "v_proj") || has(path, "v_a_proj") || has(path, "v_b_proj")) && more) || (has(path, "down_proj") && more) ||
      has(path, "lm_head")) {
    bits = high_bits_;
  }
  nlohmann::ordered_json gs = group_size_ ? nlohmann::ordered_json(*group_size_) : nlohmann::ordered_json(nullptr);
  return {{"group_size", gs}, {"bits", bits}, {"mode", "affine"}};
}

}  // namespace mlxcpp
