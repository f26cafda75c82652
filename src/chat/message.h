// The chat message model every front end (CLI, OpenAI/Anthropic translators) fills, and its one
// conversion to the values a chat template sees (transformers' dict layout).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlxcpp {

using OrderedJson = nlohmann::ordered_json;

// One part of a multi-part content ({"type": "text", "text": ...}, or an image/other part kept as
// given, since templates only look at its keys).
struct ContentPart {
  OrderedJson value;
  static ContentPart text(std::string s) { return {OrderedJson{{"type", "text"}, {"text", std::move(s)}}}; }
};

struct ToolCall {
  std::string id;                // may be empty
  std::string name;
  OrderedJson arguments;         // a JSON object (transformers' convention) or a string
  std::string type = "function";
};

struct Message {
  std::string role;  // system, user, assistant, tool, ...
  std::optional<std::string> content;                 // text content
  std::optional<std::vector<ContentPart>> parts;      // or content parts (one of the two)
  std::optional<std::string> reasoning_content;       // assistant thinking
  std::vector<ToolCall> tool_calls;                   // assistant tool calls
  std::optional<std::string> tool_call_id;            // tool results
  std::optional<std::string> name;                    // tool results / named participants

  static Message text(std::string role, std::string content) {
    Message m;
    m.role = std::move(role);
    m.content = std::move(content);
    return m;
  }
};

// The template value of a message: {"role", "content", "reasoning_content", "tool_calls",
// "tool_call_id", "name"} with absent fields left out (transformers drops None values), and
// transformers' reasoning aliases ("thinking" first, "reasoning_content" last).
OrderedJson to_template_value(const Message& m);

// Parses an OpenAI/transformers-style message object; errors (RequestError) name `where` and
// the field.
Message message_from_json(const OrderedJson& j, const std::string& where);

}  // namespace mlxcpp
