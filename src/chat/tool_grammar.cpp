#include "chat/tool_grammar.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

namespace mlxcpp {

namespace {

using ojson = nlohmann::ordered_json;

// A Lark string literal of `s` (Lark strings use JSON's syntax).
std::string lit(const std::string& s) { return nlohmann::json(s).dump(); }

// The tool's arguments as an inline JSON schema: its parameters when strict, else any object;
// compact (no free whitespace between tokens: a call is read by a parser, not a person).
std::string args_rule(const ojson& fn) {
  ojson schema = ojson{{"type", "object"}};
  if (fn.value("strict", false) && fn.contains("parameters") && fn["parameters"].is_object()) {
    schema = fn["parameters"];
  }
  schema["x-guidance"] = ojson{{"whitespace_flexible", false}};
  return "%json " + schema.dump();
}

// `s` as a literal inside a Lark /regex/.
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos) out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

struct Format {
  std::string open;       // what opens a call (the text the forced prefix starts with)
  std::string name_head;  // between `open` and the name
  std::string args_head;  // between the name and the arguments
  std::string close;      // after the arguments
  std::string not_text;   // what free text must not contain ("auto": where a call begins); empty: no "auto"
  bool quote_name = true; // the name as a JSON string (else bare)
  bool xml_params = false; // Qwen3-Coder: <parameter=P>\nVALUE\n</parameter>\n per argument, not JSON
  // Markers matched as the vocabulary's special token of that text where it has one (Mistral's
  // [TOOL_CALLS] and [ARGS], harmony's <|...|>; see special_item), as text where it has not.
  std::vector<std::string> special_texts = {};
  // Gemma's arguments: key:value pairs after the opening brace (`args_head`), strings between
  // this delimiter (<|"|> for Gemma 4, <escape> for FunctionGemma), not JSON.
  std::string gemma_delim = {};
};

// Qwen3-Coder's arguments (mlx-lm qwen3_coder.py reads them): one
// "<parameter=P>\nVALUE\n</parameter>\n" each. A strict tool's are its schema's properties in
// their order (the required ones present), each value of its type: a string runs up to its
// closing tag (one lexeme ending in it, so the lexer closes it exactly there), an enum is one
// of its values, numbers, integers, booleans and null are JSON's, objects and arrays JSON held
// to their sub-schema. Otherwise any parameters with string values. Rules named args_<i>_*.
std::string xml_args_rules(const ojson& fn, int i) {
  const std::string close = lit("\n</parameter>\n");
  std::string rules = fmt::format(
      "XSTR_{0}: /(.|\\n)*\\n<\\/parameter>\\n/ & ~/(.|\\n)*<\\/parameter>(.|\\n)*<\\/parameter>(.|\\n)*/\n", i);
  const ojson* schema = fn.value("strict", false) && fn.contains("parameters") ? &fn["parameters"] : nullptr;
  if (!schema || !schema->is_object() || !schema->contains("properties") || !(*schema)["properties"].is_object()) {
    return rules + fmt::format("args_{0}: (\"<parameter=\" /[^>\\n]+/ \">\\n\" XSTR_{0})*\n", i);
  }
  std::vector<std::string> required;
  if (schema->contains("required") && (*schema)["required"].is_array()) {
    for (const auto& r : (*schema)["required"]) {
      if (r.is_string()) required.push_back(r.get<std::string>());
    }
  }
  std::string seq;
  int k = 0;
  for (const auto& [name, prop] : (*schema)["properties"].items()) {
    const std::string type = prop.is_object() && prop.contains("type") && prop["type"].is_string()
                                 ? prop["type"].get<std::string>() : "";
    std::string value;
    if (prop.is_object() && prop.contains("enum") && prop["enum"].is_array() && !prop["enum"].empty()) {
      for (const auto& e : prop["enum"]) {
        value += (value.empty() ? "(" : " | ") + lit(e.is_string() ? e.get<std::string>() : e.dump());
      }
      value += ") " + close;
    } else if (type == "string" || type.empty()) {
      value = fmt::format("XSTR_{}", i);
    } else if (type == "integer") {
      value = "/-?(0|[1-9][0-9]*)/ " + close;
    } else if (type == "number") {
      value = "/-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/ " + close;
    } else if (type == "boolean") {
      value = "(\"true\" | \"false\") " + close;
    } else if (type == "null") {
      value = "\"null\" " + close;
    } else {  // object, array: JSON held to the sub-schema
      ojson sub = prop;
      sub["x-guidance"] = ojson{{"whitespace_flexible", false}};
      rules += fmt::format("args_{}_{}_json: %json {}\n", i, k, sub.dump());
      value = fmt::format("args_{}_{}_json {}", i, k, close);
    }
    rules += fmt::format("args_{}_{}: {} {}\n", i, k, lit("<parameter=" + name + ">\n"), value);
    const bool req = std::find(required.begin(), required.end(), name) != required.end();
    seq += fmt::format(" args_{}_{}{}", i, k, req ? "" : "?");
    ++k;
  }
  return rules + fmt::format("args_{}:{}\n", i, seq.empty() ? " \"\"" : seq);
}

// The Lark item of a special token's text: <[id]> where the vocabulary has it as one token;
// without a vocabulary, a <|name|> marker by its name (llguidance looks it up in the grammar's
// token environment); nullopt where the text stays text.
std::optional<std::string> special_item(const std::string& text, const Tokenizer* tok) {
  if (!tok) {
    if (text.size() > 4 && text.starts_with("<|") && text.ends_with("|>")) return text;
    return std::nullopt;
  }
  auto id = tok->token_to_id(text);
  if (!id) return std::nullopt;
  return fmt::format("<[{}]>", *id);
}

// Gemma's call arguments (mlx-lm's gemma4.py / function_gemma.py read them): `key:value` pairs
// joined by commas up to the closing brace, strings between the delimiter, numbers, booleans and
// null bare, objects {key:value,...} and arrays [value,...] nesting. A strict tool's are its
// schema's properties in their order (the required ones present), each value of its type;
// otherwise any keys and values. Rules named args_<i>_*; `args_<i>` is the object's body
// after its opening brace, closing brace included.
class GemmaArgs {
 public:
  GemmaArgs(int i, const std::string& delim, const Tokenizer* tok) : i_(i) {
    if (auto sp = special_item(delim, tok)) {  // text never holds a special token
      d_ = *sp;
      rules_ += fmt::format("args_{}_str: {} args_{}_text? {}\nargs_{}_text: /(.|\\n)+/\n", i, d_, i, d_, i);
    } else {  // one lexeme up to the first delimiter, so the lexer closes the string there
      d_ = lit(delim);
      const std::string t = regex_escape(delim);
      rules_ += fmt::format("args_{0}_str: {1} ARGS_{0}_STR\nARGS_{0}_STR: /(.|\\n)*{2}/ & ~/(.|\\n)*{2}(.|\\n)+/\n", i, d_, t);
    }
    rules_ += fmt::format(
        "args_{0}_any: args_{0}_str | {1} | {2} | \"true\" | \"false\" | \"null\" | \"{{\" args_{0}_pairs? \"}}\" "
        "| \"[\" (args_{0}_any (\",\" args_{0}_any)*)? \"]\"\n"
        "args_{0}_pairs: args_{0}_pair (\",\" args_{0}_pair)*\nargs_{0}_pair: /[A-Za-z0-9_.\\-]+/ \":\" args_{0}_any\n",
        i, kInt, kNumber);
  }
  // The rule for a value of `schema` (strict), its name.
  std::string value(const ojson& schema) {
    if (!schema.is_object()) return any();
    if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
      std::string alts;
      for (const auto& e : schema["enum"]) alts += (alts.empty() ? "" : " | ") + literal(e);
      return add(alts);
    }
    const std::string type = schema.contains("type") && schema["type"].is_string() ? schema["type"].get<std::string>() : "";
    if (type == "string") return string(schema);
    if (type == "integer") return add(kInt);
    if (type == "number") return add(kNumber);
    if (type == "boolean") return add("\"true\" | \"false\"");
    if (type == "null") return add("\"null\"");
    if (type == "array") {
      const std::string item = schema.contains("items") ? value(schema["items"]) : any();
      return add(fmt::format("\"[\" ({0} (\",\" {0})*)? \"]\"", item));
    }
    if (type == "object" && schema.contains("properties") && schema["properties"].is_object()) {
      return add("\"{\" " + body(schema));
    }
    return any();
  }
  // The object's properties then "}", its name (for args_<i>: the call's arguments).
  std::string body(const ojson& schema) {
    std::vector<std::pair<std::string, bool>> props;  // rule of "key:value", required
    std::vector<std::string> required;
    if (schema.contains("required") && schema["required"].is_array()) {
      for (const auto& r : schema["required"])
        if (r.is_string()) required.push_back(r.get<std::string>());
    }
    for (const auto& [name, prop] : schema["properties"].items()) {
      const std::string v = value(prop);
      props.emplace_back(add(lit(name + ":") + " " + v),
                         std::find(required.begin(), required.end(), name) != required.end());
    }
    // rest(k, first): properties k.. in order, a comma before each but the first written.
    std::string next = add("\"}\"");
    std::string next_first = next;
    for (int k = static_cast<int>(props.size()) - 1; k >= 0; --k) {
      const auto& [p, req] = props[k];
      const std::string after = add("\",\" " + p + " " + next + (req ? "" : " | " + next));
      const std::string first = add(p + " " + next + (req ? "" : " | " + next_first));
      next = after;
      next_first = first;
    }
    return next_first;
  }
  // A string: any text between the delimiters, or with an anchored "pattern" (^...$) text
  // matching it (other patterns and length bounds are not held: JSON formats get them from
  // llguidance's JSON schemas, this format does not).
  std::string string(const ojson& schema) {
    const std::string pat = schema.contains("pattern") && schema["pattern"].is_string() ? schema["pattern"].get<std::string>() : "";
    if (pat.size() < 2 || pat.front() != '^' || pat.back() != '$' || pat.find('/') != std::string::npos) {
      return fmt::format("args_{}_str", i_);
    }
    return add(fmt::format("{0} /{1}/ {0}", d_, pat.substr(1, pat.size() - 2)));
  }
  std::string any() const { return fmt::format("args_{}_any", i_); }
  // Any object body (a tool that is not strict).
  std::string any_body() { return add(fmt::format("args_{0}_pairs? \"}}\"", i_)); }
  const std::string& rules() const { return rules_; }

 private:
  static constexpr const char* kInt = "/-?(0|[1-9][0-9]*)/";
  static constexpr const char* kNumber = "/-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/";
  std::string literal(const ojson& e) const {
    if (e.is_string()) return d_ + " " + lit(e.get<std::string>()) + " " + d_;
    return lit(e.dump());
  }
  std::string add(const std::string& rhs) {
    const std::string name = fmt::format("args_{}_{}", i_, n_++);
    rules_ += name + ": " + rhs + "\n";
    return name;
  }
  int i_, n_ = 0;
  std::string d_, rules_;
};

std::string gemma_args_rules(const ojson& fn, int i, const std::string& delim, const Tokenizer* tok) {
  GemmaArgs g(i, delim, tok);
  const ojson* schema = fn.value("strict", false) && fn.contains("parameters") ? &fn["parameters"] : nullptr;
  const bool typed = schema && schema->is_object() && schema->contains("properties") && (*schema)["properties"].is_object();
  const std::string body = typed ? g.body(*schema) : g.any_body();
  return g.rules() + fmt::format("args_{}: {}\n", i, body);
}

std::optional<Format> format_of(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
      return Format{"<tool_call>\n", "{\"name\": ", ", \"arguments\": ", "}\n</tool_call>", "<tool_call>"};
    case ToolCallFormat::kLlama3Json:
      return Format{"", "{\"name\": ", ", \"parameters\": ", "}", "{\"name\""};
    case ToolCallFormat::kQwen3Coder:
      return Format{.open = "<tool_call>\n<function=", .args_head = ">\n", .close = "</function>\n</tool_call>",
                    .not_text = "<tool_call>", .quote_name = false, .xml_params = true};
    case ToolCallFormat::kMistral:
      return Format{.open = "[TOOL_CALLS]", .args_head = "[ARGS]", .not_text = "[TOOL_CALLS]", .quote_name = false,
                    .special_texts = {"[TOOL_CALLS]", "[ARGS]"}};
    case ToolCallFormat::kMistralJson:
      return Format{.open = "[TOOL_CALLS][", .name_head = "{\"name\": ", .args_head = ", \"arguments\": ",
                    .close = "}]", .not_text = "[TOOL_CALLS]", .special_texts = {"[TOOL_CALLS]"}};
    case ToolCallFormat::kGemma4:
      return Format{.open = "<|tool_call>call:", .args_head = "{", .close = "<tool_call|>", .not_text = "<|tool_call>",
                    .quote_name = false, .special_texts = {"<|tool_call>", "<tool_call|>"}, .gemma_delim = "<|\"|>"};
    case ToolCallFormat::kGemma:
      return Format{.open = "<start_function_call>call:", .args_head = "{", .close = "<end_function_call>",
                    .not_text = "<start_function_call>", .quote_name = false,
                    .special_texts = {"<start_function_call>", "<end_function_call>"}, .gemma_delim = "<escape>"};
    case ToolCallFormat::kGptOss:  // forced calls only: harmony's free text is a sequence of channels
      return Format{.open = "<|channel|>commentary to=functions.", .args_head = " <|constrain|>json<|message|>",
                    .close = "<|call|>", .quote_name = false,
                    .special_texts = {"<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"}};
    default: return std::nullopt;
  }
}

// `text` as a Lark sequence: literals, and each of f.special_texts that is a special token (see
// special_item) as that token.
std::string lark_seq(const std::string& text, const Format& f, const Tokenizer* tok) {
  std::vector<std::pair<std::string, std::string>> markers;  // text, its item
  for (const auto& t : f.special_texts) {
    if (auto item = special_item(t, tok)) markers.emplace_back(t, *item);
  }
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : " ") + item; };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = std::string::npos;
    const std::pair<std::string, std::string>* next = nullptr;  // the first marker at or after pos
    for (const auto& m : markers) {
      const size_t at = text.find(m.first, pos);
      if (at < open) open = at, next = &m;
    }
    if (!next) {
      add(lit(text.substr(pos)));
      break;
    }
    if (open > pos) add(lit(text.substr(pos, open - pos)));
    add(next->second);
    pos = open + next->first.size();
  }
  return out;
}

}  // namespace

std::optional<GrammarSpec> tool_call_grammar(ToolCallFormat format, const std::vector<ojson>& functions,
                                             const std::string& choice, const Tokenizer* tok) {
  auto f = format_of(format);
  if (!f || functions.empty()) return std::nullopt;
  const bool any_strict = std::any_of(functions.begin(), functions.end(), [](const ojson& fn) {
    return fn.value("strict", false);
  });
  if (choice == "auto" && (!any_strict || f->not_text.empty())) return std::nullopt;
  // What the prompt already ends with (a forced call's opening; under "auto", the trigger the
  // free text's last lexeme ends with), and each candidate call's head (opening, name, up to
  // its arguments) past it.
  const std::string prefix = choice == "auto" ? f->not_text
                                              : forced_tool_call_prefix(format, choice == "required" ? "" : choice);
  std::string rules, alts;
  int i = 0;
  for (const auto& fn : functions) {
    const std::string name = fn.value("name", std::string());
    if (choice != "auto" && choice != "required" && name != choice) continue;
    const std::string shown = f->quote_name ? nlohmann::json(name).dump() : name;
    const std::string head = f->open + f->name_head + shown + f->args_head;
    if (head.compare(0, prefix.size(), prefix) != 0) return std::nullopt;  // the prefix is not this format's
    const std::string rest = lark_seq(head.substr(prefix.size()), *f, tok);
    rules += f->xml_params             ? xml_args_rules(fn, i)
             : !f->gemma_delim.empty() ? gemma_args_rules(fn, i, f->gemma_delim, tok)
                                       : fmt::format("args_{}: {}\n", i, args_rule(fn));
    alts += fmt::format("{}{}args_{} {}", alts.empty() ? "" : " | ", rest.empty() ? "" : rest + " ", i,
                        lark_seq(f->close, *f, tok));
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string g;
  const auto trigger = choice == "auto" ? special_item(f->not_text, tok) : std::nullopt;
  if (trigger && std::find(f->special_texts.begin(), f->special_texts.end(), f->not_text) != f->special_texts.end()) {
    // A call opens with a special token, which text never holds: any text, then calls.
    g = fmt::format("start: TEXT? ({} fn)*\nTEXT: /(.|\\n)+/\n", *trigger);
  } else if (choice == "auto") {
    // Free text that never holds the trigger (TEXT), or text up to its first trigger (OPEN: one
    // lexeme, so the lexer ends it exactly there) and then calls, one after another.
    const std::string t = regex_escape(f->not_text);
    g = fmt::format("start: TEXT | OPEN fn more*\nmore: \"\\n\"? {} fn\n"
                    "TEXT: /(.|\\n)*/ & ~/(.|\\n)*{}(.|\\n)*/\n"
                    "OPEN: /(.|\\n)*{}/ & ~/(.|\\n)*{}(.|\\n)+/\n",
                    lit(f->not_text), t, t, t);
  } else {
    g = "start: fn\n";
  }
  g += "fn: " + alts + "\n";
  return GrammarSpec{GrammarKind::kLark, g + rules, -1};
}

}  // namespace mlxcpp
