// Perplexity as llama-perplexity measures it (generate/perplexity.h) against the same measure
// computed with mlx-lm's models (tools/oracle/perplexity_goldens.py): on tiny checkpoints of a
// dense, a Gemma and an MoE family with random ids, every number bit-identical in parity mode
// (PPL, its error, the running values, KL and top-1 against a base model), the fast path's PPL
// within 0.1%; bad input is a RequestError naming the problem.
#include <cctype>
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "generate/perplexity.h"
#include "golden_model.h"
#include "test_support.h"

using namespace mlxcpp;
using namespace mlxcpp::test;
using json = nlohmann::json;

namespace {

struct Case {
  json g;
  std::vector<int> tokens;
  std::optional<int> bos;
  PerplexityOptions opts;
};

Case load_case(const std::string& name) {
  Case c;
  c.g = load_golden_json("perplexity/" + name + ".json", "perplexity_goldens.py");
  c.tokens = c.g.at("tokens").get<std::vector<int>>();
  if (!c.g.at("bos").is_null()) c.bos = c.g.at("bos").get<int>();
  c.opts.ctx = c.g.at("ctx").get<int>();
  return c;
}

void expect_exact(const PerplexityResult& r, const json& g) {
  EXPECT_EQ(r.chunks, g.at("chunks").get<int>());
  EXPECT_EQ(r.scored, g.at("scored").get<long>());
  EXPECT_EQ(r.ppl, g.at("ppl").get<double>());
  EXPECT_EQ(r.ppl_error, g.at("ppl_error").get<double>());
  EXPECT_EQ(r.nll.mean, g.at("nll").get<double>());
  EXPECT_EQ(r.nll.error, g.at("nll_error").get<double>());
  EXPECT_EQ(r.running_ppl, g.at("running_ppl").get<std::vector<double>>());
}

class PerplexityTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(PerplexityTiny, ParityEqualsMlxLmFastWithinATenthOfAPercent) {
  auto c = load_case("tiny_" + GetParam());
  auto parity = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
  expect_exact(perplexity(*parity.model, c.tokens, c.bos, c.opts), c.g);
  auto fast = load_model(tiny_model_dir(GetParam()));
  auto r = perplexity(*fast.model, c.tokens, c.bos, c.opts);
  EXPECT_NEAR(r.ppl / c.g.at("ppl").get<double>(), 1.0, 1e-3);
  EXPECT_EQ(r.scored, c.g.at("scored").get<long>());
}

INSTANTIATE_TEST_SUITE_P(Families, PerplexityTiny,
                         ::testing::Values("llama-q4g64", "gemma3-text-q4g64", "qwen3-moe-q4g64"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return s;
                         });

TEST(Perplexity, KlAndTopOneAgainstABaseEqualMlxLm) {
  auto c = load_case("tiny_kl");
  auto model = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  auto base = load_model(tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  auto r = perplexity(*model.model, c.tokens, c.bos, c.opts, base.model.get());
  expect_exact(r, c.g);
  ASSERT_TRUE(r.kl && r.top1);
  EXPECT_EQ(r.kl->mean, c.g.at("kl").get<double>());
  EXPECT_EQ(r.kl->error, c.g.at("kl_error").get<double>());
  EXPECT_EQ(r.top1->mean, c.g.at("top1").get<double>());
  EXPECT_EQ(r.top1->error, c.g.at("top1_error").get<double>());
  // A model against itself: no divergence, every top token agrees.
  auto same = perplexity(*model.model, c.tokens, c.bos, c.opts, model.model.get());
  EXPECT_EQ(same.kl->mean, 0.0);
  EXPECT_EQ(same.top1->mean, 1.0);
}

TEST(Perplexity, ChunksLimitTheWindowsScored) {
  auto c = load_case("tiny_llama-q4g64");
  auto parity = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  c.opts.chunks = 2;
  int calls = 0;
  auto r = perplexity(*parity.model, c.tokens, c.bos, c.opts, nullptr, [&](int done, int total) {
    ++calls;
    EXPECT_EQ(done, calls);
    EXPECT_EQ(total, 2);
  });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r.chunks, 2);
  ASSERT_EQ(r.running_ppl.size(), 2u);
  const auto running = c.g.at("running_ppl").get<std::vector<double>>();
  EXPECT_EQ(r.running_ppl[1], running[1]);  // the first two windows as in the full run
  EXPECT_EQ(r.ppl, running[1]);
}

void expect_request_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Perplexity, BadInputNamesTheProblem) {
  auto c = load_case("tiny_llama-q4g64");
  auto m = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  const Model& model = *m.model;
  std::vector<int> few(c.tokens.begin(), c.tokens.begin() + 2 * c.opts.ctx - 1);
  expect_request_error([&] { perplexity(model, few, c.bos, c.opts); }, "needs at least 64");
  expect_request_error([&] { perplexity(model, c.tokens, c.bos, {.ctx = 3}); }, "ctx must be at least 4");
  expect_request_error([&] { perplexity(model, c.tokens, c.bos, {.ctx = 32, .chunks = 0}); }, "chunks");
  auto bad = c.tokens;
  bad[5] = model.vocab_size();
  expect_request_error([&] { perplexity(model, bad, c.bos, c.opts); }, "token 5");
  auto gemma = load_model(tiny_model_dir("gemma3-text-q4g64"), ModelOptions::parity_mode());
  if (gemma.model->vocab_size() != model.vocab_size()) {
    expect_request_error([&] { perplexity(model, c.tokens, c.bos, c.opts, gemma.model.get()); }, "vocabulary");
  }
}

}  // namespace
