#include "chat/message.h"

#include "core/errors.h"

namespace mlxcpp {

namespace {

OrderedJson tool_call_value(const ToolCall& c) {
  OrderedJson v = OrderedJson::object();
  if (!c.id.empty()) v["id"] = c.id;
  v["type"] = c.type;
  v["function"] = OrderedJson{{"name", c.name}, {"arguments", c.arguments}};
  return v;
}

[[noreturn]] void bad(const std::string& where, const std::string& field, const std::string& what) {
  throw RequestError(where + ": field '" + field + "': " + what);
}

std::optional<std::string> opt_string(const OrderedJson& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad(where, key, "expected a string, got " + it->dump());
  return it->get<std::string>();
}

}  // namespace

OrderedJson to_template_value(const Message& m) {
  OrderedJson v = OrderedJson::object();
  // transformers: {"thinking": r, **message, "reasoning_content": r}
  if (m.reasoning_content) v["thinking"] = *m.reasoning_content;
  v["role"] = m.role;
  if (m.parts) {
    OrderedJson parts = OrderedJson::array();
    for (const auto& p : *m.parts) parts.push_back(p.value);
    v["content"] = std::move(parts);
  } else if (m.content) {
    v["content"] = *m.content;
  }
  if (!m.tool_calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const auto& c : m.tool_calls) calls.push_back(tool_call_value(c));
    v["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) v["tool_call_id"] = *m.tool_call_id;
  if (m.name) v["name"] = *m.name;
  if (m.reasoning_content) v["reasoning_content"] = *m.reasoning_content;
  return v;
}

Message message_from_json(const OrderedJson& j, const std::string& where) {
  if (!j.is_object()) throw RequestError(where + ": expected a message object, got " + j.dump());
  Message m;
  auto role = opt_string(j, "role", where);
  if (!role) bad(where, "role", "missing");
  m.role = *role;
  if (auto it = j.find("content"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      m.content = it->get<std::string>();
    } else if (it->is_array()) {
      std::vector<ContentPart> parts;
      for (const auto& p : *it) {
        if (!p.is_object()) bad(where, "content", "a content part must be an object");
        parts.push_back(ContentPart{p});
      }
      m.parts = std::move(parts);
    } else {
      bad(where, "content", "expected a string or a list of parts, got " + it->dump());
    }
  }
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    if (!m.reasoning_content) m.reasoning_content = opt_string(j, key, where);
  }
  if (auto it = j.find("tool_calls"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) bad(where, "tool_calls", "expected a list");
    for (size_t i = 0; i < it->size(); ++i) {
      const auto& c = (*it)[i];
      std::string field = "tool_calls[" + std::to_string(i) + "]";
      const OrderedJson& fn = c.contains("function") ? c["function"] : c;
      if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) bad(where, field + ".function.name", "missing");
      ToolCall call;
      call.name = fn["name"].get<std::string>();
      call.arguments = fn.contains("arguments") ? fn["arguments"] : OrderedJson::object();
      if (auto id = opt_string(c, "id", where)) call.id = *id;
      if (auto type = opt_string(c, "type", where)) call.type = *type;
      m.tool_calls.push_back(std::move(call));
    }
  }
  m.tool_call_id = opt_string(j, "tool_call_id", where);
  m.name = opt_string(j, "name", where);
  return m;
}

}  // namespace mlxcpp
