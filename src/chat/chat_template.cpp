#include "chat/chat_template.h"

#include <string>

#include "core/errors.h"
#include "tokenizer/bridge_util.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {

struct ChatTemplate::Impl {
  std::string origin;
  bridge::TemplateHandle handle;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::compile(const std::string& source, const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  impl->origin = origin;
  bridge::Status st;
  MlxcppTemplate* raw = nullptr;
  st.rc = mlxcpp_template_new(bridge::bytes(source), source.size(), &raw, &st.err);
  if (!st.ok()) throw TemplateError(origin + ": chat template does not compile: " + st.message());
  impl->handle.reset(raw);
  return ChatTemplate(std::move(impl));
}

namespace {

// transformers' render_jinja_template keyword arguments, in its order.
OrderedJson context_of(const ChatTemplateInputs& in) {
  OrderedJson ctx = OrderedJson::object();
  OrderedJson messages = OrderedJson::array();
  for (const auto& m : in.messages) messages.push_back(to_template_value(m));
  ctx["messages"] = std::move(messages);
  ctx["tools"] = in.tools ? OrderedJson(*in.tools) : OrderedJson(nullptr);
  ctx["documents"] = in.documents ? OrderedJson(*in.documents) : OrderedJson(nullptr);
  ctx["add_generation_prompt"] = in.add_generation_prompt;
  if (!in.variables.is_object()) throw TemplateError("chat template variables must be a JSON object");
  for (const auto& [k, v] : in.variables.items()) ctx[k] = v;
  return ctx;
}

// The text a continued final message ends with: its content, or its last part with a text.
std::string final_text(const Message& m, const std::string& origin) {
  if (m.content) return *m.content;
  if (m.parts) {
    for (auto it = m.parts->rbegin(); it != m.parts->rend(); ++it) {
      if (it->value.contains("text") && it->value["text"].is_string()) return it->value["text"].get<std::string>();
    }
  }
  throw TemplateError(origin + ": continue_final_message: the final message has no text to continue");
}

std::string strip(const std::string& s, bool left, bool right) {
  const char* ws = " \t\n\r\f\v";
  size_t b = left ? s.find_first_not_of(ws) : 0, e = right ? s.find_last_not_of(ws) : s.size() - 1;
  if (b == std::string::npos || e == std::string::npos || s.empty()) return "";
  return s.substr(b, e - b + 1);
}

// transformers' apply_chat_template(continue_final_message=True): the rendering up to the end of
// the final message's text (its last occurrence; trailing whitespace the template trimmed is
// not restored).
std::string cut_after_final(const std::string& rendered, const Message& final, const std::string& origin) {
  const std::string text = final_text(final, origin), stripped = strip(text, true, true);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos) {
    throw TemplateError(origin + ": continue_final_message: the final message does not appear in the rendered "
                                 "chat (the template changes it)");
  }
  const std::string lead_stripped = strip(text, true, false);
  if (rendered.compare(at, lead_stripped.size(), lead_stripped) == 0) return rendered.substr(0, at + lead_stripped.size());
  return rendered.substr(0, at + stripped.size());
}

}  // namespace

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (inputs.messages.empty()) {
    throw TemplateError(impl_->origin + ": cannot apply a chat template to an empty conversation");
  }
  if (inputs.continue_final_message && inputs.add_generation_prompt) {
    throw TemplateError(impl_->origin + ": continue_final_message and add_generation_prompt exclude each other "
                                        "(continue the final message, or open a new assistant turn)");
  }
  std::string ctx = context_of(inputs).dump(-1, ' ', false, OrderedJson::error_handler_t::strict);
  bridge::Status st;
  MlxcppBuf out{nullptr, 0};
  st.rc = mlxcpp_template_render(impl_->handle.get(), bridge::bytes(ctx), ctx.size(), bridge::bytes(inputs.fixed_now),
                                 inputs.fixed_now.size(), &out, &st.err);
  if (st.rc == MLXCPP_RAISED) throw TemplateError(impl_->origin + ": raise_exception: " + st.message());
  if (!st.ok()) throw TemplateError(impl_->origin + ": chat template failed: " + st.message());
  std::string rendered = bridge::take(out);
  if (!inputs.continue_final_message) return rendered;
  return cut_after_final(rendered, inputs.messages.back(), impl_->origin);
}

OrderedJson special_token_variables(const Tokenizer& tokenizer) {
  OrderedJson v = OrderedJson::object();
  for (const auto& [k, s] : tokenizer.special_tokens_map()) v[k] = s;
  return v;
}

std::string render_chat_template(const std::string& source, const ChatTemplateInputs& inputs,
                                 const std::string& origin) {
  return ChatTemplate::compile(source, origin).render(inputs);
}

}  // namespace mlxcpp
