// The generator against mlx-lm's generate_step on the tiny checkpoints: greedy tokens and
// logprobs bit-identical (single prefill and prefill_step_size=8), and seeded sampling
// (temp 0.8, top_p 0.9, top_k 50, seed 42) drawing the same tokens.
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "generate/stream_generate.h"
#include "golden_model.h"
#include "slow_op.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

class GeneratorParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = model_golden(GetParam());
    loaded_ = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
    prompt_ = to_ints(golden_.at("prompt"));
  }
  // Runs the generator for 16 tokens; returns tokens and stacked logprobs.
  std::pair<std::vector<int>, mx::array> run(const SamplerParams& sp, GenerateOptions opts) {
    opts.max_tokens = 16;
    Generator gen(*loaded_.model, prompt_, make_sampler(sp), {}, opts);
    std::vector<int> toks;
    std::vector<mx::array> lps;
    while (auto t = gen.next()) {
      toks.push_back(t->id);
      lps.push_back(t->logprobs);
    }
    return {toks, mx::stack(lps)};
  }

  std::map<std::string, mx::array> golden_;
  LoadedModel loaded_;
  std::vector<int> prompt_;
};

TEST_P(GeneratorParity, GreedyMatchesGenerateStep) {
  auto [toks, lps] = run({}, {});
  EXPECT_EQ(toks, to_ints(golden_.at("gen_tokens")));
  EXPECT_EQ(max_abs_diff(lps, golden_.at("gen_logprobs")), 0.0f);
}

TEST_P(GeneratorParity, ChunkedPrefillMatchesGenerateStep) {
  GenerateOptions opts;
  opts.prefill_step_size = 8;
  auto [toks, lps] = run({}, opts);
  EXPECT_EQ(toks, to_ints(golden_.at("gen_chunked_tokens")));
  EXPECT_EQ(max_abs_diff(lps, golden_.at("gen_chunked_logprobs")), 0.0f);
}

TEST_P(GeneratorParity, SeededSamplingMatchesGenerateStep) {
  mx::random::seed(42);
  SamplerParams sp;
  sp.temp = 0.8;
  sp.top_p = 0.9;
  sp.top_k = 50;
  auto [toks, lps] = run(sp, {});
  EXPECT_EQ(toks, to_ints(golden_.at("gen_sampled_tokens")));
}

TEST_P(GeneratorParity, StreamGenerateStopsAtEosAndMaxTokens) {
  auto expect = to_ints(golden_.at("gen_tokens"));
  GenerationRequest req;
  req.prompt = prompt_;
  req.options.max_tokens = 16;
  std::vector<int> got;
  auto stats = stream_generate(*loaded_.model, req, [&](const GeneratedToken& t) {
    got.push_back(t.id);
    return true;
  });
  EXPECT_EQ(got, expect);
  EXPECT_EQ(stats.finish_reason, "length");
  EXPECT_EQ(stats.generation_tokens, 16);
  EXPECT_EQ(stats.prompt_tokens, 20);
  EXPECT_GT(stats.prompt_tps, 0);
  EXPECT_GT(stats.peak_memory_gb, 0);

  // The 6th greedy token as eos: generation stops before emitting it.
  req.eos_ids = {expect[5]};
  got.clear();
  stats = stream_generate(*loaded_.model, req, [&](const GeneratedToken& t) {
    got.push_back(t.id);
    return true;
  });
  auto first = std::find(expect.begin(), expect.end(), expect[5]) - expect.begin();
  EXPECT_EQ(got, std::vector<int>(expect.begin(), expect.begin() + first));
  EXPECT_EQ(stats.finish_reason, "stop");
}

// Destroyed after a next() (which queues the step after it: mlx-lm's pipelining), a Generator
// waits for that step (see BatchGenerator.DestructionWaitsForTheQueuedStep).
TEST(Generator, DestructionWaitsForTheQueuedStep) {
  auto loaded = load_model(tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  SlowOp slow;
  {
    GenerateOptions go;
    go.max_tokens = 8;
    Generator gen(*loaded.model, {5, 6, 7}, make_sampler({}), {slow.processor()}, go);
    ASSERT_TRUE(gen.next());
    slow.armed->store(true);
    ASSERT_TRUE(gen.next());  // queues the next step, the slow op in it
    ASSERT_FALSE(slow.done->load());
  }
  EXPECT_TRUE(slow.done->load());
}

TEST(Generator, RejectsBadPrompts) {
  auto loaded = load_model(tiny_model_dir("llama-bf16"), ModelOptions::parity_mode());
  EXPECT_THROW(Generator(*loaded.model, {}, make_sampler({}), {}, {}), RequestError);
  EXPECT_THROW(Generator(*loaded.model, {1, 100000}, make_sampler({}), {}, {}), RequestError);
  EXPECT_THROW(Generator(*loaded.model, {-1}, make_sampler({}), {}, {}), RequestError);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, GeneratorParity, ::testing::ValuesIn(tiny_model_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
