// Shared helpers for the test suites: where goldens live, exact array comparison.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

namespace mlxcpp::test {

// Directory of oracle outputs produced by `make goldens` (env MLXCPP_GOLDEN_DIR).
std::filesystem::path golden_dir();
// Repository root (env MLXCPP_SOURCE_DIR).
std::filesystem::path source_dir();

// max |a - b| over all elements, computed in float32 (shapes must match).
float max_abs_diff(const mlx::core::array& a, const mlx::core::array& b);

// "b{bits}_g{group}": the name of a (bits, group) test parameter.
std::string bits_group_name(int bits, int group);

// One golden safetensors file: its tensors and metadata (a missing key throws, naming it).
struct GoldenFile {
  std::unordered_map<std::string, mlx::core::array> arrays;
  std::unordered_map<std::string, std::string> meta;

  bool has(const std::string& key) const { return arrays.count(key) != 0; }
  const mlx::core::array& at(const std::string& key) const;
  const std::string& field(const std::string& key) const;
};
// Loads <golden_dir>/<subdir>/<name>.safetensors; when it is missing, a test failure naming the
// oracle script that writes it (tools/oracle/<script>) and nullopt.
std::optional<GoldenFile> load_golden_file(const std::string& subdir, const std::string& name,
                                           const std::string& script);

// <golden_dir>/<file> parsed as JSON; a missing file throws, naming the oracle script that writes it.
nlohmann::json load_golden_json(const std::string& file, const std::string& script);

// An integer array's values as int64.
std::vector<int64_t> int64s(const mlx::core::array& a);

// `got` equals `want` exactly: dtype, shape and every value.
::testing::AssertionResult same_array(const mlx::core::array& got, const mlx::core::array& want);

// Normal(0, sd) float32 values of `shape` from a fixed seed, evaluated.
mlx::core::array randn(mlx::core::Shape shape, uint64_t seed, float sd = 1.f);

}  // namespace mlxcpp::test
