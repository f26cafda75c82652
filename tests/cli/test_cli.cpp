// The `mlxcpp` binary as a user meets it: real process, real checkpoint, stdout/stderr/exit code.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <mlx/version.h>

#include "cli_test_util.h"
#include "golden_model.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace mlxcpp::test;

namespace {

TEST(Cli, VersionPrintsMlxVersion) {
  auto r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mlxcpp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(mlx::core::version()), std::string::npos) << r.out;
}

TEST(Cli, HelpOnEverySubcommand) {
  auto top = run_cli("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("generate"), std::string::npos) << top.out;
  auto gen = run_cli("generate --help");
  EXPECT_EQ(gen.exit_code, 0);
  for (const char* flag : {"--model", "--prompt-ids", "--max-tokens", "--temp", "--top-p", "--top-k",
                           "--min-p", "--seed", "--parity"}) {
    EXPECT_NE(gen.out.find(flag), std::string::npos) << flag << " missing from:\n" << gen.out;
  }
  for (const char* flag : {"--prompt", "--stop", "--system-prompt", "--ignore-chat-template", "--isa", "--threads"}) {
    EXPECT_NE(gen.out.find(flag), std::string::npos) << flag << " missing from:\n" << gen.out;
  }
  auto chat = run_cli("chat --help");
  EXPECT_EQ(chat.exit_code, 0);
  for (const char* flag : {"--model", "--system", "--prompt", "--chat-template-kwargs", "--stop", "--temp", "--parity",
                           "--isa", "--threads", "--max-tokens"}) {
    EXPECT_NE(chat.out.find(flag), std::string::npos) << flag << " missing from:\n" << chat.out;
  }
  auto tok = run_cli("tokenize --help");
  EXPECT_EQ(tok.exit_code, 0);
  for (const char* flag : {"--model", "--text", "--file", "--json", "--add-special"}) {
    EXPECT_NE(tok.out.find(flag), std::string::npos) << flag << " missing from:\n" << tok.out;
  }
}

class CliGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(CliGenerate, GreedyIdsEqualMlxLm) {
  auto golden = model_golden(GetParam());
  auto prompt = to_ints(golden.at("prompt"));
  auto expect = to_ints(golden.at("gen_tokens"));
  auto r = run_cli("generate --parity --ignore-eos --max-tokens " + std::to_string(expect.size()) +
                   " --model " + quote(tiny_model_dir(GetParam())) + " --prompt-ids " + join_ids(prompt));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, join_ids(expect) + "\n");
  // Stats line as mlx-lm prints it.
  EXPECT_NE(r.err.find("tokens-per-sec"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("peak memory"), std::string::npos) << r.err;
}

TEST_P(CliGenerate, SeededSamplingEqualsMlxLm) {
  // model_goldens.py: mx.random.seed(42); make_sampler(temp=0.8, top_p=0.9, top_k=50).
  auto golden = model_golden(GetParam());
  auto prompt = to_ints(golden.at("prompt"));
  auto expect = to_ints(golden.at("gen_sampled_tokens"));
  auto r = run_cli("generate --ignore-eos --seed 42 --temp 0.8 --top-p 0.9 --top-k 50 --max-tokens " +
                   std::to_string(expect.size()) + " --model " + quote(tiny_model_dir(GetParam())) +
                   " --prompt-ids " + join_ids(prompt));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, join_ids(expect) + "\n");
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, CliGenerate,
                         ::testing::Values("llama-q4g64", "qwen2-q8g32", "llama-bf16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) if (c == '-') c = '_';
                           return s;
                         });

TEST(CliErrors, MissingModelDirectory) {
  auto r = run_cli("generate --model /nonexistent/model --prompt-ids 1,2");
  expect_one_line_error(r, "/nonexistent/model");
}

TEST(CliErrors, BadPromptIds) {
  auto r = run_cli("generate --model " + quote(tiny_model_dir("llama-q4g64")) + " --prompt-ids 1,x,3");
  expect_one_line_error(r, "--prompt-ids");
}

TEST(CliErrors, PromptIdOutsideVocabulary) {
  auto r = run_cli("generate --model " + quote(tiny_model_dir("llama-q4g64")) + " --prompt-ids 1,99999999");
  expect_one_line_error(r, "99999999");
}

TEST(CliErrors, BrokenConfig) {
  TempDir tmp("cli_cfg");
  auto dir = tmp.path();
  fs::copy(tiny_model_dir("llama-q4g64"), dir, fs::copy_options::recursive);
  std::ofstream(dir / "config.json") << "{\"model_type\": \"llama\", \"hidden_size\": ";
  auto r = run_cli("generate --model " + quote(dir.string()) + " --prompt-ids 1,2");
  expect_one_line_error(r, "config.json");
}

TEST(CliErrors, UnknownSubcommandOrFlag) {
  auto r = run_cli("generate --model x --prompt-ids 1 --no-such-flag");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no-such-flag"), std::string::npos) << r.err;
}

}  // namespace

// --kv-bits / --kv-group-size / --quantized-kv-start: mlx-lm's generate_step with kv_bits
// (tools/oracle/kv_quant_goldens.py: prefill chunks of 8, the cache quantized after 12 tokens).
TEST(CliKvBits, GreedyIdsEqualMlxLm) {
  auto g = load_golden_file("kv_quant", "llama_b4_start12", "kv_quant_goldens.py");
  ASSERT_TRUE(g.has_value());
  auto ids = [](const mlx::core::array& a) {
    std::vector<int> out;
    for (int64_t v : int64s(a)) out.push_back(static_cast<int>(v));
    return out;
  };
  auto expect = ids(g->at("tokens"));
  auto r = run_cli("generate --parity --ignore-eos --prefill-step-size 8 --kv-bits 4 --kv-group-size 32 "
                   "--quantized-kv-start 12 --max-tokens " + std::to_string(expect.size()) + " --model " +
                   quote(tiny_model_dir("llama-q4g64")) + " --prompt-ids " + join_ids(ids(g->at("prompt"))));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, join_ids(expect) + "\n");
  expect_one_line_error(run_cli("generate --kv-bits 3 --model " + quote(tiny_model_dir("llama-q4g64")) +
                                " --prompt-ids 1,2"),
                        "kv_bits must be 2, 4 or 8");
  expect_one_line_error(run_cli("generate --kv-bits 4 --quantized-kv-start 0 --model " +
                                quote(tiny_model_dir("llama-q4g64")) + " --prompt-ids 1,2"),
                        "kv_group_size 64 does not divide the head dimension 32");
}
