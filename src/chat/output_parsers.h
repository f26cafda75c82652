// What the model's generated text holds besides the answer: reasoning (`<think>...</think>` and
// the like) and tool calls in the format the chat template teaches. Both parsers are streaming:
// text arrives in arbitrary pieces (split anywhere, even inside a marker or a UTF-8 character)
// and the concatenated output equals what a whole-text parse gives.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/message.h"

namespace mlxcpp {

class Tokenizer;

// ---- reasoning -----------------------------------------------------------------------------
struct ReasoningFormat {
  std::string start = "<think>";
  std::string end = "</think>";
};

// The markers this model's vocabulary uses (nullopt: no reasoning support). As mlx-lm's
// _infer_thinking, only the vocabulary decides: <think>, <longcat_think>, <|think:start|>,
// Gemma 4's <|channel>thought ... <channel|>, XTML's <|open|>think<|sep|>.
std::optional<ReasoningFormat> detect_reasoning_format(const Tokenizer& tok);
// True when the rendered prompt (the generation prompt) leaves a reasoning block open, so the
// generated text starts inside it (e.g. Qwen3 with enable_thinking, DeepSeek-R1).
bool prompt_opens_reasoning(const std::string& rendered_prompt, const ReasoningFormat& fmt);

// As mlx-lm's TextStateMachine: start marker -> reasoning, end marker -> content, and a later
// start marker opens reasoning again. Only the markers that switch state are removed (an end
// marker outside reasoning stays text; no newline is stripped).
class ReasoningParser {
 public:
  ReasoningParser(ReasoningFormat fmt, bool starts_inside);
  struct Out {
    std::string reasoning;
    std::string content;
  };
  // Text that may be the start of a marker is held back, and so is an incomplete UTF-8
  // character at the end of `text`.
  Out push(std::string_view text);
  Out flush();  // end of stream: releases what was held back

 private:
  void emit(Out& out, std::string_view text) const;
  ReasoningFormat fmt_;
  bool inside_;
  std::string held_;
};

// ---- tool calls ----------------------------------------------------------------------------
enum class ToolCallFormat {
  kNone,
  kHermes,      // <tool_call>{"name": ..., "arguments": {...}}</tool_call>  (Hermes, Qwen2.5/3)
  kQwen3Coder,  // <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>
  kLlama3Json,  // {"name": ..., "parameters": {...}} (optionally after <|python_tag|>)
  kMistral,     // [TOOL_CALLS]name[ARGS]{...} (also reads the JSON array form below)
  kMistralJson,  // [TOOL_CALLS][{"name": ..., "arguments": {...}}] (Mistral Nemo / Small 3.1: no [ARGS])
  kGemma,       // FunctionGemma: <start_function_call>call:NAME{k:<escape>v<escape>,...}<end_function_call>
  kGemma4,      // Gemma 4: <|tool_call>call:NAME{k:<|"|>v<|"|>,...}<tool_call|>
  kGptOss,      // harmony channels: <|channel|>commentary to=functions.NAME ... <|message|>{...}<|call|>
};

const char* to_string(ToolCallFormat f);
// "hermes", "qwen3_coder", "llama3_json", "mistral", "mistral_json", "gemma", "gemma4", "gpt_oss", "none"; also
// mlx-lm's tool_parser_type names ("json_tools", "function_gemma"); nullopt if unknown.
std::optional<ToolCallFormat> tool_call_format_from_string(std::string_view name);
// The format the chat template (and vocabulary) teaches; kNone when it teaches none. As mlx-lm's
// _infer_tool_parser (tokenizer_config.json's tool_parser_type first, then the template, then the
// vocabulary; formats mlx-lm knows but we do not parse give kNone), plus Llama 3.1 JSON and
// gpt-oss harmony, which mlx-lm does not parse.
ToolCallFormat detect_tool_call_format(const Tokenizer& tok, const std::string& chat_template);

// A piece of a streamed tool call: the first delta of call `index` carries id and name (and
// maybe arguments); later ones only argument fragments. The fragments concatenate to the
// call's arguments as JSON text.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

// Streaming tool-call parser. Text outside calls is content. Malformed call text (no parseable
// name, broken JSON) is returned as content, never an error. A call whose name was already
// streamed stays a call when its text later turns out broken or cut short: JSON formats keep
// the arguments text that arrived (maybe not valid JSON), XML/Gemma formats close the object.
// Arguments are, for JSON formats, the model's arguments value as generated (raw text); for the
// XML/Gemma formats, JSON built as Python's json.dumps writes it ({"a": 1, "b": "x"}).
class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  struct Out {
    std::string content;
    std::string reasoning;  // kGptOss only: the analysis channel (so use it even without tools)
    std::vector<ToolCallDelta> calls;
  };
  virtual Out push(std::string_view text) = 0;
  virtual Out flush() = 0;  // end of stream
  // Every call completed so far (arguments as JSON text in ToolCall::arguments as a string).
  virtual std::vector<ToolCall> calls() const = 0;
};

// `id_prefix` makes the call ids ("call_<prefix>_<n>"). `tools` (OpenAI tool objects,
// {"type": "function", "function": {"name", "parameters"}}) give Qwen3-Coder's parameter types.
// kNone gives a parser that passes all text through as content.
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat f, std::string id_prefix,
                                                      std::vector<nlohmann::ordered_json> tools = {});

// Generated-side text that opens a call in this format, so a forced call (tool_choice required /
// named) can be appended to the generation prompt and fed to the parser first. `name` empty:
// any tool. Empty string when the format cannot be forced this way.
std::string forced_tool_call_prefix(ToolCallFormat f, const std::string& name);

// Checks a call's arguments (JSON text) against a tool's JSON schema ("parameters"); returns an
// error message naming the failing path, or nullopt when valid.
std::optional<std::string> check_tool_arguments(const nlohmann::ordered_json& parameters_schema,
                                                const std::string& arguments_json);

}  // namespace mlxcpp
