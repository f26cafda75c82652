// Shared helpers for the test suites: where goldens live, exact array comparison.
#pragma once

#include <filesystem>
#include <string>

#include <mlx/mlx.h>

namespace mlxcpp::test {

// Directory of oracle outputs produced by `make goldens` (env MLXCPP_GOLDEN_DIR).
std::filesystem::path golden_dir();
// Repository root (env MLXCPP_SOURCE_DIR).
std::filesystem::path source_dir();

// max |a - b| over all elements, computed in float32 (shapes must match).
float max_abs_diff(const mlx::core::array& a, const mlx::core::array& b);

// "b{bits}_g{group}": the name of a (bits, group) test parameter.
std::string bits_group_name(int bits, int group);

// Normal(0, sd) float32 values of `shape` from a fixed seed, evaluated.
mlx::core::array randn(mlx::core::Shape shape, uint64_t seed, float sd = 1.f);

}  // namespace mlxcpp::test
