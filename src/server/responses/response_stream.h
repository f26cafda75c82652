// One response being built from engine events: its output items (reasoning, message, function
// calls, in the order the model produced them), the Responses streaming events that describe
// them (sequence-numbered), and the final response object. Used for streamed and whole answers
// alike, so both report the same items.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/message.h"
#include "scheduler/request.h"
#include "server/json_fields.h"

namespace mlxcpp::server::responses {

// The response object before any output: id, created_at, model and the request's echoed
// settings (`echo` from ResponsesRequest), status "in_progress".
Json response_skeleton(const std::string& id, const std::string& model, const Json& echo,
                       const std::optional<std::string>& instructions,
                       const std::optional<std::string>& previous_response_id, bool store);

class ResponseStream {
 public:
  explicit ResponseStream(Json skeleton);

  // response.created and response.in_progress (before the first engine event).
  std::vector<Json> start();
  // The events one engine event yields; Usage closes the response (response.completed, or
  // response.incomplete when the output hit max_output_tokens).
  std::vector<Json> on_event(const sched::Event& e);
  // response.failed (the engine failed after the stream started).
  std::vector<Json> on_failure(const sched::Failure& f);

  bool finished() const { return finished_; }
  bool started() const { return started_; }
  const std::string& status() const;
  const Json& response() const { return response_; }
  // The assistant turn as one chat message (text, reasoning, tool calls), for the store.
  Message output_message() const;

 private:
  enum class Kind { kReasoning, kMessage, kCall };
  struct Item {
    Kind kind;
    std::string id;
    std::string text;  // reasoning text, message text or call arguments
    std::string call_id, name;
    int call_index = -1;
    Json logprobs = Json::array();
    bool done = false;
    bool cut = false;  // ended by max_output_tokens
  };

  void on_delta(const sched::Delta& d, std::vector<Json>& out);
  void on_finish(const sched::Finish& f, std::vector<Json>& out);
  void on_usage(const sched::Usage& u, std::vector<Json>& out);
  void add_text(Kind kind, const std::string& text, const std::vector<sched::TokenLogprob>& lps, std::vector<Json>& out);
  void add_call(const ToolCallDelta& d, std::vector<Json>& out);
  void append(const std::string& piece, const std::vector<sched::TokenLogprob>& lps, std::vector<Json>& out);
  // Closes the open item and opens a new one (output_item.added, content_part.added).
  void open(Kind kind, std::vector<Json>& out, const ToolCallDelta* call = nullptr);
  void close_open(std::vector<Json>& out);
  Json item_json(const Item& it) const;
  Json part_json(const Item& it) const;
  Json event(const char* type, Json fields);
  Json output_json() const;

  Json response_;
  std::vector<Item> items_;
  int open_ = -1;          // index of the item receiving text, -1 when none
  std::string held_space_;  // whitespace-only text not yet given a message item
  std::string finish_reason_;
  int seq_ = 0;
  bool started_ = false;
  bool finished_ = false;
};

// Server-sent events text for a batch of events ("event: <type>" + data).
std::string to_sse(const std::vector<Json>& events);

}  // namespace mlxcpp::server::responses
