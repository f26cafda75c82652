// Inputs found by the libFuzzer targets in fuzz/ that once escaped as something other than an
// mlxcpp error; each must now be a WeightError naming the file.
#include <gtest/gtest.h>

#include "artifacts/safetensors.h"
#include "artifacts_test_util.h"
#include "core/errors.h"

using namespace mlxcpp;
using namespace mlxcpp::test;

// fuzz_safetensors: a number too large for a double made nlohmann throw out_of_range (406), not
// parse_error, and the header reader only caught the latter.
TEST(FuzzRegressions, SafetensorsHeaderNumberOverflow) {
  TempDir dir;
  auto file = dir / "x.safetensors";
  std::string header = R"({"a":{"dtype":"F32","shape":[3E7856],"data_offsets":[0,4]}})";
  write_raw_safetensors(file, header, std::string(4, '\0'));
  auto msg = error_of<WeightError>([&] { read_safetensors_header(file); });
  expect_contains(msg, {file.string(), "not valid JSON", "3E7856"});
}
