// `mlxcpp convert --hf` / `mlxcpp quantize` through the real binary: mlx_lm.convert's flags give
// its bytes (tools/oracle/convert_goldens.py), bad options one error line and no output folder.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace mlxcpp::test;

namespace {

std::string input(const std::string& model) { return quote((golden_dir() / "convert" / "in" / model).string()); }
fs::path expected(const std::string& name) { return golden_dir() / "convert" / "out" / name; }

// `<command> --hf in/<model> --out X <flags>` writes the config.json and weights of out/<golden>.
void expect_equals_golden(const std::string& command, const std::string& model, const std::string& flags,
                          const std::string& golden) {
  TempDir tmp("convert_hf");
  auto out = tmp.path() / "out";
  auto r = run_cli(command + " --hf " + input(model) + " --out " + quote(out.string()) + " " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(out / "config.json"), slurp(expected(golden) / "config.json"));
  EXPECT_TRUE(slurp(out / "model.safetensors") == slurp(expected(golden) / "model.safetensors"));
}

TEST(CliConvertHf, LlamaMixed36EqualsMlxLm) {
  expect_equals_golden("convert", "llama-bf16", "-q --q-group-size 64 --quant-predicate mixed_3_6", "llama-mixed_3_6");
}

TEST(CliConvertHf, QuantizeAliasQwen3MoeMxfp4EqualsMlxLm) {
  expect_equals_golden("quantize", "qwen3-moe-bf16", "-q --q-mode mxfp4", "qwen3-moe-mxfp4");
}

TEST(CliConvertHf, LlamaMxfp4With8BitsIsOneErrorLineAndNoFolder) {
  TempDir tmp("convert_hf_bad");
  auto out = tmp.path() / "out";
  auto r = run_cli("convert --hf " + input("llama-bf16") + " --out " + quote(out.string()) + " -q --q-mode mxfp4 --q-bits 8");
  expect_one_line_error(r, "mxfp4");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(CliConvertHf, HelpListsMlxLmFlags) {
  for (const char* sub : {"convert", "quantize"}) {
    auto r = run_cli(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0);
    for (const char* flag : {"--hf", "--out", "--quantize", "--q-bits", "--q-group-size", "--q-mode", "--quant-predicate",
                             "--dtype", "--dequantize"}) {
      EXPECT_NE(r.out.find(flag), std::string::npos) << sub << ": " << flag << " missing from:\n" << r.out;
    }
  }
}

TEST(CliConvertHf, NeitherGgufNorHf) {
  TempDir tmp("convert_none");
  auto r = run_cli("convert --out " + quote((tmp.path() / "out").string()));
  expect_one_line_error(r, "--hf");
}

}  // namespace
