// libFuzzer target: the HTTP request-body parsers of every protocol (OpenAI chat, Anthropic
// messages, Responses). The first byte picks the parser; the rest is the body. Any input must
// parse or throw an mlxcpp::Error (FieldError and friends) or a JSON exception, never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "server/anthropic/messages.h"
#include "server/json_fields.h"
#include "server/openai/chat_completions.h"
#include "server/responses/responses_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    auto j = mlxcpp::server::parse_body(body);
    switch (data[0] % 4) {
      case 0: mlxcpp::server::openai::parse_chat_request(j); break;
      case 1: mlxcpp::server::anthropic::parse_messages_request(j); break;
      case 2: mlxcpp::server::anthropic::parse_messages_request(j, true); break;
      default: mlxcpp::server::responses::parse_responses_request(j); break;
    }
  } catch (const mlxcpp::Error&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
