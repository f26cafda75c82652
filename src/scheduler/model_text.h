// The text side of a model as mlx-lm sets it up, shared by the CLI and the server: eos ids from
// the snapshot and the tokenizer, XTC's special tokens, and the chat-template variables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifacts/checkpoint.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {

// mlx-lm's eos set: config/generation_config eos_token_id plus the tokenizer's eos_token.
std::vector<int64_t> merged_eos_ids(const Checkpoint& ckpt, const Tokenizer& tok);
// mlx-lm's xtc_special_tokens: encode("\n") (with special tokens) + the eos ids.
std::vector<int> xtc_special_tokens(const Tokenizer& tok, const std::vector<int64_t>& eos);

// mlx-lm's _infer_thinking: the vocabulary has thinking markers.
bool vocabulary_has_thinking(const Tokenizer& tok);

// What mlx-lm's TokenizerWrapper.apply_chat_template hands transformers: the special tokens,
// enable_thinking (true when the vocabulary has thinking tokens) unless the kwargs set it, then
// `kwargs` (a JSON object) over them.
OrderedJson chat_template_variables(const Tokenizer& tok, const OrderedJson& kwargs);
// The same from JSON text ("" = none); bad JSON is a ConfigError naming `flag`.
OrderedJson chat_template_variables(const Tokenizer& tok, const std::string& kwargs_json, const std::string& flag);

// The tokenizer's default chat template, compiled (TemplateError when it has none).
ChatTemplate compile_chat_template(const Tokenizer& tok);

}  // namespace mlxcpp
