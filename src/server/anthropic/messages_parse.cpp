// Anthropic Messages request body -> ChatCall. Content blocks map onto the chat message model:
// text blocks join into the message's text, tool_use blocks become the assistant's tool calls,
// tool_result blocks become "tool" messages, thinking blocks the assistant's reasoning.
#include "server/anthropic/messages.h"

#include <cctype>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "scheduler/model_text.h"
#include "server/constraint_fields.h"

namespace mlxcpp::server::anthropic {

namespace {

constexpr size_t kMaxStopSequences = 16;

std::string at(const std::string& base, size_t i) { return fmt::format("{}[{}]", base, i); }

[[noreturn]] void fail_at(const std::string& path, const std::string& what) {
  throw FieldError(path, fmt::format("'{}' {}", path, what));
}

[[noreturn]] void bad_block_type(const Fields& b, const std::string& type, const char* allowed) {
  if (type == "image" || type == "document") {
    b.fail("type", fmt::format("is '{}', which is not supported (this server takes text only)", type));
  }
  b.fail("type", fmt::format("must be one of {} here, got {}", allowed, brief(Json(type))));
}

// A string, or an array of text blocks (system, tool_result content): their texts joined.
std::string read_text(const Json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) fail_at(path, fmt::format("must be a string or an array of text blocks, got {}", brief(v)));
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    Fields b(v[i], at(path, i));
    const std::string type = b.req_str("type");
    if (type != "text") bad_block_type(b, type, "text");
    if (i > 0) out += "\n";
    out += b.req_str("text");
  }
  return out;
}

// Collects the text blocks of one message (several join with a newline).
struct TextAcc {
  std::string text;
  bool any = false;
  void add(const std::string& s) {
    if (any) text += "\n";
    text += s;
    any = true;
  }
};

const Json& content_of(const Fields& mf) {
  const Json* c = mf.get("content");
  if (!c) mf.fail("content", "is required");
  if (!c->is_string() && !c->is_array()) {
    mf.fail("content", fmt::format("must be a string or an array of content blocks, got {}", brief(*c)));
  }
  return *c;
}

Message tool_result(const Fields& b, const std::map<std::string, std::string>& names) {
  Message m;
  m.role = "tool";
  m.tool_call_id = b.req_str("tool_use_id");
  std::string content;
  if (const Json* c = b.get("content")) content = read_text(*c, b.path("content"));
  // Templates have no error flag for tool results; the text tells the model instead.
  if (b.boolean("is_error").value_or(false)) content = "Error: " + content;
  m.content = std::move(content);
  if (auto it = names.find(*m.tool_call_id); it != names.end()) m.name = it->second;
  return m;
}

// A user turn: its tool results become "tool" messages and its text a user message, in order.
void add_user(const Fields& mf, std::vector<Message>& out, const std::map<std::string, std::string>& names) {
  const Json& c = content_of(mf);
  if (c.is_string()) {
    out.push_back(Message::text("user", c.get<std::string>()));
    return;
  }
  if (c.empty()) mf.fail("content", "must hold at least one content block");
  TextAcc text;
  auto flush = [&] {
    if (text.any) out.push_back(Message::text("user", text.text));
    text = TextAcc{};
  };
  for (size_t i = 0; i < c.size(); ++i) {
    Fields b(c[i], at(mf.path("content"), i));
    const std::string type = b.req_str("type");
    if (type == "text") {
      text.add(b.req_str("text"));
    } else if (type == "tool_result") {
      flush();
      out.push_back(tool_result(b, names));
    } else {
      bad_block_type(b, type, "text, tool_result");
    }
  }
  flush();
}

void add_assistant(const Fields& mf, std::vector<Message>& out, std::map<std::string, std::string>& names) {
  const Json& c = content_of(mf);
  Message m;
  m.role = "assistant";
  if (c.is_string()) {
    m.content = c.get<std::string>();
    out.push_back(std::move(m));
    return;
  }
  TextAcc text;
  std::string reasoning;
  for (size_t i = 0; i < c.size(); ++i) {
    Fields b(c[i], at(mf.path("content"), i));
    const std::string type = b.req_str("type");
    if (type == "text") {
      text.add(b.req_str("text"));
    } else if (type == "tool_use") {
      ToolCall call;
      call.id = b.req_str("id");
      call.name = b.req_str("name");
      const Json* input = b.object("input");
      if (!input) b.fail("input", "is required");
      call.arguments = *input;
      names[call.id] = call.name;
      m.tool_calls.push_back(std::move(call));
    } else if (type == "thinking") {
      reasoning += b.req_str("thinking");
    } else if (type != "redacted_thinking") {  // redacted: encrypted, nothing a template can use
      bad_block_type(b, type, "text, tool_use, thinking, redacted_thinking");
    }
  }
  // "" rather than none when there is no text: templates that concatenate content fail on none.
  m.content = text.text;
  if (!reasoning.empty()) m.reasoning_content = std::move(reasoning);
  out.push_back(std::move(m));
}

void read_messages(const Fields& f, std::vector<Message>& out) {
  const Json* msgs = f.array("messages");
  if (!msgs) f.fail("messages", "is required");
  if (msgs->empty()) f.fail("messages", "must hold at least one message");
  std::map<std::string, std::string> names;  // tool_use id -> tool name
  for (size_t i = 0; i < msgs->size(); ++i) {
    Fields mf((*msgs)[i], at("messages", i));
    const std::string role = mf.req_str("role");
    if (role == "user") {
      add_user(mf, out, names);
    } else if (role == "assistant") {
      add_assistant(mf, out, names);
    } else {
      mf.fail("role", fmt::format("must be 'user' or 'assistant', got {} (the system prompt is the top-level "
                                  "'system' field)",
                                  brief(Json(role))));
    }
  }
}

// A final assistant message is a prefill: the reply continues it (its text without trailing
// whitespace, as Anthropic requires); an empty one is no prefill.
void read_prefill(const Fields& f, ChatCall& call) {
  const Json& msgs = *f.array("messages");
  if (msgs.back().value("role", "") != "assistant") return;
  const std::string path = at("messages", msgs.size() - 1);
  Message& last = call.messages.back();
  if (!last.tool_calls.empty()) {
    throw FieldError(path, "the final assistant message ends in tool_use blocks: a user turn with their "
                           "tool_result blocks must follow");
  }
  const std::string text = last.content.value_or("");
  if (text.empty()) {
    call.messages.pop_back();
    return;
  }
  if (std::isspace(static_cast<unsigned char>(text.back()))) {
    throw FieldError(path + ".content", "final assistant content cannot end with trailing whitespace");
  }
  call.continue_final_message = true;
  call.add_generation_prompt = false;
}

void read_tools(const Fields& f, ChatCall& call) {
  const Json* tools = f.array("tools");
  if (!tools) return;
  std::set<std::string> seen;
  for (size_t i = 0; i < tools->size(); ++i) {
    Fields t((*tools)[i], at("tools", i));
    if (auto type = t.str("type"); type && *type != "custom") {
      t.fail("type", fmt::format("is {}, a server tool, which this server does not run (only custom tools with "
                                 "name, description and input_schema are supported)",
                                 brief(Json(*type))));
    }
    const std::string name = t.req_str("name");
    if (name.empty()) t.fail("name", "must not be empty");
    if (!seen.insert(name).second) t.fail("name", fmt::format("{} names another tool already", brief(Json(name))));
    const Json* schema = t.object("input_schema");
    if (!schema) t.fail("input_schema", "is required");
    Json fn = {{"name", name}};
    if (auto d = t.str("description")) fn["description"] = *d;
    fn["parameters"] = *schema;
    if (auto st = t.boolean("strict")) fn["strict"] = *st;  // strict tool use: input held to input_schema
    call.tools.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
}

void read_tool_choice(const Fields& f, ChatCall& call) {
  const Json* tc = f.object("tool_choice");
  if (!tc) return;
  Fields c(*tc, "tool_choice");
  const std::string type = c.req_str("type");
  c.boolean("disable_parallel_tool_use");  // checked, not enforced: calls are parsed as generated
  if (type == "auto") {
    call.tool_choice = "auto";
  } else if (type == "none") {
    call.tool_choice = "none";
  } else if (type == "any" || type == "tool") {
    if (call.tools.empty()) c.fail("type", fmt::format("{} needs 'tools'", brief(Json(type))));
    if (type == "any") {
      call.tool_choice = "required";
    } else {
      const std::string name = c.req_str("name");
      const auto names = tool_names(call.tools);
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        c.fail("name", fmt::format("{} is not one of the request's tools", brief(Json(name))));
      }
      call.tool_choice = name;
    }
  } else {
    c.fail("type", fmt::format("must be one of auto, any, tool, none, got {}", brief(Json(type))));
  }
}

void read_thinking(const Fields& f, ChatCall& call) {
  const Json* th = f.object("thinking");
  if (!th) return;
  Fields t(*th, "thinking");
  const std::string type = t.req_str("type");
  if (type == "enabled") {
    // The budget is not enforced: max_tokens bounds reasoning and answer together.
    if (!t.integer("budget_tokens", 1, kMaxInt32)) t.fail("budget_tokens", "is required when thinking is enabled");
    call.enable_thinking = true;
  } else if (type == "disabled" || type == "between_tools") {  // between_tools: thinking off
    call.enable_thinking = false;
  } else if (type != "adaptive") {  // adaptive: the model's (template's) default
    t.fail("type", fmt::format("must be one of enabled, disabled, adaptive, between_tools, got {}", brief(Json(type))));
  }
}

void read_sampling(const Fields& f, GenParams& g, bool count_only) {
  auto max_tokens = f.integer("max_tokens", 1, kMaxInt32);
  if (!max_tokens && !count_only) f.fail("max_tokens", "is required");
  if (max_tokens) g.max_tokens = static_cast<int>(*max_tokens);
  // Negative values mean "the server's default" to finish_gen_params. Anthropic's temperature
  // range is [0, 1]; up to 2 is accepted as OpenAI clients send it.
  g.sampling.temp = f.number("temperature", 0, 2).value_or(-1);
  g.sampling.top_p = f.number("top_p", 0, 1).value_or(-1);
  g.sampling.top_k = static_cast<int>(f.integer("top_k", 0, kMaxInt32).value_or(-2));
  g.sampling.min_p = -1;
  g.n = 1;
  g.kv = read_kv_params(f);
  if (const Json* stops = f.array("stop_sequences")) {
    if (stops->size() > kMaxStopSequences) {
      f.fail("stop_sequences", fmt::format("may hold at most {} strings, got {}", kMaxStopSequences, stops->size()));
    }
    for (size_t i = 0; i < stops->size(); ++i) {
      const Json& s = (*stops)[i];
      if (!s.is_string()) fail_at(at("stop_sequences", i), fmt::format("must be a string, got {}", brief(s)));
      if (s.get<std::string>().empty()) fail_at(at("stop_sequences", i), "must not be empty");
      g.stops.push_back(s.get<std::string>());
    }
  }
}

// Structured outputs: output_format {"type": "json_schema", "schema": {...}} constrains the text
// to the schema (llguidance, as OpenAI's response_format).
void read_output_format(const Fields& f, GenParams& g) {
  const Json* of = f.object("output_format");
  if (!of) return;
  Fields o(*of, "output_format");
  const std::string type = o.req_str("type");
  if (type != "json_schema") o.fail("type", fmt::format("must be \"json_schema\", got '{}'", type));
  const Json* schema = o.object("schema");
  if (!schema) o.fail("schema", "is required (a JSON schema object)");
  g.grammar = json_schema_grammar(*schema);
  g.grammar_param = "output_format";
}

}  // namespace

MessagesRequest parse_messages_request(const Json& body, bool count_only) {
  Fields f(body);
  MessagesRequest r;
  f.req_str("model");  // any name: the server has one model, whose id the response carries
  read_sampling(f, r.call.gen, count_only);
  r.stream = f.boolean("stream").value_or(false);
  if (const Json* s = f.get("system")) {
    std::string text = read_text(*s, "system");
    // An empty system prompt is none (the template's own default applies).
    if (!text.empty()) r.call.messages.push_back(Message::text("system", std::move(text)));
  }
  read_messages(f, r.call.messages);
  read_prefill(f, r.call);
  read_tools(f, r.call);
  read_tool_choice(f, r.call);
  read_thinking(f, r.call);
  read_output_format(f, r.call.gen);
  return r;
}

size_t count_prompt_tokens(const sched::ServedModel& m, const ChatCall& call) {
  return render_chat(m, call).request.prompt.size();
}

}  // namespace mlxcpp::server::anthropic
