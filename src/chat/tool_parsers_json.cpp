// JSON tool-call formats: Hermes/Qwen (mlx-lm tool_parsers/json_tools.py), Llama 3.1 JSON
// ({"name", "parameters"}, after <|python_tag|> or as the whole output; vLLM's llama3_json) and
// Mistral (mlx-lm tool_parsers/mistral.py: [TOOL_CALLS] then a JSON array or name[ARGS]{...}).
// The arguments stream as their raw JSON text; the region text is rescanned on every piece, so
// what is sent depends only on the text, never on how it was split.
#include "chat/parse_util.h"
#include "chat/tool_call_base.h"

namespace mlxcpp::detail {
namespace {

using parse::npos;
using parse::Scan;

const std::vector<std::string> kArgKeys = {"arguments", "parameters"};
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";

struct JsonOptions {
  std::string separators = " \t\r\n";  // skipped between calls
  bool need_args_key = false;          // a call needs an arguments key besides "name"
  bool mistral = false;                // [TOOL_CALLS] repeats; name[ARGS]{...} calls
};

bool is_name_char(char c) {
  auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool is_proper_prefix(std::string_view s, std::string_view of) { return s.size() < of.size() && of.substr(0, s.size()) == s; }

class JsonCallsBody : public Body {
 public:
  JsonCallsBody(CallSink& sink, const std::string& open, const std::string& close, JsonOptions opt)
      : Body(sink, open, close), opt_(std::move(opt)) {}

 protected:
  void on_feed(std::string_view) override { pump(false); }
  void on_finish() override { pump(true); }

 private:
  enum class Step { kWait, kNext, kStop };
  void pump(bool final);
  Step between(bool final);
  Step object(bool final);
  Step header_call(bool final);
  Step mistral_header(bool final);
  void close_call(size_t args_begin) {
    args_.finish(sink_, raw(), args_begin);
    sink_.end_call();
    state_ = State::kBetween;
    args_.reset();
    args_scan_ = parse::ValueScanner();
  }

  enum class State { kBetween, kObject, kHeaderCall };
  JsonOptions opt_;
  State state_ = State::kBetween;
  size_t pos_ = 0;          // start of the current element
  size_t args_from_ = 0;    // kHeaderCall: where the arguments value may start
  bool header_ = false;     // kObject: the call's name was sent
  RawArgs args_;
  // The arguments value while it is incomplete: resumed instead of rescanning the call.
  parse::ValueScanner args_scan_;
};

void JsonCallsBody::pump(bool final) {
  while (!passthrough()) {
    Step s = state_ == State::kBetween ? between(final) : state_ == State::kObject ? object(final) : header_call(final);
    if (s != Step::kNext) return;
  }
}

JsonCallsBody::Step JsonCallsBody::between(bool final) {
  const std::string& t = raw();
  while (pos_ < t.size()) {
    std::string_view rest = std::string_view(t).substr(pos_);
    if (opt_.mistral && parse::starts_with(rest, kMistralMarker)) {
      pos_ += kMistralMarker.size();
      continue;
    }
    if (opt_.mistral && !final && is_proper_prefix(rest, kMistralMarker)) return Step::kWait;
    if (opt_.separators.find(t[pos_]) == std::string::npos) break;
    ++pos_;
  }
  if (pos_ == t.size()) return Step::kWait;
  if (t[pos_] == '{') {
    state_ = State::kObject;
    header_ = false;
    return Step::kNext;
  }
  if (opt_.mistral) return mistral_header(final);
  junk_from(pos_);
  return Step::kStop;
}

// name[ARGS]{...} (or name[CALL_ID]id[ARGS]{...}).
JsonCallsBody::Step JsonCallsBody::mistral_header(bool final) {
  const std::string& t = raw();
  size_t q = pos_;
  while (q < t.size() && is_name_char(t[q])) ++q;
  size_t r = parse::skip_ws(t, q);
  if (r < t.size() && parse::starts_with(std::string_view(t).substr(r), "[CALL_ID]")) {
    r = t.find('[', r + 9);
    if (r == npos) r = t.size();
  }
  std::string_view rest = std::string_view(t).substr(r);
  if (q > pos_ && parse::starts_with(rest, "[ARGS]")) {
    begin_call(t.substr(pos_, q - pos_));
    args_from_ = r + 6;
    state_ = State::kHeaderCall;
    return Step::kNext;
  }
  bool may_come = q > pos_ && (rest.empty() || is_proper_prefix(rest, "[ARGS]") || is_proper_prefix(rest, "[CALL_ID]"));
  if (may_come && !final) return Step::kWait;
  junk_from(pos_);
  return Step::kStop;
}

JsonCallsBody::Step JsonCallsBody::header_call(bool final) {
  const std::string& t = raw();
  size_t b = parse::skip_ws(t, args_from_);
  if (b == t.size()) {
    if (final) close_call(npos);
    return final ? Step::kStop : Step::kWait;
  }
  if (args_scan_.begin() != b) args_scan_ = parse::ValueScanner(b);
  auto v = args_scan_.scan(t);
  args_.update(sink_, t, b, v.status == Scan::kComplete ? v.end : npos);
  if (v.status == Scan::kComplete) {
    close_call(b);
    pos_ = v.end;
    return Step::kNext;
  }
  if (v.status == Scan::kBad) {
    close_call(b);
    junk_from(v.end);
    return Step::kStop;
  }
  if (final) close_call(b);
  return final ? Step::kStop : Step::kWait;
}

JsonCallsBody::Step JsonCallsBody::object(bool final) {
  const std::string& t = raw();
  if (args_scan_.begin() != npos) {  // only the arguments value was missing last time
    auto v = args_scan_.scan(t);
    if (v.status == Scan::kIncomplete && !final) {
      if (header_) args_.update(sink_, t, args_scan_.begin(), npos);
      return Step::kWait;
    }
    args_scan_ = parse::ValueScanner();  // it ended: rescan the call once
  }
  auto sc = parse::scan_call_object(t, pos_, kArgKeys);
  if (!header_ && sc.name && (!opt_.need_args_key || sc.args_key)) {
    begin_call(*sc.name);
    header_ = true;
  }
  if (header_) args_.update(sink_, t, sc.args_begin, sc.args_end);
  switch (sc.status) {
    case Scan::kIncomplete:
      if (!final) {
        if (sc.args_begin != npos && sc.args_end == npos) {
          args_scan_ = parse::ValueScanner(sc.args_begin);
          args_scan_.scan(t);
        }
        return Step::kWait;
      }
      if (header_) {
        close_call(sc.args_begin);
      } else {
        junk_from(pos_);
      }
      return Step::kStop;
    case Scan::kBad:
      if (!header_) {
        junk_from(pos_);
        return Step::kStop;
      }
      close_call(sc.args_begin);
      junk_from(sc.end);
      return Step::kStop;
    case Scan::kComplete:
      if (!header_) {  // JSON, but not a call
        junk_from(pos_);
        return Step::kStop;
      }
      if (!sc.args_key) sink_.args("{}");
      close_call(sc.args_begin);
      pos_ = sc.end;
      return Step::kNext;
  }
  return Step::kStop;
}

BodyFactory json_body(JsonOptions opt) {
  return [opt](CallSink& sink, const std::string& open, const std::string& close) {
    return std::make_unique<JsonCallsBody>(sink, open, close, opt);
  };
}

}  // namespace

std::unique_ptr<ToolCallParser> make_hermes_parser(std::string id_prefix) {
  return std::make_unique<RegionParser>(std::move(id_prefix),
                                        RegionSpec{{"<tool_call>"}, "</tool_call>", json_body({}), false});
}

std::unique_ptr<ToolCallParser> make_llama3_json_parser(std::string id_prefix) {
  JsonOptions opt;
  opt.separators = " \t\r\n;";
  opt.need_args_key = true;
  return std::make_unique<RegionParser>(std::move(id_prefix), RegionSpec{{"<|python_tag|>"}, "", json_body(opt), true});
}

std::unique_ptr<ToolCallParser> make_mistral_parser(std::string id_prefix) {
  JsonOptions opt;
  opt.separators = " \t\r\n[,]";
  opt.mistral = true;
  return std::make_unique<RegionParser>(std::move(id_prefix),
                                        RegionSpec{{std::string(kMistralMarker)}, "", json_body(opt), false});
}

}  // namespace mlxcpp::detail
