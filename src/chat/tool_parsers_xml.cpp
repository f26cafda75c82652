// Qwen3-Coder / Qwen3.5 XML calls (mlx-lm tool_parsers/qwen3_coder.py):
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
// One newline is stripped on each side of a value; values are typed by the tool's schema as
// mlx-lm's _convert_param_value does (no schema for a parameter: a string; "null": null). The
// arguments JSON is built as it streams: `{`, then `"P": ` and the value (a string value's
// characters as they come), `}` at </function>.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "chat/parse_util.h"
#include "chat/tool_call_base.h"

namespace mlxcpp::detail {
namespace {

using parse::npos;
using parse::OrderedJson;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ci_prefix_of_null(std::string_view s) { return s.size() <= 4 && std::string_view("null").substr(0, s.size()) == lower(s); }

// Python's float(): surrounding whitespace allowed, nothing else after the number.
std::optional<double> py_float(std::string_view s) {
  std::string t(parse::trim(s));
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

OrderedJson number_value(double v, bool integral_only, std::string_view raw) {
  double ip = 0;
  bool integral = std::modf(v, &ip) == 0.0 && std::fabs(v) < 9.2e18;
  if (integral) return OrderedJson(static_cast<int64_t>(v));
  if (integral_only) return OrderedJson(std::string(raw));  // mlx-lm raises: keep the text
  return OrderedJson(v);
}

// ast.literal_eval's common cases, else the text.
OrderedJson literal_or_string(std::string_view v) {
  if (auto j = parse::try_parse_json(v)) return *j;
  std::string t(parse::trim(v));
  if (t == "True") return true;
  if (t == "False") return false;
  if (t == "None") return nullptr;
  return std::string(v);
}

// The schema of parameter `p` of tool `fn` (nullptr: none).
const OrderedJson* param_config(const std::vector<OrderedJson>& tools, const std::string& fn, const std::string& p) {
  for (const auto& t : tools) {
    const OrderedJson* f = t.contains("function") ? &t["function"] : &t;
    if (!f->is_object() || f->value("name", "") != fn) continue;
    if (!f->contains("parameters") || !(*f)["parameters"].contains("properties")) return nullptr;
    const auto& props = (*f)["parameters"]["properties"];
    return props.is_object() && props.contains(p) ? &props[p] : nullptr;
  }
  return nullptr;
}

std::string type_of(const OrderedJson& cfg) {
  const auto& t = cfg["type"];
  return t.is_string() ? lower(parse::trim(t.get<std::string>())) : "";
}

bool is_string_type(const std::string& t) {
  return t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum";
}

bool is_string_param(const OrderedJson* cfg) { return !cfg || (cfg->contains("type") && is_string_type(type_of(*cfg))); }

OrderedJson convert_value(const std::string& v, const OrderedJson* cfg) {
  if (lower(v) == "null") return nullptr;
  if (!cfg) return v;
  if (!cfg->contains("type")) {
    auto j = parse::try_parse_json(v);
    return j && (j->is_object() || j->is_array()) ? *j : OrderedJson(v);
  }
  std::string t = type_of(*cfg);
  auto starts = [&](std::string_view p) { return parse::starts_with(t, p); };
  if (is_string_type(t)) return v;
  if (starts("int") || starts("uint") || starts("long") || starts("short") || starts("unsigned")) {
    auto d = py_float(v);
    return d ? number_value(*d, true, v) : OrderedJson(v);
  }
  if (starts("num") || starts("float")) {
    auto d = py_float(v);
    return d ? number_value(*d, false, v) : OrderedJson(v);
  }
  if (t == "boolean" || t == "bool" || t == "binary") return lower(v) == "true";
  return literal_or_string(v);
}

class Qwen3CoderBody : public Body {
 public:
  Qwen3CoderBody(CallSink& sink, const std::string& open, const std::string& close, const std::vector<OrderedJson>& tools)
      : Body(sink, open, close), tools_(tools) {}

 protected:
  void on_feed(std::string_view text) override {
    buf_ += text;
    run(false);
  }
  void on_finish() override { run(true); }

 private:
  enum class State { kFunc, kFuncName, kParams, kParamName, kValue };
  void run(bool final);
  bool read_name(std::string* name);
  void stream_value();
  void end_value();
  void close_call() {
    sink_.args("}");
    sink_.end_call();
    state_ = State::kFunc;
  }
  size_t offset() const { return raw().size() - buf_.size(); }

  const std::vector<OrderedJson>& tools_;
  State state_ = State::kFunc;
  std::string buf_;  // not yet consumed
  std::string function_;
  bool first_param_ = true;
  const OrderedJson* cfg_ = nullptr;
  bool string_mode_ = true;
  std::string value_;  // the raw value so far
  bool opened_ = false;
  size_t sent_ = 0;
};

// `\s*([^\s<>]+)>?` at the start of buf_; false while it may still grow.
bool Qwen3CoderBody::read_name(std::string* name) {
  size_t p = parse::skip_ws(buf_, 0), q = p;
  while (q < buf_.size() && !parse::is_json_ws(buf_[q]) && buf_[q] != '<' && buf_[q] != '>') ++q;
  if (q == buf_.size()) return false;
  *name = buf_.substr(p, q - p);
  if (q < buf_.size() && buf_[q] == '>') ++q;
  buf_.erase(0, q);
  return true;
}

void Qwen3CoderBody::run(bool final) {
  static const std::vector<std::string> kParamMarks = {"<parameter=", "</function>"};
  while (!passthrough()) {
    switch (state_) {
      case State::kFunc: {
        const auto open = parse::take_opening(buf_, "<function=", final);
        if (open == parse::Opening::kMore) return;
        if (open == parse::Opening::kOther) {
          junk_from(offset());
          return;
        }
        state_ = State::kFuncName;
        break;
      }
      case State::kFuncName: {
        size_t before = offset();
        bool named = read_name(&function_);
        if (!named && !final) return;
        if (!named || function_.empty()) {
          junk_from(before);
          return;
        }
        begin_call(function_);
        sink_.args("{");
        first_param_ = true;
        state_ = State::kParams;
        break;
      }
      case State::kParams: {
        auto [at, which] = parse::find_first_marker(buf_, kParamMarks);
        if (at == npos) {  // text between parameters is dropped
          buf_.erase(0, buf_.size() - parse::partial_marker_suffix(buf_, kParamMarks));
          if (final) close_call();
          return;
        }
        buf_.erase(0, at + kParamMarks[which].size());
        if (which == 1) {
          close_call();
        } else {
          state_ = State::kParamName;
        }
        break;
      }
      case State::kParamName: {
        std::string name;
        bool named = read_name(&name);
        if (!named && !final) return;
        if (!named) {  // cut short inside a parameter's name
          close_call();
          return;
        }
        if (name.empty()) {
          state_ = State::kParams;
          break;
        }
        sink_.args((first_param_ ? "\"" : ", \"") + parse::json_escape(name) + "\": ");
        first_param_ = false;
        cfg_ = param_config(tools_, function_, name);
        string_mode_ = is_string_param(cfg_);
        value_.clear();
        opened_ = false;
        sent_ = 0;
        state_ = State::kValue;
        break;
      }
      case State::kValue: {
        static const std::string kEnd = "</parameter>";
        size_t at = buf_.find(kEnd);
        if (at == npos && !final) {
          size_t keep = parse::partial_marker_suffix(buf_, kEnd);
          value_ += buf_.substr(0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          stream_value();
          return;
        }
        value_ += buf_.substr(0, at);
        buf_.erase(0, at == npos ? buf_.size() : at + kEnd.size());
        end_value();
        state_ = State::kParams;
        break;
      }
    }
  }
}

// A string value streams as it comes; a trailing newline (maybe the one stripped) and a value
// that may still turn out to be "null" wait.
void Qwen3CoderBody::stream_value() {
  if (!string_mode_ || value_.empty()) return;
  std::string_view v = value_;
  if (v[0] == '\n') v.remove_prefix(1);
  size_t safe = v.size() - (!v.empty() && v.back() == '\n' ? 1 : 0);
  if (!opened_) {
    if (ci_prefix_of_null(v.substr(0, safe))) return;
    sink_.args("\"");
    opened_ = true;
  }
  if (safe > sent_) {
    sink_.args(parse::json_escape(v.substr(sent_, safe - sent_)));
    sent_ = safe;
  }
}

void Qwen3CoderBody::end_value() {
  std::string v = value_;
  if (!v.empty() && v[0] == '\n') v.erase(0, 1);
  if (!v.empty() && v.back() == '\n') v.pop_back();
  if (!string_mode_ || (!opened_ && lower(v) == "null")) {
    sink_.args(parse::py_json(convert_value(v, cfg_)));
    return;
  }
  if (!opened_) sink_.args("\"");
  sink_.args(parse::json_escape(std::string_view(v).substr(std::min(sent_, v.size()))) + "\"");
}

}  // namespace

std::unique_ptr<ToolCallParser> make_qwen3_coder_parser(std::string id_prefix, std::vector<OrderedJson> tools) {
  auto shared = std::make_shared<const std::vector<OrderedJson>>(std::move(tools));
  BodyFactory body = [shared](CallSink& sink, const std::string& open, const std::string& close) {
    return std::make_unique<Qwen3CoderBody>(sink, open, close, *shared);
  };
  return std::make_unique<RegionParser>(std::move(id_prefix), RegionSpec{{"<tool_call>"}, "</tool_call>", body, false});
}

}  // namespace mlxcpp::detail
