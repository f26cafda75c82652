// Dotted module paths as mlx-lm spells them ("model.layers.3.mlp.down_proj").
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace mlxcpp {

inline std::vector<std::string> split_module_path(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = s.find('.', start)) != std::string::npos; start = dot + 1) parts.push_back(s.substr(start, dot - start));
  parts.push_back(s.substr(start));
  return parts;
}

// A list index ("3"), as opposed to an attribute name.
inline bool is_index_component(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace mlxcpp
