// The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) as a thin translator over
// ChatCall and the engine's events: a pure parse of the request body, a streaming encoder that
// turns events into Anthropic's SSE event sequence, and a builder for the whole response body.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/request.h"
#include "scheduler/served_model.h"
#include "server/chat_call.h"
#include "server/json_fields.h"

namespace mlxcpp::server::anthropic {

struct MessagesRequest {
  ChatCall call;
  bool stream = false;
};

// Body JSON -> ChatCall. `count_only` (count_tokens): max_tokens is not required and sampling
// fields are not read. Every wrong type or value is a FieldError naming the field's path.
MessagesRequest parse_messages_request(const Json& body, bool count_only = false);

// Anthropic's stop_reason for an engine Finish: end_turn, max_tokens, stop_sequence, tool_use.
std::string stop_reason(const sched::Finish& f);

// A tool call's arguments (JSON text, or already a value) as the object Anthropic's `input` is.
Json tool_input(const Json& arguments);

// The prompt's token count, rendered exactly as prepare_chat renders it (no admission check).
size_t count_prompt_tokens(const sched::ServedModel& m, const ChatCall& call);

// Engine events -> Anthropic SSE events for one request (choice 0). Content blocks open as
// output of a kind starts and close when another kind starts: thinking, text, one per tool call.
class MessagesStreamEncoder {
 public:
  MessagesStreamEncoder(std::string id, std::string model, size_t prompt_tokens);
  std::string encode(const sched::Event& e);
  std::string failure(const sched::Failure& f) const;

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  void start_message(std::string& out);
  void open(std::string& out, Block kind, const Json& content_block);
  void close(std::string& out);
  void delta(std::string& out, const Json& d);
  void add_delta(std::string& out, const sched::Delta& d);
  void add_tool_call(std::string& out, const ToolCallDelta& c);

  std::string id_;
  std::string model_;
  size_t prompt_tokens_;
  bool started_ = false;
  Block open_ = Block::kNone;
  int index_ = -1;          // the open (or last) block's index
  int open_tool_ = -1;      // the engine's tool-call index of the open tool_use block
  std::string stop_reason_ = "end_turn";
  std::optional<std::string> stop_sequence_;
};

// Engine events -> the non-streaming Message body.
class MessagesBodyBuilder {
 public:
  MessagesBodyBuilder(std::string id, std::string model);
  void add(const sched::Event& e);
  Json body() const;

 private:
  std::string id_;
  std::string model_;
  std::string reasoning_;
  std::string content_;
  std::vector<ToolCall> tool_calls_;
  std::string stop_reason_ = "end_turn";
  std::optional<std::string> stop_sequence_;
  sched::Usage usage_;
};

// Anthropic's usage object from the engine's counts (input_tokens excludes cache reads).
Json usage_json(int prompt_tokens, int cached_tokens, int output_tokens);

}  // namespace mlxcpp::server::anthropic
