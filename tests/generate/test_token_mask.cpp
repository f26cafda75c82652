// Sampling under a grammar mask: apply_token_mask on logits, and the Generator constrained by a
// grammar (compiled against SmolLM2's tokenizer, whose single-digit tokens lie inside the tiny
// checkpoint's 512-token vocabulary) emitting only what the grammar allows, greedy and sampled.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include "core/errors.h"
#include "generate/batch_generator.h"
#include "generate/stream_generate.h"
#include "generate/token_mask.h"
#include "golden_model.h"
#include "kernels/kernel_context.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace mx = mlx::core;

namespace mlxcpp {
namespace {

std::vector<uint32_t> mask_of(size_t vocab, std::initializer_list<int> allowed) {
  std::vector<uint32_t> words((vocab + 31) / 32, 0u);
  for (int id : allowed) words[id / 32] |= 1u << (id % 32);
  return words;
}

TEST(TokenMask, ForbiddenLogitsBecomeMinusInfinity) {
  auto logits = mx::reshape(mx::astype(mx::arange(140), mx::float32), {2, 70});
  auto masked = apply_token_mask(logits, mask_of(70, {0, 33, 69}));
  mx::eval(masked);
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 70; ++col) {
      float v = mx::slice(masked, {row, col}, {row + 1, col + 1}).item<float>();
      if (col == 0 || col == 33 || col == 69) EXPECT_EQ(v, row * 70 + col);
      else EXPECT_TRUE(std::isinf(v) && v < 0) << row << "," << col;
    }
  EXPECT_THROW(apply_token_mask(logits, std::vector<uint32_t>(2)), Error);  // 64 < 70
}

// One op for a batch: row 0 masked (words all clear, all set and mixed), row 1 free, row 2 masked
// otherwise; equal to masking each row alone.
TEST(TokenMask, BatchMasksEqualRowByRow) {
  const int V = 100;
  auto logits = mx::reshape(mx::astype(mx::arange(3 * V), mx::float32), {3, V});
  auto m0 = mask_of(V, {1, 2, 40, 99});
  m0[1] = ~0u;  // tokens 32..63 all allowed
  auto m2 = mask_of(V, {0, 64});
  auto got = apply_token_masks(logits, {&m0, nullptr, &m2});
  auto row = [&](int r) { return mx::slice(logits, {r, 0}, {r + 1, V}); };
  auto want = mx::concatenate({apply_token_mask(row(0), m0), row(1), apply_token_mask(row(2), m2)}, 0);
  EXPECT_TRUE(mx::array_equal(got, want, /*equal_nan=*/false).item<bool>());
  EXPECT_THROW(apply_token_masks(logits, {&m0, nullptr}), Error);  // one per row
}

// The fast path's one primitive (MlxcppTokenMask, reading the packed words) gives the stock
// composition's values exactly: random words with all-clear and all-set ones among them, a
// partial last word, a free row; a mask narrower than the logits is refused.
TEST(TokenMask, FastPathPrimitiveEqualsStockOps) {
  const int V = 1000, B = 4;
  auto fast = std::make_shared<const kernels::KernelContext>();
  auto logits = mx::random::normal({B, V}, mx::float32, mx::random::key(5));
  std::vector<std::vector<uint32_t>> m(B);
  uint32_t x = 12345;
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < (V + 31) / 32; ++i) {
      x = x * 1664525u + 1013904223u;
      m[b].push_back(i % 5 == 0 ? 0u : i % 5 == 1 ? ~0u : x);
    }
  }
  auto got = apply_token_masks(logits, {&m[0], nullptr, &m[2], &m[3]}, fast);
  auto want = apply_token_masks(logits, {&m[0], nullptr, &m[2], &m[3]});
  EXPECT_STREQ(got.primitive().name(), "MlxcppTokenMask");
  EXPECT_TRUE(mx::array_equal(got, want, /*equal_nan=*/false).item<bool>());
  auto one = apply_token_mask(logits, m[1], fast);
  EXPECT_STREQ(one.primitive().name(), "MlxcppTokenMask");
  EXPECT_TRUE(mx::array_equal(one, apply_token_mask(logits, m[1]), false).item<bool>());
  const std::vector<uint32_t> narrow(V / 32 - 1, ~0u);
  EXPECT_THROW(apply_token_masks(logits, {&narrow, nullptr, nullptr, nullptr}, fast), Error);
}

TEST(TokenMask, EverySamplerDrawsOnlyAllowedTokens) {
  auto logits = mx::random::normal({1, 100}, mx::float32, mx::random::key(3));
  const auto words = mask_of(100, {7, 40, 41});
  auto masked = apply_token_mask(logits, words);
  auto logprobs = mx::subtract(masked, mx::logsumexp(masked, true));
  for (SamplerParams p : {SamplerParams{}, SamplerParams{.temp = 1.5}, SamplerParams{.temp = 0.8, .top_p = 0.9},
                          SamplerParams{.temp = 1.0, .min_p = 0.05}, SamplerParams{.temp = 1.0, .top_k = 2}}) {
    auto sampler = make_sampler(p);
    mx::random::seed(11);
    for (int i = 0; i < 20; ++i) {
      int id = mx::astype(sampler(logprobs), mx::int32).item<int>();
      EXPECT_TRUE(id == 7 || id == 40 || id == 41) << id;
    }
  }
}

class ConstrainedGenerator : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = std::make_unique<Tokenizer>(Tokenizer::load(test::source_dir() / "models" / "SmolLM2-135M-Instruct"));
  }
  static std::unique_ptr<Tokenizer> tok_;
};
std::unique_ptr<Tokenizer> ConstrainedGenerator::tok_;

TEST_F(ConstrainedGenerator, EmitsOnlyWhatTheGrammarAllows) {
  auto loaded = load_model(test::tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  const int eos = tok_->eos_token_ids().at(0);
  ASSERT_LT(eos, loaded.model->vocab_size());
  TokenEnv env(*tok_, {eos});
  auto grammar = std::make_shared<const Grammar>(env.compile({GrammarKind::kRegex, "[0-9]{1,12}", -1}));
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>{}, std::optional<uint64_t>{1}, std::optional<uint64_t>{2}}) {
    GenerationRequest req;
    req.prompt = {1, 2, 3, 4};
    req.options.max_tokens = 40;
    req.options.grammar = grammar;
    req.eos_ids = {eos};
    req.seed = seed;
    if (seed) req.sampling.temp = 1.0;
    req.processors.repetition_penalty = 1.3f;  // penalties still apply under the mask
    std::vector<int32_t> ids;
    auto stats = stream_generate(*loaded.model, req, [&](const GeneratedToken& t) {
      ids.push_back(t.id);
      return true;
    });
    const auto text = tok_->decode(ids);
    EXPECT_EQ(stats.finish_reason, "stop") << text;
    EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]{1,12}"))) << text;
  }
}

TEST_F(ConstrainedGenerator, ForcedTokensAreFastForwarded) {
  auto loaded = load_model(test::tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  const int eos = tok_->eos_token_ids().at(0);
  TokenEnv env(*tok_, {eos});
  // After the first digit the grammar forces "-7-7" (single-byte tokens, inside 512 ids).
  auto grammar = std::make_shared<const Grammar>(env.compile({GrammarKind::kRegex, "[0-9]-7-7(0|1)", -1}));
  {
    auto m = grammar->matcher();
    ASSERT_TRUE(m.consume(tok_->encode("3", false).at(0)));
    const auto forced = m.forced_tokens();
    ASSERT_GE(forced.size(), 2u);
    ASSERT_EQ(tok_->decode(forced), "-7-7");
  }
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>{}, std::optional<uint64_t>{5}}) {
    GenerationRequest req;
    req.prompt = {9, 8, 7};
    req.options.max_tokens = 20;
    req.options.grammar = grammar;
    req.eos_ids = {eos};
    req.seed = seed;
    if (seed) req.sampling.temp = 1.0;
    std::vector<int32_t> ids;
    auto stats = stream_generate(*loaded.model, req, [&](const GeneratedToken& t) {
      ids.push_back(t.id);
      EXPECT_EQ(t.logprobs.shape(), (mx::Shape{loaded.model->vocab_size()}));
      return true;
    });
    const auto text = tok_->decode(ids);
    EXPECT_EQ(stats.finish_reason, "stop") << text;
    EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]-7-7(0|1)"))) << text;
  }
}

// Batch rows with their own grammars (masks computed on the host while the step's forward runs)
// next to a free row with a penalty processor: each constrained row matches its grammar, and the
// free row's tokens are its tokens alone.
TEST_F(ConstrainedGenerator, BatchRowsWithGrammars) {
  auto loaded = load_model(test::tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  const int eos = tok_->eos_token_ids().at(0);
  TokenEnv env(*tok_, {eos});
  auto digits = std::make_shared<const Grammar>(env.compile({GrammarKind::kRegex, "[0-9]{1,6}", -1}));
  auto words = std::make_shared<const Grammar>(env.compile({GrammarKind::kRegex, "(yes|no)", -1}));
  auto free_row = [] {
    BatchRow row;
    row.prompt = {11, 12, 13, 14};
    LogitsProcessorParams lp;
    lp.repetition_penalty = 1.3f;
    row.processors = make_logits_processors(lp);
    row.max_tokens = 12;
    return row;
  };
  std::vector<int> alone;
  {
    BatchGenerator solo(*loaded.model, {});
    solo.insert(free_row());
    while (!solo.idle()) {
      for (const auto& t : solo.next()) alone.push_back(t.token);
    }
  }
  BatchGenerator gen(*loaded.model, {});
  std::map<RowId, std::pair<std::string, std::vector<int32_t>>> rows;
  for (const auto& [re, grammar] : {std::pair{"[0-9]{1,6}", digits}, std::pair{"(yes|no)", words}}) {
    BatchRow row;
    row.prompt = {5, 6, 7};
    row.grammar = grammar;
    row.max_tokens = 20;
    rows[gen.insert(std::move(row))] = {re, {}};
  }
  const RowId free_id = gen.insert(free_row());
  std::vector<int> together;
  size_t open = rows.size();
  while (!gen.idle()) {
    for (const auto& t : gen.next()) {
      if (t.row == free_id) {
        together.push_back(t.token);
        continue;
      }
      auto& [re, ids] = rows.at(t.row);
      ASSERT_FALSE(t.length) << "row " << t.row << " did not end: " << tok_->decode(ids);
      if (t.token == eos) {
        gen.remove({t.row});
        --open;
        EXPECT_TRUE(std::regex_match(tok_->decode(ids), std::regex(re))) << tok_->decode(ids);
      } else {
        ids.push_back(t.token);
      }
    }
  }
  EXPECT_EQ(open, 0u);
  EXPECT_EQ(together, alone);
}

// A row whose grammar fails (here its sampler ignores the mask and picks a letter under a digits
// grammar: the matcher rejects it) leaves the batch with the error on that token, which is never
// shown; the rows beside it run on as if it had not been there.
TEST_F(ConstrainedGenerator, FailingGrammarRowLeavesWithItsError) {
  auto loaded = load_model(test::tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  const int eos = tok_->eos_token_ids().at(0);
  TokenEnv env(*tok_, {eos});
  auto digits = std::make_shared<const Grammar>(env.compile({GrammarKind::kRegex, "[0-9]{1,6}", -1}));
  const int letter = tok_->encode("x", false).at(0);
  ASSERT_LT(letter, loaded.model->vocab_size());
  auto digits_row = [&] {
    BatchRow row;
    row.prompt = {5, 6, 7};
    row.grammar = digits;
    row.max_tokens = 20;
    return row;
  };
  auto run = [&](bool with_rogue) {
    BatchGenerator gen(*loaded.model, {});
    std::optional<RowId> rogue;
    if (with_rogue) {
      BatchRow row = digits_row();
      row.sampler = [letter](const mx::array&) { return mx::array({static_cast<uint32_t>(letter)}, mx::uint32); };
      rogue = gen.insert(std::move(row));
    }
    const RowId good = gen.insert(digits_row());
    std::vector<int> good_tokens;
    std::vector<BatchToken> rogue_tokens;
    for (int guard = 0; !gen.idle() && guard < 100; ++guard) {
      for (auto& t : gen.next()) {
        if (rogue && t.row == *rogue) {
          rogue_tokens.push_back(t);
        } else if (t.row == good) {
          if (t.token == eos) gen.remove({t.row});
          else good_tokens.push_back(t.token);
        }
      }
    }
    EXPECT_TRUE(gen.idle());
    return std::pair{good_tokens, rogue_tokens};
  };
  const auto alone = run(false).first;
  EXPECT_TRUE(std::regex_match(tok_->decode(alone), std::regex("[0-9]{1,6}"))) << tok_->decode(alone);
  const auto [beside, rogue] = run(true);
  EXPECT_EQ(beside, alone);
  ASSERT_EQ(rogue.size(), 1u);
  EXPECT_EQ(rogue[0].token, letter);
  ASSERT_TRUE(rogue[0].error.has_value());
  EXPECT_NE(rogue[0].error->find("failed at token"), std::string::npos) << *rogue[0].error;
}

}  // namespace
}  // namespace mlxcpp
