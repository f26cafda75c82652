// Tool-call formats by name, their detection (mlx-lm tokenizer_utils._infer_tool_parser), the
// parser factory and the text that forces a call.
#include <filesystem>

#include "chat/output_parsers.h"
#include "chat/parse_util.h"
#include "chat/tool_call_base.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {

const char* to_string(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kQwen3Coder: return "qwen3_coder";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kMistralJson: return "mistral_json";
    case ToolCallFormat::kGemma: return "gemma";
    case ToolCallFormat::kGemma4: return "gemma4";
    case ToolCallFormat::kGptOss: return "gpt_oss";
  }
  return "none";
}

std::optional<ToolCallFormat> tool_call_format_from_string(std::string_view name) {
  static const std::pair<std::string_view, ToolCallFormat> kNames[] = {
      {"none", ToolCallFormat::kNone},           {"hermes", ToolCallFormat::kHermes},
      {"json_tools", ToolCallFormat::kHermes},   {"qwen3_coder", ToolCallFormat::kQwen3Coder},
      {"llama3_json", ToolCallFormat::kLlama3Json}, {"mistral", ToolCallFormat::kMistral},
      {"mistral_json", ToolCallFormat::kMistralJson},
      {"gemma", ToolCallFormat::kGemma},         {"function_gemma", ToolCallFormat::kGemma},
      {"gemma4", ToolCallFormat::kGemma4},       {"gpt_oss", ToolCallFormat::kGptOss},
  };
  for (const auto& [n, f] : kNames) {
    if (n == name) return f;
  }
  return std::nullopt;
}

namespace {

// _infer_tool_parser's template tests in its order; nullopt when none matches. Parsers mlx-lm has
// and we do not (minimax_m2, longcat, glm47, pythonic, kimi_k2, minicpm5, muse_spark) give kNone.
std::optional<ToolCallFormat> from_template(const std::string& t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string::npos; };
  using F = ToolCallFormat;
  if (has("<minimax:tool_call>")) return F::kNone;
  if (has("<|tool_call>") && has("<tool_call|>")) return F::kGemma4;
  if (has("<start_function_call>")) return F::kGemma;
  if (has("<longcat_tool_call>") || has("<arg_key>")) return F::kNone;
  if (has("<|tool_list_start|>") || has("<|tool_call_start|>")) return F::kNone;
  if (has("<tool_call>\\n<function=") || has("<tool_call>\n<function=")) return F::kQwen3Coder;
  if (has("<|tool_calls_section_begin|>")) return F::kNone;
  if (has("<function name=\"") && has("<param name=\"")) return F::kNone;
  // mlx-lm's "mistral" for both; the JSON array form where the template has no [ARGS] (its
  // parser reads either; the form matters for a forced call's text and grammar).
  if (has("[TOOL_CALLS]")) return has("[ARGS]") ? F::kMistral : F::kMistralJson;
  if (has("<atem:function_calls>")) return F::kNone;
  if (has("<tool_call>") && has("tool_call.name")) return F::kHermes;
  // Beyond mlx-lm: harmony and Llama 3.1's JSON calls.
  if (has("<|channel|>") && (has("<|call|>") || has("to=functions."))) return F::kGptOss;
  if (has("<|python_tag|>") || has("\"parameters\": dictionary of argument name")) return F::kLlama3Json;
  return std::nullopt;
}

}  // namespace

ToolCallFormat detect_tool_call_format(const Tokenizer& tok, const std::string& chat_template) {
  // tokenizer_config.json's "tool_parser_type" first, as mlx-lm reads it before inferring.
  if (auto name = tok.config_string("tool_parser_type")) return tool_call_format_from_string(*name).value_or(ToolCallFormat::kNone);
  if (auto f = from_template(chat_template)) return *f;
  auto has = [&](std::string_view t) { return tok.token_to_id(t).has_value(); };
  // mlx-lm's vocabulary fallback (kimi_k3, pythonic): formats we do not parse.
  if (has("<|open|>") && has("<|close|>") && has("<|sep|>") && has("<|end_of_msg|>")) return ToolCallFormat::kNone;
  if (has("<|tool_call_start|>") && has("<|tool_call_end|>")) return ToolCallFormat::kNone;
  // Beyond mlx-lm: harmony's and Llama 3.1's special tokens.
  if (has("<|channel|>") && has("<|call|>")) return ToolCallFormat::kGptOss;
  if (has("<|python_tag|>")) return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

namespace {

class PassThroughParser : public detail::StreamingParser {
 public:
  using StreamingParser::StreamingParser;

 protected:
  void feed(std::string_view text) override { sink_.content(text); }
  void finish() override {}
};

}  // namespace

std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat f, std::string id_prefix,
                                                      std::vector<nlohmann::ordered_json> tools) {
  switch (f) {
    case ToolCallFormat::kHermes: return detail::make_hermes_parser(std::move(id_prefix));
    case ToolCallFormat::kQwen3Coder: return detail::make_qwen3_coder_parser(std::move(id_prefix), std::move(tools));
    case ToolCallFormat::kLlama3Json: return detail::make_llama3_json_parser(std::move(id_prefix));
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kMistralJson: return detail::make_mistral_parser(std::move(id_prefix));
    case ToolCallFormat::kGemma: return detail::make_gemma_parser(std::move(id_prefix), false);
    case ToolCallFormat::kGemma4: return detail::make_gemma_parser(std::move(id_prefix), true);
    case ToolCallFormat::kGptOss: return detail::make_gpt_oss_parser(std::move(id_prefix));
    case ToolCallFormat::kNone: break;
  }
  return std::make_unique<PassThroughParser>(std::move(id_prefix));
}

std::string forced_tool_call_prefix(ToolCallFormat f, const std::string& name) {
  std::string quoted = nlohmann::json(name).dump();
  bool any = name.empty();
  switch (f) {
    case ToolCallFormat::kHermes:
      return any ? "<tool_call>\n" : "<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ";
    case ToolCallFormat::kQwen3Coder: return "<tool_call>\n<function=" + (any ? "" : name + ">\n");
    case ToolCallFormat::kLlama3Json: return any ? "{\"name\": \"" : "{\"name\": " + quoted + ", \"parameters\": ";
    case ToolCallFormat::kMistral: return "[TOOL_CALLS]" + (any ? "" : name + "[ARGS]");
    case ToolCallFormat::kMistralJson:
      return any ? "[TOOL_CALLS][" : "[TOOL_CALLS][{\"name\": " + quoted + ", \"arguments\": ";
    case ToolCallFormat::kGemma: return "<start_function_call>call:" + (any ? "" : name + "{");
    case ToolCallFormat::kGemma4: return "<|tool_call>call:" + (any ? "" : name + "{");
    case ToolCallFormat::kGptOss:
      return "<|channel|>commentary to=functions." + (any ? "" : name + " <|constrain|>json<|message|>");
    case ToolCallFormat::kNone: break;
  }
  return "";
}

}  // namespace mlxcpp
