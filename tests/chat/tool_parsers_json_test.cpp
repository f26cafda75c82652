// JSON tool-call formats (Hermes/Qwen, Llama 3.1 JSON, Mistral) on realistic model outputs:
// whole, split at every byte and byte by byte give the same content, calls and argument stream.
#include <gtest/gtest.h>

#include "parser_feed.h"

namespace mlxcpp {
namespace {

using test::check_tool_text;
constexpr auto kHermes = ToolCallFormat::kHermes;
constexpr auto kLlama = ToolCallFormat::kLlama3Json;
constexpr auto kMistral = ToolCallFormat::kMistral;

TEST(HermesParser, NoCallIsContent) {
  check_tool_text(kHermes, "The capital of France is Paris. Use the <tools> tag <tool for more.",
                  "The capital of France is Paris. Use the <tools> tag <tool for more.", {});
  check_tool_text(kHermes, "A partial marker at the end is text: <tool_ca", "A partial marker at the end is text: <tool_ca", {});
}

TEST(HermesParser, OneCallAfterContent) {
  check_tool_text(kHermes,
                  "Let me check the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                  "\"unit\": \"celsius\"}}\n</tool_call>",
                  "Let me check the weather.\n", {{"get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}});
}

TEST(HermesParser, TwoCallsAndContentAfter) {
  check_tool_text(kHermes,
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                  "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\", \"n\": [1, 2.5, null]}}\n"
                  "</tool_call>\nDone.",
                  "\n\nDone.",
                  {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{\"tz\": \"Europe/Paris\", \"n\": [1, 2.5, null]}"}});
}

TEST(HermesParser, UnicodeInArguments) {
  check_tool_text(kHermes,
                  "Voilà 🌍\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"Zürich 東京 🌸\", \"esc\": \"a\\\"b\\\\c\\u00e9}\"}}\n"
                  "</tool_call>",
                  "Voilà 🌍\n", {{"search", "{\"q\": \"Zürich 東京 🌸\", \"esc\": \"a\\\"b\\\\c\\u00e9}\"}"}});
}

TEST(HermesParser, CompactJsonKeptAsGenerated) {
  check_tool_text(kHermes, "<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1,\"b\":{\"c\":[]}}}</tool_call>", "",
                  {{"f", "{\"a\":1,\"b\":{\"c\":[]}}"}});
}

TEST(HermesParser, NameAfterArgumentsAndMissingArguments) {
  check_tool_text(kHermes, "<tool_call>\n{\"arguments\": {\"a\": 1}, \"name\": \"f\"}\n</tool_call>", "", {{"f", "{\"a\": 1}"}});
  check_tool_text(kHermes, "<tool_call>\n{\"name\": \"ping\"}\n</tool_call>", "", {{"ping", "{}"}});
}

TEST(HermesParser, ArgumentsAsJsonString) {
  check_tool_text(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>", "",
                  {{"f", "{\"a\": 1}"}});
}

TEST(HermesParser, MalformedCallsAreContent) {
  std::string no_json = "Hmm <tool_call>\nnot json at all\n</tool_call> ok";
  check_tool_text(kHermes, no_json, no_json, {});
  std::string no_name = "<tool_call>\n{\"nme\": \"x\", \"arguments\": {}}\n</tool_call>";
  check_tool_text(kHermes, no_name, no_name, {});
  std::string broken = "<tool_call>\n{\"arguments\": {\"a\" 1}}\n</tool_call>";
  check_tool_text(kHermes, broken, broken, {});
  // Cut short before the name is complete: the text comes back, markers included.
  check_tool_text(kHermes, "Sure <tool_call>\n{\"name\": \"get_wea", "Sure <tool_call>\n{\"name\": \"get_wea", {});
}

TEST(HermesParser, StartedCallKeepsWhatArrived) {
  // The name was streamed, then the output stopped: the call stays with the arguments text so far.
  check_tool_text(kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "",
                  {{"get_weather", "{\"city\": \"Par"}});
  // Broken after the arguments: the call stays, the rest is content.
  check_tool_text(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}]\n</tool_call>", "]\n", {{"f", "{\"a\": 1}"}});
}

TEST(HermesParser, UnterminatedCompleteCall) {
  // mlx-lm parses the tool text at the end of the stream even without </tool_call>.
  check_tool_text(kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": true}}\n", "", {{"f", "{\"x\": true}"}});
}

TEST(HermesParser, ForcedPrefixThenContinuation) {
  std::string prefix = forced_tool_call_prefix(kHermes, "get_weather");
  EXPECT_EQ(prefix, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  check_tool_text(kHermes, prefix + "{\"city\": \"Paris\"}}\n</tool_call>", "", {{"get_weather", "{\"city\": \"Paris\"}"}});
  EXPECT_EQ(forced_tool_call_prefix(kHermes, ""), "<tool_call>\n");
  check_tool_text(kHermes, forced_tool_call_prefix(kHermes, "") + "{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "",
                  {{"f", "{}"}});
}

TEST(HermesParser, ArgumentsStreamBeforeTheCallEnds) {
  auto p = make_tool_call_parser(kHermes, "x");
  auto a = p->push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Pa");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].id, "call_x_0");
  EXPECT_EQ(a.calls[0].name, "f");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\": \"Pa");
  EXPECT_TRUE(p->calls().empty());  // not complete yet
  auto b = p->push("ris\"}}\n</tool_call>");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].id, "");
  EXPECT_EQ(b.calls[0].arguments, "ris\"}");
  ASSERT_EQ(p->calls().size(), 1u);
  EXPECT_EQ(p->calls()[0].arguments.get<std::string>(), "{\"city\": \"Paris\"}");
}

TEST(HermesParser, SplitUtf8IsHeldBack) {
  auto p = make_tool_call_parser(kHermes, "x");
  std::string s = "é";  // 2 bytes
  auto a = p->push(s.substr(0, 1));
  EXPECT_EQ(a.content, "");
  auto b = p->push(s.substr(1));
  EXPECT_EQ(b.content, "é");
}

// A long value (a file written through a tool) fed in small pieces: the scan resumes instead of
// starting over, so this takes milliseconds, not minutes.
TEST(HermesParser, LongArgumentsInSmallPieces) {
  std::string body;
  for (int i = 0; i < 20000; ++i) body += "ab\\\"é";  // a, b, an escaped quote, é
  std::string args = "{\"path\": \"a.txt\", \"text\": \"" + body + "\"}";
  std::string text = "<tool_call>\n{\"name\": \"write\", \"arguments\": " + args + "}\n</tool_call>";
  std::vector<std::string> pieces;
  for (size_t i = 0; i < text.size(); i += 3) pieces.push_back(text.substr(i, 3));
  for (auto f : {kHermes}) {
    auto r = test::run_tool_parser(f, pieces);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(test::args_text(r.calls[0]), args);
    EXPECT_EQ(r.streamed_args[0], args);
  }
  std::string mistral = "[TOOL_CALLS]write[ARGS]" + args;
  pieces.clear();
  for (size_t i = 0; i < mistral.size(); i += 3) pieces.push_back(mistral.substr(i, 3));
  auto m = test::run_tool_parser(kMistral, pieces);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.streamed_args[0], args);
}

TEST(Llama3JsonParser, WholeOutputCall) {
  check_tool_text(kLlama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"São Paulo\"}}", "",
                  {{"get_weather", "{\"city\": \"São Paulo\"}"}});
}

TEST(Llama3JsonParser, PythonTagAndTwoCalls) {
  check_tool_text(kLlama,
                  "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {\"y\": \"ü\"}}",
                  "", {{"a", "{\"x\": 1}"}, {"b", "{\"y\": \"ü\"}"}});
  check_tool_text(kLlama, "  \n{\"name\": \"a\", \"parameters\": {}}", "  \n", {{"a", "{}"}});
}

TEST(Llama3JsonParser, ContentAndNonCallJson) {
  check_tool_text(kLlama, "The weather in Paris is sunny {\"name\": \"x\", \"parameters\": {}}",
                  "The weather in Paris is sunny {\"name\": \"x\", \"parameters\": {}}", {});
  check_tool_text(kLlama, "{\"name\": \"John\", \"age\": 30}", "{\"name\": \"John\", \"age\": 30}", {});
  check_tool_text(kLlama, "{\"name\": \"a\", \"parameters\": {\"x\": 1}}\nThat is all.", "That is all.", {{"a", "{\"x\": 1}"}});
}

TEST(Llama3JsonParser, ForcedPrefix) {
  EXPECT_EQ(forced_tool_call_prefix(kLlama, "f"), "{\"name\": \"f\", \"parameters\": ");
  check_tool_text(kLlama, forced_tool_call_prefix(kLlama, "f") + "{\"q\": \"x\"}}", "", {{"f", "{\"q\": \"x\"}"}});
  check_tool_text(kLlama, forced_tool_call_prefix(kLlama, "") + "g\", \"parameters\": {}}", "", {{"g", "{}"}});
}

TEST(MistralParser, JsonArrayForm) {
  check_tool_text(kMistral,
                  "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123xyz\"}, "
                  "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]",
                  "", {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{\"tz\": \"CET\"}"}});
}

TEST(MistralParser, HeaderFormWithContentBefore) {
  check_tool_text(kMistral,
                  "Sure, checking. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Köln\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"CET\"}",
                  "Sure, checking. ", {{"get_weather", "{\"city\": \"Köln\"}"}, {"get_time", "{\"tz\": \"CET\"}"}});
  check_tool_text(kMistral, "[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{}", "", {{"f", "{}"}});
}

TEST(MistralParser, MalformedIsContent) {
  check_tool_text(kMistral, "[TOOL_CALLS]this is not a call", "[TOOL_CALLS]this is not a call", {});
  check_tool_text(kMistral, "No tools needed.", "No tools needed.", {});
  check_tool_text(kMistral, "[TOOL_CALLS]f[ARGS]{\"a\": [1, 2", "", {{"f", "{\"a\": [1, 2"}});
}

TEST(MistralParser, ForcedPrefix) {
  EXPECT_EQ(forced_tool_call_prefix(kMistral, "f"), "[TOOL_CALLS]f[ARGS]");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kMistralJson, "f"), "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": ");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kMistralJson, ""), "[TOOL_CALLS][");
  // The JSON array form's forced text, then what the model writes, read back as the call.
  check_tool_text(ToolCallFormat::kMistralJson, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", "",
                  {{"f", "{\"a\": 1}"}});
  check_tool_text(kMistral, forced_tool_call_prefix(kMistral, "f") + "{\"a\": 1}", "", {{"f", "{\"a\": 1}"}});
}

TEST(NoneParser, PassesEverythingThrough) {
  check_tool_text(ToolCallFormat::kNone, "<tool_call>{\"name\": \"f\"}</tool_call> ünï", "<tool_call>{\"name\": \"f\"}</tool_call> ünï", {});
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kNone, "f"), "");
}

}  // namespace
}  // namespace mlxcpp
