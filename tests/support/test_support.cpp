#include "test_support.h"

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace mx = mlx::core;

namespace mlxcpp::test {

namespace {
std::filesystem::path env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}
}  // namespace

// Env MLXCPP_GOLDEN_DIR / MLXCPP_SOURCE_DIR override the build's defaults (build/golden, from
// `make goldens`, and the source tree).
std::filesystem::path golden_dir() { return env_or("MLXCPP_GOLDEN_DIR", MLXCPP_TEST_GOLDEN_DIR); }
std::filesystem::path source_dir() { return env_or("MLXCPP_SOURCE_DIR", MLXCPP_TEST_SOURCE_DIR); }

float max_abs_diff(const mx::array& a, const mx::array& b) {
  if (a.shape() != b.shape()) throw std::runtime_error("max_abs_diff: shape mismatch");
  auto d = mx::max(mx::abs(mx::subtract(mx::astype(a, mx::float32), mx::astype(b, mx::float32))));
  return d.item<float>();
}

std::string bits_group_name(int bits, int group) {
  // fmt, not string operator+ (GCC 12 -Wrestrict false positive).
  return fmt::format("b{}_g{}", bits, group);
}

mlx::core::array randn(mlx::core::Shape shape, uint64_t seed, float sd) {
  auto a = mlx::core::random::normal(std::move(shape), mlx::core::float32, 0.f, sd, mlx::core::random::key(seed));
  mlx::core::eval(a);
  return a;
}

}  // namespace mlxcpp::test
