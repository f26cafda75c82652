#include "core/markers.h"

#include <algorithm>

namespace mlxcpp {

size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

size_t partial_marker_suffix(std::string_view s, const std::vector<std::string>& markers) {
  size_t best = 0;
  for (const auto& m : markers) best = std::max(best, partial_marker_suffix(s, m));
  return best;
}

}  // namespace mlxcpp
