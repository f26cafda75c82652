// Drives the streaming output parsers with a text cut into pieces and collects what they give,
// so a test can compare a whole-text parse with every split of the same text.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chat/output_parsers.h"

namespace mlxcpp::test {

struct ToolRun {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> calls;              // parser.calls() after flush
  std::vector<std::string> streamed_names;  // from the first delta of each call
  std::vector<std::string> streamed_ids;
  std::vector<std::string> streamed_args;   // concatenated fragments per call
  std::string protocol_errors;              // deltas out of order, first delta without id/name
};

inline ToolRun run_tool_parser(ToolCallFormat f, const std::vector<std::string>& pieces,
                               const std::vector<nlohmann::ordered_json>& tools = {}) {
  auto parser = make_tool_call_parser(f, "t", tools);
  ToolRun r;
  auto take = [&](ToolCallParser::Out out) {
    r.content += out.content;
    r.reasoning += out.reasoning;
    for (const auto& d : out.calls) {
      if (d.index == static_cast<int>(r.streamed_names.size())) {
        if (d.id.empty() || d.name.empty()) r.protocol_errors += "first delta of call " + std::to_string(d.index) + " lacks id/name; ";
        r.streamed_names.push_back(d.name);
        r.streamed_ids.push_back(d.id);
        r.streamed_args.push_back(d.arguments);
      } else if (d.index == static_cast<int>(r.streamed_names.size()) - 1) {
        if (!d.id.empty() || !d.name.empty()) r.protocol_errors += "later delta repeats id/name; ";
        r.streamed_args.back() += d.arguments;
      } else {
        r.protocol_errors += "delta index " + std::to_string(d.index) + " out of order; ";
      }
    }
  };
  for (const auto& p : pieces) take(parser->push(p));
  take(parser->flush());
  r.calls = parser->calls();
  return r;
}

inline std::vector<std::string> whole(const std::string& s) { return {s}; }
inline std::vector<std::string> split_at(const std::string& s, size_t at) { return {s.substr(0, at), s.substr(at)}; }
inline std::vector<std::string> bytes(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

inline std::string args_text(const ToolCall& c) {
  return c.arguments.is_string() ? c.arguments.get<std::string>() : "<not a string>";
}

// Equal results, and each call's streamed fragments equal its final arguments.
inline void expect_same_run(const ToolRun& want, const ToolRun& got, const std::string& how) {
  EXPECT_EQ(got.protocol_errors, "") << how;
  EXPECT_EQ(got.content, want.content) << how;
  EXPECT_EQ(got.reasoning, want.reasoning) << how;
  ASSERT_EQ(got.calls.size(), want.calls.size()) << how;
  ASSERT_EQ(got.streamed_args.size(), got.calls.size()) << how;
  for (size_t i = 0; i < got.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, want.calls[i].name) << how << " call " << i;
    EXPECT_EQ(got.calls[i].id, want.calls[i].id) << how << " call " << i;
    EXPECT_EQ(args_text(got.calls[i]), args_text(want.calls[i])) << how << " call " << i;
    EXPECT_EQ(got.streamed_args[i], args_text(got.calls[i])) << how << " call " << i;
    EXPECT_EQ(got.streamed_names[i], got.calls[i].name) << how << " call " << i;
    EXPECT_EQ(got.streamed_ids[i], got.calls[i].id) << how << " call " << i;
  }
}

struct ExpectedCall {
  std::string name;
  std::string arguments;
};

// Parses `text` whole, split in two at every byte and byte by byte: every run must give the
// expected content, reasoning and calls.
inline void check_tool_text(ToolCallFormat f, const std::string& text, const std::string& content,
                            const std::vector<ExpectedCall>& calls, const std::vector<nlohmann::ordered_json>& tools = {},
                            const std::string& reasoning = "") {
  SCOPED_TRACE(std::string(to_string(f)) + ": " + text);
  ToolRun w = run_tool_parser(f, whole(text), tools);
  EXPECT_EQ(w.protocol_errors, "");
  EXPECT_EQ(w.content, content);
  EXPECT_EQ(w.reasoning, reasoning);
  ASSERT_EQ(w.calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(w.calls[i].name, calls[i].name);
    EXPECT_EQ(w.calls[i].id, "call_t_" + std::to_string(i));
    EXPECT_EQ(args_text(w.calls[i]), calls[i].arguments);
    ASSERT_EQ(w.streamed_args.size(), calls.size());
    EXPECT_EQ(w.streamed_args[i], calls[i].arguments);
  }
  for (size_t at = 0; at <= text.size(); ++at) {
    expect_same_run(w, run_tool_parser(f, split_at(text, at), tools), "split at " + std::to_string(at));
    if (::testing::Test::HasFailure()) return;  // one failing split is enough to read
  }
  expect_same_run(w, run_tool_parser(f, bytes(text), tools), "byte by byte");
}

}  // namespace mlxcpp::test
