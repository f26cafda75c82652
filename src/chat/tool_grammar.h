// Tool calls constrained by a grammar (llguidance's Lark, JSON schemas inline): a forced call
// (tool_choice "required" or a tool's name) follows the model's own call format exactly, its
// arguments the tool's schema where the tool is strict (any JSON object otherwise); with
// tool_choice "auto" and a strict tool, free text runs until a call opens, and the call is then
// held to the same grammar. The formats: Hermes (<tool_call> JSON </tool_call>, Qwen 2.5/3),
// Llama 3 JSON, Mistral ([TOOL_CALLS]name[ARGS]{...}, or the JSON array form), Gemma 4 and
// FunctionGemma (call:NAME{key:value,...}, strings between <|"|> / <escape>), Qwen3-Coder /
// Qwen3.5 XML (<parameter=P> blocks, values typed by the schema), and
// for forced calls gpt-oss harmony (commentary to=functions.NAME <|constrain|>json<|message|>
// JSON <|call|>, its markers as special tokens).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parsers.h"
#include "tokenizer/grammar.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {

// `functions`: the tools' "function" objects ({name, parameters, strict}); `choice`: "auto",
// "required" or a tool's name, the prompt ending with forced_tool_call_prefix(format, name) for
// the latter two. nullopt where nothing is to be constrained ("auto" without a strict tool) or
// the format has no grammar here (its forced calls keep the prefix alone).
// `tok`: the model's vocabulary, where a format's markers are special tokens (Mistral's
// [TOOL_CALLS] / [ARGS]); without it they are matched as text.
std::optional<GrammarSpec> tool_call_grammar(ToolCallFormat format, const std::vector<nlohmann::ordered_json>& functions,
                                             const std::string& choice, const Tokenizer* tok = nullptr);

}  // namespace mlxcpp
