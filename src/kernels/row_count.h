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

}  // namespace mlxcpp::kernels
