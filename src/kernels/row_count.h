// Register-blocked kernels are templates on their row count; this turns a run-time count (a
// tail block) into the matching instantiation.
#pragma once

namespace mlxcpp::kernels {

// Calls f.template operator()<M>() for the run-time m, 1 <= m <= MAX (m > MAX runs MAX).
template <int MAX, class F>
inline void with_row_count(int m, F&& f) {
  if constexpr (MAX > 1) {
    if (m < MAX) return with_row_count<MAX - 1>(m, f);
  }
  f.template operator()<MAX>();
}

// Calls f.template operator()<G>() for a quantization group of 32, 64 or 128 (others: 128).
template <class F>
inline void with_group(int group, F&& f) {
  if (group == 32) return f.template operator()<32>();
  if (group == 64) return f.template operator()<64>();
  f.template operator()<128>();
}

}  // namespace mlxcpp::kernels
