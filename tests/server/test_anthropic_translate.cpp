// Anthropic Messages request bodies -> ChatCall: content blocks onto chat messages, tools and
// tool_choice onto the OpenAI form, and malformed bodies -> FieldError naming the field's path.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/anthropic/messages.h"

using namespace mlxcpp;
using namespace mlxcpp::server;
using mlxcpp::server::anthropic::parse_messages_request;

namespace {

Json body(const std::string& extra_fields_json) {
  Json b = Json::parse(R"({"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]})");
  const Json extra = Json::parse(extra_fields_json);
  for (const auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

ChatCall parse(const std::string& extra) { return parse_messages_request(body(extra)).call; }

}  // namespace

TEST(AnthropicParse, MinimalBodyLeavesDefaultsToTheServer) {
  auto r = parse_messages_request(body("{}"));
  ASSERT_EQ(r.call.messages.size(), 1u);
  EXPECT_EQ(r.call.messages[0].role, "user");
  EXPECT_EQ(r.call.messages[0].content.value(), "Hi");
  EXPECT_EQ(r.call.gen.max_tokens, 10);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.call.tools.empty());
  EXPECT_EQ(r.call.tool_choice, "auto");
  EXPECT_FALSE(r.call.enable_thinking.has_value());
  EXPECT_EQ(r.call.gen.sampling.temp, -1);
  EXPECT_EQ(r.call.gen.sampling.top_p, -1);
  EXPECT_EQ(r.call.gen.sampling.top_k, -2);
  EXPECT_EQ(r.call.gen.sampling.min_p, -1);
  EXPECT_EQ(r.call.gen.n, 1);
  EXPECT_TRUE(r.call.gen.stops.empty());
}

TEST(AnthropicParse, SamplingStopsStreamAndSystem) {
  auto r = parse_messages_request(body(R"({"system": "Be brief.", "temperature": 0.5, "top_p": 0.9, "top_k": 40,
      "stream": true, "stop_sequences": ["\n\n", "END"], "metadata": {"user_id": "u"}, "n": 3,
      "service_tier": "auto"})"));
  EXPECT_TRUE(r.stream);
  EXPECT_DOUBLE_EQ(r.call.gen.sampling.temp, 0.5);
  EXPECT_DOUBLE_EQ(r.call.gen.sampling.top_p, 0.9);
  EXPECT_EQ(r.call.gen.sampling.top_k, 40);
  EXPECT_EQ(r.call.gen.n, 1);  // not Anthropic's field
  EXPECT_EQ(r.call.gen.stops, (std::vector<std::string>{"\n\n", "END"}));
  ASSERT_EQ(r.call.messages.size(), 2u);
  EXPECT_EQ(r.call.messages[0].role, "system");
  EXPECT_EQ(r.call.messages[0].content.value(), "Be brief.");
  EXPECT_EQ(r.call.messages[1].role, "user");
}

TEST(AnthropicParse, SystemAsTextBlocksAndEmptySystem) {
  auto c = parse(R"({"system": [{"type": "text", "text": "One."}, {"type": "text", "text": "Two.",
      "cache_control": {"type": "ephemeral"}}]})");
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[0].content.value(), "One.\nTwo.");
  EXPECT_EQ(parse(R"({"system": ""})").messages.size(), 1u);  // none: the template's default applies
}

TEST(AnthropicParse, ToolRoundTrip) {
  auto c = parse(R"({
    "tools": [{"name": "get_weather", "description": "Weather by city",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
              {"type": "custom", "name": "noop", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "get_weather"},
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "20C"},
        {"type": "text", "text": "Thanks."}]}]})");
  ASSERT_EQ(c.tools.size(), 2u);
  EXPECT_EQ(c.tools[0], Json::parse(R"({"type": "function", "function": {"name": "get_weather",
      "description": "Weather by city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})"));
  EXPECT_EQ(c.tools[1], Json::parse(R"({"type": "function", "function": {"name": "noop",
      "parameters": {"type": "object"}}})"));
  EXPECT_EQ(c.tool_choice, "get_weather");
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[0].content.value(), "Weather in Paris?");
  const Message& a = c.messages[1];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content.value(), "Let me check.");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, "toolu_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[0].arguments, Json::parse(R"({"city": "Paris"})"));
  const Message& t = c.messages[2];
  EXPECT_EQ(t.role, "tool");
  EXPECT_EQ(t.tool_call_id.value(), "toolu_1");
  EXPECT_EQ(t.name.value(), "get_weather");
  EXPECT_EQ(t.content.value(), "20C");
  EXPECT_EQ(c.messages[3].role, "user");
  EXPECT_EQ(c.messages[3].content.value(), "Thanks.");
}

TEST(AnthropicParse, ToolResultBlocksAndErrors) {
  auto c = parse(R"({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9",
      "is_error": true, "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"type": "tool_result", "tool_use_id": "t10"}]}]})");
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[0].role, "tool");
  EXPECT_EQ(c.messages[0].content.value(), "Error: a\nb");
  EXPECT_FALSE(c.messages[0].name.has_value());  // no earlier tool_use with that id
  EXPECT_EQ(c.messages[1].content.value(), "");
}

TEST(AnthropicParse, ToolChoiceKinds) {
  const std::string tools = R"("tools": [{"name": "f", "input_schema": {"type": "object"}}])";
  EXPECT_EQ(parse("{" + tools + R"(, "tool_choice": {"type": "auto"}})").tool_choice, "auto");
  EXPECT_EQ(parse("{" + tools + R"(, "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})").tool_choice,
            "required");
  EXPECT_EQ(parse("{" + tools + R"(, "tool_choice": {"type": "none"}})").tool_choice, "none");
  EXPECT_EQ(parse(R"({"tool_choice": {"type": "none"}})").tool_choice, "none");
}

TEST(AnthropicParse, Thinking) {
  EXPECT_EQ(parse(R"({"thinking": {"type": "enabled", "budget_tokens": 1024}})").enable_thinking, true);
  EXPECT_EQ(parse(R"({"thinking": {"type": "disabled"}})").enable_thinking, false);
  EXPECT_EQ(parse(R"({"thinking": {"type": "between_tools"}})").enable_thinking, false);
  EXPECT_FALSE(parse(R"({"thinking": {"type": "adaptive", "display": "omitted"}})").enable_thinking.has_value());
}

TEST(AnthropicParse, AssistantHistoryBlocks) {
  auto c = parse(R"({"messages": [{"role": "user", "content": "Q"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "xyz"}, {"type": "text", "text": "A1"}, {"type": "text", "text": "A2"}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
      {"role": "assistant", "content": "plain"}]})");
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[1].reasoning_content.value(), "hmm");
  EXPECT_EQ(c.messages[1].content.value(), "A1\nA2");
  EXPECT_EQ(c.messages[2].content.value(), "");  // tool calls only: "" (templates concatenate it)
  EXPECT_EQ(c.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(c.messages[3].content.value(), "plain");
}

TEST(AnthropicParse, CountTokensNeedsNoMaxTokens) {
  Json b = body("{}");
  b.erase("max_tokens");
  auto r = parse_messages_request(b, /*count_only=*/true);
  EXPECT_FALSE(r.call.gen.max_tokens.has_value());
  EXPECT_THROW(parse_messages_request(b), FieldError);
}

struct Bad {
  const char* extra;  // fields merged over a valid body
  const char* param;  // the FieldError's param
};

class AnthropicBadBody : public ::testing::TestWithParam<Bad> {};

TEST_P(AnthropicBadBody, NamesTheField) {
  const Bad& bad = GetParam();
  try {
    parse_messages_request(body(bad.extra));
    FAIL() << "no error for " << bad.extra;
  } catch (const FieldError& e) {
    EXPECT_EQ(e.param(), bad.param) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.param), std::string::npos) << e.what();
  }
}

#define MSGS(x) "{\"messages\": " x "}"
#define USER(c) MSGS("[{\"role\": \"user\", \"content\": " c "}]")
#define ASSIST(c) MSGS("[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": " c "}]")
#define TOOLS "\"tools\": [{\"name\": \"f\", \"input_schema\": {\"type\": \"object\"}}]"

INSTANTIATE_TEST_SUITE_P(
    Fields, AnthropicBadBody,
    ::testing::Values(
        Bad{R"({"model": null})", "model"}, Bad{R"({"model": 5})", "model"},
        Bad{R"({"max_tokens": null})", "max_tokens"}, Bad{R"({"max_tokens": 0})", "max_tokens"},
        Bad{R"({"max_tokens": "10"})", "max_tokens"}, Bad{R"({"max_tokens": 1.5})", "max_tokens"},
        Bad{R"({"messages": null})", "messages"}, Bad{R"({"messages": []})", "messages"},
        Bad{R"({"messages": "hi"})", "messages"}, Bad{MSGS("[5]"), "messages[0]"},
        Bad{MSGS(R"([{"role": "system", "content": "x"}])"), "messages[0].role"},
        Bad{MSGS(R"([{"content": "x"}])"), "messages[0].role"},
        Bad{MSGS(R"([{"role": "user"}])"), "messages[0].content"},
        Bad{USER("5"), "messages[0].content"}, Bad{USER("[]"), "messages[0].content"},
        Bad{USER(R"([{"text": "x"}])"), "messages[0].content[0].type"},
        Bad{USER(R"([{"type": "image", "source": {}}])"), "messages[0].content[0].type"},
        Bad{USER(R"([{"type": "text", "text": "a"}, {"type": "document", "source": {}}])"),
            "messages[0].content[1].type"},
        Bad{USER(R"([{"type": "text", "text": 3}])"), "messages[0].content[0].text"},
        Bad{USER(R"(["plain"])"), "messages[0].content[0]"},
        Bad{USER(R"([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])"), "messages[0].content[0].type"},
        Bad{USER(R"([{"type": "thinking", "thinking": "x"}])"), "messages[0].content[0].type"},
        Bad{USER(R"([{"type": "tool_result", "content": "x"}])"), "messages[0].content[0].tool_use_id"},
        Bad{USER(R"([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}])"),
            "messages[0].content[0].content[0].type"},
        Bad{USER(R"([{"type": "tool_result", "tool_use_id": "t", "content": 7}])"), "messages[0].content[0].content"},
        Bad{USER(R"([{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}])"),
            "messages[0].content[0].is_error"},
        Bad{ASSIST(R"([{"type": "tool_result", "tool_use_id": "t"}])"), "messages[1].content[0].type"},
        Bad{ASSIST(R"([{"type": "tool_use", "id": "t", "name": "f"}])"), "messages[1].content[0].input"},
        Bad{ASSIST(R"([{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}])"), "messages[1].content[0].input"},
        Bad{ASSIST(R"([{"type": "tool_use", "name": "f", "input": {}}])"), "messages[1].content[0].id"},
        Bad{ASSIST(R"([{"type": "thinking"}])"), "messages[1].content[0].thinking"},
        Bad{ASSIST(R"([{"type": "server_tool_use"}])"), "messages[1].content[0].type"},
        Bad{R"({"system": 5})", "system"}, Bad{R"({"system": [{"type": "image"}]})", "system[0].type"},
        Bad{R"({"stop_sequences": "x"})", "stop_sequences"}, Bad{R"({"stop_sequences": [""]})", "stop_sequences[0]"},
        Bad{R"({"stop_sequences": ["a", 1]})", "stop_sequences[1]"},
        Bad{R"({"stop_sequences": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})",
            "stop_sequences"},
        Bad{R"({"temperature": 3})", "temperature"}, Bad{R"({"temperature": "hot"})", "temperature"},
        Bad{R"({"top_p": 1.5})", "top_p"}, Bad{R"({"top_k": -1})", "top_k"}, Bad{R"({"stream": "yes"})", "stream"},
        Bad{R"({"tools": {}})", "tools"}, Bad{R"({"tools": [{"input_schema": {}}]})", "tools[0].name"},
        Bad{R"({"tools": [{"name": "f"}]})", "tools[0].input_schema"},
        Bad{R"({"tools": [{"name": "f", "input_schema": []}]})", "tools[0].input_schema"},
        Bad{R"({"tools": [{"type": "web_search_20250305", "name": "web_search"}]})", "tools[0].type"},
        Bad{R"({"tools": [{"name": "f", "input_schema": {}}, {"name": "f", "input_schema": {}}]})", "tools[1].name"},
        Bad{"{" TOOLS R"(, "tool_choice": "auto"})", "tool_choice"},
        Bad{"{" TOOLS R"(, "tool_choice": {"type": "bogus"}})", "tool_choice.type"},
        Bad{"{" TOOLS R"(, "tool_choice": {"type": "tool", "name": "g"}})", "tool_choice.name"},
        Bad{"{" TOOLS R"(, "tool_choice": {"type": "tool"}})", "tool_choice.name"},
        Bad{R"({"tool_choice": {"type": "any"}})", "tool_choice.type"},
        Bad{R"({"thinking": {"type": "enabled"}})", "thinking.budget_tokens"},
        Bad{R"({"thinking": {"type": "on"}})", "thinking.type"}, Bad{R"({"thinking": true})", "thinking"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return "case" + std::to_string(info.index); });

TEST(AnthropicParse, BodyMustBeAnObject) {
  try {
    parse_messages_request(Json::array());
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.param(), "body");
  }
}

TEST(AnthropicParse, MediaBlocksSayNotSupported) {
  try {
    parse_messages_request(body(USER(R"([{"type": "image", "source": {}}])")));
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
  }
}
