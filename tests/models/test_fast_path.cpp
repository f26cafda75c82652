// The CPU fast path (our kernels, block primitives) against parity mode (stock MLX, which is
// bit-identical to mlx-lm): same checkpoint, same teacher-forced tokens, prefill + cached decode.
#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "fast_vs_parity.h"
#include "golden_model.h"
#include "models/model.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

// Logits [T, vocab] for prompt (one prefill) then each further token (cached decode).
mx::array teacher_forced(const Model& m, const std::vector<int>& prompt, const std::vector<int>& rest) {
  auto caches = m.make_cache();
  std::vector<mx::array> rows;
  auto ids = mx::array(prompt.data(), {1, static_cast<int>(prompt.size())}, mx::int32);
  auto logits = m(ids, &caches);
  rows.push_back(mx::reshape(logits, {-1, logits.shape(2)}));
  for (int t : rest) {
    logits = m(mx::array(&t, {1, 1}, mx::int32), &caches);
    rows.push_back(mx::reshape(logits, {-1, logits.shape(2)}));
    mx::eval(rows.back());
  }
  return mx::concatenate(rows, 0);
}


// Every checkpoint with a fast mode (block primitives, or stock ops + our quantized matmuls).
class FastPath : public ::testing::TestWithParam<std::string> {};
// The checkpoints whose family decodes through the block primitives.
class FastPathBlocks : public ::testing::TestWithParam<std::string> {};
// The mixture-of-experts checkpoints.
class FastPathMoe : public ::testing::TestWithParam<std::string> {};
// Checkpoints with gated-DeltaNet (recurrent) layers.
class FastPathRecurrent : public ::testing::TestWithParam<std::string> {};

TEST_P(FastPath, MatchesParityOnTeacherForcedTokens) {
  auto golden = model_golden(GetParam());
  auto prompt = to_ints(golden.at("prompt"));
  auto rest = to_ints(golden.at("decode_tokens"));
  auto parity = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
  auto ref = teacher_forced(*parity.model, prompt, rest);
  auto lp = mx::subtract(ref, mx::logsumexp(ref, -1, true));
  const float scale = mx::max(mx::abs(ref)).item<float>();
  // A checkpoint whose random router has a near-tie that int16-rounded activations flip (one expert
  // swapped in one token; float products agree to 2e-5): the strict bounds below hold with float
  // products; with int16 ones the quality bounds (mean KL <= 1e-3, top-1 >= 97% here).
  const bool near_tie = GetParam() == "qwen3-next-q4g64";
  if (near_tie) {
    auto fast = load_model(tiny_model_dir(GetParam()));
    const auto a = agreement(ref, teacher_forced(*fast.model, prompt, rest));
    EXPECT_LE(a.mean_kl, 1e-3f);
    EXPECT_GE(a.top1, 0.97f);
  }
  // The fast path with a float32 KV cache, then with the default float16 one.
  for (bool kv_f16 : {false, true}) {
    ModelOptions opts;
    opts.kernels.kv_f16 = kv_f16;
    opts.kernels.int_dot = !near_tie;
    auto fast = load_model(tiny_model_dir(GetParam()), opts);
    auto got = teacher_forced(*fast.model, prompt, rest);
    // KL(parity || fast) per token, and top-1 agreement.
    auto lq = mx::subtract(got, mx::logsumexp(got, -1, true));
    float kl = mx::mean(mx::sum(mx::multiply(mx::exp(lp), mx::subtract(lp, lq)), -1)).item<float>();
    float agree = mx::mean(mx::astype(mx::equal(mx::argmax(ref, -1), mx::argmax(got, -1)), mx::float32)).item<float>();
    const float diff = max_abs_diff(got, ref);
    std::printf("%s kv_f16=%d: mean KL %.3g, max |diff| %.3g (logit scale %.3g)\n", GetParam().c_str(), kv_f16, kl,
                diff, scale);
    // Prefill and decode both round activations to int16 levels (the prefill GEMM per group, the
    // decode GEMV per row): <= 2e-7 here except the tiny Gemma 3 (1.7e-6; 4e-7 with float prefill).
    // A float16 cache rounds each key and value to 11 significant bits on top: <= 1.1e-7 here
    // except the tiny Gemma 3 (2.0e-5; its random weights make large keys and sharp attention).
    EXPECT_LE(kl, kv_f16 ? 5e-5f : 5e-6f) << "kv_f16=" << kv_f16;
    EXPECT_GE(agree, 0.97f) << "kv_f16=" << kv_f16;  // 36 tokens of a random tiny model: near-ties may flip one
    // Logit-level closeness too: the decode GEMVs round activations to int16 levels (see
    // test_qmatmul's stated bound), so a little looser than float summation order alone.
    EXPECT_LE(diff, (kv_f16 ? 5e-3f : 2e-3f) * std::max(scale, 1.f)) << "kv_f16=" << kv_f16;
  }
}

// Every layer in one decoder-stack primitive: a decode step is a handful of MLX ops.
TEST_P(FastPathBlocks, DecodeIsOneDecoderStack) {
  auto fast = load_model(tiny_model_dir(GetParam()));
  auto caches = fast.model->make_cache();
  std::vector<int> prompt{5, 6, 7, 8};
  mx::eval((*fast.model)(mx::array(prompt.data(), {1, 4}, mx::int32), &caches));
  int t = 9;
  auto logits = (*fast.model)(mx::array(&t, {1, 1}, mx::int32), &caches);
  auto names = primitive_names(logits);
  EXPECT_TRUE(names.count("MlxcppDecoderStack")) << GetParam();
  EXPECT_FALSE(names.count("MlxcppAttentionBlock") || names.count("MlxcppMlpBlock")) << GetParam();
  EXPECT_FALSE(names.count("QuantizedMatmul")) << "stock quantized matmul left in the graph";
  EXPECT_LE(names.size(), 8u) << GetParam();
}

// A sparse layer's experts run in one primitive of ours (only the chosen experts' rows read),
// beside the fused attention blocks; no stock gather_qmm or quantized matmul is left.
TEST_P(FastPathMoe, ExpertsRunInTheMoePrimitive) {
  auto fast = load_model(tiny_model_dir(GetParam()));
  auto caches = fast.model->make_cache();
  for (int len : {20, 1}) {  // a prompt (80 token/expert pairs), then a decode step
    std::vector<int> ids(len, 7);
    auto logits = (*fast.model)(mx::array(ids.data(), {1, len}, mx::int32), &caches);
    auto names = primitive_names(logits);
    EXPECT_TRUE(names.count("MlxcppMoeGlu")) << GetParam();
    EXPECT_TRUE(names.count("MlxcppAttentionBlock")) << GetParam();
    EXPECT_FALSE(names.count("GatherQMM") || names.count("QuantizedMatmul")) << GetParam();
    mx::eval(logits);
  }
}

// Qwen3.5 / Qwen3-Next: everything between a gated-DeltaNet layer's projections (conv, norms,
// gates, the recurrence) runs as one primitive of ours, the quantized projections through our
// matmuls.
TEST_P(FastPathRecurrent, RecurrenceRunsInOnePrimitive) {
  auto fast = load_model(tiny_model_dir(GetParam()));
  auto caches = fast.model->make_cache();
  for (int len : {20, 1}) {
    std::vector<int> ids(len, 7);
    auto logits = (*fast.model)(mx::array(ids.data(), {1, len}, mx::int32), &caches);
    auto names = primitive_names(logits);
    EXPECT_GE(names.count("MlxcppGatedDeltaCore"), 1u) << GetParam();
    EXPECT_FALSE(names.count("QuantizedMatmul") || names.count("Convolution")) << GetParam();
    mx::eval(logits);
  }
}

// Gemma 4: the donor layers' attention in our block primitive (the KV-shared layers attend over
// their donors' caches with stock ops), every dense MLP in ours, no stock quantized matmul left.
TEST(FastPathGemma4, DonorLayersRunTheAttentionBlock) {
  auto fast = load_model(tiny_model_dir("gemma4-text-q4g64"));
  auto caches = fast.model->make_cache();
  ASSERT_EQ(caches.size(), 4u);
  for (int len : {20, 1}) {
    std::vector<int> ids(len, 7);
    auto logits = (*fast.model)(mx::array(ids.data(), {1, len}, mx::int32), &caches);
    // Distinct primitives (a lending layer's block is reached through its cache outputs too).
    auto prims = distinct_primitives(logits);
    EXPECT_EQ(prims["MlxcppAttentionBlock"], 4u) << len;
    EXPECT_EQ(prims["MlxcppMlpBlock"], 6u) << len;
    EXPECT_FALSE(prims.count("QuantizedMatmul")) << len;
    mx::eval(logits);
  }
}

// Gemma 4's MoE layers: the geglu experts in our MoE primitive, beside the attention blocks.
TEST(FastPathGemma4, MoeExpertsRunInTheMoePrimitive) {
  auto fast = load_model(tiny_model_dir("gemma4-moe-untied-q4g64"));
  auto caches = fast.model->make_cache();
  for (int len : {20, 1}) {
    std::vector<int> ids(len, 7);
    auto logits = (*fast.model)(mx::array(ids.data(), {1, len}, mx::int32), &caches);
    auto names = primitive_names(logits);
    EXPECT_TRUE(names.count("MlxcppMoeGlu")) << len;
    EXPECT_TRUE(names.count("MlxcppAttentionBlock")) << len;
    EXPECT_FALSE(names.count("GatherQMM") || names.count("QuantizedMatmul")) << len;
    mx::eval(logits);
  }
}

// KV caches are written in place: a pipelined decode (each step built before the previous one
// is evaluated, as the generator does) copies no cache buffer.
TEST_P(FastPathBlocks, PipelinedDecodeWritesCachesInPlace) {
  auto fast = load_model(tiny_model_dir(GetParam()));
  ASSERT_TRUE(fast.kernels);
  auto caches = fast.model->make_cache();
  std::vector<int> prompt{5, 6, 7, 8};
  auto logits = (*fast.model)(mx::array(prompt.data(), {1, 4}, mx::int32), &caches);
  std::vector<mx::array> state{logits};
  for (const auto& c : caches)
    for (auto& a : c->state_to_eval()) state.push_back(a);
  mx::eval(state);
  for (int i = 0; i < 300; ++i) {  // crosses a 256-row growth of the buffers
    auto y = mx::reshape(mx::argmax(mx::slice(logits, {0, logits.shape(1) - 1, 0}, logits.shape()), -1), {1, 1});
    logits = (*fast.model)(mx::astype(y, mx::int32), &caches);
    mx::async_eval(logits);
  }
  mx::eval(logits);
  EXPECT_EQ(fast.kernels->cache_copies(), 0) << GetParam();
}

// A snapshot handed out by state() stays intact: the next step copies that layer's buffers
// once (and only that layer's), then writes in place again.
TEST_P(FastPathBlocks, CacheSnapshotSurvivesInPlaceDecode) {
  auto fast = load_model(tiny_model_dir(GetParam()));
  auto caches = fast.model->make_cache();
  std::vector<int> prompt{5, 6, 7, 8};
  auto logits = (*fast.model)(mx::array(prompt.data(), {1, 4}, mx::int32), &caches);
  mx::eval(logits);
  auto snap = caches[0]->state();
  mx::eval(snap);
  auto before = mx::copy(snap[0]);
  mx::eval(before);
  for (int t : {9, 10}) mx::eval((*fast.model)(mx::array(&t, {1, 1}, mx::int32), &caches));
  EXPECT_EQ(max_abs_diff(snap[0], before), 0.f);
  EXPECT_EQ(fast.kernels->cache_copies(), 2) << "keys + values of layer 0, once";
}

TEST(FastPathIsa, EveryIsaMatchesParity) {
  // The block primitives on the scalar and AVX2 paths too (forced where AVX-512 exists).
  for (const char* name : {"llama-q4g64", "qwen2-q8g32", "llama-q2g32"}) {
    auto golden = model_golden(name);
    auto prompt = to_ints(golden.at("prompt"));
    auto rest = to_ints(golden.at("decode_tokens"));
    auto parity = load_model(tiny_model_dir(name), ModelOptions::parity_mode());
    auto ref = teacher_forced(*parity.model, prompt, rest);
    for (auto isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
      if (!kernels::isa_supported(isa)) continue;
      ModelOptions opts;
      opts.kernels.isa = isa;
      auto fast = load_model(tiny_model_dir(name), opts);
      auto got = teacher_forced(*fast.model, prompt, rest);
      float scale = mx::max(mx::abs(ref)).item<float>();
      EXPECT_LE(max_abs_diff(got, ref), 1e-3f * std::max(scale, 1.f)) << name << " " << kernels::isa_name(isa);
    }
  }
}

// The affine-quantized checkpoints the block primitives cover end to end.
const std::vector<std::string> kBlockModels = {
    "llama-q4g64", "llama-q8g32", "llama-q2g32", "llama-q3g128", "llama-q5g64", "llama-q6g32", "llama-mixed",
    "llama3rope-untied-q4g64", "qwen2-q4g64", "qwen2-q8g32", "smollm3-q4g64",
    // Qwen3: per-head q/k norms (plain RMSNorm weights) in the blocks.
    "qwen3-q4g64", "qwen3-untied-q8g32",
    // Phi-3: fused qkv/gate_up split at load; longrope (input scale, long factors) on 24 of 32 dims.
    "phi3-q4g64", "phi3-longrope-q4g64",
    // MiniCPM: scaled residual branches in the blocks (embedding and logit scales around them).
    "minicpm-q4g64", "minicpm-longrope-q8g32",
    // Granite: attention_multiplier as the blocks' scale, scaled residuals (embedding/logit scales around).
    "granite-q4g64",
    // OLMo 2: no input norms, q/k norms over all heads, post-norms on both branches.
    "olmo2-q4g64",
    // Ministral 3 (mistral3's text model): queries * the llama-4 attention temperature after RoPE.
    "mistral3-q4g64",
    // Gemma 3: q/k norms, post-norms, GeGLU, sliding-window layers (window 8) in the blocks.
    "gemma3-text-q4g64",
    // GLM-4: q/k/v biases, input and output norms on both branches, traditional RoPE on half of each head.
    "glm4-q4g64",
    // mxfp4: its linear layers as the same values in affine 8-bit (kernels/microscaled.h).
    "llama-mxfp4"};
// Mixture-of-experts checkpoints: fused attention blocks, the experts through our MoE primitive.
const std::vector<std::string> kMoeModels = {"qwen3-moe-q4g64", "qwen3-moe-mixed-q8g32", "glm4-moe-q4g64"};
// Checkpoints whose fast mode runs stock ops for their quantized layers: nvfp4 (groups of 16) and
// mxfp8 (e4m3 values) have no kernel of ours.
const std::vector<std::string> kStockOpModels = {"llama-nvfp4", "llama-mxfp8"};
// Gated-DeltaNet layers (our recurrence primitive) with gated attention; MoE with a gated shared expert.
const std::vector<std::string> kRecurrentModels = {"qwen3_5-q4g64", "qwen3_5-moe-q4g64", "qwen3-next-q4g64"};
// Gemma 4: the donor layers' attention blocks, the MLP blocks and (MoE) our experts primitive, the
// KV-shared layers' attention as stock ops. The MoE checkpoint in bf16 (float linears): its q4g64
// twin's routers have near-ties in parity mode itself (the 4th and 5th experts' scores 2.8e-6
// apart at decode step 29, 1.2e-5 at prompt token 18), which the fast path's int16-rounded
// activations flip (mean KL 5.5e-3 as the cache carries it on; its routing is checked by
// FastPathGemma4.MoeExpertsRunInTheMoePrimitive and BatchParity/gemma4_moe_join_leave).
const std::vector<std::string> kGemma4Models = {"gemma4-text-q4g64", "gemma4-moe-untied-bf16"};

std::vector<std::string> all_fast_models() {
  auto v = kBlockModels;
  v.insert(v.end(), kStockOpModels.begin(), kStockOpModels.end());
  v.insert(v.end(), kMoeModels.begin(), kMoeModels.end());
  v.insert(v.end(), kRecurrentModels.begin(), kRecurrentModels.end());
  v.insert(v.end(), kGemma4Models.begin(), kGemma4Models.end());
  return v;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (auto& c : s) if (c == '-') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, FastPath, ::testing::ValuesIn(all_fast_models()), param_name);
INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, FastPathBlocks, ::testing::ValuesIn(kBlockModels), param_name);
INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, FastPathMoe, ::testing::ValuesIn(kMoeModels), param_name);
INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, FastPathRecurrent, ::testing::ValuesIn(kRecurrentModels), param_name);

}  // namespace
