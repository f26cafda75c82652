#include "server/responses/response_stream.h"

#include <algorithm>

#include "server/event_relay.h"
#include "server/responses/responses_request.h"
#include "server/server_context.h"

namespace mlxcpp::server::responses {

namespace {

bool all_space(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}
Json logprob_entry(const sched::TokenLogprob& lp) {
  Json top = Json::array();
  for (size_t i = 0; i < lp.top.size() && i < lp.top_tokens.size(); ++i) {
    top.push_back(Json{{"token", lp.top_tokens[i]}, {"logprob", lp.top[i].second}, {"bytes", bytes_of(lp.top_tokens[i])}});
  }
  return Json{{"token", lp.token}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.token)}, {"top_logprobs", top}};
}

Json echo_or(const Json& echo, const char* key, Json fallback) {
  auto it = echo.find(key);
  return it == echo.end() ? std::move(fallback) : *it;
}

}  // namespace

Json response_skeleton(const std::string& id, const std::string& model, const Json& echo,
                       const std::optional<std::string>& instructions,
                       const std::optional<std::string>& previous_response_id, bool store) {
  return Json{{"id", id},
              {"object", "response"},
              {"created_at", unix_now()},
              {"status", "in_progress"},
              {"background", false},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"instructions", instructions ? Json(*instructions) : Json(nullptr)},
              {"max_output_tokens", echo_or(echo, "max_output_tokens", nullptr)},
              {"model", model},
              {"output", Json::array()},
              {"parallel_tool_calls", echo_or(echo, "parallel_tool_calls", true)},
              {"previous_response_id", previous_response_id ? Json(*previous_response_id) : Json(nullptr)},
              {"reasoning", echo_or(echo, "reasoning", Json{{"effort", nullptr}, {"summary", nullptr}})},
              {"store", store},
              {"temperature", echo_or(echo, "temperature", nullptr)},
              {"text", echo_or(echo, "text", Json{{"format", {{"type", "text"}}}})},
              {"tool_choice", echo_or(echo, "tool_choice", "auto")},
              {"tools", echo_or(echo, "tools", Json::array())},
              {"top_logprobs", echo_or(echo, "top_logprobs", nullptr)},
              {"top_p", echo_or(echo, "top_p", nullptr)},
              {"truncation", echo_or(echo, "truncation", "disabled")},
              {"usage", nullptr},
              {"metadata", echo_or(echo, "metadata", Json::object())}};
}

std::string to_sse(const std::vector<Json>& events) {
  std::string out;
  for (const auto& e : events) out += sse(e, e.at("type").get<std::string>());
  return out;
}

ResponseStream::ResponseStream(Json skeleton) : response_(std::move(skeleton)) {}

const std::string& ResponseStream::status() const { return response_.at("status").get_ref<const std::string&>(); }

Json ResponseStream::event(const char* type, Json fields) {
  Json e = Json{{"type", type}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  e["sequence_number"] = seq_++;
  return e;
}

std::vector<Json> ResponseStream::start() {
  started_ = true;
  std::vector<Json> out;
  out.push_back(event("response.created", Json{{"response", response_}}));
  out.push_back(event("response.in_progress", Json{{"response", response_}}));
  return out;
}

std::vector<Json> ResponseStream::on_event(const sched::Event& e) {
  std::vector<Json> out;
  if (finished_) return out;
  if (auto* d = std::get_if<sched::Delta>(&e)) on_delta(*d, out);
  if (auto* f = std::get_if<sched::Finish>(&e)) on_finish(*f, out);
  if (auto* u = std::get_if<sched::Usage>(&e)) on_usage(*u, out);
  if (auto* f = std::get_if<sched::Failure>(&e)) out = on_failure(*f);
  return out;
}

void ResponseStream::on_delta(const sched::Delta& d, std::vector<Json>& out) {
  if (d.choice != 0) return;  // the Responses API has one output per response
  add_text(Kind::kReasoning, d.reasoning, {}, out);
  add_text(Kind::kMessage, d.content, d.logprobs, out);
  for (const auto& c : d.tool_calls) add_call(c, out);
}

void ResponseStream::add_text(Kind kind, const std::string& text, const std::vector<sched::TokenLogprob>& lps,
                              std::vector<Json>& out) {
  if (text.empty()) return;
  std::string piece = text;
  if (open_ < 0 || items_[open_].kind != kind) {
    // Whitespace between items (after reasoning, around tool calls) is no message by itself.
    if (kind == Kind::kMessage && all_space(text)) {
      held_space_ += text;
      return;
    }
    if (kind == Kind::kMessage) {
      piece = held_space_ + text;
      held_space_.clear();
    }
    open(kind, out);
  }
  append(piece, lps, out);
}

void ResponseStream::append(const std::string& piece, const std::vector<sched::TokenLogprob>& lps,
                            std::vector<Json>& out) {
  Item& it = items_[open_];
  it.text += piece;
  if (it.kind == Kind::kCall) {
    out.push_back(event("response.function_call_arguments.delta",
                        Json{{"item_id", it.id}, {"output_index", open_}, {"delta", piece}}));
  } else if (it.kind == Kind::kReasoning) {
    out.push_back(event("response.reasoning_text.delta",
                        Json{{"item_id", it.id}, {"output_index", open_}, {"content_index", 0}, {"delta", piece}}));
  } else {
    Json lp = Json::array();
    for (const auto& l : lps) lp.push_back(logprob_entry(l));
    for (const auto& l : lp) it.logprobs.push_back(l);
    out.push_back(event("response.output_text.delta", Json{{"item_id", it.id}, {"output_index", open_}, {"content_index", 0},
                                                           {"delta", piece}, {"logprobs", lp}}));
  }
}

void ResponseStream::add_call(const ToolCallDelta& d, std::vector<Json>& out) {
  auto found = std::find_if(items_.begin(), items_.end(),
                            [&](const Item& it) { return it.kind == Kind::kCall && it.call_index == d.index; });
  if (found != items_.end() && found->done) {
    found->text += d.arguments;  // a fragment after the call was closed: kept, no event left to carry it
    return;
  }
  if (found == items_.end()) {
    open(Kind::kCall, out, &d);
  } else if (open_ != static_cast<int>(found - items_.begin())) {
    return;  // only the open item can be reached here
  }
  if (!d.arguments.empty()) append(d.arguments, {}, out);
}

void ResponseStream::open(Kind kind, std::vector<Json>& out, const ToolCallDelta* call) {
  close_open(out);
  if (kind != Kind::kMessage) held_space_.clear();
  Item it;
  it.kind = kind;
  it.id = make_id(kind == Kind::kReasoning ? "rs_" : kind == Kind::kMessage ? "msg_" : "fc_");
  if (call) {
    it.call_index = call->index;
    it.call_id = call->id.empty() ? make_id("call_") : call->id;
    it.name = call->name;
  }
  items_.push_back(std::move(it));
  open_ = static_cast<int>(items_.size()) - 1;
  const Item& added = items_.back();
  out.push_back(event("response.output_item.added", Json{{"output_index", open_}, {"item", item_json(added)}}));
  if (kind != Kind::kCall) {
    out.push_back(event("response.content_part.added", Json{{"item_id", added.id}, {"output_index", open_},
                                                            {"content_index", 0}, {"part", part_json(added)}}));
  }
}

void ResponseStream::close_open(std::vector<Json>& out) {
  if (open_ < 0) return;
  Item& it = items_[open_];
  const int idx = open_;
  open_ = -1;
  it.done = true;
  it.cut = finish_reason_ == "length";  // closed by the token limit
  if (it.kind == Kind::kCall) {
    out.push_back(event("response.function_call_arguments.done",
                        Json{{"item_id", it.id}, {"output_index", idx}, {"name", it.name}, {"arguments", it.text}}));
  } else {
    if (it.kind == Kind::kMessage) {
      out.push_back(event("response.output_text.done", Json{{"item_id", it.id}, {"output_index", idx}, {"content_index", 0},
                                                            {"text", it.text}, {"logprobs", it.logprobs}}));
    } else {
      out.push_back(event("response.reasoning_text.done",
                          Json{{"item_id", it.id}, {"output_index", idx}, {"content_index", 0}, {"text", it.text}}));
    }
    out.push_back(event("response.content_part.done", Json{{"item_id", it.id}, {"output_index", idx},
                                                           {"content_index", 0}, {"part", part_json(it)}}));
  }
  out.push_back(event("response.output_item.done", Json{{"output_index", idx}, {"item", item_json(it)}}));
}

Json ResponseStream::part_json(const Item& it) const {
  const std::string text = it.done ? it.text : "";
  if (it.kind == Kind::kReasoning) return Json{{"type", "reasoning_text"}, {"text", text}};
  return Json{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()},
              {"logprobs", it.done ? it.logprobs : Json::array()}};
}

Json ResponseStream::item_json(const Item& it) const {
  const char* status = !it.done ? "in_progress" : it.cut ? "incomplete" : "completed";
  switch (it.kind) {
    case Kind::kReasoning:
      return Json{{"id", it.id}, {"type", "reasoning"}, {"summary", Json::array()},
                  {"content", it.done ? Json::array({part_json(it)}) : Json::array()}, {"status", status}};
    case Kind::kMessage:
      return Json{{"id", it.id}, {"type", "message"}, {"status", status}, {"role", "assistant"},
                  {"content", it.done ? Json::array({part_json(it)}) : Json::array()}};
    case Kind::kCall:
      return Json{{"id", it.id}, {"type", "function_call"}, {"status", status}, {"arguments", it.done ? it.text : ""},
                  {"call_id", it.call_id}, {"name", it.name}};
  }
  return Json();
}

void ResponseStream::on_finish(const sched::Finish& f, std::vector<Json>& out) {
  if (f.choice != 0) return;
  finish_reason_ = f.reason;
  // Calls the deltas did not announce (none expected) still reach the output.
  for (size_t i = 0; i < f.tool_calls.size(); ++i) {
    const auto& c = f.tool_calls[i];
    const int index = static_cast<int>(i);
    if (std::any_of(items_.begin(), items_.end(), [&](const Item& it) { return it.kind == Kind::kCall && it.call_index == index; })) {
      continue;
    }
    add_call(ToolCallDelta{index, c.id, c.name, c.arguments.is_string() ? c.arguments.get<std::string>() : c.arguments.dump()},
             out);
  }
  close_open(out);
  if (items_.empty() && !held_space_.empty()) {
    // Nothing but whitespace: that is the answer.
    std::string text;
    text.swap(held_space_);
    open(Kind::kMessage, out);
    append(text, {}, out);
    close_open(out);
  }
}

void ResponseStream::on_usage(const sched::Usage& u, std::vector<Json>& out) {
  close_open(out);
  finished_ = true;
  response_["output"] = output_json();
  response_["usage"] = Json{{"input_tokens", u.prompt_tokens},
                            {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                            {"output_tokens", u.completion_tokens},
                            {"output_tokens_details", {{"reasoning_tokens", 0}}},
                            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  const char* type = "response.completed";
  if (finish_reason_ == "length") {
    response_["status"] = "incomplete";
    response_["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
    type = "response.incomplete";
  } else if (finish_reason_ == "cancelled") {
    response_["status"] = "cancelled";
    type = "response.incomplete";
  } else {
    response_["status"] = "completed";
  }
  out.push_back(event(type, Json{{"response", response_}}));
}

std::vector<Json> ResponseStream::on_failure(const sched::Failure& f) {
  std::vector<Json> out;
  if (finished_) return out;
  finished_ = true;
  response_["output"] = output_json();
  response_["status"] = "failed";
  response_["error"] = Json{{"code", "server_error"}, {"message", f.message}};
  out.push_back(event("response.failed", Json{{"response", response_}}));
  return out;
}

Json ResponseStream::output_json() const {
  Json out = Json::array();
  for (const auto& it : items_) {
    if (it.done) out.push_back(item_json(it));
  }
  return out;
}

Message ResponseStream::output_message() const {
  Message m = Message::text("assistant", "");
  for (const auto& it : items_) {
    if (it.kind == Kind::kMessage) *m.content += it.text;
    if (it.kind == Kind::kReasoning) m.reasoning_content = m.reasoning_content.value_or("") + it.text;
    if (it.kind == Kind::kCall) m.tool_calls.push_back(ToolCall{it.call_id, it.name, arguments_value(it.text)});
  }
  return m;
}

}  // namespace mlxcpp::server::responses
