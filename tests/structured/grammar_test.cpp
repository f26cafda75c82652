// TokenEnv / Grammar / GrammarMatcher (tokenizer/grammar.h) on the real tokenizers: regex and
// Lark grammars, compile errors, forced tokens, rollback and clones, EOS only where accepting,
// the mask sized to the model's vocabulary, and a tokenizer it cannot map failing at load.
#include <gtest/gtest.h>

#include <fstream>

#include "core/errors.h"
#include "structured_util.h"
#include "test_support.h"

namespace mlxcpp {
namespace {

namespace fs = std::filesystem;

class GrammarTest : public ::testing::TestWithParam<std::string> {
 protected:
  const test::TokenizerUnderTest& t() const { return test::structured_tokenizer(GetParam()); }
  Grammar compile(GrammarKind kind, const std::string& text, int ws = -1) const {
    return t().env->compile({kind, text, ws});
  }
  bool accepts(const Grammar& g, const std::string& text) const { return test::feed_text(g, t(), text).accepted; }
};

TEST_P(GrammarTest, RegexAcceptsOnlyItsLanguage) {
  auto g = compile(GrammarKind::kRegex, "[0-9]{3}-[a-z]+");
  EXPECT_TRUE(accepts(g, "123-abc"));
  EXPECT_FALSE(accepts(g, "12-abc"));
  EXPECT_FALSE(accepts(g, "123-"));
  EXPECT_FALSE(accepts(g, "123-abc!"));
}

TEST_P(GrammarTest, LarkGrammar) {
  auto g = compile(GrammarKind::kLark, R"(start: "The answer is " ANSWER "."
ANSWER: "yes" | "no")");
  EXPECT_TRUE(accepts(g, "The answer is yes."));
  EXPECT_TRUE(accepts(g, "The answer is no."));
  EXPECT_FALSE(accepts(g, "The answer is maybe."));
}

TEST_P(GrammarTest, CompileErrorsCarryLlguidanceMessage) {
  try {
    compile(GrammarKind::kJsonSchema, R"({"type": "strnig"})");
    FAIL() << "an unknown type compiled";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("[grammar] JSON schema:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("strnig"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compile(GrammarKind::kJsonSchema, "{not json"), RequestError);
  EXPECT_THROW(compile(GrammarKind::kRegex, "(unclosed"), RequestError);
  EXPECT_THROW(compile(GrammarKind::kLark, "start: undefined_rule"), RequestError);
}

TEST_P(GrammarTest, EosOnlyWhereAccepting) {
  auto g = compile(GrammarKind::kRegex, "ab+");
  auto m = g.matcher();
  const auto eos = t().tok.eos_token_ids().at(0);
  EXPECT_FALSE(mask_allows(m.compute_mask(), eos));
  EXPECT_FALSE(m.is_accepting());
  for (int32_t id : t().tok.encode("ab", false)) ASSERT_TRUE(m.consume(id));
  EXPECT_TRUE(m.is_accepting());
  EXPECT_TRUE(mask_allows(m.compute_mask(), eos));
  ASSERT_TRUE(m.consume(eos));
  EXPECT_TRUE(m.is_stopped());
}

TEST_P(GrammarTest, ForbiddenTokenPutsMatcherInErrorStateThatOnlyEnds) {
  auto g = compile(GrammarKind::kRegex, "[0-9]+");
  auto m = g.matcher();
  const auto ids = t().tok.encode("x", false);
  ASSERT_FALSE(m.consume(ids.at(0)));
  EXPECT_TRUE(m.error().has_value());
  EXPECT_TRUE(m.is_stopped());
  auto mask = m.compute_mask();
  const auto eos = t().tok.eos_token_ids();
  for (int32_t id : eos) mask[id / 32] &= ~(1u << (id % 32));
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; })) << "only EOS is allowed";
  EXPECT_TRUE(m.consume(eos.at(0)));
  EXPECT_FALSE(m.consume(ids.at(0)));
}

TEST_P(GrammarTest, ForcedTokensSpellTheConstant) {
  auto g = compile(GrammarKind::kJsonSchema, R"({"const": "structured output"})", 0);
  auto m = g.matcher();
  const auto forced = m.forced_tokens();
  ASSERT_FALSE(forced.empty());
  EXPECT_EQ(t().tok.decode(forced).substr(0, 1), "\"");
  for (int32_t id : forced) ASSERT_TRUE(m.consume(id));
}

TEST_P(GrammarTest, RollbackAndCloneAreIndependent) {
  auto g = compile(GrammarKind::kRegex, "(cat|dog)s?");
  auto m = g.matcher();
  const auto cat = t().tok.encode("cat", false);
  for (int32_t id : cat) ASSERT_TRUE(m.consume(id));
  auto copy = m.clone();
  m.rollback(cat.size());
  EXPECT_FALSE(m.is_accepting());
  EXPECT_TRUE(copy.is_accepting());
  for (int32_t id : t().tok.encode("dog", false)) ASSERT_TRUE(m.consume(id));
  EXPECT_TRUE(m.is_accepting());
}

TEST_P(GrammarTest, JsonWhitespaceBound) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})";
  auto compact = compile(GrammarKind::kJsonSchema, schema, 0);
  EXPECT_TRUE(accepts(compact, R"({"a":1})"));
  EXPECT_FALSE(accepts(compact, R"({"a": 1})"));
  auto two = compile(GrammarKind::kJsonSchema, schema, 2);
  EXPECT_TRUE(accepts(two, "{ \"a\":  1}"));
  EXPECT_FALSE(accepts(two, "{\"a\":   1}"));
  auto free_ws = compile(GrammarKind::kJsonSchema, schema, -1);
  EXPECT_TRUE(accepts(free_ws, "{\n      \"a\":     1\n}"));
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GrammarTest, ::testing::Values("smollm2", "gemma3"),
                         [](const auto& info) { return info.param; });

TEST(TokenEnv, MaskCoversTheModelVocabulary) {
  const auto& t = test::structured_tokenizer("smollm2");
  const size_t wider = t.tok.vocab_size() + 100;
  TokenEnv env(t.tok, t.tok.eos_token_ids(), wider);
  EXPECT_EQ(env.vocab_size(), wider);
  auto m = env.compile({GrammarKind::kRegex, ".*", -1}).matcher();
  const auto mask = m.compute_mask();
  ASSERT_EQ(mask.size(), (wider + 31) / 32);
  for (size_t id = t.tok.vocab_size(); id < wider; ++id) EXPECT_FALSE(mask_allows(mask, static_cast<int32_t>(id)));
}

// A WordLevel tokenizer with a WordPiece decoder: nothing structured output can map.
Tokenizer wordpiece_tokenizer() {
  const fs::path dir = fs::temp_directory_path() / "mlxcpp_grammar_wordpiece";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << R"({"version":"1.0","added_tokens":[],"normalizer":null,
    "pre_tokenizer":{"type":"Whitespace"},"post_processor":null,
    "decoder":{"type":"WordPiece","prefix":"##","cleanup":true},
    "model":{"type":"WordLevel","vocab":{"[UNK]":0,"a":1,"b":2},"unk_token":"[UNK]"}})";
  auto tok = Tokenizer::load(dir);
  fs::remove_all(dir);
  return tok;
}

TEST(TokenEnv, UnmappableTokenizerFailsAtLoad) {
  auto tok = wordpiece_tokenizer();
  try {
    TokenEnv env(tok, {0});
    FAIL() << "a WordPiece decoder was accepted";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("WordPiece"), std::string::npos) << e.what();
  }
}

TEST(LazyGrammarCache, BuildsTheEnvOnFirstUse) {
  const auto& t = test::structured_tokenizer("smollm2");
  LazyGrammarCache lazy(t.tok, t.tok.eos_token_ids(), 0);
  const GrammarSpec spec{GrammarKind::kRegex, "x+", -1};
  auto g = lazy.get(spec);
  EXPECT_EQ(lazy.get(spec), g);
  EXPECT_THROW(lazy.get({GrammarKind::kRegex, "(", -1}), RequestError);
  LazyGrammarCache unmappable(wordpiece_tokenizer(), {0}, 0);
  for (int i = 0; i < 2; ++i) EXPECT_THROW(unmappable.get(spec), TokenizerError);
}

TEST(GrammarCache, ReusesCompiledGrammarsAndEvicts) {
  const auto& t = test::structured_tokenizer("smollm2");
  GrammarCache cache(t.env, 2);
  const GrammarSpec a{GrammarKind::kRegex, "a+", -1}, b{GrammarKind::kRegex, "b+", -1}, c{GrammarKind::kRegex, "c+", -1};
  auto ga = cache.get(a);
  EXPECT_EQ(cache.get(a), ga);
  cache.get(b);
  cache.get(c);  // evicts a, the least recently used
  EXPECT_NE(cache.get(a), ga);
  EXPECT_THROW(cache.get({GrammarKind::kRegex, "(", -1}), RequestError);
}

}  // namespace
}  // namespace mlxcpp
