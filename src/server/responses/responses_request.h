// The Responses API's request (POST /v1/responses) in the protocol-neutral form: input items ->
// chat messages, flat function tools -> the OpenAI chat form, sampling fields -> GenParams.
// Pure: the previous response is looked up by the route, which then assembles the messages.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/message.h"
#include "server/chat_call.h"
#include "server/json_fields.h"

namespace mlxcpp::server::responses {

struct ResponsesRequest {
  ChatCall chat;                   // everything but the messages (see assemble_messages)
  std::vector<Message> input;      // this request's input items as chat messages
  std::optional<std::string> instructions;
  std::optional<std::string> previous_response_id;
  bool stream = false;
  bool store = true;
  // What the response object repeats (Responses-form values): tools, tool_choice, temperature,
  // top_p, max_output_tokens, top_logprobs, parallel_tool_calls, metadata, reasoning, text, truncation.
  Json echo = Json::object();
};

// Reads a request body (already a JSON object). Errors are FieldErrors naming the field
// ("input[2].content[0].type", "tools[0].name", ...).
ResponsesRequest parse_responses_request(const Json& body);

// An input item list (or string) alone, as chat messages.
std::vector<Message> parse_input(const Json& input);

// The messages the template sees: instructions as a leading system message, then `history`
// (the previous conversation followed by this input). Tool results get the name of the call
// they answer when the history holds it.
std::vector<Message> assemble_messages(const std::optional<std::string>& instructions, std::vector<Message> history);

// A tool call's arguments as templates want them: the parsed JSON object when the text is one,
// else the text itself.
Json arguments_value(const std::string& text);

}  // namespace mlxcpp::server::responses
