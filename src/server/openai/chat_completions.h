// POST /v1/chat/completions: the body -> a ChatCall, and engine events -> chat.completion
// chunks (streaming) or one chat.completion object.
#pragma once

#include <string>
#include <vector>

#include "server/chat_call.h"
#include "server/openai/openai_common.h"

namespace mlxcpp::server::openai {

struct ChatRequest {
  ChatCall call;
  StreamFlags stream;
};

// FieldError names the offending field (e.g. "messages[1].content[0].type").
ChatRequest parse_chat_request(const Json& body);
// One OpenAI message object -> a Message (content parts joined to text; arguments strings that
// hold a JSON object become that object, as mlx_lm.server passes them to templates).
Message parse_chat_message(const Json& m, const std::string& where);
// The tools list ([{"type": "function", "function": {name, description?, parameters?}}]).
std::vector<Json> parse_tools(const Fields& f, const std::string& key);

// Streaming encoder: per-request state (which choices have sent their role).
class ChatStreamEncoder {
 public:
  ChatStreamEncoder(std::string id, std::string model, bool include_usage);
  std::string encode(const sched::Event& e);
  std::string failure(const sched::Failure& f) const;

 private:
  Json chunk(Json choices) const;
  std::string id_, model_;
  int64_t created_;
  bool include_usage_;
  std::vector<bool> role_sent_;
};

// The whole chat.completion object from accumulated choices.
Json chat_completion_body(const std::string& id, const std::string& model, const std::vector<ChoiceText>& choices,
                          const sched::Usage& usage, bool with_logprobs);

}  // namespace mlxcpp::server::openai
