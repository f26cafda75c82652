#include "server/constraint_fields.h"

#include <vector>

#include <fmt/format.h>

namespace mlxcpp::server {

GrammarSpec json_schema_grammar(const Json& schema) {
  return {GrammarKind::kJsonSchema, schema.dump(), kDefaultJsonWhitespace};
}
GrammarSpec any_json_object_grammar() {
  return {GrammarKind::kJsonSchema, R"({"type":"object"})", kDefaultJsonWhitespace};
}

namespace {

// response_format: "text" (free), "json_object" (any JSON object) or "json_schema" (its
// json_schema.schema; strict or not, the output follows it).
std::optional<GrammarSpec> response_format(const Json& rf) {
  Fields f(rf, "response_format");
  const std::string type = f.req_str("type");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return any_json_object_grammar();
  if (type != "json_schema") {
    throw FieldError("response_format", fmt::format("'response_format' type '{}' is not supported (known: text, "
                                                    "json_object, json_schema)", type));
  }
  const Json* js = f.object("json_schema");
  if (js == nullptr) throw FieldError("response_format.json_schema", "'response_format.json_schema' is required");
  const Json* schema = Fields(*js, "response_format.json_schema").object("schema");
  if (schema == nullptr) {
    throw FieldError("response_format.json_schema.schema", "'response_format.json_schema.schema' must be an object");
  }
  return json_schema_grammar(*schema);
}

// A JSON schema given as an object or as its text (vLLM accepts both for guided_json).
GrammarSpec schema_value(const Fields& f, const std::string& key) {
  const Json* v = f.get(key);
  if (v->is_object() || v->is_boolean()) return json_schema_grammar(*v);
  if (v->is_string()) {
    auto parsed = Json::parse(v->get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      f.fail(key, "must be a JSON schema (an object, or its JSON text)");
    }
    return json_schema_grammar(parsed);
  }
  f.fail(key, fmt::format("must be a JSON schema object, got {}", brief(*v)));
}

// A grammar in Lark's syntax; GBNF (llama.cpp's, `rule ::= ...`) has no converter yet.
GrammarSpec lark(const Fields& f, const std::string& key) {
  auto text = f.req_str(key);
  if (text.find("::=") != std::string::npos) {
    f.fail(key, "looks like GBNF (rules written `name ::= ...`), which is not supported yet; give the grammar in "
                "Lark's syntax (`name: ...`, start rule `start`)");
  }
  return {GrammarKind::kLark, std::move(text), -1};
}

// One of the strings exactly: a regex alternation of the escaped choices.
GrammarSpec choice(const Fields& f, const std::string& key) {
  const Json* list = f.array(key);
  if (list == nullptr || list->empty()) f.fail(key, "must be a non-empty list of strings");
  std::string re;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& c = (*list)[i];
    if (!c.is_string()) f.fail(key, fmt::format("item {} must be a string, got {}", i, brief(c)));
    re += i ? "|" : "(";
    for (char ch : c.get<std::string>()) {
      if (std::string_view("\\^$.|?*+()[]{}/").find(ch) != std::string_view::npos) re += '\\';
      re += ch;
    }
  }
  return {GrammarKind::kRegex, re + ")", -1};
}

// vLLM's structured_outputs object: exactly one of json, regex, choice, grammar, json_object.
GrammarSpec structured_outputs(const Json& so, std::string& param) {
  Fields f(so, "structured_outputs");
  std::vector<std::string> given;
  for (const char* k : {"json", "regex", "choice", "grammar", "json_object"}) {
    if (f.has(k)) given.push_back(k);
  }
  if (given.size() != 1) {
    throw FieldError("structured_outputs", "'structured_outputs' must hold exactly one of json, regex, choice, "
                                           "grammar, json_object");
  }
  const std::string& k = given[0];
  param = f.path(k);
  if (k == "json") return schema_value(f, k);
  if (k == "regex") return {GrammarKind::kRegex, f.req_str(k), -1};
  if (k == "choice") return choice(f, k);
  if (k == "grammar") return lark(f, k);
  if (!f.boolean(k).value_or(false)) f.fail(k, "must be true when given");
  return any_json_object_grammar();
}

}  // namespace

std::optional<Constraint> read_constraint(const Fields& f) {
  std::vector<Constraint> found;
  auto add = [&](std::optional<GrammarSpec> g, std::string param) {
    if (g) found.push_back({std::move(*g), std::move(param)});
  };
  if (const Json* rf = f.object("response_format")) add(response_format(*rf), "response_format");
  if (f.has("json_schema")) add(schema_value(f, "json_schema"), "json_schema");  // llama-server
  if (f.has("grammar")) add(lark(f, "grammar"), "grammar");                       // llama-server (Lark)
  if (const Json* so = f.object("structured_outputs")) {
    std::string param;
    auto g = structured_outputs(*so, param);
    add(g, param);
  }
  if (f.has("guided_json")) add(schema_value(f, "guided_json"), "guided_json");  // vLLM, legacy
  if (f.has("guided_regex")) add(GrammarSpec{GrammarKind::kRegex, f.req_str("guided_regex"), -1}, "guided_regex");
  if (f.has("guided_choice")) add(choice(f, "guided_choice"), "guided_choice");
  if (f.has("guided_grammar")) add(lark(f, "guided_grammar"), "guided_grammar");
  if (found.size() > 1) {
    throw FieldError(found[1].param, fmt::format("'{}' and '{}' both constrain the output; give one", found[0].param,
                                                 found[1].param));
  }
  if (found.empty()) return std::nullopt;
  return found[0];
}

}  // namespace mlxcpp::server
