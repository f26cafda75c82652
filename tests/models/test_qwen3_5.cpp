// Qwen3.5 / Qwen3-Next beyond the parity suite: the recurrent (ArraysCache) state it keeps, its
// batch operations, the fast recurrence primitive against mlx-lm's ops, and what loading refuses.
#include <gtest/gtest.h>
#include <mlx/fast.h>
#include <mlx/mlx.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cache/arrays_cache.h"
#include "core/errors.h"
#include "golden_model.h"
#include "kernels/cpu_features.h"
#include "kernels/gated_delta.h"
#include "models/model.h"
#include "nn/gated_delta.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

mx::array ids(const std::vector<int>& v, int begin, int end) {
  return mx::array(v.data() + begin, {1, end - begin}, mx::int32);
}

LayerCaches clone_all(const LayerCaches& caches) {
  LayerCaches out;
  for (const auto& c : caches) out.push_back(c->clone());
  return out;
}

class Qwen35Cache : public ::testing::TestWithParam<std::string> {};

// Continuing from a saved state (a cache cloned mid-prompt) equals the uninterrupted run, bit
// for bit, and leaves the original untouched.
TEST_P(Qwen35Cache, ContinuingFromASavedStateEqualsTheUninterruptedRun) {
  auto m = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
  auto prompt = to_ints(model_golden(GetParam()).at("prompt"));
  auto caches = m.model->make_cache();
  mx::eval((*m.model)(ids(prompt, 0, 12), &caches));
  auto saved = clone_all(caches);
  auto straight = (*m.model)(ids(prompt, 12, 20), &caches);
  auto resumed = (*m.model)(ids(prompt, 12, 20), &saved);
  EXPECT_EQ(max_abs_diff(straight, resumed), 0.0f);
  // Recurrent layers are not trimmable: a state summarizes every token.
  bool recurrent = false;
  for (const auto& c : caches) {
    if (recurrent_state(c.get())) {
      recurrent = true;
      EXPECT_FALSE(c->is_trimmable());
      EXPECT_EQ(c->trim(3), 0);
      EXPECT_EQ(c->offset(), 20);
    }
  }
  EXPECT_TRUE(recurrent);
}

// Two sequences merged into a batch cache, filtered, extended and extracted keep their states.
TEST_P(Qwen35Cache, BatchMergeFilterExtractRoundTrip) {
  auto m = load_model(tiny_model_dir(GetParam()), ModelOptions::parity_mode());
  auto prompt = to_ints(model_golden(GetParam()).at("prompt"));
  auto a = m.model->make_cache(), b = m.model->make_cache();
  mx::eval((*m.model)(ids(prompt, 0, 9), &a));
  mx::eval((*m.model)(ids(prompt, 3, 17), &b));
  for (size_t l = 0; l < a.size(); ++l) {
    auto* ra = dynamic_cast<ArraysCache*>(a[l].get());
    if (!ra) continue;
    auto* rb = dynamic_cast<ArraysCache*>(b[l].get());
    ArraysCache empty(2);
    auto batch = BatchArraysCache::merge({ra, &empty, rb});
    EXPECT_EQ(batch->batch_size(), 3);
    EXPECT_EQ(batch->offsets(), (std::vector<int>{9, 0, 14}));
    // The empty row is zeros; the others are their sequences' states.
    for (int s = 0; s < 2; ++s) {
      auto row0 = dynamic_cast<ArraysCache&>(*batch->extract(0)).slot(s);
      auto row2 = dynamic_cast<ArraysCache&>(*batch->extract(2)).slot(s);
      EXPECT_EQ(max_abs_diff(*row0, *ra->slot(s)), 0.0f);
      EXPECT_EQ(max_abs_diff(*row2, *rb->slot(s)), 0.0f);
      auto row1 = dynamic_cast<ArraysCache&>(*batch->extract(1)).slot(s);
      EXPECT_EQ(mx::max(mx::abs(*row1)).item<float>(), 0.0f);
    }
    batch->filter({2, 0});
    EXPECT_EQ(batch->offsets(), (std::vector<int>{14, 9}));
    auto first = batch->extract(0);
    EXPECT_EQ(max_abs_diff(*dynamic_cast<ArraysCache&>(*first).slot(1), *rb->slot(1)), 0.0f);
    auto other = BatchArraysCache::merge({ra});
    batch->extend(*other);
    EXPECT_EQ(batch->batch_size(), 3);
    EXPECT_EQ(max_abs_diff(*dynamic_cast<ArraysCache&>(*batch->extract(2)).slot(0), *ra->slot(0)), 0.0f);
    EXPECT_THROW(batch->extract(3), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, Qwen35Cache, ::testing::Values("qwen3_5-bf16", "qwen3-next-q4g64"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s) c = (c == '-') ? '_' : c;
                           return s;
                         });

// The fused layer core against mlx-lm's composition (conv, SiLU, normalize_qk, compute_g, the
// per-token ops recurrence, the gated RMSNorm): grouped heads, a conv state and a recurrent state
// carried in, unpadded, right-padded with lengths (row 1 after `len1` tokens) and left-padded (row
// 1's first `pad1` tokens masked), on every ISA. S picks the per-token form (short calls) or the
// chunked one (one partial chunk, or several and a partial last one).
struct CoreCase {
  int S, Dk, Dv, len1, pad1;
};

void expect_core_matches_ops(const CoreCase& cc) {
  const int B = 2, S = cc.S, Hk = 2, Hv = 4, Dk = cc.Dk, Dv = cc.Dv, K = 4, C = 2 * Hk * Dk + Hv * Dv;
  const float eps = 1e-6f;
  auto qkv = randn({B, S, C}, 1), z = randn({B, S, Hv * Dv}, 2);
  auto b = randn({B, S, Hv}, 3), a = randn({B, S, Hv}, 4);
  auto conv_state = randn({B, K - 1, C}, 5), state = randn({B, Hv, Dv, Dk}, 6, 0.1f);
  auto conv_w = randn({C, K, 1}, 7, 0.5f), a_log = randn({Hv}, 8, 0.5f), dt_bias = randn({Hv}, 9);
  auto norm_w = mx::add(mx::array(1.f), randn({Dv}, 10, 0.2f));
  auto lengths = mx::array({S, cc.len1});
  auto right = mx::less(mx::arange(S), mx::reshape(lengths, {B, 1}));
  auto left = mx::greater_equal(mx::arange(S), mx::reshape(mx::array({0, cc.pad1}), {B, 1}));
  enum Pad { kNone, kRight, kLeft };
  for (Pad pad : {kNone, kRight, kLeft}) {
    SCOPED_TRACE("padding " + std::to_string(pad));
    auto m = pad == kNone ? std::nullopt : std::optional<mx::array>(pad == kRight ? right : left);
    auto l = pad == kRight ? std::optional<mx::array>(lengths) : std::nullopt;
    // The reference, op by op as qwen3_5.py's GatedDeltaNet composes them.
    auto x = m ? mx::where(mx::expand_dims(*m, -1), qkv, mx::array(0.f)) : qkv;
    auto xin = mx::concatenate({conv_state, x}, 1);
    auto co = mx::conv1d(xin, conv_w, 1, 0, 1, C);
    co = mx::multiply(co, mx::sigmoid(co));
    auto part = [&](int lo, int hi, int h, int d) {
      return mx::reshape(mx::slice(co, {0, 0, lo}, {B, S, hi}), {B, S, h, d});
    };
    const float inv = 1.f / std::sqrt(static_cast<float>(Dk));
    auto q = mx::multiply(mx::array(inv * inv), mx::fast::rms_norm(part(0, Hk * Dk, Hk, Dk), std::nullopt, 1e-6f * inv * inv));
    auto k = mx::multiply(mx::array(inv), mx::fast::rms_norm(part(Hk * Dk, 2 * Hk * Dk, Hk, Dk), std::nullopt, 1e-6f * inv * inv));
    auto v = part(2 * Hk * Dk, C, Hv, Dv);
    auto g = gated_delta_decay(a_log, a, dt_bias);
    auto [y, st] = gated_delta_ops(q, k, v, g, mx::sigmoid(b), state, m);
    auto zz = mx::reshape(z, {B, S, Hv, Dv});
    auto out = mx::multiply(mx::fast::rms_norm(y, norm_w, eps), mx::multiply(zz, mx::sigmoid(zz)));
    out = mx::reshape(out, {B, S, Hv * Dv});
    auto keep = mx::expand_dims(m ? *m : mx::full({B, S}, true), -1);
    mx::eval({out, st, keep});
    for (auto isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
      if (!kernels::isa_supported(isa)) continue;
      SCOPED_TRACE(kernels::isa_name(isa));
      kernels::KernelOptions ko;
      ko.isa = isa;
      auto ctx = std::make_shared<const kernels::KernelContext>(ko);
      auto got = kernels::gated_delta_core(qkv, z, b, a, conv_state, state, conv_w, a_log, dt_bias, norm_w, m, l,
                                           {Hk, Hv, Dk, Dv, K, eps}, ctx);
      ASSERT_TRUE(got.has_value());
      EXPECT_LT(max_abs_diff((*got)[2], st), 1e-5f) << "state";
      EXPECT_LT(max_abs_diff(mx::where(keep, (*got)[0], mx::array(0.f)), mx::where(keep, out, mx::array(0.f))), 1e-4f)
          << "outputs";
      // The conv state ends at each row's length (the last K - 1 inputs without lengths).
      for (int r = 0; r < B; ++r) {
        const int end = l && r == 1 ? cc.len1 : S;
        auto want = mx::slice(xin, {r, end, 0}, {r + 1, end + K - 1, C});
        EXPECT_EQ(max_abs_diff(mx::slice((*got)[1], {r, 0, 0}, {r + 1, K - 1, C}), want), 0.f) << "row " << r;
      }
    }
  }
}

TEST(GatedDeltaCore, MatchesMlxLmComposition) {
  expect_core_matches_ops({5, 16, 8, 3, 2});     // per token
  expect_core_matches_ops({23, 16, 8, 17, 6});   // one partial chunk
  expect_core_matches_ops({200, 32, 24, 137, 70});  // three chunks and a partial one, vector and scalar columns
  // Not its inputs: float16 falls back to the stock composition.
  const int Hk = 2, Hv = 4, Dk = 16, Dv = 8, K = 4, C = 2 * Hk * Dk + Hv * Dv;
  auto ctx = std::make_shared<const kernels::KernelContext>();
  auto b = randn({1, 3, Hv}, 3);
  EXPECT_FALSE(kernels::gated_delta_core(mx::astype(randn({1, 3, C}, 1), mx::float16), randn({1, 3, Hv * Dv}, 2), b, b,
                                         randn({1, K - 1, C}, 5), randn({1, Hv, Dv, Dk}, 6), randn({C, K, 1}, 7),
                                         randn({Hv}, 8), randn({Hv}, 9), randn({Dv}, 10), std::nullopt, std::nullopt,
                                         {Hk, Hv, Dk, Dv, K, 1e-6f}, ctx)
                   .has_value());
}

// A Hugging Face layout (norms stored as w - 1, [C, 1, K] conv kernels) is refused with the file
// and the tensor named, rather than loaded with its norms misread.
TEST(Qwen35Load, RefusesTheHuggingFaceLayout) {
  namespace fs = std::filesystem;
  const fs::path src = tiny_model_dir("qwen3_5-bf16");
  const fs::path dir = fs::temp_directory_path() / "mlxcpp_qwen35_hf_layout";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json");
  auto weights = mx::load_safetensors((src / "model.safetensors").string()).first;
  const std::string conv = "language_model.model.layers.0.linear_attn.conv1d.weight";
  ASSERT_TRUE(weights.count(conv));
  weights.insert_or_assign(conv, mx::moveaxis(weights.at(conv), 2, 1));
  mx::save_safetensors((dir / "model.safetensors").string(), weights);
  try {
    load_model(dir, ModelOptions::parity_mode());
    FAIL() << "loaded a Hugging Face layout";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(conv), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("convert"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
