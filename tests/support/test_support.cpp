#include "test_support.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
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

const mx::array& GoldenFile::at(const std::string& key) const {
  auto it = arrays.find(key);
  if (it == arrays.end()) throw std::runtime_error("golden has no tensor '" + key + "'");
  return it->second;
}

const std::string& GoldenFile::field(const std::string& key) const {
  auto it = meta.find(key);
  if (it == meta.end()) throw std::runtime_error("golden has no metadata '" + key + "'");
  return it->second;
}

std::optional<GoldenFile> load_golden_file(const std::string& subdir, const std::string& name,
                                           const std::string& script) {
  std::filesystem::path path;
  try {
    path = golden_dir() / subdir / (name + ".safetensors");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    return std::nullopt;
  }
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "missing golden " << path << "; generate it with: .venv/bin/python tools/oracle/" << script
                  << " <golden dir>";
    return std::nullopt;
  }
  auto [arrays, meta] = mx::load_safetensors(path.string());
  return GoldenFile{std::move(arrays), std::move(meta)};
}

nlohmann::json load_golden_json(const std::string& file, const std::string& script) {
  auto path = golden_dir() / file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + " is missing: run tools/oracle/" + script + " (make goldens)");
  return nlohmann::json::parse(in);
}

std::vector<int64_t> int64s(const mx::array& a) {
  auto b = mx::astype(a, mx::int64);
  b.eval();
  return std::vector<int64_t>(b.data<int64_t>(), b.data<int64_t>() + b.size());
}

::testing::AssertionResult same_array(const mx::array& got, const mx::array& want) {
  if (got.dtype() != want.dtype()) return ::testing::AssertionFailure() << "dtype differs";
  if (got.shape() != want.shape()) {
    std::ostringstream os;
    os << "shape " << got.shape() << " != golden " << want.shape();
    return ::testing::AssertionFailure() << os.str();
  }
  if (!mx::array_equal(got, want).item<bool>()) {
    return ::testing::AssertionFailure() << "values differ, max |diff| = " << max_abs_diff(got, want);
  }
  return ::testing::AssertionSuccess();
}

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
