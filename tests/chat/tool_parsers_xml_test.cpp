// Qwen3-Coder XML, Gemma call blocks and gpt-oss harmony on realistic model outputs: whole, split
// at every byte and byte by byte give the same content, calls and argument stream. Expected
// arguments are mlx-lm's parsers' results through json.dumps(ensure_ascii=False).
#include <gtest/gtest.h>

#include "parser_feed.h"

namespace mlxcpp {
namespace {

using test::check_tool_text;
using Json = nlohmann::ordered_json;
constexpr auto kCoder = ToolCallFormat::kQwen3Coder;

std::vector<Json> weather_tools() {
  return {Json::parse(R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object"},
                     "ratio": {"type": "number"}, "flag": {"type": "boolean"}}}}})")};
}

const std::string kCoderCall =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
    "<parameter=opts>\n{\"unit\": \"c\", \"n\": [1, 2]}\n</parameter>\n<parameter=ratio>\n2.5\n</parameter>\n"
    "<parameter=flag>\nTrue\n</parameter>\n</function>\n</tool_call>";

TEST(Qwen3CoderParser, TypedBySchema) {
  check_tool_text(kCoder, "I'll look it up.\n\n" + kCoderCall, "I'll look it up.\n\n",
                  {{"get_weather", "{\"city\": \"Zürich\", \"days\": 3, \"opts\": {\"unit\": \"c\", \"n\": [1, 2]}, \"ratio\": 2.5, "
                                   "\"flag\": true}"}},
                  weather_tools());
}

TEST(Qwen3CoderParser, WithoutSchemaEverythingIsAString) {
  check_tool_text(kCoder, kCoderCall, "",
                  {{"get_weather", "{\"city\": \"Zürich\", \"days\": \"3\", \"opts\": \"{\\\"unit\\\": \\\"c\\\", \\\"n\\\": [1, 2]}\", "
                                   "\"ratio\": \"2.5\", \"flag\": \"True\"}"}});
}

TEST(Qwen3CoderParser, MultilineCodeAndNull) {
  check_tool_text(kCoder,
                  "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.py\n</parameter>\n<parameter=content>\n"
                  "def f():\n    return \"é\" # </param\n\n</parameter>\n<parameter=mode>\nNULL\n</parameter>\n"
                  "<parameter=note>\nnullable\n</parameter>\n</function>\n</tool_call>",
                  "",
                  {{"write_file", "{\"path\": \"/tmp/a.py\", \"content\": \"def f():\\n    return \\\"é\\\" # </param\\n\", "
                                  "\"mode\": null, \"note\": \"nullable\"}"}});
}

TEST(Qwen3CoderParser, TwoCallsNoParameters) {
  check_tool_text(kCoder,
                  "<tool_call>\n<function=list_files>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n"
                  "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
                  "\n", {{"list_files", "{}"}, {"get_weather", "{\"city\": \"Paris\"}"}}, weather_tools());
}

TEST(Qwen3CoderParser, MalformedIsContentAndCutShortCallIsClosed) {
  std::string junk = "<tool_call>\njust text\n</tool_call>";
  check_tool_text(kCoder, junk, junk, {});
  check_tool_text(kCoder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", "", {{"get_weather", "{\"city\": \"Par\"}"}},
                  weather_tools());
  check_tool_text(kCoder, "<tool_call>\n<function=get_weather>\n<parameter=days>\n1", "", {{"get_weather", "{\"days\": 1}"}},
                  weather_tools());
}

TEST(Qwen3CoderParser, ForcedPrefix) {
  EXPECT_EQ(forced_tool_call_prefix(kCoder, "get_weather"), "<tool_call>\n<function=get_weather>\n");
  check_tool_text(kCoder, forced_tool_call_prefix(kCoder, "get_weather") + "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
                  "", {{"get_weather", "{\"days\": 2}"}}, weather_tools());
}

TEST(GemmaParser, FunctionGemmaCalls) {
  check_tool_text(ToolCallFormat::kGemma,
                  "Checking.<start_function_call>call:get_weather{city:<escape>Paris, FR<escape>,days:3,unit:celsius}"
                  "<end_function_call><start_function_call>call:get_time{tz:<escape>Europe/Zürich {x}<escape>}<end_function_call>",
                  "Checking.",
                  {{"get_weather", "{\"city\": \"Paris, FR\", \"days\": 3, \"unit\": \"celsius\"}"},
                   {"get_time", "{\"tz\": \"Europe/Zürich {x}\"}"}});
}

TEST(GemmaParser, Gemma4NestedValues) {
  check_tool_text(ToolCallFormat::kGemma4,
                  "<|tool_call>call:get_weather{city:<|\"|>Zürich<|\"|>,opts:{unit:<|\"|>c}<|\"|>,n:[1,2]},ok:true}<tool_call|>Done",
                  "Done", {{"get_weather", "{\"city\": \"Zürich\", \"opts\": {\"unit\": \"c}\", \"n\": [1, 2]}, \"ok\": true}"}});
}

TEST(GemmaParser, MalformedAndCutShort) {
  std::string junk = "<start_function_call>oops<end_function_call>";
  check_tool_text(ToolCallFormat::kGemma, junk, junk, {});
  check_tool_text(ToolCallFormat::kGemma, "<start_function_call>call:f{a:<escape>hal", "", {{"f", "{\"a\": \"hal\"}"}});
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kGemma, "f"), "<start_function_call>call:f{");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kGemma4, ""), "<|tool_call>call:");
  check_tool_text(ToolCallFormat::kGemma4, forced_tool_call_prefix(ToolCallFormat::kGemma4, "f") + "x:1}<tool_call|>", "",
                  {{"f", "{\"x\": 1}"}});
}

TEST(GptOssParser, AnalysisThenCall) {
  check_tool_text(ToolCallFormat::kGptOss,
                  "<|channel|>analysis<|message|>User asks weather in Zürich. Call get_weather.<|end|><|start|>assistant"
                  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Zürich\"}<|call|>",
                  "", {{"get_weather", "{\"city\":\"Zürich\"}"}}, {}, "User asks weather in Zürich. Call get_weather.");
}

TEST(GptOssParser, FinalAnswerAndPreamble) {
  check_tool_text(ToolCallFormat::kGptOss,
                  "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Paris is sunny ☀.<|return|>",
                  "Paris is sunny ☀.", {}, {}, "Easy.");
  check_tool_text(ToolCallFormat::kGptOss,
                  "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant to=functions.a<|channel|>commentary json"
                  "<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>"
                  "{\"x\": [1]}<|call|>",
                  "Let me check.", {{"a", "{}"}, {"b", "{\"x\": [1]}"}});
}

TEST(GptOssParser, CutShortAndForced) {
  // The stream stopped at <|call|> (an eos token the decoder may drop): the call is complete.
  check_tool_text(ToolCallFormat::kGptOss, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}", "",
                  {{"f", "{\"a\": 1}"}});
  check_tool_text(ToolCallFormat::kGptOss, "plain text, no harmony", "plain text, no harmony", {});
  std::string prefix = forced_tool_call_prefix(ToolCallFormat::kGptOss, "f");
  EXPECT_EQ(prefix, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
  check_tool_text(ToolCallFormat::kGptOss, prefix + "{}<|call|>", "", {{"f", "{}"}});
  check_tool_text(ToolCallFormat::kGptOss,
                  forced_tool_call_prefix(ToolCallFormat::kGptOss, "") + "get_time <|constrain|>json<|message|>{\"tz\": \"UTC\"}<|call|>",
                  "", {{"get_time", "{\"tz\": \"UTC\"}"}});
}

}  // namespace
}  // namespace mlxcpp
