// gpt-oss harmony messages (OpenAI's harmony format; mlx-lm has no parser for it):
//   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...<|return|>
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
// A header (up to <|message|>) is never emitted. analysis -> reasoning; a recipient
// functions.NAME -> a call whose arguments are the message text as generated; final, commentary
// without a recipient (preambles) and other recipients -> content.
#include "chat/parse_util.h"
#include "chat/tool_call_base.h"

namespace mlxcpp::detail {
namespace {

using parse::npos;

// The word after `key` in a header: up to whitespace or the next <|token|>.
std::string header_field(std::string_view header, std::string_view key) {
  size_t p = header.find(key);
  if (p == npos) return "";
  p += key.size();
  size_t e = p;
  while (e < header.size() && !parse::is_json_ws(header[e]) && header.substr(e, 2) != "<|") ++e;
  return std::string(header.substr(p, e - p));
}

class GptOssParser : public StreamingParser {
 public:
  using StreamingParser::StreamingParser;

 protected:
  void feed(std::string_view text) override;
  void finish() override;

 private:
  enum class Kind { kReasoning, kContent, kCall };
  void start_message(std::string_view header);
  void body(std::string_view text);
  void end_message() {
    if (kind_ == Kind::kCall) sink_.end_call();
    in_body_ = false;
  }

  std::string buf_;
  bool in_body_ = false;
  Kind kind_ = Kind::kContent;
};

void GptOssParser::start_message(std::string_view header) {
  std::string channel = header_field(header, "<|channel|>");
  std::string recipient = header_field(header, "to=");
  if (parse::starts_with(recipient, "functions.") && recipient.size() > 10) {
    kind_ = Kind::kCall;
    sink_.begin_call(recipient.substr(10));
  } else {
    kind_ = channel == "analysis" && recipient.empty() ? Kind::kReasoning : Kind::kContent;
  }
  in_body_ = true;
}

void GptOssParser::body(std::string_view text) {
  if (text.empty()) return;
  if (kind_ == Kind::kReasoning) {
    sink_.reasoning(text);
  } else if (kind_ == Kind::kCall) {
    sink_.args(text);
  } else {
    sink_.content(text);
  }
}

void GptOssParser::feed(std::string_view text) {
  static const std::vector<std::string> kEnds = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
  buf_ += text;
  while (true) {
    if (!in_body_) {
      size_t at = buf_.find("<|message|>");
      if (at == npos) return;  // the header waits whole
      start_message(std::string_view(buf_).substr(0, at));
      buf_.erase(0, at + 11);
      continue;
    }
    auto [at, which] = parse::find_first_marker(buf_, kEnds);
    if (at == npos) {
      size_t n = buf_.size() - parse::partial_marker_suffix(buf_, kEnds);
      body(std::string_view(buf_).substr(0, n));
      buf_.erase(0, n);
      return;
    }
    body(std::string_view(buf_).substr(0, at));
    // <|start|> begins the next header; the others end this message.
    buf_.erase(0, kEnds[which] == "<|start|>" ? at : at + kEnds[which].size());
    end_message();
    if (parse::starts_with(buf_, "<|start|>")) buf_.erase(0, 9);
  }
}

void GptOssParser::finish() {
  if (in_body_) {
    body(buf_);
    end_message();
  } else if (buf_.find("<|channel|>") == npos) {
    sink_.content(buf_);  // not harmony at all
  }
  buf_.clear();
}

}  // namespace

std::unique_ptr<ToolCallParser> make_gpt_oss_parser(std::string id_prefix) {
  return std::make_unique<GptOssParser>(std::move(id_prefix));
}

}  // namespace mlxcpp::detail
