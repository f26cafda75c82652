// `mlxcpp bench` as a user runs it: real process on the tiny oracle checkpoint; the numbers are
// not judged (the machine is shared), only that the report is complete and batching is real.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "test_support.h"

using namespace mlxcpp::test;

namespace {

std::string tiny_model() { return quote((golden_dir() / "models" / "llama-q4g64").string()); }

nlohmann::json bench_json(const std::string& args) {
  auto r = run_cli("bench --model " + tiny_model() + " --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliBench, JsonReportHasMediansOfEveryRun) {
  for (const char* mode : {"", "--parity"}) {
    auto j = bench_json(std::string("--prompt-tokens 12 --gen-tokens 5 --runs 3 ") + mode);
    EXPECT_EQ(j.at("runs").get<int>(), 3);
    EXPECT_EQ(j.at("decode_depth").get<int>(), 12);
    for (const char* k : {"prefill_tps", "decode_tps"}) {
      const auto& s = j.at(k);
      EXPECT_EQ(s.at("runs").size(), 3u) << k;
      EXPECT_GT(s.at("min").get<double>(), 0) << k;
      EXPECT_LE(s.at("min").get<double>(), s.at("median").get<double>()) << k;
      EXPECT_LE(s.at("median").get<double>(), s.at("max").get<double>()) << k;
    }
    EXPECT_GT(j.at("weight_bytes_per_step").get<int64_t>(), 0);
    EXPECT_EQ(j.at("mode").get<std::string>(), *mode ? "parity" : "fast");
  }
}

TEST(CliBench, BatchRowsComputeWhatEachSequenceAloneComputes) {
  auto j = bench_json("--prompt-tokens 9 --gen-tokens 4 --runs 1 --batch 3 --decode-depth 0");
  EXPECT_EQ(j.at("batch").get<int>(), 3);
  EXPECT_EQ(j.at("decode_depth").get<int>(), 1);
  EXPECT_TRUE(j.at("batch_check").at("same_argmax").get<bool>());
  EXPECT_LT(j.at("batch_check").at("max_abs_diff_logprobs").get<double>(), 1e-3);
}

TEST(CliBench, BandwidthProbeAloneNeedsNoModel) {
  auto r = run_cli("bench --bandwidth --bandwidth-mib 16 --threads 1 --runs 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("bandwidth_gbps").get<double>(), 0);
  EXPECT_EQ(j.at("bandwidth_runs").size(), 5u);  // at least 5 passes
}

TEST(CliBench, BadValuesAreOneLineErrors) {
  expect_one_line_error(run_cli("bench --model " + tiny_model() + " --batch 0"), "--batch");
  expect_one_line_error(run_cli("bench --model " + tiny_model() + " --runs 0"), "--runs");
  expect_one_line_error(run_cli("bench"), "--model");
  expect_one_line_error(run_cli("bench --bandwidth --bandwidth-mib 0"), "--bandwidth-mib");
}

}  // namespace
