// `mlxcpp perplexity` on the real SmolLM2 and a real text (tests/data/perplexity.txt): the text
// tokenized as transformers does, and the PPL equal to the one computed with mlx-lm on the same
// snapshot (tools/oracle/perplexity_goldens.py) — exactly in parity mode, within 0.1% on the fast
// path; the text report's lines; bad flags and files as one-line errors.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace mlxcpp::test;
using json = nlohmann::json;

namespace {

fs::path smol() { return source_dir() / "models" / "SmolLM2-135M-Instruct"; }
fs::path text() { return source_dir() / "tests" / "data" / "perplexity.txt"; }

std::string args(const std::string& extra) {
  return "perplexity --model " + quote(smol().string()) + " -f " + quote(text().string()) + " --ctx 64 --chunks 2 " +
         extra;
}

TEST(CliPerplexity, SmolLM2EqualsMlxLm) {
  if (!fs::exists(smol() / "config.json")) GTEST_SKIP() << smol() << " missing (make models)";
  const json g = load_golden_json("perplexity/smollm2.json", "perplexity_goldens.py");
  auto parity = run_cli(args("--parity --json"));
  ASSERT_EQ(parity.exit_code, 0) << parity.err;
  auto p = json::parse(parity.out);
  EXPECT_EQ(p.at("tokens").get<size_t>(), g.at("tokens").size());
  EXPECT_EQ(p.at("bos"), g.at("bos"));
  for (const char* k : {"ppl", "ppl_error", "nll", "nll_error"}) EXPECT_EQ(p.at(k).get<double>(), g.at(k).get<double>()) << k;
  EXPECT_EQ(p.at("running_ppl"), g.at("running_ppl"));
  auto fast = run_cli(args("--json"));
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_NEAR(json::parse(fast.out).at("ppl").get<double>() / g.at("ppl").get<double>(), 1.0, 1e-3);
}

TEST(CliPerplexity, TextReportAsLlamaPerplexity) {
  if (!fs::exists(smol() / "config.json")) GTEST_SKIP() << smol() << " missing (make models)";
  auto r = run_cli(args("--kl-base " + quote(smol().string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("[1]", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(",[2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Final estimate: PPL = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Mean KLD: 0.000000 +/- 0.000000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Same top p: 100.000 +/- 0.000 %"), std::string::npos) << r.out;
}

TEST(CliPerplexity, BadInputIsOneLine) {
  if (!fs::exists(smol() / "config.json")) GTEST_SKIP() << smol() << " missing (make models)";
  TempDir tmp("ppl");
  expect_one_line_error(run_cli("perplexity --model " + quote(smol().string()) + " -f " +
                                quote((tmp.path() / "none.txt").string())),
                        "--file: cannot open");
  std::ofstream(tmp.path() / "short.txt") << "Too short to score.";
  expect_one_line_error(run_cli("perplexity --model " + quote(smol().string()) + " -f " +
                                quote((tmp.path() / "short.txt").string())),
                        "needs at least 1024");
  expect_one_line_error(run_cli(args("--kl-base " + quote((tmp.path() / "nope").string()))), "nope");
}

}  // namespace
