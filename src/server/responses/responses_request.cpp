#include "server/responses/responses_request.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "server/constraint_fields.h"

namespace mlxcpp::server::responses {

namespace {

std::string at_index(const std::string& where, size_t i) { return fmt::format("{}[{}]", where, i); }

bool one_of(const std::string& s, std::initializer_list<const char*> set) {
  return std::any_of(set.begin(), set.end(), [&](const char* x) { return s == x; });
}

// Text of a content value: a string, or parts of the given text types joined (as mlx-lm joins
// chat content fragments). Images, files and audio are refused.
std::string content_text(const Fields& f, const std::string& key, std::initializer_list<const char*> text_types) {
  const Json* c = f.get(key);
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) f.fail(key, fmt::format("must be a string or a list of content parts, got {}", brief(*c)));
  std::string text;
  for (size_t i = 0; i < c->size(); ++i) {
    Fields part((*c)[i], at_index(f.path(key), i));
    const std::string type = part.req_str("type");
    if (one_of(type, text_types)) {
      text += part.req_str("text");
    } else if (one_of(type, {"input_image", "input_file", "input_audio"})) {
      part.fail("type", fmt::format("{} is not supported: this server takes text input only", brief(Json(type))));
    } else {
      part.fail("type", fmt::format("{} is not a known content part type here (known: {})", brief(Json(type)),
                                    fmt::join(text_types, ", ")));
    }
  }
  return text;
}

// Builds chat messages from input items. Consecutive function calls (and a preceding assistant
// message) form one assistant turn; a reasoning item goes to the next assistant turn.
class InputReader {
 public:
  std::vector<Message> read(const Json& items) {
    for (size_t i = 0; i < items.size(); ++i) item(items[i], at_index("input", i));
    return std::move(out_);
  }

 private:
  void item(const Json& j, const std::string& where) {
    Fields f(j, where);
    const std::string type = f.str("type").value_or("message");
    if (type == "message") {
      message(f);
    } else if (type == "function_call") {
      function_call(f);
    } else if (type == "function_call_output") {
      Message m;
      m.role = "tool";
      m.tool_call_id = f.req_str("call_id");
      if (!f.has("output")) f.fail("output", "is required");
      m.content = content_text(f, "output", {"input_text", "output_text", "text"});
      out_.push_back(std::move(m));
    } else if (type == "reasoning") {
      std::string text = content_text(f, "content", {"reasoning_text", "text"});
      if (text.empty()) text = content_text(f, "summary", {"summary_text"});
      pending_reasoning_ += text;
    } else {
      f.fail("type", fmt::format("{} is not supported (known: message, function_call, function_call_output, reasoning)",
                                 brief(Json(type))));
    }
  }

  void message(const Fields& f) {
    std::string role = f.req_str("role");
    if (!one_of(role, {"user", "assistant", "system", "developer"})) {
      f.fail("role", fmt::format("must be one of user, assistant, system, developer, got {}", brief(Json(role))));
    }
    if (!f.has("content")) f.fail("content", "is required");
    if (role == "developer") role = "system";  // chat templates know system, not developer
    Message m = Message::text(role, content_text(f, "content", {"input_text", "output_text", "text"}));
    if (role == "assistant") take_reasoning(m);
    out_.push_back(std::move(m));
  }

  void function_call(const Fields& f) {
    ToolCall call;
    call.id = f.req_str("call_id");
    call.name = f.req_str("name");
    if (call.name.empty()) f.fail("name", "must not be empty");
    call.arguments = arguments_value(f.req_str("arguments"));
    if (out_.empty() || out_.back().role != "assistant") out_.push_back(Message::text("assistant", ""));
    take_reasoning(out_.back());
    out_.back().tool_calls.push_back(std::move(call));
  }

  void take_reasoning(Message& m) {
    if (pending_reasoning_.empty()) return;
    m.reasoning_content = m.reasoning_content.value_or("") + pending_reasoning_;
    pending_reasoning_.clear();
  }

  std::vector<Message> out_;
  std::string pending_reasoning_;
};

// Flat Responses tools ({type: "function", name, description, parameters, strict}) -> the chat
// form; also accepts the chat form itself.
std::vector<Json> read_tools(const Fields& body, Json& echo) {
  std::vector<Json> tools;
  const Json* arr = body.array("tools");
  if (!arr) return tools;
  for (size_t i = 0; i < arr->size(); ++i) {
    Fields f((*arr)[i], at_index("tools", i));
    const std::string type = f.req_str("type");
    if (type != "function") {
      f.fail("type", fmt::format("{} is not supported: this server runs function tools only", brief(Json(type))));
    }
    const Json* nested = f.object("function");
    Fields fn = nested ? Fields(*nested, f.path("function")) : f;
    Json def = Json::object();
    def["name"] = fn.req_str("name");
    if (def["name"].get<std::string>().empty()) fn.fail("name", "must not be empty");
    if (auto d = fn.str("description")) def["description"] = *d;
    def["parameters"] = fn.object("parameters") ? *fn.object("parameters") : Json{{"type", "object"}, {"properties", Json::object()}};
    def["strict"] = fn.boolean("strict").value_or(true);  // the Responses API's default
    tools.push_back(Json{{"type", "function"}, {"function", def}});
    Json flat = Json{{"type", "function"}};
    for (const auto& [k, v] : def.items()) flat[k] = v;
    if (!flat.contains("description")) flat["description"] = nullptr;
    if (!flat.contains("strict")) flat["strict"] = true;
    echo["tools"].push_back(std::move(flat));
  }
  return tools;
}

// "auto" | "none" | "required" | {type: "function", name}; the echo keeps the given form.
std::string read_tool_choice(const Fields& body, const std::vector<Json>& tools, Json& echo) {
  const Json* tc = body.get("tool_choice");
  if (!tc) return "auto";
  echo["tool_choice"] = *tc;
  if (tc->is_string()) {
    const std::string s = tc->get<std::string>();
    if (!one_of(s, {"auto", "none", "required"})) {
      body.fail("tool_choice", fmt::format("must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", "
                                           "\"name\": ...}}, got {}", brief(*tc)));
    }
    if (s == "required" && tools.empty()) body.fail("tool_choice", "is \"required\" but no 'tools' were given");
    return s;
  }
  Fields f(*tc, "tool_choice");
  const std::string type = f.req_str("type");
  if (type != "function") f.fail("type", fmt::format("{} is not supported (only \"function\")", brief(Json(type))));
  const std::string name = f.req_str("name");
  auto names = tool_names(tools);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    f.fail("name", fmt::format("{} names no function in 'tools'", brief(Json(name))));
  }
  return name;
}

void read_reasoning(const Fields& body, ChatCall& call, Json& echo) {
  const Json* r = body.object("reasoning");
  if (!r) return;
  Fields f(*r, "reasoning");
  Json e = Json{{"effort", nullptr}, {"summary", nullptr}};
  if (auto effort = f.str("effort")) {
    if (!one_of(*effort, {"none", "minimal", "low", "medium", "high", "xhigh"})) {
      f.fail("effort", fmt::format("must be one of none, minimal, low, medium, high, xhigh, got {}", brief(Json(*effort))));
    }
    call.enable_thinking = *effort != "none";
    e["effort"] = *effort;
  }
  if (auto s = f.str("summary")) e["summary"] = *s;
  echo["reasoning"] = e;
}

// text.format: "text", "json_object" (any object) or "json_schema" (its "schema", strict or
// not); echoed as given.
std::optional<GrammarSpec> read_text_format(const Fields& body, Json& echo) {
  const Json* t = body.object("text");
  if (!t) return std::nullopt;
  Fields f(*t, "text");
  std::optional<GrammarSpec> spec;
  if (const Json* fmt_obj = f.object("format")) {
    Fields ff(*fmt_obj, "text.format");
    const std::string type = ff.req_str("type");
    if (type == "json_object") {
      spec = any_json_object_grammar();
    } else if (type == "json_schema") {
      const Json* schema = ff.object("schema");
      if (!schema) ff.fail("schema", "must be an object (the JSON schema)");
      spec = json_schema_grammar(*schema);
    } else if (type != "text") {
      ff.fail("type", fmt::format("must be \"text\", \"json_object\" or \"json_schema\", got {}", brief(Json(type))));
    }
    echo["text"]["format"] = *fmt_obj;
  }
  if (auto v = f.str("verbosity")) echo["text"]["verbosity"] = *v;
  return spec;
}

// Fields of other OpenAI features this server does not offer: refused rather than ignored.
void refuse_unsupported(const Fields& body) {
  if (body.boolean("background").value_or(false)) body.fail("background", "is not supported (responses run in the request)");
  for (const char* key : {"conversation", "prompt"}) {
    if (body.has(key)) body.fail(key, "is not supported by this server");
  }
  if (auto t = body.str("truncation"); t && !one_of(*t, {"disabled", "auto"})) {
    body.fail("truncation", fmt::format("must be \"disabled\" or \"auto\", got {}", brief(Json(*t))));
  }
}

}  // namespace

Json arguments_value(const std::string& text) {
  Json v = Json::parse(text, nullptr, false);
  if (v.is_discarded() || !v.is_object()) return Json(text);
  return v;
}

std::vector<Message> parse_input(const Json& input) {
  if (input.is_string()) return {Message::text("user", input.get<std::string>())};
  if (!input.is_array()) throw FieldError("input", fmt::format("'input' must be a string or a list of items, got {}", brief(input)));
  return InputReader().read(input);
}

ResponsesRequest parse_responses_request(const Json& body) {
  Fields f(body);
  ResponsesRequest r;
  f.str("model");
  if (!f.has("input")) f.fail("input", "is required");
  r.input = parse_input(*f.get("input"));
  if (r.input.empty()) f.fail("input", "must hold at least one item");
  r.instructions = f.str("instructions");
  r.previous_response_id = f.str("previous_response_id");
  if (r.previous_response_id && r.previous_response_id->empty()) f.fail("previous_response_id", "must not be empty");
  r.stream = f.boolean("stream").value_or(false);
  r.store = f.boolean("store").value_or(true);
  refuse_unsupported(f);

  Json& e = r.echo;
  e = Json{{"tools", Json::array()}, {"tool_choice", "auto"}, {"parallel_tool_calls", true}, {"metadata", Json::object()},
           {"reasoning", Json{{"effort", nullptr}, {"summary", nullptr}}}, {"text", Json{{"format", {{"type", "text"}}}}},
           {"truncation", f.str("truncation").value_or("disabled")}};
  r.chat.tools = read_tools(f, e);
  r.chat.tool_choice = read_tool_choice(f, r.chat.tools, e);
  if (auto p = f.boolean("parallel_tool_calls")) e["parallel_tool_calls"] = *p;
  if (const Json* m = f.object("metadata")) e["metadata"] = *m;
  read_reasoning(f, r.chat, e);
  auto format = read_text_format(f, e);

  r.chat.gen = read_gen_params(f, {"max_output_tokens"});
  r.chat.gen.grammar = std::move(format);
  r.chat.gen.grammar_param = "text.format";
  if (r.chat.gen.n != 1) f.fail("n", "is not supported by the Responses API (one output per response)");
  if (r.chat.gen.max_tokens && *r.chat.gen.max_tokens < 1) f.fail("max_output_tokens", "must be at least 1");
  if (auto top = f.integer("top_logprobs", 0, 20)) {
    r.chat.gen.top_logprobs = static_cast<int>(*top);
    e["top_logprobs"] = *top;
  }
  if (const Json* inc = f.array("include")) {
    for (size_t i = 0; i < inc->size(); ++i) {
      if (!(*inc)[i].is_string()) f.fail(at_index("include", i), fmt::format("must be a string, got {}", brief((*inc)[i])));
      if ((*inc)[i] == "message.output_text.logprobs" && r.chat.gen.top_logprobs < 0) r.chat.gen.top_logprobs = 0;
    }
  }
  if (auto t = f.number("temperature", 0, 2)) e["temperature"] = *t;
  if (auto p = f.number("top_p", 0, 1)) e["top_p"] = *p;
  if (r.chat.gen.max_tokens) e["max_output_tokens"] = *r.chat.gen.max_tokens;
  return r;
}

std::vector<Message> assemble_messages(const std::optional<std::string>& instructions, std::vector<Message> history) {
  std::vector<Message> out;
  out.reserve(history.size() + 1);
  if (instructions) out.push_back(Message::text("system", *instructions));
  for (auto& m : history) {
    if (m.role == "tool" && !m.name && m.tool_call_id) {
      for (const auto& prev : out) {
        for (const auto& c : prev.tool_calls) {
          if (c.id == *m.tool_call_id) m.name = c.name;
        }
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace mlxcpp::server::responses
