// Gemma call blocks: FunctionGemma (mlx-lm tool_parsers/function_gemma.py)
//   <start_function_call>call:NAME{key:<escape>text<escape>,n:3}<end_function_call>
// and Gemma 4 (tool_parsers/gemma4.py), the same with <|tool_call>...<tool_call|> and <|"|> as
// the string delimiter, where values may nest ({...}, [...]). Bare values are JSON when they
// parse, else strings. The arguments JSON is built as it streams: `{`, `"key": `, a string's
// characters as they come, other values once complete, `}`.
#include <cctype>

#include "chat/parse_util.h"
#include "chat/tool_call_base.h"

namespace mlxcpp::detail {
namespace {

using parse::npos;
using parse::OrderedJson;

bool is_name_char(char c) {
  auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u) || c == '_' || c == '-' || c == '.';
}

// One past the container starting at s[pos] ('{' or '['), npos while it is incomplete.
size_t balanced_end(std::string_view s, size_t pos, std::string_view delim) {
  int depth = 0;
  for (size_t i = pos; i < s.size();) {
    if (s.substr(i, delim.size()) == delim) {
      size_t close = s.find(delim, i + delim.size());
      if (close == npos) return npos;
      i = close + delim.size();
      continue;
    }
    if (s[i] == '{' || s[i] == '[') ++depth;
    if (s[i] == '}' || s[i] == ']') {
      if (--depth == 0) return i + 1;
    }
    ++i;
  }
  return npos;
}

OrderedJson bare_value(std::string_view v) {
  v = parse::trim(v);
  if (auto j = parse::try_parse_json(v)) return *j;
  return std::string(v);
}

// A complete Gemma value at s[p...]: delimited string, {key:value,...}, [value,...] or bare.
OrderedJson gemma_value(std::string_view s, size_t& p, std::string_view delim) {
  p = parse::skip_ws(s, p);
  if (s.substr(p, delim.size()) == delim) {
    size_t close = s.find(delim, p + delim.size());
    if (close == npos) close = s.size();
    std::string text(s.substr(p + delim.size(), close - p - delim.size()));
    p = std::min(s.size(), close + delim.size());
    return text;
  }
  if (p < s.size() && (s[p] == '{' || s[p] == '[')) {
    bool object = s[p] == '{';
    char end = object ? '}' : ']';
    OrderedJson out = object ? OrderedJson::object() : OrderedJson::array();
    ++p;
    while (true) {
      p = parse::skip_ws(s, p);
      if (p >= s.size()) return out;
      if (s[p] == end) {
        ++p;
        return out;
      }
      if (s[p] == ',') {
        ++p;
        continue;
      }
      size_t before = p;
      if (object) {
        size_t colon = s.find(':', p);
        if (colon == npos) return out;
        std::string key(parse::trim(s.substr(p, colon - p)));
        if (key.size() >= 2 && key.front() == '"' && key.back() == '"') key = key.substr(1, key.size() - 2);
        p = colon + 1;
        out[key] = gemma_value(s, p, delim);
      } else {
        out.push_back(gemma_value(s, p, delim));
      }
      if (p == before) ++p;  // no progress: skip the byte
    }
  }
  size_t e = s.find_first_of(",}]", p);
  if (e == npos) e = s.size();
  OrderedJson v = bare_value(s.substr(p, e - p));
  p = e;
  return v;
}

class GemmaBody : public Body {
 public:
  GemmaBody(CallSink& sink, const std::string& open, const std::string& close, std::string delim)
      : Body(sink, open, close), delim_(std::move(delim)) {}

 protected:
  void on_feed(std::string_view text) override {
    buf_ += text;
    run(false);
  }
  void on_finish() override { run(true); }

 private:
  enum class State { kCall, kName, kKey, kValue, kString };
  void run(bool final);
  bool value(bool final);
  void close_call() {
    sink_.args("}");
    sink_.end_call();
    state_ = State::kCall;
  }
  size_t offset() const { return raw().size() - buf_.size(); }

  std::string delim_;
  State state_ = State::kCall;
  std::string buf_;
  bool first_ = true;
};

void GemmaBody::run(bool final) {
  while (!passthrough()) {
    switch (state_) {
      case State::kCall: {
        const auto open = parse::take_opening(buf_, "call:", final);
        if (open == parse::Opening::kMore) return;
        if (open == parse::Opening::kOther) {
          junk_from(offset());
          return;
        }
        state_ = State::kName;
        break;
      }
      case State::kName: {
        size_t q = 0;
        while (q < buf_.size() && is_name_char(buf_[q])) ++q;
        if (q == buf_.size() && !final) return;
        if (q == 0 || q == buf_.size() || buf_[q] != '{') {
          junk_from(offset());
          return;
        }
        begin_call(buf_.substr(0, q));
        sink_.args("{");
        first_ = true;
        buf_.erase(0, q + 1);
        state_ = State::kKey;
        break;
      }
      case State::kKey: {
        size_t p = parse::skip_ws(buf_, 0);
        if (p < buf_.size() && buf_[p] == '}') {
          buf_.erase(0, p + 1);
          close_call();
          break;
        }
        if (p < buf_.size() && buf_[p] == ',') {
          buf_.erase(0, p + 1);
          break;
        }
        size_t colon = buf_.find(':', p);
        if (colon == npos) {
          if (final) close_call();
          return;
        }
        std::string key(parse::trim(std::string_view(buf_).substr(p, colon - p)));
        sink_.args((first_ ? "\"" : ", \"") + parse::json_escape(key) + "\": ");
        first_ = false;
        buf_.erase(0, colon + 1);
        state_ = State::kValue;
        break;
      }
      case State::kValue:
        if (!value(final)) return;
        break;
      case State::kString: {
        size_t at = buf_.find(delim_);
        if (at == npos && !final) {
          size_t n = buf_.size() - parse::partial_marker_suffix(buf_, delim_);
          sink_.args(parse::json_escape(std::string_view(buf_).substr(0, n)));
          buf_.erase(0, n);
          return;
        }
        sink_.args(parse::json_escape(std::string_view(buf_).substr(0, at)) + "\"");
        buf_.erase(0, at == npos ? buf_.size() : at + delim_.size());
        state_ = State::kKey;
        break;
      }
    }
  }
}

// The value after `key:`; false while it must wait for more text.
bool GemmaBody::value(bool final) {
  size_t p = parse::skip_ws(buf_, 0);
  std::string_view rest = std::string_view(buf_).substr(p);
  if (parse::starts_with(rest, delim_)) {
    buf_.erase(0, p + delim_.size());
    sink_.args("\"");
    state_ = State::kString;
    return true;
  }
  if (rest.empty() || (!final && parse::starts_with(delim_, rest))) {
    if (!final) return false;
    sink_.args("null");  // cut short before the value
    close_call();
    return true;
  }
  size_t end = npos;
  if (rest[0] == '{' || rest[0] == '[') {
    end = balanced_end(buf_, p, delim_);
  } else {
    end = buf_.find_first_of(",}", p);
  }
  if (end == npos && !final) return false;
  if (end == npos) end = buf_.size();
  size_t q = p;
  OrderedJson v = rest[0] == '{' || rest[0] == '[' ? gemma_value(std::string_view(buf_).substr(0, end), q, delim_)
                                                   : bare_value(std::string_view(buf_).substr(p, end - p));
  sink_.args(parse::py_json(v));
  buf_.erase(0, end);
  state_ = State::kKey;
  return true;
}

}  // namespace

std::unique_ptr<ToolCallParser> make_gemma_parser(std::string id_prefix, bool gemma4) {
  std::string delim = gemma4 ? "<|\"|>" : "<escape>";
  BodyFactory body = [delim](CallSink& sink, const std::string& open, const std::string& close) {
    return std::make_unique<GemmaBody>(sink, open, close, delim);
  };
  RegionSpec spec = gemma4 ? RegionSpec{{"<|tool_call>"}, "<tool_call|>", body, false}
                           : RegionSpec{{"<start_function_call>"}, "<end_function_call>", body, false};
  return std::make_unique<RegionParser>(std::move(id_prefix), std::move(spec));
}

}  // namespace mlxcpp::detail
