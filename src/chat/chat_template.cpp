#include "chat/chat_template.h"

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

}  // namespace

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (inputs.messages.empty()) {
    throw TemplateError(impl_->origin + ": cannot apply a chat template to an empty conversation");
  }
  std::string ctx = context_of(inputs).dump(-1, ' ', false, OrderedJson::error_handler_t::strict);
  bridge::Status st;
  MlxcppBuf out{nullptr, 0};
  st.rc = mlxcpp_template_render(impl_->handle.get(), bridge::bytes(ctx), ctx.size(), bridge::bytes(inputs.fixed_now),
                                 inputs.fixed_now.size(), &out, &st.err);
  if (st.rc == MLXCPP_RAISED) throw TemplateError(impl_->origin + ": raise_exception: " + st.message());
  if (!st.ok()) throw TemplateError(impl_->origin + ": chat template failed: " + st.message());
  return bridge::take(out);
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
