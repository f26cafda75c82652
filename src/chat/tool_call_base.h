// The machinery every tool-call format shares: the sink that numbers and streams calls, the
// streaming base (whole UTF-8 characters only), and the region parser (text between an open
// marker and a close marker, or the end of the stream, goes to a format's body).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parsers.h"

namespace mlxcpp::detail {

// Collects one push's output and the finished calls.
class CallSink {
 public:
  explicit CallSink(std::string id_prefix) : id_prefix_(std::move(id_prefix)) {}
  void content(std::string_view s) { out_.content += s; }
  void reasoning(std::string_view s) { out_.reasoning += s; }
  // Opens call number calls().size(): a delta with index, id and name.
  void begin_call(const std::string& name);
  void args(std::string_view fragment);  // appended to the open call's arguments
  void end_call();                       // the open call is complete
  bool in_call() const { return open_; }
  ToolCallParser::Out take();
  const std::vector<ToolCall>& calls() const { return done_; }

 private:
  std::string id_prefix_;
  ToolCallParser::Out out_;
  std::vector<ToolCall> done_;
  bool open_ = false;
  ToolCall current_;
  std::string current_args_;
};

// Feeds subclasses whole UTF-8 characters only (an incomplete one waits for the next piece), so
// their cuts, made at ASCII markers, never split a character.
class StreamingParser : public ToolCallParser {
 public:
  explicit StreamingParser(std::string id_prefix) : sink_(std::move(id_prefix)) {}
  Out push(std::string_view text) final;
  Out flush() final;
  std::vector<ToolCall> calls() const final { return sink_.calls(); }

 protected:
  virtual void feed(std::string_view text) = 0;
  virtual void finish() = 0;  // end of stream, after the last feed
  CallSink sink_;

 private:
  std::string utf8_tail_;
  bool flushed_ = false;
};

// What a region holds. Text that turns out not to be a call becomes content: the whole region
// with its markers when no call came out of it, else just that text.
class Body {
 public:
  Body(CallSink& sink, std::string open, std::string close)
      : sink_(sink), open_(std::move(open)), close_(std::move(close)) {}
  virtual ~Body() = default;
  void feed(std::string_view text);
  void finish(bool closed);  // the close marker was seen (true) or the stream ended

 protected:
  virtual void on_feed(std::string_view text) = 0;
  virtual void on_finish() = 0;  // close an open call (keep it), or give the rest up as junk
  void begin_call(const std::string& name);
  // From `from` (an offset in raw()) on, the region is content.
  void junk_from(size_t from);
  const std::string& raw() const { return raw_; }
  bool passthrough() const { return passthrough_; }
  CallSink& sink_;

 private:
  std::string open_, close_;
  std::string raw_;  // the region's text so far
  int calls_ = 0;
  bool passthrough_ = false;
};

using BodyFactory = std::function<std::unique_ptr<Body>(CallSink&, const std::string& open, const std::string& close)>;

struct RegionSpec {
  std::vector<std::string> open;  // any of these opens a region
  std::string close;              // empty: the region lasts to the end of the stream
  BodyFactory body;
  bool bare_json_at_start = false;  // Llama 3: output starting with '{' is a region too
};

class RegionParser : public StreamingParser {
 public:
  RegionParser(std::string id_prefix, RegionSpec spec) : StreamingParser(std::move(id_prefix)), spec_(std::move(spec)) {}

 protected:
  void feed(std::string_view text) override;
  void finish() override;

 private:
  void open_region(const std::string& marker);
  RegionSpec spec_;
  std::string buf_;
  std::unique_ptr<Body> body_;
  bool at_start_ = true;
};

// Streams a raw JSON arguments value of a JSON call as it arrives: objects and arrays byte for
// byte; a string holding JSON is sent decoded, other values once complete.
class RawArgs {
 public:
  // `text` holds the value at [begin, end) (end npos: not complete yet).
  void update(CallSink& sink, std::string_view text, size_t begin, size_t end);
  // The call ends: an incomplete string or primitive value is sent as it arrived.
  void finish(CallSink& sink, std::string_view text, size_t begin);
  void reset() { *this = RawArgs(); }

 private:
  bool done_ = false;
  size_t sent_ = 0;
};

std::unique_ptr<ToolCallParser> make_hermes_parser(std::string id_prefix);
std::unique_ptr<ToolCallParser> make_llama3_json_parser(std::string id_prefix);
std::unique_ptr<ToolCallParser> make_mistral_parser(std::string id_prefix);
std::unique_ptr<ToolCallParser> make_qwen3_coder_parser(std::string id_prefix, std::vector<nlohmann::ordered_json> tools);
std::unique_ptr<ToolCallParser> make_gemma_parser(std::string id_prefix, bool gemma4);
std::unique_ptr<ToolCallParser> make_gpt_oss_parser(std::string id_prefix);

}  // namespace mlxcpp::detail
