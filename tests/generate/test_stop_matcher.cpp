// StopMatcher: stop strings over streamed pieces (vLLM / mlx-lm server semantics: the output
// ends right before the stop string, which is never emitted, even split across pieces).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generate/stop_matcher.h"

namespace mlxcpp {
namespace {

// Feeds `pieces` and returns everything emitted (flushing at the end) and whether it stopped.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  std::string out;
  for (const auto& p : pieces) {
    auto step = m.push(p);
    out += step.text;
    if (step.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.push("Hello").text, "Hello");
  EXPECT_EQ(m.push(", world").text, ", world");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopInsideOnePiece) {
  EXPECT_EQ(run({"STOP"}, {"abc", "deSTOPfg", "never"}), std::make_pair(std::string("abcde"), true));
}

TEST(StopMatcher, StopSpanningPiecesIsNeverHalfPrinted) {
  StopMatcher m({"</end>"});
  auto a = m.push("text </");
  EXPECT_EQ(a.text, "text ");  // "</" could start the stop string: held back
  EXPECT_FALSE(a.stopped);
  auto b = m.push("en");
  EXPECT_EQ(b.text, "");
  auto c = m.push("d> more");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("after").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("a</e").text, "a");
  auto s = m.push("x");
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.text, "</ex");
}

TEST(StopMatcher, HeldTailIsFlushedAtTheEnd) {
  EXPECT_EQ(run({"###"}, {"one #", "#"}), std::make_pair(std::string("one ##"), false));
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  EXPECT_EQ(run({"world", "lo"}, {"hello world"}), std::make_pair(std::string("hel"), true));
  // "abcd" starts before "c" although it completes with the same piece: the output is the
  // longest text that contains no stop string.
  EXPECT_EQ(run({"c", "abcd"}, {"xab", "cd"}), std::make_pair(std::string("x"), true));
}

TEST(StopMatcher, StopAtTheVeryStart) {
  EXPECT_EQ(run({"\n\n"}, {"\n", "\nrest"}), std::make_pair(std::string(""), true));
}

TEST(StopMatcher, OverlappingPrefixKeepsTheLongestCandidate) {
  // "aab" must be found although the stream first shows "aa" then "aab".
  EXPECT_EQ(run({"aab"}, {"xa", "a", "a", "b", "y"}), std::make_pair(std::string("xa"), true));
}

TEST(StopMatcher, MultibyteStopAcrossPieces) {
  // "é" is 0xC3 0xA9; pieces always hold whole characters, the stop spans two of them.
  EXPECT_EQ(run({"éè"}, {"caf", "é", "è!"}), std::make_pair(std::string("caf"), true));
  EXPECT_EQ(run({"éè"}, {"café", "s"}), std::make_pair(std::string("cafés"), false));
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  StopMatcher m({""});
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.push("abc").text, "abc");
}

}  // namespace
}  // namespace mlxcpp
