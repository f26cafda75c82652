// The quantized KV cache (cache/quantized_kv_cache.h, --kv-bits) against mlx-lm's generate_step
// with kv_bits on tiny checkpoints (tools/oracle/kv_quant_goldens.py): greedy tokens and every
// logprob bit-identical in parity mode — 2, 4 and 8 bits, quantized from the start or between
// prefill chunks (quantized_kv_start 12 with chunks of 8), dense GQA and fused-qkv families —
// and the cache's bytes as mlx-lm counts them; with --max-kv-size the quantized rotating cache
// (ring of 12, keep 4, wrapped several times) against a reference built from mlx-lm's
// RotatingKVCache. The fast path (which attends to a quantized cache
// with stock ops) stays within the usual bounds of parity. Bad settings are RequestErrors.
#include <cmath>

#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include "cache/quantized_kv_cache.h"
#include "cache/quantized_rotating_kv_cache.h"
#include "core/errors.h"
#include "generate/generator.h"
#include "generate/sampler.h"
#include "fast_vs_parity.h"
#include "golden_model.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

struct KvRun {
  std::vector<int> tokens;
  mx::array logprobs = mx::array(0.f);
  int64_t nbytes = 0;
  bool quantized = false;
};

class KvQuant : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto g = load_golden_file("kv_quant", GetParam(), "kv_quant_goldens.py");
    ASSERT_TRUE(g.has_value());
    golden_ = std::move(*g);
    for (int64_t v : int64s(golden_.at("prompt"))) prompt_.push_back(static_cast<int>(v));
    for (int64_t v : int64s(golden_.at("tokens"))) tokens_.push_back(static_cast<int>(v));
    q_ = KvQuantization{std::stoi(golden_.field("kv_bits")), std::stoi(golden_.field("kv_group_size")),
                        std::stoi(golden_.field("quantized_kv_start"))};
  }
  KvRun run(bool parity, int prefill_step = 8) const {
    auto loaded = load_model(tiny_model_dir(golden_.field("model")), parity ? ModelOptions::parity_mode() : ModelOptions{});
    GenerateOptions opts;
    opts.max_tokens = 16;
    opts.prefill_step_size = prefill_step;
    opts.kv_quantization = q_;
    if (const int m = std::stoi(golden_.field("max_kv_size")); m > 0) opts.max_kv_size = m;
    Generator gen(*loaded.model, prompt_, make_sampler({}), {}, opts);
    KvRun r;
    std::vector<mx::array> lps;
    while (auto t = gen.next()) {
      r.tokens.push_back(t->id);
      lps.push_back(t->logprobs);
    }
    r.logprobs = mx::stack(lps);
    r.nbytes = gen.caches()[0]->nbytes();
    r.quantized = dynamic_cast<QuantizedCache*>(gen.caches()[0].get()) != nullptr;
    return r;
  }

  GoldenFile golden_;
  std::vector<int> prompt_, tokens_;
  KvQuantization q_;
};

TEST_P(KvQuant, ParityEqualsGenerateStep) {
  auto r = run(true);
  EXPECT_TRUE(r.quantized);
  EXPECT_EQ(r.tokens, tokens_);
  EXPECT_TRUE(same_array(r.logprobs, golden_.at("logprobs")));
  EXPECT_EQ(r.nbytes, std::stoll(golden_.field("nbytes")));
}

// Fast vs parity while their greedy tokens agree: mean KL <= 1e-3; where they part, parity's
// logprobs of the two tokens are within 0.01. A rotating cache's prompt runs in one chunk in both
// (the fast path may merge a short last chunk into the one before it, and what a ring of 12 has
// evicted depends on the chunks), the parity side then our own parity run.
TEST_P(KvQuant, FastPathWithinBoundsOfParity) {
  const bool rotating = std::stoi(golden_.field("max_kv_size")) > 0;
  const int step = rotating ? 2048 : 8;
  auto r = run(false, step);
  EXPECT_TRUE(r.quantized);
  std::vector<int> tokens = tokens_;
  mx::array want = golden_.at("logprobs");
  if (rotating) {
    auto p = run(true, step);
    tokens = p.tokens;
    want = p.logprobs;
  }
  double kl = 0;
  int n = 0;
  for (; n < static_cast<int>(r.tokens.size()) && r.tokens[n] == tokens[n]; ++n) {
    auto p = mx::slice(want, {n, 0}, {n + 1, want.shape(1)});
    auto q = mx::slice(r.logprobs, {n, 0}, {n + 1, want.shape(1)});
    kl += mx::sum(mx::multiply(mx::exp(p), mx::subtract(p, q))).template item<float>();
  }
  ASSERT_GE(n, 1);
  if (n < static_cast<int>(r.tokens.size())) {
    // The greedy paths part only at a near tie of parity's logprobs (a tiny random model's flat
    // distributions; 4-bit keys magnify the float16 rounding of the fast path's cache).
    const float gap = mx::slice(want, {n, tokens[n]}, {n + 1, tokens[n] + 1}).template item<float>() -
                      mx::slice(want, {n, r.tokens[n]}, {n + 1, r.tokens[n] + 1}).template item<float>();
    EXPECT_LT(gap, 0.01f) << "fast greedy tokens left parity's at step " << n;
  }
  EXPECT_LE(kl / n, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Cases, KvQuant,
                         ::testing::Values("llama_b8_start0", "llama_b4_start12", "llama_b2_start0", "phi3_b4_start0",
                                           "qwen2_b8_start12", "llama_rot12_b8_start0", "llama_rot12_b4_start10"));

TEST(KvQuantSettings, BadValuesAreRequestErrors) {
  EXPECT_THROW(check_kv_quantization({3, 64, 0}), RequestError);
  EXPECT_THROW(check_kv_quantization({4, 16, 0}), RequestError);
  EXPECT_THROW(check_kv_quantization({4, 64, -1}), RequestError);
  EXPECT_NO_THROW(check_kv_quantization({4, 64, 0}));
  // A group size that does not divide head_dim (32 in the tiny llama) names both.
  auto loaded = load_model(tiny_model_dir("llama-q4g64"), ModelOptions::parity_mode());
  GenerateOptions opts;
  opts.max_tokens = 2;
  opts.kv_quantization = KvQuantization{4, 64, 0};
  Generator gen(*loaded.model, {5, 6, 7}, make_sampler({}), {}, opts);
  try {
    gen.next();
    ADD_FAILURE() << "no error";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("kv_group_size 64 does not divide the head dimension 32"), std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace {

// On the fast path a quantized cache lives inside the fused decoder stack: a decode step is one
// MlxcppDecoderStack (no separate quantized attention, no stock quantize), and a pipelined decode
// (each step built before the previous one is evaluated) writes the packed rows in place, across
// a 256-row growth, single caches and a batch of them alike.
TEST(KvQuantFused, DecodeRunsInTheStackWithoutCopies) {
  auto fast = load_model(tiny_model_dir("llama-q4g64"));
  ASSERT_TRUE(fast.kernels);
  for (int bits : {4, 8}) {
    auto caches = fast.model->make_cache();
    maybe_quantize_kv_cache(caches, KvQuantization{bits, 32, 0});
    for (const auto& c : caches) ASSERT_TRUE(dynamic_cast<QuantizedKVCache*>(c.get()));
    std::vector<int> prompt{5, 6, 7, 8, 9, 10, 11};
    auto logits = (*fast.model)(mx::array(prompt.data(), {1, 7}, mx::int32), &caches);
    std::vector<mx::array> state{logits};
    for (const auto& c : caches)
      for (auto& a : c->state_to_eval()) state.push_back(a);
    mx::eval(state);
    const int64_t copies = fast.kernels->cache_copies();
    for (int i = 0; i < 260; ++i) {
      auto y = mx::reshape(mx::argmax(mx::slice(logits, {0, logits.shape(1) - 1, 0}, logits.shape()), -1), {1, 1});
      logits = (*fast.model)(mx::astype(y, mx::int32), &caches);
      if (i == 0) {
        auto names = primitive_names(logits);
        EXPECT_TRUE(names.count("MlxcppDecoderStack")) << bits;
        EXPECT_FALSE(names.count("MlxcppQuantAttention") || names.count("Quantize")) << bits;
      }
      mx::async_eval(logits);
    }
    mx::eval(logits);
    EXPECT_EQ(fast.kernels->cache_copies() - copies, 0) << bits << "-bit";
    EXPECT_EQ(caches[0]->offset(), 267);
    EXPECT_TRUE(std::isfinite(mx::sum(logits).item<float>()));
  }
}

// Gemma 4 with KV sharing: the shared layers attend over their donors' quantized rows. mlx-lm has
// no reference (its RotatingKVCache.to_quantized raises, and a shared layer would hand quantized
// keys to mx.fast.scaled_dot_product_attention): 8-bit keys against the unquantized greedy run
// (model_goldens.py's gen_*), within the bounds above while the tokens agree.
TEST(KvQuantGemma4, SharedLayersReadTheDonorsQuantizedRows) {
  const std::string name = "gemma4-text-q4g64";
  auto golden = model_golden(name);
  auto prompt = to_ints(golden.at("prompt"));
  auto want_tokens = to_ints(golden.at("gen_tokens"));
  auto want = golden.at("gen_logprobs");
  for (bool parity : {true, false}) {  // fast: the donors' blocks run until their caches turn quantized
    auto loaded = load_model(tiny_model_dir(name), parity ? ModelOptions::parity_mode() : ModelOptions{});
    GenerateOptions opts;
    opts.max_tokens = 16;
    opts.kv_quantization = KvQuantization{8, 32, 0};
    Generator gen(*loaded.model, prompt, make_sampler({}), {}, opts);
    std::vector<int> tokens;
    std::vector<mx::array> lps;
    while (auto t = gen.next()) {
      tokens.push_back(t->id);
      lps.push_back(t->logprobs);
    }
    ASSERT_EQ(gen.caches().size(), 4u);  // the donor layers' only
    for (const auto& c : gen.caches()) EXPECT_TRUE(dynamic_cast<QuantizedCache*>(c.get())) << "not quantized";
    auto got = mx::stack(lps);
    double kl = 0;
    int n = 0;
    for (; n < static_cast<int>(tokens.size()) && tokens[n] == want_tokens[n]; ++n) {
      auto p = mx::slice(want, {n, 0}, {n + 1, want.shape(1)});
      auto q = mx::slice(got, {n, 0}, {n + 1, want.shape(1)});
      kl += mx::sum(mx::multiply(mx::exp(p), mx::subtract(p, q))).item<float>();
    }
    ASSERT_GE(n, 4);
    std::printf("%s 8-bit KV (%s): %d tokens agree, mean KL %.3g\n", name.c_str(), parity ? "parity" : "fast", n,
                kl / n);
    EXPECT_LE(kl / n, 1e-3);
  }
}

}  // namespace
