#include "server/openai/chat_completions.h"

#include <fmt/format.h>

#include "server/constraint_fields.h"
#include "server/event_relay.h"
#include "server/server_context.h"

namespace mlxcpp::server::openai {

namespace {

std::string at(const std::string& where, size_t i) { return fmt::format("{}[{}]", where, i); }

// Text parts joined (mlx_lm.server's process_message_content); other parts are refused.
std::string content_text(const Json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw FieldError(where, fmt::format("'{}' must be a string or a list of content parts, got {}", where, brief(content)));
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    Fields part(content[i], at(where, i));
    std::string type = part.req_str("type");
    if (type != "text" && type != "input_text") {
      part.fail("type", fmt::format("'{}' content parts are not supported (this server's models read text only)", type));
    }
    text += part.req_str("text");
  }
  return text;
}

std::vector<ToolCall> parse_tool_calls(const Fields& f) {
  std::vector<ToolCall> calls;
  const Json* list = f.array("tool_calls");
  if (!list) return calls;
  for (size_t i = 0; i < list->size(); ++i) {
    Fields c((*list)[i], f.path(at("tool_calls", i)));
    ToolCall call;
    call.id = c.str("id").value_or("");
    const Json* fn = c.object("function");
    if (!fn) c.fail("function", "is required");
    Fields ff(*fn, c.path("function"));
    call.name = ff.req_str("name");
    call.arguments = Json::object();
    if (const Json* args = ff.get("arguments")) {
      if (args->is_string()) {
        Json parsed = Json::parse(args->get<std::string>(), nullptr, false);
        call.arguments = parsed.is_object() ? parsed : *args;
      } else if (args->is_object()) {
        call.arguments = *args;
      } else {
        ff.fail("arguments", fmt::format("must be a JSON string or an object, got {}", brief(*args)));
      }
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace

Message parse_chat_message(const Json& m, const std::string& where) {
  Fields f(m, where);
  Message msg;
  msg.role = f.req_str("role");
  static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  if (std::find(std::begin(kRoles), std::end(kRoles), msg.role) == std::end(kRoles)) {
    f.fail("role", fmt::format("must be one of system, developer, user, assistant, tool; got '{}'", msg.role));
  }
  if (const Json* c = f.get("content")) msg.content = content_text(*c, f.path("content"));
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (!msg.reasoning_content) msg.reasoning_content = f.str(key);
  }
  if (msg.role == "assistant") msg.tool_calls = parse_tool_calls(f);
  msg.tool_call_id = f.str("tool_call_id");
  msg.name = f.str("name");
  if (msg.role == "tool" && !msg.content) msg.content = "";
  if (!msg.content && msg.tool_calls.empty() && msg.role != "assistant") f.fail("content", "is required");
  return msg;
}

std::vector<Json> parse_tools(const Fields& f, const std::string& key) {
  std::vector<Json> tools;
  const Json* list = f.array(key);
  if (!list) return tools;
  if (list->size() > 128) f.fail(key, fmt::format("may hold at most 128 tools, got {}", list->size()));
  for (size_t i = 0; i < list->size(); ++i) {
    Fields t((*list)[i], f.path(at(key, i)));
    if (t.req_str("type") != "function") t.fail("type", "must be \"function\"");
    const Json* fn = t.object("function");
    if (!fn) t.fail("function", "is required");
    Fields ff(*fn, t.path("function"));
    Json out = Json::object();
    std::string name = ff.req_str("name");
    if (name.empty()) ff.fail("name", "must not be empty");
    out["name"] = name;
    if (auto d = ff.str("description")) out["description"] = *d;
    if (const Json* p = ff.object("parameters")) out["parameters"] = *p;
    if (auto st = ff.boolean("strict")) out["strict"] = *st;  // arguments held to the schema (chat/tool_grammar.h)
    tools.push_back(Json{{"type", "function"}, {"function", out}});
  }
  return tools;
}

ChatRequest parse_chat_request(const Json& body) {
  Fields f(body);
  ChatRequest r;
  const Json* msgs = f.array("messages");
  if (!msgs) f.fail("messages", "is required");
  if (msgs->empty()) f.fail("messages", "must not be empty");
  for (size_t i = 0; i < msgs->size(); ++i) r.call.messages.push_back(parse_chat_message((*msgs)[i], at("messages", i)));
  r.call.tools = parse_tools(f, "tools");
  if (const Json* tc = f.get("tool_choice")) {
    if (tc->is_string()) {
      std::string s = tc->get<std::string>();
      if (s != "auto" && s != "none" && s != "required") f.fail("tool_choice", "must be auto, none, required or a named tool");
      r.call.tool_choice = s;
    } else if (tc->is_object()) {
      Fields tf(*tc, "tool_choice");
      const Json* fn = tf.object("function");
      if (!fn) tf.fail("function", "is required");
      r.call.tool_choice = Fields(*fn, "tool_choice.function").req_str("name");
    } else {
      f.fail("tool_choice", fmt::format("must be a string or an object, got {}", brief(*tc)));
    }
    if (r.call.tool_choice != "auto" && r.call.tool_choice != "none") {
      if (r.call.tools.empty()) f.fail("tool_choice", "needs 'tools'");
      auto names = tool_names(r.call.tools);
      if (r.call.tool_choice != "required" && std::find(names.begin(), names.end(), r.call.tool_choice) == names.end()) {
        f.fail("tool_choice", fmt::format("names '{}', which is not in 'tools'", r.call.tool_choice));
      }
    }
  }
  r.call.gen = read_gen_params(f, {"max_completion_tokens", "max_tokens"});
  r.call.gen.top_logprobs = read_chat_logprobs(f);
  r.stream = read_stream_flags(f);
  if (const Json* kw = f.object("chat_template_kwargs")) r.call.template_kwargs = *kw;
  read_continuation(f, r.call);
  if (auto effort = f.str("reasoning_effort")) {
    static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), *effort) == std::end(kEfforts)) {
      f.fail("reasoning_effort", fmt::format("must be none, minimal, low, medium or high; got '{}'", *effort));
    }
    r.call.enable_thinking = *effort != "none";
    r.call.template_kwargs["reasoning_effort"] = *effort;
  }
  if (auto c = read_constraint(f)) {
    r.call.gen.grammar = std::move(c->grammar);
    r.call.gen.grammar_param = std::move(c->param);
  }
  return r;
}

ChatStreamEncoder::ChatStreamEncoder(std::string id, std::string model, bool include_usage)
    : id_(std::move(id)), model_(std::move(model)), created_(unix_now()), include_usage_(include_usage) {}

Json ChatStreamEncoder::chunk(Json choices) const {
  Json c{{"id", id_}, {"object", "chat.completion.chunk"}, {"created", created_}, {"model", model_},
         {"system_fingerprint", nullptr}, {"choices", std::move(choices)}};
  if (include_usage_) c["usage"] = nullptr;
  return c;
}

std::string ChatStreamEncoder::encode(const sched::Event& e) {
  std::string out;
  auto role_chunk = [&](int choice) {
    if (role_sent_.size() <= static_cast<size_t>(choice)) role_sent_.resize(choice + 1, false);
    if (role_sent_[choice]) return;
    role_sent_[choice] = true;
    out += sse(chunk(Json::array({Json{{"index", choice},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}})));
  };
  if (auto* d = std::get_if<sched::Delta>(&e)) {
    role_chunk(d->choice);
    Json delta = Json::object();
    if (!d->reasoning.empty()) {
      delta["reasoning_content"] = d->reasoning;
      delta["reasoning"] = d->reasoning;
    }
    if (!d->content.empty()) delta["content"] = d->content;
    if (!d->tool_calls.empty()) {
      Json calls = Json::array();
      for (const auto& c : d->tool_calls) {
        Json fn{{"arguments", c.arguments}};
        Json call{{"index", c.index}};
        if (!c.name.empty()) {
          call["id"] = c.id;
          call["type"] = "function";
          fn["name"] = c.name;
        }
        call["function"] = fn;
        calls.push_back(call);
      }
      delta["tool_calls"] = calls;
    }
    Json lp = nullptr;
    if (!d->logprobs.empty()) {
      Json content = Json::array();
      for (const auto& l : d->logprobs) content.push_back(chat_logprob_entry(l));
      lp = Json{{"content", content}, {"refusal", nullptr}};
    }
    if (delta.empty() && lp.is_null()) return out;
    out += sse(chunk(Json::array(
        {Json{{"index", d->choice}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", nullptr}}})));
  } else if (auto* f = std::get_if<sched::Finish>(&e)) {
    role_chunk(f->choice);
    out += sse(chunk(Json::array({Json{{"index", f->choice},
                                       {"delta", Json::object()},
                                       {"logprobs", nullptr},
                                       {"finish_reason", finish_reason(f->reason)}}})));
  } else if (auto* u = std::get_if<sched::Usage>(&e)) {
    out += stream_end(chunk(Json::array()), *u, include_usage_);
  }
  return out;
}

std::string ChatStreamEncoder::failure(const sched::Failure& f) const { return stream_failure(f); }

Json chat_completion_body(const std::string& id, const std::string& model, const std::vector<ChoiceText>& choices,
                          const sched::Usage& usage, bool with_logprobs) {
  Json out_choices = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    Json msg{{"role", "assistant"}};
    const bool has_calls = !c.finish.tool_calls.empty();
    msg["content"] = (c.content.empty() && has_calls) ? Json(nullptr) : Json(c.content);
    if (!c.reasoning.empty()) {
      msg["reasoning_content"] = c.reasoning;
      msg["reasoning"] = c.reasoning;
    }
    if (has_calls) {
      Json calls = Json::array();
      for (const auto& t : c.finish.tool_calls) {
        std::string args = t.arguments.is_string() ? t.arguments.get<std::string>() : t.arguments.dump();
        calls.push_back(Json{{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", args}}}});
      }
      msg["tool_calls"] = calls;
    }
    Json lp = nullptr;
    if (with_logprobs) {
      Json content = Json::array();
      for (const auto& l : c.logprobs) content.push_back(chat_logprob_entry(l));
      lp = Json{{"content", content}, {"refusal", nullptr}};
    }
    out_choices.push_back(Json{{"index", static_cast<int>(i)},
                               {"message", msg},
                               {"logprobs", lp},
                               {"finish_reason", finish_reason(c.finish.reason)}});
  }
  return Json{{"id", id},           {"object", "chat.completion"}, {"created", unix_now()},
              {"model", model},     {"system_fingerprint", nullptr}, {"choices", out_choices},
              {"usage", usage_json(usage)}};
}

void add_openai_chat_routes_impl(HttpServer& http, ServerContext& ctx) {
  add_route(http, ctx, "POST", "/v1/chat/completions", "chat_completions",
            [](ServerContext& ctx, const HttpRequest& req, const std::shared_ptr<ResponseWriter>& w) {
              Json body = parse_body(req.body);
              check_model_field(Fields(body), ctx.engine.model());
              ChatRequest r = parse_chat_request(body);
              PreparedCall p = prepare_chat(ctx.engine, r.call, ctx.defaults);
              p.request.endpoint = "chat";
              const std::string id = make_id("chatcmpl-");
              const std::string model = ctx.engine.model().id;
              if (r.stream.stream) {
                auto enc = std::make_shared<ChatStreamEncoder>(id, model, r.stream.include_usage);
                relay_stream(ctx.engine, w, std::move(p.request), stream_encoder(enc), Protocol::kOpenAI);
                return;
              }
              const bool with_lp = p.request.output.top_logprobs >= 0;
              relay_whole(ctx.engine, w, std::move(p.request),
                          choices_body_builder([=](const auto& choices, const sched::Usage& usage) {
                            return chat_completion_body(id, model, choices, usage, with_lp);
                          }),
                          Protocol::kOpenAI);
            });
}

}  // namespace mlxcpp::server::openai

namespace mlxcpp::server {
void add_openai_chat_routes(HttpServer& http, ServerContext& ctx) { openai::add_openai_chat_routes_impl(http, ctx); }
}  // namespace mlxcpp::server
