// Chat-template rendering equal to transformers' apply_chat_template(tokenize=False): the
// template runs in minijinja (Rust bridge) configured like transformers' jinja2 environment.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/message.h"

namespace mlxcpp {

class Tokenizer;

struct ChatTemplateInputs {
  std::vector<Message> messages;
  std::optional<std::vector<OrderedJson>> tools;      // JSON schemas; nullopt = None
  std::optional<std::vector<OrderedJson>> documents;  // [{"title", "text"}]; nullopt = None
  bool add_generation_prompt = false;
  // transformers' continue_final_message: the rendering stops right after the last message's
  // text (its end-of-turn markup cut), so that the model goes on with that message (assistant
  // prefill). Not with add_generation_prompt.
  bool continue_final_message = false;
  // Template variables: the tokenizer's special tokens (bos_token, eos_token, ...) first, then
  // extra kwargs such as enable_thinking, which override them (transformers' order).
  OrderedJson variables = OrderedJson::object();
  // "YYYY-MM-DD HH:MM:SS" that strftime_now uses instead of the clock ("" = the clock).
  std::string fixed_now;
};

// A compiled template. Errors are TemplateError: syntax errors at compile (with the line), and at
// render the template's own raise_exception message or the engine's error.
class ChatTemplate {
 public:
  // `origin` names the template in messages (e.g. "models/x/tokenizer_config.json").
  static ChatTemplate compile(const std::string& source, const std::string& origin);
  std::string render(const ChatTemplateInputs& inputs) const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// transformers' special_tokens_map as template variables (bos_token, eos_token, ...).
OrderedJson special_token_variables(const Tokenizer& tokenizer);

// One-shot: compile + render.
std::string render_chat_template(const std::string& source, const ChatTemplateInputs& inputs,
                                 const std::string& origin = "chat template");

}  // namespace mlxcpp
