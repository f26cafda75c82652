// Engine events -> Anthropic's Message: the SSE event sequence the SDKs accumulate
// (message_start, content_block_start/delta/stop per block, message_delta, message_stop) and the
// whole-body Message.
#include "server/anthropic/messages.h"

#include <type_traits>

#include "server/api_error.h"
#include "server/event_relay.h"
#include "server/server_context.h"

namespace mlxcpp::server::anthropic {

namespace {

// Every Anthropic stream event carries its type as the SSE event name too.
std::string event(const Json& j) { return sse(j, j.at("type").get<std::string>()); }

Json nullable(const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); }

std::string tool_id(const std::string& engine_id) { return engine_id.empty() ? make_id("toolu_") : engine_id; }

}  // namespace

std::string stop_reason(const sched::Finish& f) {
  if (f.reason == "length") return "max_tokens";
  if (f.reason == "tool_calls") return "tool_use";
  if (!f.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";  // eos, or cancelled
}

Json tool_input(const Json& arguments) {
  if (arguments.is_object()) return arguments;
  if (arguments.is_string()) {
    Json parsed = Json::parse(arguments.get<std::string>(), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) return parsed;
  }
  // Arguments that are not an object (broken JSON cut short by max_tokens): Anthropic's input
  // must be one, so the call keeps its name with no arguments.
  return Json::object();
}

Json usage_json(int prompt_tokens, int cached_tokens, int output_tokens) {
  return {{"input_tokens", prompt_tokens - cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached_tokens},
          {"output_tokens", output_tokens}};
}

// ---- streaming -------------------------------------------------------------------------------

MessagesStreamEncoder::MessagesStreamEncoder(std::string id, std::string model, size_t prompt_tokens)
    : id_(std::move(id)), model_(std::move(model)), prompt_tokens_(prompt_tokens) {}

void MessagesStreamEncoder::start_message(std::string& out) {
  if (started_) return;
  started_ = true;
  // Cache reads are known only at the end; message_delta's usage corrects input_tokens then.
  Json msg = {{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", Json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", usage_json(static_cast<int>(prompt_tokens_), 0, 0)}};
  out += event({{"type", "message_start"}, {"message", std::move(msg)}});
}

void MessagesStreamEncoder::open(std::string& out, Block kind, const Json& content_block) {
  close(out);
  ++index_;
  open_ = kind;
  out += event({{"type", "content_block_start"}, {"index", index_}, {"content_block", content_block}});
}

void MessagesStreamEncoder::close(std::string& out) {
  if (open_ == Block::kNone) return;
  // The SDKs expect a signature on thinking blocks; a local model has none to give.
  if (open_ == Block::kThinking) delta(out, {{"type", "signature_delta"}, {"signature", ""}});
  out += event({{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::kNone;
  open_tool_ = -1;
}

void MessagesStreamEncoder::delta(std::string& out, const Json& d) {
  out += event({{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
}

void MessagesStreamEncoder::add_tool_call(std::string& out, const ToolCallDelta& c) {
  if (!c.name.empty()) {
    open(out, Block::kToolUse,
         {{"type", "tool_use"}, {"id", tool_id(c.id)}, {"name", c.name}, {"input", Json::object()}});
    open_tool_ = c.index;
  } else if (open_ != Block::kToolUse || c.index != open_tool_) {
    return;  // a fragment of a call whose block is closed: the parser never sends one
  }
  if (!c.arguments.empty()) delta(out, {{"type", "input_json_delta"}, {"partial_json", c.arguments}});
}

void MessagesStreamEncoder::add_delta(std::string& out, const sched::Delta& d) {
  if (!d.reasoning.empty()) {
    if (open_ != Block::kThinking) open(out, Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    delta(out, {{"type", "thinking_delta"}, {"thinking", d.reasoning}});
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) open(out, Block::kText, {{"type", "text"}, {"text", ""}});
    delta(out, {{"type", "text_delta"}, {"text", d.content}});
  }
  for (const auto& c : d.tool_calls) add_tool_call(out, c);
}

std::string MessagesStreamEncoder::encode(const sched::Event& e) {
  std::string out;
  start_message(out);
  std::visit(
      [&](const auto& ev) {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, sched::Delta>) {
          if (ev.choice == 0) add_delta(out, ev);
        } else if constexpr (std::is_same_v<T, sched::Finish>) {
          if (ev.choice != 0) return;
          close(out);
          stop_reason_ = stop_reason(ev);
          if (stop_reason_ == "stop_sequence") stop_sequence_ = ev.stop_sequence;
        } else if constexpr (std::is_same_v<T, sched::Usage>) {
          close(out);
          Json usage = usage_json(ev.prompt_tokens, ev.cached_tokens, ev.completion_tokens);
          out += event({{"type", "message_delta"},
                        {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", nullable(stop_sequence_)}}},
                        {"usage", std::move(usage)}});
          out += event({{"type", "message_stop"}});
        } else {
          out += failure(ev);
        }
      },
      e);
  return out;
}

std::string MessagesStreamEncoder::failure(const sched::Failure& f) const {
  // The error type by status as the whole-response errors have it, with Anthropic's key order.
  const Json shaped = Json::parse(error_body(Protocol::kAnthropic, f.status, f.message));
  return event({{"type", "error"}, {"error", {{"type", shaped.at("error").at("type")}, {"message", f.message}}}});
}

// ---- whole body ------------------------------------------------------------------------------

MessagesBodyBuilder::MessagesBodyBuilder(std::string id, std::string model)
    : id_(std::move(id)), model_(std::move(model)) {}

void MessagesBodyBuilder::add(const sched::Event& e) {
  if (const auto* d = std::get_if<sched::Delta>(&e); d && d->choice == 0) {
    reasoning_ += d->reasoning;
    content_ += d->content;
  } else if (const auto* f = std::get_if<sched::Finish>(&e); f && f->choice == 0) {
    stop_reason_ = stop_reason(*f);
    if (stop_reason_ == "stop_sequence") stop_sequence_ = f->stop_sequence;
    tool_calls_ = f->tool_calls;
  } else if (const auto* u = std::get_if<sched::Usage>(&e)) {
    usage_ = *u;
  }
}

Json MessagesBodyBuilder::body() const {
  Json content = Json::array();
  if (!reasoning_.empty()) content.push_back({{"type", "thinking"}, {"thinking", reasoning_}, {"signature", ""}});
  if (!content_.empty()) content.push_back({{"type", "text"}, {"text", content_}});
  for (const auto& c : tool_calls_) {
    content.push_back({{"type", "tool_use"}, {"id", tool_id(c.id)}, {"name", c.name}, {"input", tool_input(c.arguments)}});
  }
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", std::move(content)},
          {"stop_reason", stop_reason_},
          {"stop_sequence", nullable(stop_sequence_)},
          {"usage", usage_json(usage_.prompt_tokens, usage_.cached_tokens, usage_.completion_tokens)}};
}

}  // namespace mlxcpp::server::anthropic
