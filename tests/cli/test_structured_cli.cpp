// `mlxcpp generate --json-schema/--regex/--grammar` with the real SmolLM2-135M-Instruct
// (`make models`): greedy and two sampled seeds per schema; every output parses, validates
// against its schema (chat/'s check_tool_arguments) and has no whitespace run above the bound.
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "chat/output_parsers.h"
#include "cli_test_util.h"
#include "test_support.h"

namespace mlxcpp::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

struct SchemaCase {
  const char* name;
  const char* prompt;
  const char* schema;
};

const SchemaCase kCases[] = {
    {"weather_call", "Call the weather tool for Paris.",
     R"({"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string","minLength":1,"maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false})"},
    {"person", "Describe a fictional person as JSON.",
     R"({"type":"object","properties":{"name":{"type":"string","maxLength":30},"age":{"type":"integer","minimum":0,"maximum":120},"email":{"type":"string","pattern":"^[a-z]{1,10}@[a-z]{1,10}\\.com$"}},"required":["name","age","email"],"additionalProperties":false})"},
    {"sentiment", "Classify the sentiment of: 'I love this phone'.",
     R"({"type":"object","properties":{"label":{"enum":["positive","negative","neutral"]},"confidence":{"type":"integer","minimum":0,"maximum":100}},"required":["label","confidence"],"additionalProperties":false})"},
    {"tags", "List three tags for a blog post about cooking pasta.",
     R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":15},"minItems":1,"maxItems":3}},"required":["tags"],"additionalProperties":false})"},
    {"order", "Create an order for two apples and one pear.",
     R"({"type":"object","properties":{"items":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{"fruit":{"enum":["apple","pear","banana"]},"qty":{"type":"integer","minimum":1,"maximum":9}},"required":["fruit","qty"],"additionalProperties":false}}},"required":["items"],"additionalProperties":false})"},
    {"ref_address", "Give an address in Berlin as JSON.",
     R"({"$defs":{"addr":{"type":"object","properties":{"city":{"type":"string","maxLength":20},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city","zip"],"additionalProperties":false}},"type":"object","properties":{"home":{"$ref":"#/$defs/addr"}},"required":["home"],"additionalProperties":false})"},
    {"any_of", "Give a shape as JSON.",
     R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"integer","minimum":1,"maximum":99}},"required":["kind","r"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"integer","minimum":1,"maximum":99}},"required":["kind","side"],"additionalProperties":false}]})"},
    {"booleans", "Is the sky blue? Is fire cold? Answer as JSON.",
     R"({"type":"object","properties":{"sky_blue":{"type":"boolean"},"fire_cold":{"type":"boolean"}},"required":["sky_blue","fire_cold"],"additionalProperties":false})"},
    {"nullable", "Give a user with an optional nickname.",
     R"({"type":"object","properties":{"user":{"type":"string","maxLength":20},"nickname":{"type":["string","null"],"maxLength":10}},"required":["user","nickname"],"additionalProperties":false})"},
    {"matrix", "Give the 2x2 identity matrix.",
     R"({"type":"object","properties":{"rows":{"type":"array","minItems":2,"maxItems":2,"items":{"type":"array","minItems":2,"maxItems":2,"items":{"type":"integer","minimum":-9,"maximum":9}}}},"required":["rows"],"additionalProperties":false})"},
};

fs::path smollm2() { return source_dir() / "models" / "SmolLM2-135M-Instruct"; }

// The longest run of JSON whitespace outside strings.
size_t longest_whitespace_run(const std::string& s) {
  size_t best = 0, run = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    run = (c == ' ' || c == '\n' || c == '\t' || c == '\r') ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

class StructuredCli : public ::testing::TestWithParam<SchemaCase> {};

TEST_P(StructuredCli, OutputsParseAndValidate) {
  if (!fs::exists(smollm2() / "config.json")) GTEST_SKIP() << "needs `make models`";
  const auto& c = GetParam();
  TempDir tmp("structured");
  const auto schema_file = tmp.path() / "schema.json";
  std::ofstream(schema_file) << c.schema;
  const auto schema = ordered_json::parse(c.schema);
  const int max_ws = 2;
  for (const std::string sampling : {"", "--temp 0.8 --seed 1", "--temp 0.8 --seed 2"}) {
    SCOPED_TRACE(sampling.empty() ? "greedy" : sampling);
    auto r = run_cli("generate --model " + quote(smollm2().string()) + " --max-tokens 200 --json-whitespace " +
                     std::to_string(max_ws) + " --json-schema " + quote(schema_file.string()) + " " + sampling +
                     " --prompt " + quote(std::string(c.prompt) + " Answer in JSON."));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("finish: stop"), std::string::npos) << r.err;
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();  // end_answer's newline
    ordered_json value;
    ASSERT_NO_THROW(value = ordered_json::parse(out)) << out;
    auto problem = check_tool_arguments(schema, out);
    EXPECT_FALSE(problem.has_value()) << out << "\n" << problem.value_or("");
    EXPECT_LE(longest_whitespace_run(out), static_cast<size_t>(max_ws)) << out;
  }
}

INSTANTIATE_TEST_SUITE_P(SmolLM2, StructuredCli, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(StructuredCliOptions, RegexAndLarkConstrainTheOutput) {
  if (!fs::exists(smollm2() / "config.json")) GTEST_SKIP() << "needs `make models`";
  const std::string model = " --model " + quote(smollm2().string()) + " --max-tokens 40";
  auto r = run_cli("generate" + model + " --regex '[0-9]{3}-[0-9]{4}' --prompt 'A phone number:'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(r.out.substr(0, r.out.find('\n')), std::regex("[0-9]{3}-[0-9]{4}"))) << r.out;
  TempDir tmp("structured_lark");
  std::ofstream(tmp.path() / "g.lark") << "start: \"Answer: \" (\"yes\" | \"no\")\n";
  r = run_cli("generate" + model + " --grammar " + quote((tmp.path() / "g.lark").string()) + " --prompt 'Is water wet?'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == "Answer: yes\n" || r.out == "Answer: no\n") << r.out;
}

TEST(StructuredCliOptions, BadSchemaIsAnErrorNotUnconstrained) {
  if (!fs::exists(smollm2() / "config.json")) GTEST_SKIP() << "needs `make models`";
  TempDir tmp("structured_bad");
  std::ofstream(tmp.path() / "s.json") << R"({"type":"strnig"})";
  auto r = run_cli("generate --model " + quote(smollm2().string()) + " --json-schema " +
                   quote((tmp.path() / "s.json").string()) + " --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("strnig"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace mlxcpp::test
