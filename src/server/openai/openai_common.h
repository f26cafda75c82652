// Pieces the OpenAI-shaped endpoints share: usage, logprob entries, finish reasons, and the
// per-choice accumulation of a whole (non-streamed) answer.
#pragma once

#include <string>
#include <vector>

#include "scheduler/request.h"
#include "server/event_relay.h"
#include "server/json_fields.h"

namespace mlxcpp::server::openai {

Json usage_json(const sched::Usage& u);
// {"token", "logprob", "bytes", "top_logprobs": [...]} (chat completions' shape).
Json chat_logprob_entry(const sched::TokenLogprob& lp);
// OpenAI's finish_reason for an engine reason ("cancelled" -> "stop").
std::string finish_reason(const std::string& engine_reason);
// "stream" and "stream_options.include_usage" (false when absent).
struct StreamFlags {
  bool stream = false;
  bool include_usage = false;
};
StreamFlags read_stream_flags(const Fields& f);
// The end of a stream: with include_usage a chunk (`chunk`, its choices emptied) carrying the
// usage, then "data: [DONE]".
std::string stream_end(Json chunk, const sched::Usage& u, bool include_usage);
// A failure after the stream started: the error object as an event, then "data: [DONE]".
std::string stream_failure(const sched::Failure& f);

// A JSON array of token ids (non-negative integers); FieldError naming `where` otherwise.
std::vector<int> token_ids(const Json& a, const std::string& where);

// Reads "logprobs" (bool) and "top_logprobs" (0..20) as chat completions does: -1 when off.
int read_chat_logprobs(const Fields& f);

// Everything one choice produced, for whole responses.
struct ChoiceText {
  std::string content;
  std::string reasoning;
  std::vector<sched::TokenLogprob> logprobs;
  sched::Finish finish;
  bool finished = false;
};
// Adds a Delta / Finish to choices[choice] (grows the vector).
void accumulate(std::vector<ChoiceText>& choices, const sched::Event& e);

// A BodyBuilder that accumulates every choice and the usage, then calls `body` with them.
using ChoicesBody = std::function<Json(const std::vector<ChoiceText>&, const sched::Usage&)>;
BodyBuilder choices_body_builder(ChoicesBody body);

}  // namespace mlxcpp::server::openai
