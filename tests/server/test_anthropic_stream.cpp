// Engine events -> Anthropic's SSE event sequence and whole Message body: block order and
// indices, the deltas' concatenation, stop reasons and usage (input_tokens excludes cache reads).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/anthropic/messages.h"

using namespace mlxcpp;
using namespace mlxcpp::server;
using anthropic::MessagesBodyBuilder;
using anthropic::MessagesStreamEncoder;

namespace {

struct SseEvent {
  std::string name;
  Json data;
};

// Splits SSE text into events; every event must have an `event:` line and JSON data.
std::vector<SseEvent> parse_sse(const std::string& text) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event in: " << text.substr(pos);
    if (end == std::string::npos) break;
    std::string block = text.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    size_t nl = block.find('\n');
    SseEvent e;
    e.name = block.substr(7, nl - 7);
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    e.data = Json::parse(block.substr(nl + 7));
    out.push_back(std::move(e));
  }
  return out;
}

sched::Delta reasoning(std::string s) {
  sched::Delta d;
  d.reasoning = std::move(s);
  return d;
}
sched::Delta content(std::string s) {
  sched::Delta d;
  d.content = std::move(s);
  return d;
}
sched::Delta call(int index, std::string id, std::string name, std::string args) {
  sched::Delta d;
  d.tool_calls.push_back(ToolCallDelta{index, std::move(id), std::move(name), std::move(args)});
  return d;
}
sched::Finish finish(std::string reason, std::string stop = "", std::vector<ToolCall> calls = {}) {
  sched::Finish f;
  f.reason = std::move(reason);
  f.stop_sequence = std::move(stop);
  f.tool_calls = std::move(calls);
  return f;
}
sched::Usage usage(int prompt, int completion, int cached) {
  sched::Usage u;
  u.prompt_tokens = prompt;
  u.completion_tokens = completion;
  u.cached_tokens = cached;
  return u;
}

// Reasoning, text, then two tool calls (the first in fragments).
std::vector<sched::Event> tool_script() {
  std::vector<ToolCall> calls = {ToolCall{"call_1", "get_weather", Json(R"({"city": "Paris"})")},
                                 ToolCall{"call_2", "noop", Json("{}")}};
  return {reasoning("Let me "), reasoning("think."), content("Hello"), content(" world"),
          call(0, "call_1", "get_weather", ""), call(0, "", "", R"({"city")"), call(0, "", "", R"(: "Paris"})"),
          call(1, "call_2", "noop", "{}"), finish("tool_calls", "", calls), usage(30, 12, 8)};
}

std::vector<SseEvent> run(MessagesStreamEncoder& enc, const std::vector<sched::Event>& script) {
  std::string text;
  for (const auto& e : script) text += enc.encode(e);
  return parse_sse(text);
}

std::vector<std::string> types(const std::vector<SseEvent>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) {
    EXPECT_EQ(e.name, e.data.at("type").get<std::string>());
    out.push_back(e.name);
  }
  return out;
}

}  // namespace

TEST(AnthropicStream, BlocksInOrderWithIndices) {
  MessagesStreamEncoder enc("msg_1", "smol", 30);
  auto evs = run(enc, tool_script());
  const std::vector<std::string> want = {
      "message_start",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_stop",
      "message_delta", "message_stop"};
  ASSERT_EQ(types(evs), want);

  const Json& msg = evs[0].data.at("message");
  EXPECT_EQ(msg.at("id"), "msg_1");
  EXPECT_EQ(msg.at("type"), "message");
  EXPECT_EQ(msg.at("role"), "assistant");
  EXPECT_EQ(msg.at("model"), "smol");
  EXPECT_EQ(msg.at("content"), Json::array());
  EXPECT_TRUE(msg.at("stop_reason").is_null());
  EXPECT_EQ(msg.at("usage").at("input_tokens"), 30);
  EXPECT_EQ(msg.at("usage").at("output_tokens"), 0);

  // Per block: its index, its start, and its deltas concatenated.
  struct Block {
    Json start;
    std::string text;
    std::vector<std::string> delta_types;
  };
  std::vector<Block> blocks;
  for (const auto& e : evs) {
    const Json& d = e.data;
    if (e.name == "content_block_start") {
      EXPECT_EQ(d.at("index"), blocks.size());
      blocks.push_back({d.at("content_block"), "", {}});
    } else if (e.name == "content_block_delta" || e.name == "content_block_stop") {
      EXPECT_EQ(d.at("index"), blocks.size() - 1);
      if (e.name == "content_block_stop") continue;
      const Json& delta = d.at("delta");
      const std::string t = delta.at("type");
      blocks.back().delta_types.push_back(t);
      if (t == "thinking_delta") blocks.back().text += delta.at("thinking").get<std::string>();
      if (t == "text_delta") blocks.back().text += delta.at("text").get<std::string>();
      if (t == "input_json_delta") blocks.back().text += delta.at("partial_json").get<std::string>();
      if (t == "signature_delta") {
        EXPECT_EQ(delta.at("signature"), "");
      }
    }
  }
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].start, Json::parse(R"({"type": "thinking", "thinking": "", "signature": ""})"));
  EXPECT_EQ(blocks[0].text, "Let me think.");
  EXPECT_EQ(blocks[0].delta_types, (std::vector<std::string>{"thinking_delta", "thinking_delta", "signature_delta"}));
  EXPECT_EQ(blocks[1].start, Json::parse(R"({"type": "text", "text": ""})"));
  EXPECT_EQ(blocks[1].text, "Hello world");
  EXPECT_EQ(blocks[2].start,
            Json::parse(R"({"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}})"));
  EXPECT_EQ(Json::parse(blocks[2].text), Json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(blocks[2].delta_types, (std::vector<std::string>{"input_json_delta", "input_json_delta"}));
  EXPECT_EQ(blocks[3].start.at("name"), "noop");
  EXPECT_EQ(blocks[3].text, "{}");

  const Json& md = evs[evs.size() - 2].data;
  EXPECT_EQ(md.at("delta").at("stop_reason"), "tool_use");
  EXPECT_TRUE(md.at("delta").at("stop_sequence").is_null());
  EXPECT_EQ(md.at("usage").at("output_tokens"), 12);
  EXPECT_EQ(md.at("usage").at("input_tokens"), 22);
  EXPECT_EQ(md.at("usage").at("cache_read_input_tokens"), 8);
}

TEST(AnthropicStream, StopSequenceAndTextBlockOnly) {
  MessagesStreamEncoder enc("msg_2", "smol", 5);
  auto evs = run(enc, {content(""), content("abc"), sched::Delta{}, finish("stop", "END"), usage(5, 3, 0)});
  ASSERT_EQ(types(evs), (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                                  "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(evs[2].data.at("delta"), Json::parse(R"({"type": "text_delta", "text": "abc"})"));
  EXPECT_EQ(evs[4].data.at("delta").at("stop_reason"), "stop_sequence");
  EXPECT_EQ(evs[4].data.at("delta").at("stop_sequence"), "END");
}

TEST(AnthropicStream, StopReasons) {
  auto reason_of = [](sched::Finish f) {
    MessagesStreamEncoder enc("m", "smol", 1);
    auto evs = run(enc, {content("x"), f, usage(1, 1, 0)});
    return evs[evs.size() - 2].data.at("delta").at("stop_reason").get<std::string>();
  };
  EXPECT_EQ(reason_of(finish("stop")), "end_turn");
  EXPECT_EQ(reason_of(finish("length")), "max_tokens");
  EXPECT_EQ(reason_of(finish("tool_calls")), "tool_use");
  EXPECT_EQ(reason_of(finish("cancelled")), "end_turn");
}

TEST(AnthropicStream, CancelledBeforeAnyOutput) {
  MessagesStreamEncoder enc("m", "smol", 4);
  auto evs = run(enc, {finish("cancelled"), usage(4, 0, 0)});
  EXPECT_EQ(types(evs), (std::vector<std::string>{"message_start", "message_delta", "message_stop"}));
}

TEST(AnthropicStream, TextAfterToolCallOpensANewBlockAndStrayFragmentsAreDropped) {
  MessagesStreamEncoder enc("m", "smol", 4);
  auto evs = run(enc, {call(0, "c", "f", "{"), content("oops"), call(0, "", "", "}"), finish("stop"), usage(4, 2, 0)});
  EXPECT_EQ(types(evs), (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                                  "content_block_stop", "content_block_start", "content_block_delta",
                                                  "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(evs[4].data.at("index"), 1);
  EXPECT_EQ(evs[4].data.at("content_block").at("type"), "text");
}

TEST(AnthropicStream, ToolCallWithoutIdGetsOne) {
  MessagesStreamEncoder enc("m", "smol", 4);
  auto evs = run(enc, {call(0, "", "f", "{}"), finish("tool_calls"), usage(4, 2, 0)});
  const std::string id = evs[1].data.at("content_block").at("id");
  EXPECT_EQ(id.rfind("toolu_", 0), 0u) << id;
}

TEST(AnthropicStream, FailureIsAnErrorEvent) {
  MessagesStreamEncoder enc("m", "smol", 4);
  auto evs = parse_sse(enc.failure(sched::Failure{500, "boom"}));
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].name, "error");
  EXPECT_EQ(evs[0].data, Json::parse(R"({"type": "error", "error": {"type": "api_error", "message": "boom"}})"));
}

TEST(AnthropicBody, ToolScript) {
  MessagesBodyBuilder b("msg_9", "smol");
  for (const auto& e : tool_script()) b.add(e);
  Json want = Json::parse(R"({"id": "msg_9", "type": "message", "role": "assistant", "model": "smol",
      "content": [{"type": "thinking", "thinking": "Let me think.", "signature": ""},
                  {"type": "text", "text": "Hello world"},
                  {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                  {"type": "tool_use", "id": "call_2", "name": "noop", "input": {}}],
      "stop_reason": "tool_use", "stop_sequence": null,
      "usage": {"input_tokens": 22, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 8,
                "output_tokens": 12}})");
  EXPECT_EQ(b.body(), want);
}

TEST(AnthropicBody, StopSequenceAndNoReasoning) {
  MessagesBodyBuilder b("m", "smol");
  for (const auto& e : std::vector<sched::Event>{content("Hi"), content(" there"), finish("stop", "\n\n"), usage(7, 3, 2)}) {
    b.add(e);
  }
  Json body = b.body();
  EXPECT_EQ(body.at("content"), Json::parse(R"([{"type": "text", "text": "Hi there"}])"));
  EXPECT_EQ(body.at("stop_reason"), "stop_sequence");
  EXPECT_EQ(body.at("stop_sequence"), "\n\n");
  EXPECT_EQ(body.at("usage").at("input_tokens"), 5);
  EXPECT_EQ(body.at("usage").at("cache_read_input_tokens"), 2);
}

TEST(AnthropicBody, MaxTokensWithNoOutput) {
  MessagesBodyBuilder b("m", "smol");
  b.add(finish("length"));
  b.add(usage(3, 1, 0));
  EXPECT_EQ(b.body().at("content"), Json::array());
  EXPECT_EQ(b.body().at("stop_reason"), "max_tokens");
}

TEST(AnthropicBody, ToolInputFromArguments) {
  EXPECT_EQ(anthropic::tool_input(Json::parse(R"({"a": 1})")), Json::parse(R"({"a": 1})"));
  EXPECT_EQ(anthropic::tool_input(Json(R"({"a": [1, 2]})")), Json::parse(R"({"a": [1, 2]})"));
  EXPECT_EQ(anthropic::tool_input(Json(R"({"a": )")), Json::object());  // cut short
  EXPECT_EQ(anthropic::tool_input(Json("[1]")), Json::object());
}
