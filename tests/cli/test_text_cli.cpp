// `mlxcpp generate --prompt` and `mlxcpp chat` against mlx-lm's own output text on tiny random
// llamas that carry real tokenizers (tools/oracle/text_goldens.py): the same prompt rendering,
// greedy/seeded tokens, streaming detokenizer and (for stops) vLLM's truncation rule.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "golden_model.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace mlxcpp::test;

namespace {

const json& text_cases() {
  static const json cases = load_golden_json("text/cases.json", "text_goldens.py").at("cases");
  return cases;
}

const json& text_case(const std::string& name) {
  for (const auto& c : text_cases()) {
    if (c.at("name") == name) return c;
  }
  throw std::runtime_error("no text golden named " + name);
}

fs::path model_dir(const json& c) { return golden_dir() / c.at("model").get<std::string>(); }
std::string model_of(const json& c) { return quote(model_dir(c).string()); }

// The flags every case shares: parity mode (mlx-lm ran in float32), max tokens, sampling.
std::string common_flags(const json& c) {
  std::string s = "--parity --model " + model_of(c) + " --max-tokens " + std::to_string(c.at("max_tokens").get<int>());
  if (c.contains("sampling") && !c["sampling"].is_null()) {
    s += fmt::format(" --temp {} --seed {}", c["sampling"]["temp"].get<double>(), c["sampling"]["seed"].get<int>());
  }
  return s;
}

std::string args_of(const json& c) {
  std::string cmd = c.at("command");
  std::string s = cmd + " " + common_flags(c) + " --prompt " + quote(c.at("prompt"));
  if (!c["system"].is_null()) s += (cmd == "chat" ? " --system " : " --system-prompt ") + quote(c["system"]);
  if (c.value("raw", false)) s += " --ignore-chat-template";
  if (!c["kwargs"].empty()) s += " --chat-template-kwargs " + quote(c["kwargs"].dump());
  if (c.contains("stops")) {
    for (const auto& stop : c["stops"]) s += " --stop=" + quote(stop);
  }
  return s;
}

std::vector<std::string> case_names(const std::string& command, bool with_stops) {
  std::vector<std::string> names;
  for (const auto& c : text_cases()) {
    if (c.at("command") == command && c.contains("stops") == with_stops) names.push_back(c.at("name"));
  }
  return names;
}

void expect_text_case(const std::string& name) {
  SCOPED_TRACE(name);
  const auto& c = text_case(name);
  auto r = run_cli(args_of(c));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c.at("text").get<std::string>() + "\n");
  EXPECT_NE(r.err.find("tokens-per-sec"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

TEST(CliText, GoldensArePresent) {
  EXPECT_GE(case_names("generate", false).size(), 6u);
  EXPECT_GE(case_names("generate", true).size(), 6u);
  EXPECT_GE(case_names("chat", false).size(), 2u);
}

TEST(CliText, GeneratePromptEqualsMlxLm) {
  for (const auto& name : case_names("generate", false)) expect_text_case(name);
}

TEST(CliText, StopStringsEndTheOutputRightBeforeThem) {
  for (const auto& name : case_names("generate", true)) expect_text_case(name);
}

TEST(CliText, ChatOneShotEqualsMlxLm) {
  for (const auto& name : case_names("chat", false)) expect_text_case(name);
}

TEST(CliText, ChatReplKeepsTheConversation) {
  for (const auto& c : text_cases()) {
    if (c.at("command") != "repl") continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::string input, expect;
    for (const auto& t : c.at("turns")) input += t.get<std::string>() + "\n";
    for (const auto& t : c.at("texts")) expect += t.get<std::string>() + "\n";
    // A blank line is skipped; /exit ends the session before the last line.
    auto r = run_cli("chat " + common_flags(c), "\n" + input + "/exit\nnever sent\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expect);  // no "> " prompt: stdin is not a terminal
    EXPECT_EQ(count_lines(r.err), static_cast<int>(c.at("turns").size())) << r.err;  // one stats line per turn
    // A turn whose rendered prompt extends the cached tokens feeds only the new ones (as mlx-lm
    // with the same cache): the stats name how many.
    std::istringstream lines(r.err);
    std::string line;
    for (const auto& n : c.at("prompt_tokens")) {
      std::getline(lines, line);
      EXPECT_EQ(line.rfind(fmt::format("prompt: {} tokens,", n.get<int>()), 0), 0u) << line;
    }
    EXPECT_TRUE(c.at("cache_reused").back().get<bool>()) << "the golden no longer exercises cache reuse";
  }
}

TEST(CliText, ChatReplResetAndEof) {
  // Greedy: after /reset the same question gets the same answer; EOF ends the session cleanly.
  const auto& c = text_case("qwen3tok-llama-q4-chat-kwargs");
  std::string flags = "chat --parity --model " + model_of(c) + " --max-tokens 24 --chat-template-kwargs " +
                      quote(c.at("kwargs").dump());
  std::string answer = c.at("text").get<std::string>() + "\n";
  auto r = run_cli(flags, c.at("prompt").get<std::string>() + "\n/reset\n" + c.at("prompt").get<std::string>() + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, answer + answer);
  EXPECT_NE(r.err.find("reset"), std::string::npos) << r.err;
}

TEST(CliText, PromptFromStdinAndEscapes) {
  // As mlx_lm.generate: "-" reads stdin; a literal backslash-n in --prompt is a newline.
  const auto& c = text_case("llama2tok-llama-q4-raw");
  auto from_stdin = run_cli("generate " + common_flags(c) + " --prompt -", c.at("prompt").get<std::string>());
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(from_stdin.out, c.at("text").get<std::string>() + "\n");
  auto escaped = run_cli("generate " + common_flags(c) + " --prompt 'a\\nb'");
  auto literal = run_cli("generate " + common_flags(c) + " --prompt \"$(printf 'a\\nb')\"");
  ASSERT_EQ(escaped.exit_code, 0) << escaped.err;
  EXPECT_EQ(escaped.out, literal.out);
}

TEST(CliTextErrors, PromptWithoutTokenizer) {
  auto r = run_cli("generate --model " + quote(tiny_model_dir("llama-q4g64")) + " --prompt hello");
  expect_one_line_error(r, "tokenizer.json");
}

TEST(CliTextErrors, BadTemplateKwargsJson) {
  const auto& c = text_case("qwen3tok-llama-q4-chat");
  expect_one_line_error(run_cli("chat --model " + model_of(c) + " --prompt hi --chat-template-kwargs '{bad'"),
                        "--chat-template-kwargs");
  expect_one_line_error(run_cli("chat --model " + model_of(c) + " --prompt hi --chat-template-kwargs '[1]'"),
                        "JSON object");
  expect_one_line_error(run_cli("generate --model " + model_of(c) + " --prompt hi --chat-template-config '{'"),
                        "--chat-template-kwargs");
}

TEST(CliTextErrors, ChatWithoutChatTemplate) {
  const auto& c = text_case("llama2tok-llama-q4-raw");
  expect_one_line_error(run_cli("chat --model " + model_of(c) + " --prompt hi"), "chat template");
}

TEST(CliTextErrors, ReplReportsAnErrorAndContinues) {
  // A copy of the qwen3 snapshot whose template raises on one message: that turn prints one
  // error line, the session goes on, and the next turn answers.
  const auto& c = text_case("qwen3tok-llama-q4-chat");
  TempDir tmp("cli_repl");
  fs::path src = model_dir(c);
  for (const auto& e : fs::directory_iterator(src)) fs::create_symlink(e.path(), tmp.path() / e.path().filename());
  fs::remove(tmp.path() / "tokenizer_config.json");
  json cfg = json::parse(std::ifstream(src / "tokenizer_config.json"));
  cfg["chat_template"] =
      "{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('boom is not allowed') }}{% endif %}"
      "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";
  std::ofstream(tmp.path() / "tokenizer_config.json") << cfg.dump();
  auto r = run_cli("chat --parity --max-tokens 4 --model " + quote(tmp.path().string()), "boom\nhello\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("mlxcpp: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("boom is not allowed"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 2) << r.err;  // the error, then the stats of the good turn
  EXPECT_NE(r.err.find("tokens-per-sec"), std::string::npos) << r.err;
  EXPECT_FALSE(r.out.empty());
  // One-shot, the same error is fatal.
  expect_one_line_error(run_cli("chat --model " + quote(tmp.path().string()) + " --prompt boom"), "boom is not allowed");
}

TEST(CliTextErrors, PromptAndPromptIdsExcludeEachOther) {
  const auto& c = text_case("qwen3tok-llama-q4-chat");
  auto both = run_cli("generate --model " + model_of(c) + " --prompt hi --prompt-ids 1,2");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  expect_one_line_error(run_cli("generate --model " + model_of(c)), "--prompt");
  expect_one_line_error(run_cli("generate --model " + model_of(c) + " --prompt-ids 1,2 --stop x"), "--stop");
}

}  // namespace
