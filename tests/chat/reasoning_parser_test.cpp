// ReasoningParser against mlx-lm's TextStateMachine (expected values are its outputs for the
// same texts, finish_reason "length"): whole text, every two-piece split and byte by byte.
#include <gtest/gtest.h>

#include "chat/output_parsers.h"

namespace mlxcpp {
namespace {

struct Split {
  std::string reasoning, content;
};

Split run(const std::vector<std::string>& pieces, bool starts_inside, const ReasoningFormat& fmt = {}) {
  ReasoningParser p(fmt, starts_inside);
  Split s;
  for (const auto& piece : pieces) {
    auto o = p.push(piece);
    s.reasoning += o.reasoning;
    s.content += o.content;
  }
  auto o = p.flush();
  s.reasoning += o.reasoning;
  s.content += o.content;
  return s;
}

void check(const std::string& text, bool starts_inside, const std::string& reasoning, const std::string& content,
           const ReasoningFormat& fmt = {}) {
  SCOPED_TRACE(text + (starts_inside ? " (starts inside)" : ""));
  Split w = run({text}, starts_inside, fmt);
  EXPECT_EQ(w.reasoning, reasoning);
  EXPECT_EQ(w.content, content);
  for (size_t at = 0; at <= text.size(); ++at) {
    Split s = run({text.substr(0, at), text.substr(at)}, starts_inside, fmt);
    EXPECT_EQ(s.reasoning, reasoning) << "split at " << at;
    EXPECT_EQ(s.content, content) << "split at " << at;
    if (::testing::Test::HasFailure()) return;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  Split b = run(bytes, starts_inside, fmt);
  EXPECT_EQ(b.reasoning, reasoning) << "byte by byte";
  EXPECT_EQ(b.content, content) << "byte by byte";
}

TEST(ReasoningParser, ThinkBlockThenAnswerNoNewlineStripped) {
  check("<think>\nLet me think about 2+2. Ünïcödé ✓\n</think>\n\nThe answer is 4.", false,
        "\nLet me think about 2+2. Ünïcödé ✓\n", "\n\nThe answer is 4.");
}

TEST(ReasoningParser, StartsInsideBothWays) {
  check("Let me think.\n</think>\n\nAnswer", true, "Let me think.\n", "\n\nAnswer");
  // Not inside: an end marker in normal text is text (mlx-lm has no transition for it).
  check("Let me think.\n</think>\n\nAnswer", false, "", "Let me think.\n</think>\n\nAnswer");
}

TEST(ReasoningParser, LaterStartMarkerOpensReasoningAgain) {
  check("<think>a</think>b<think>c</think>d", false, "ac", "bd");
}

TEST(ReasoningParser, UnterminatedAtFlush) {
  check("<think>partial thought, cut by max_tokens", false, "partial thought, cut by max_tokens", "");
  check("<think>abc</thi", false, "abc</thi", "");  // a held partial marker is released as text
  check("x <thin", false, "", "x <thin");
  check("", true, "", "");
}

TEST(ReasoningParser, HoldsBackPartialMarkersAndUtf8) {
  ReasoningParser p({}, false);
  auto a = p.push("Hi <th");
  EXPECT_EQ(a.content, "Hi ");
  auto b = p.push("ink>é");
  EXPECT_EQ(b.content, "");
  EXPECT_EQ(b.reasoning, "é");
  std::string euro = "€";  // 3 bytes
  auto c = p.push(euro.substr(0, 2));
  EXPECT_EQ(c.reasoning, "");
  auto d = p.push(euro.substr(2) + "</think>ok");
  EXPECT_EQ(d.reasoning, "€");
  EXPECT_EQ(d.content, "ok");
}

TEST(ReasoningParser, OtherMarkers) {
  ReasoningFormat gemma4{"<|channel>thought", "<channel|>"};
  check("<|channel>thought\nplan<channel|>Answer", false, "\nplan", "Answer", gemma4);
}

TEST(ReasoningParser, PromptOpensReasoning) {
  ReasoningFormat fmt;
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", fmt));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", fmt));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n", fmt));
  EXPECT_TRUE(prompt_opens_reasoning("<think>old</think> user <think>", fmt));
}

}  // namespace
}  // namespace mlxcpp
