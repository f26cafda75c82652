// The Responses API translator without an engine: request parsing (input items, tools,
// tool_choice, refusals naming the field), the response store, and the event stream built
// from scripted engine events.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "server/responses/response_store.h"
#include "server/responses/response_stream.h"
#include "server/responses/responses_request.h"

namespace mlxcpp::server::responses {
namespace {

ResponsesRequest parse(const std::string& body) { return parse_responses_request(Json::parse(body)); }

TEST(ResponsesParse, StringInputIsOneUserMessage) {
  auto r = parse(R"({"model": "m", "input": "Hello"})");
  ASSERT_EQ(r.input.size(), 1u);
  EXPECT_EQ(r.input[0].role, "user");
  EXPECT_EQ(r.input[0].content, "Hello");
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.instructions);
  EXPECT_EQ(r.chat.tool_choice, "auto");
  EXPECT_FALSE(r.chat.gen.max_tokens);
}

TEST(ResponsesParse, ItemArrayWithCallsResultsAndReasoning) {
  auto r = parse(R"({"input": [
    {"role": "developer", "content": "Be brief."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in "},
                                                     {"type": "input_text", "text": "Paris and Rome?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Two calls."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{\"city\": \"Rome\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "Sunny and rain.", "annotations": []}]}
  ]})");
  ASSERT_EQ(r.input.size(), 6u);
  EXPECT_EQ(r.input[0].role, "system");  // developer -> system
  EXPECT_EQ(r.input[0].content, "Be brief.");
  EXPECT_EQ(r.input[1].content, "Weather in Paris and Rome?");
  const Message& call = r.input[2];
  EXPECT_EQ(call.role, "assistant");
  EXPECT_EQ(call.content, "");
  EXPECT_EQ(call.reasoning_content, "Two calls.");
  ASSERT_EQ(call.tool_calls.size(), 2u);  // consecutive calls: one assistant turn
  EXPECT_EQ(call.tool_calls[0].id, "c1");
  EXPECT_EQ(call.tool_calls[0].name, "weather");
  EXPECT_EQ(call.tool_calls[0].arguments, Json({{"city", "Paris"}}));
  EXPECT_EQ(call.tool_calls[1].arguments, Json({{"city", "Rome"}}));
  EXPECT_EQ(r.input[3].role, "tool");
  EXPECT_EQ(r.input[3].tool_call_id, "c1");
  EXPECT_EQ(r.input[3].content, "sunny");
  EXPECT_EQ(r.input[4].content, "rain");
  EXPECT_EQ(r.input[5].role, "assistant");
  EXPECT_EQ(r.input[5].content, "Sunny and rain.");
  EXPECT_FALSE(r.input[5].reasoning_content);
}

TEST(ResponsesParse, FunctionCallAfterAssistantMessageJoinsIt) {
  auto r = parse(R"({"input": [{"role": "user", "content": "hi"},
    {"role": "assistant", "content": "Let me check."},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "not json"}]})");
  ASSERT_EQ(r.input.size(), 2u);
  EXPECT_EQ(r.input[1].content, "Let me check.");
  ASSERT_EQ(r.input[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.input[1].tool_calls[0].arguments, Json("not json"));  // kept as text
}

TEST(ResponsesParse, InstructionsLeadAndToolResultsGetNames) {
  auto r = parse(R"({"instructions": "Talk like a pirate.", "input": [
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "42"}]})");
  EXPECT_EQ(r.instructions, "Talk like a pirate.");
  auto msgs = assemble_messages(r.instructions, r.input);
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0].role, "system");
  EXPECT_EQ(msgs[0].content, "Talk like a pirate.");
  EXPECT_EQ(msgs[2].role, "tool");
  EXPECT_EQ(msgs[2].name, "lookup");
  EXPECT_EQ(assemble_messages(std::nullopt, r.input).size(), 2u);
}

TEST(ResponsesParse, FlatToolsBecomeChatForm) {
  auto r = parse(R"({"input": "x", "tools": [
    {"type": "function", "name": "get_weather", "description": "Weather now",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": false},
    {"type": "function", "name": "noargs"}]})");
  ASSERT_EQ(r.chat.tools.size(), 2u);
  EXPECT_EQ(r.chat.tools[0], Json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "Weather now", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": false}})"));
  EXPECT_EQ(r.chat.tools[1]["function"]["parameters"], Json::parse(R"({"type": "object", "properties": {}})"));
  ASSERT_EQ(r.echo["tools"].size(), 2u);
  EXPECT_EQ(r.echo["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r.echo["tools"][0]["type"], "function");
  EXPECT_EQ(r.echo["tools"][1]["description"], nullptr);
}

TEST(ResponsesParse, ToolChoiceForms) {
  const std::string tools = R"("tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "g"}])";
  EXPECT_EQ(parse(R"({"input": "x", )" + tools + "}").chat.tool_choice, "auto");
  for (const char* s : {"auto", "none", "required"}) {
    auto r = parse(R"({"input": "x", )" + tools + R"(, "tool_choice": ")" + s + "\"}");
    EXPECT_EQ(r.chat.tool_choice, s);
    EXPECT_EQ(r.echo["tool_choice"], s);
  }
  auto named = parse(R"({"input": "x", )" + tools + R"(, "tool_choice": {"type": "function", "name": "g"}})");
  EXPECT_EQ(named.chat.tool_choice, "g");
  EXPECT_EQ(named.echo["tool_choice"], Json::parse(R"({"type": "function", "name": "g"})"));
}

TEST(ResponsesParse, SamplingReasoningAndEcho) {
  auto r = parse(R"({"input": "x", "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 24, "stream": true,
    "store": false, "reasoning": {"effort": "none"}, "text": {"format": {"type": "text"}},
    "metadata": {"k": "v"}, "parallel_tool_calls": false, "user": "u", "top_logprobs": 3,
    "previous_response_id": "resp_1"})");
  EXPECT_DOUBLE_EQ(r.chat.gen.sampling.temp, 0.5);
  EXPECT_DOUBLE_EQ(r.chat.gen.sampling.top_p, 0.9);
  EXPECT_EQ(r.chat.gen.max_tokens, 24);
  EXPECT_EQ(r.chat.gen.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.chat.enable_thinking, false);
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_EQ(r.echo["temperature"], 0.5);
  EXPECT_EQ(r.echo["max_output_tokens"], 24);
  EXPECT_EQ(r.echo["metadata"]["k"], "v");
  EXPECT_EQ(r.echo["parallel_tool_calls"], false);
  EXPECT_EQ(r.echo["reasoning"]["effort"], "none");
  EXPECT_EQ(parse(R"({"input": "x", "reasoning": {"effort": "high"}})").chat.enable_thinking, true);
  EXPECT_FALSE(parse(R"({"input": "x"})").chat.enable_thinking);
  EXPECT_EQ(parse(R"({"input": "x", "include": ["message.output_text.logprobs"]})").chat.gen.top_logprobs, 0);
}

TEST(ResponsesParse, MalformedBodiesNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "input"},
      {R"({"input": 5})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": "x", "model": 3})", "model"},
      {R"({"input": [5]})", "input[0]"},
      {R"({"input": [{"type": "message", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"role": "user"}]})", "input[0].content"},
      {R"({"input": [{"role": "user", "content": 7}]})", "input[0].content"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", "input[0].content[0].type"},
      {R"({"input": [{"role": "user", "content": [{"type": "weird", "text": "t"}]}]})", "input[0].content[0].type"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})", "input[0].content[0].text"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0].call_id"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]})", "input[0].name"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})", "input[0].arguments"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input[0].output"},
      {R"({"input": [{"type": "function_call_output", "output": "o"}]})", "input[0].call_id"},
      {R"({"input": [{"type": "item_reference", "id": "x"}]})", "input[0].type"},
      {R"({"input": "x", "instructions": 1})", "instructions"},
      {R"({"input": "x", "tools": {}})", "tools"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "tools[0].name"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": []}]})", "tools[0].parameters"},
      {R"({"input": "x", "tool_choice": "sometimes"})", "tool_choice"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})",
       "tool_choice.name"},
      {R"({"input": "x", "tool_choice": {"type": "mcp"}})", "tool_choice.type"},
      {R"({"input": "x", "temperature": 3})", "temperature"},
      {R"({"input": "x", "top_p": "high"})", "top_p"},
      {R"({"input": "x", "max_output_tokens": -1})", "max_output_tokens"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "stream": "yes"})", "stream"},
      {R"({"input": "x", "store": 1})", "store"},
      {R"({"input": "x", "reasoning": {"effort": "max"}})", "reasoning.effort"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "text.format.schema"},
      {R"({"input": "x", "text": {"format": {"type": "xml"}}})", "text.format.type"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "previous_response_id": ""})", "previous_response_id"},
      {R"({"input": "x", "metadata": []})", "metadata"},
      {R"({"input": "x", "top_logprobs": 30})", "top_logprobs"},
      {R"({"input": "x", "n": 2})", "n"},
      {R"({"input": "x", "include": [1]})", "include[0]"},
  };
  for (const auto& [body, param] : cases) {
    try {
      parse(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const FieldError& e) {
      EXPECT_EQ(e.param(), param) << body << " -> " << e.what();
      EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
    }
  }
}

TEST(ResponsesParse, ArgumentsValue) {
  EXPECT_EQ(arguments_value(R"({"a": 1})"), Json({{"a", 1}}));
  EXPECT_EQ(arguments_value("[1]"), Json("[1]"));
  EXPECT_EQ(arguments_value("{broken"), Json("{broken"));
}

// ---- store ----------------------------------------------------------------------------------

StoredResponse stored(const std::string& text) {
  return StoredResponse{{Message::text("user", text), Message::text("assistant", "ok")}, Json{{"id", "r"}}};
}

TEST(ResponseStore, PutGetReplaceErase) {
  ResponseStore s(1 << 20);
  EXPECT_FALSE(s.get("resp_a"));
  s.put("resp_a", stored("hello"));
  auto a = s.get("resp_a");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->conversation.size(), 2u);
  EXPECT_EQ(a->conversation[0].content, "hello");
  s.put("resp_a", stored("again"));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.get("resp_a")->conversation[0].content, "again");
  EXPECT_EQ(s.bytes(), ResponseStore::estimate_bytes("resp_a", stored("again")));
  EXPECT_TRUE(s.erase("resp_a"));
  EXPECT_FALSE(s.erase("resp_a"));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.bytes(), 0);
}

TEST(ResponseStore, UnknownIdIsNotFound) {
  ResponseStore s(1 << 20);
  try {
    s.at("resp_missing");
    FAIL() << "no throw";
  } catch (const NotFoundError& e) {
    EXPECT_EQ(e.param(), "previous_response_id");
    EXPECT_NE(std::string(e.what()).find("resp_missing"), std::string::npos);
  }
}

TEST(ResponseStore, ByteCapEvictsLeastRecentlyUsed) {
  const std::string big(1000, 'x');
  const int64_t one = ResponseStore::estimate_bytes("resp_1", stored(big));
  ResponseStore s(3 * one + one / 2);  // room for three
  s.put("resp_1", stored(big));
  s.put("resp_2", stored(big));
  s.put("resp_3", stored(big));
  EXPECT_TRUE(s.get("resp_1"));  // now the most recent; resp_2 is the oldest
  s.put("resp_4", stored(big));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_FALSE(s.get("resp_2"));
  EXPECT_TRUE(s.get("resp_1"));
  EXPECT_TRUE(s.get("resp_3"));
  EXPECT_TRUE(s.get("resp_4"));
  EXPECT_LE(s.bytes(), s.max_bytes());
  s.put("resp_huge", stored(std::string(10 * one, 'y')));  // larger than the cap: not kept
  EXPECT_FALSE(s.get("resp_huge"));
  EXPECT_EQ(s.size(), 3u);
}

// ---- stream ---------------------------------------------------------------------------------

sched::Delta content(const std::string& s) { return sched::Delta{0, s, "", {}, {}}; }
sched::Delta reasoning(const std::string& s) { return sched::Delta{0, "", s, {}, {}}; }
sched::Delta call(int index, const std::string& id, const std::string& name, const std::string& args) {
  sched::Delta d;
  d.tool_calls.push_back(ToolCallDelta{index, id, name, args});
  return d;
}

struct Script {
  std::vector<Json> events;
  std::vector<std::string> types;
};

Script run(ResponseStream& s, const std::vector<sched::Event>& script) {
  Script r;
  r.events = s.start();
  for (const auto& e : script) {
    for (auto& j : s.on_event(e)) r.events.push_back(std::move(j));
  }
  for (size_t i = 0; i < r.events.size(); ++i) {
    r.types.push_back(r.events[i]["type"].get<std::string>());
    EXPECT_EQ(r.events[i]["sequence_number"], i) << r.types.back();
  }
  return r;
}

ResponseStream make_stream() {
  Json echo = parse_responses_request(Json::parse(R"({"input": "x", "max_output_tokens": 50})")).echo;
  return ResponseStream(response_skeleton("resp_test", "tiny", echo, std::string("Be nice."), std::nullopt, true));
}

TEST(ResponsesStream, ReasoningTextAndToolCall) {
  ResponseStream s = make_stream();
  sched::Finish fin{0, "tool_calls", "", {ToolCall{"call_1", "get_weather", Json(R"({"city": "Paris"})")}}, 9};
  Script r = run(s, {reasoning("Let me"), reasoning(" think."), content("\n\n"), content("Hello"), content(" world"),
                  call(0, "call_1", "get_weather", R"({"city")"), call(0, "", "", R"(: "Paris"})"), fin,
                  sched::Usage{12, 9, 4, 0}});
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(r.types, expected);

  // Deltas concatenate to the done texts, per output index.
  std::map<int, std::string> deltas, done;
  for (const auto& e : r.events) {
    const std::string t = e["type"];
    if (t.ends_with(".delta")) deltas[e["output_index"]] += e["delta"].get<std::string>();
    if (t == "response.output_text.done" || t == "response.reasoning_text.done") done[e["output_index"]] = e["text"];
    if (t == "response.function_call_arguments.done") done[e["output_index"]] = e["arguments"];
  }
  EXPECT_EQ(done[0], "Let me think.");
  EXPECT_EQ(done[1], "\n\nHello world");
  EXPECT_EQ(done[2], R"({"city": "Paris"})");
  EXPECT_EQ(deltas, done);

  EXPECT_EQ(r.events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(r.events[0]["response"]["id"], "resp_test");
  const Json& added_call = r.events[16]["item"];
  EXPECT_EQ(added_call["type"], "function_call");
  EXPECT_EQ(added_call["arguments"], "");
  EXPECT_EQ(added_call["call_id"], "call_1");
  EXPECT_EQ(added_call["name"], "get_weather");

  const Json& resp = r.events.back()["response"];
  EXPECT_EQ(resp, s.response());
  EXPECT_EQ(resp["status"], "completed");
  EXPECT_EQ(resp["model"], "tiny");
  EXPECT_EQ(resp["instructions"], "Be nice.");
  EXPECT_EQ(resp["max_output_tokens"], 50);
  EXPECT_EQ(resp["incomplete_details"], nullptr);
  EXPECT_EQ(resp["usage"], Json::parse(R"({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 21})"));
  ASSERT_EQ(resp["output"].size(), 3u);
  const Json& rs = resp["output"][0];
  EXPECT_EQ(rs["type"], "reasoning");
  EXPECT_TRUE(rs["id"].get<std::string>().starts_with("rs_"));
  EXPECT_EQ(rs["content"], Json::parse(R"([{"type": "reasoning_text", "text": "Let me think."}])"));
  const Json& msg = resp["output"][1];
  EXPECT_TRUE(msg["id"].get<std::string>().starts_with("msg_"));
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"], Json::parse(R"([{"type": "output_text", "text": "\n\nHello world", "annotations": [],
    "logprobs": []}])"));
  const Json& fc = resp["output"][2];
  EXPECT_TRUE(fc["id"].get<std::string>().starts_with("fc_"));
  EXPECT_EQ(fc["call_id"], "call_1");
  EXPECT_EQ(fc["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(fc["status"], "completed");
  // Items in the done events equal the final ones.
  EXPECT_EQ(r.events[8]["item"], rs);
  EXPECT_EQ(r.events[15]["item"], msg);
  EXPECT_EQ(r.events[20]["item"], fc);

  Message m = s.output_message();
  EXPECT_EQ(m.role, "assistant");
  EXPECT_EQ(m.content, "\n\nHello world");
  EXPECT_EQ(m.reasoning_content, "Let me think.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].id, "call_1");
  EXPECT_EQ(m.tool_calls[0].arguments, Json({{"city", "Paris"}}));
}

TEST(ResponsesStream, LengthIsIncomplete) {
  ResponseStream s = make_stream();
  Script r = run(s, {content("Once"), content(" upon"), sched::Finish{0, "length", "", {}, 2}, sched::Usage{5, 2, 0, 0}});
  EXPECT_EQ(r.types.back(), "response.incomplete");
  EXPECT_EQ(s.status(), "incomplete");
  EXPECT_EQ(s.response()["incomplete_details"], Json::parse(R"({"reason": "max_output_tokens"})"));
  EXPECT_EQ(s.response()["output"][0]["content"][0]["text"], "Once upon");
  EXPECT_EQ(s.response()["output"][0]["status"], "incomplete");  // the message was cut short
  EXPECT_TRUE(s.finished());
}

TEST(ResponsesStream, WhitespaceOnlyAnswerIsKeptAndSpaceBeforeCallsDropped) {
  ResponseStream only = make_stream();
  run(only, {content("\n"), sched::Finish{0, "stop", "", {}, 1}, sched::Usage{5, 1, 0, 0}});
  ASSERT_EQ(only.response()["output"].size(), 1u);
  EXPECT_EQ(only.response()["output"][0]["content"][0]["text"], "\n");

  ResponseStream calls = make_stream();
  Script r = run(calls, {content("\n"), call(0, "c0", "f", "{}"), content("\n"), call(1, "c1", "g", "{\"a\": 1}"),
                      sched::Finish{0, "tool_calls", "", {}, 9}, sched::Usage{5, 9, 0, 0}});
  const Json& out = calls.response()["output"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["name"], "f");
  EXPECT_EQ(out[1]["name"], "g");
  EXPECT_EQ(out[1]["arguments"], "{\"a\": 1}");
  EXPECT_EQ(calls.output_message().tool_calls.size(), 2u);
}

TEST(ResponsesStream, CallsOnlyInFinishStillReachTheOutput) {
  ResponseStream s = make_stream();
  run(s, {sched::Finish{0, "tool_calls", "", {ToolCall{"c9", "f", Json("{}")}}, 3}, sched::Usage{5, 3, 0, 0}});
  ASSERT_EQ(s.response()["output"].size(), 1u);
  EXPECT_EQ(s.response()["output"][0]["call_id"], "c9");
}

TEST(ResponsesStream, FailureAfterStart) {
  ResponseStream s = make_stream();
  Script r = run(s, {content("Hi")});
  auto failed = s.on_failure(sched::Failure{500, "boom"});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["type"], "response.failed");
  EXPECT_EQ(failed[0]["sequence_number"], r.events.size());
  EXPECT_EQ(failed[0]["response"]["status"], "failed");
  EXPECT_EQ(failed[0]["response"]["error"]["message"], "boom");
  EXPECT_EQ(s.status(), "failed");
}

TEST(ResponsesStream, LogprobsTravelWithText) {
  ResponseStream s = make_stream();
  sched::Delta d = content("Hi");
  d.logprobs.push_back(sched::TokenLogprob{7, "Hi", -0.5f, {{7, -0.5f}, {8, -2.0f}}, {"Hi", "Ho"}});
  Script r = run(s, {d, sched::Finish{0, "stop", "", {}, 1}, sched::Usage{5, 1, 0, 0}});
  const Json& delta = r.events[4];
  ASSERT_EQ(delta["type"], "response.output_text.delta");
  ASSERT_EQ(delta["logprobs"].size(), 1u);
  EXPECT_EQ(delta["logprobs"][0]["token"], "Hi");
  EXPECT_EQ(delta["logprobs"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(s.response()["output"][0]["content"][0]["logprobs"], delta["logprobs"]);
}

TEST(ResponsesStream, SseFraming) {
  std::string text = to_sse({Json{{"type", "response.created"}, {"sequence_number", 0}}});
  EXPECT_EQ(text, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n");
}

}  // namespace
}  // namespace mlxcpp::server::responses
