// Milliseconds since a steady-clock time point (phase timings in debug logs).
#pragma once

#include <chrono>

namespace mlxcpp {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace mlxcpp
