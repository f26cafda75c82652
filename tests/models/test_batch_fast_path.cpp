// The CPU fast path over batch caches (BatchKVCache: rows of different lengths, left-padded):
// batched decode in fast mode against the same batched steps in parity mode (stock MLX ops)
// and against each row decoded alone in fast mode; through a filter and an extend, with the
// projections of all rows in one weight pass (the GEMV up to kDecodeGemvMaxRows rows, the GEMM
// beyond), and a left-padded batch prefill.
#include <gtest/gtest.h>
#include <mlx/mlx.h>
#include <mlx/primitives.h>

#include <cstdio>
#include <set>
#include <string>

#include "cache/batch_kv_cache.h"
#include "cache/batch_rotating_kv_cache.h"
#include "cache/ragged_kv_cache.h"
#include "cache/rotating_kv_cache.h"
#include "fast_vs_parity.h"
#include "golden_model.h"
#include "kernels/qmatmul.h"
#include "models/model.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

// Every layer through our primitives: one decoder stack, or (mixture-of-experts layers) fused
// attention blocks and the MoE primitive.
bool fused_graph(const std::multiset<std::string>& names) {
  return names.count("MlxcppDecoderStack") || (names.count("MlxcppAttentionBlock") && names.count("MlxcppMoeGlu"));
}

std::vector<int> tokens(int n, int seed, int vocab) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (seed * 7919 + i * 131) % (vocab - 3);
  return t;
}

// The token row `row` is fed at decode step `step` (teacher-forced, the same in every run).
int step_token(int row, int step, int vocab) { return 3 + (row * 509 + step * 37 + 11) % (vocab - 3); }

// Logits of the last position, [B, vocab].
mx::array last(const mx::array& logits) {
  auto s = mx::slice(logits, {0, logits.shape(1) - 1, 0}, logits.shape());
  return mx::reshape(s, {logits.shape(0), logits.shape(2)});
}

LayerCaches prefill_alone(const Model& m, const std::vector<int>& prompt) {
  auto caches = m.make_cache();
  mx::eval(m(mx::array(prompt.data(), {1, static_cast<int>(prompt.size())}, mx::int32), &caches));
  return caches;
}

// The rows' solo caches merged layer by layer (merge_layer_caches: KVCache -> BatchKVCache,
// RotatingKVCache -> BatchRotatingKVCache).
LayerCaches merge(const std::vector<const LayerCaches*>& rows) {
  LayerCaches out;
  for (size_t i = 0; i < rows[0]->size(); ++i) {
    std::vector<const KVCacheBase*> layer;
    for (const auto* r : rows) layer.push_back((*r)[i].get());
    out.push_back(merge_layer_caches(layer));
  }
  return out;
}

// The same as ragged batches (RaggedKVCache, each row's keys in a buffer of its own).
LayerCaches merge_ragged(const std::vector<const LayerCaches*>& rows, bool f16) {
  LayerCaches out;
  for (size_t i = 0; i < rows[0]->size(); ++i) {
    std::vector<const KVCache*> layer;
    for (const auto* r : rows) layer.push_back(&dynamic_cast<const KVCache&>(*(*r)[i]));
    out.push_back(RaggedKVCache::merge(layer, f16));
  }
  return out;
}

BatchCacheBase& batch(const std::unique_ptr<KVCacheBase>& c) { return dynamic_cast<BatchCacheBase&>(*c); }


// Rows of logits gathered step by step, compared at the end: mean KL(ref || got), top-1
// agreement and max |diff| (with the logits' scale).
struct Stats {
  int rows;
  float kl, agree, diff, scale;
};
struct Comparison {
  std::vector<mx::array> ref, got;
  void add(const mx::array& r, const mx::array& g) {
    ref.push_back(r);
    got.push_back(g);
  }
  Stats stats(const char* what, const std::string& model) const {
    auto r = mx::concatenate(ref, 0), g = mx::concatenate(got, 0);
    const Agreement a = agreement(r, g);
    Stats st{r.shape(0), a.mean_kl, a.top1, max_abs_diff(r, g), std::max(mx::max(mx::abs(r)).item<float>(), 1.f)};
    std::printf("%s %s: %d rows, mean KL %.3g, top-1 %.3f, max |diff| %.3g (scale %.3g)\n", model.c_str(), what,
                st.rows, st.kl, st.agree, st.diff, st.scale);
    return st;
  }
  // Within the bounds, or no worse than `base` (the same rows decoded alone in fast mode
  // against the same reference: the single-row fast path's own error on these tokens).
  void check(const char* what, const std::string& model, float kl_max, float agree_min, float diff_rel,
             const Stats* base = nullptr) const {
    const Stats st = stats(what, model);
    EXPECT_LE(st.kl, base ? std::max(kl_max, 1.25f * base->kl) : kl_max) << model << " " << what;
    EXPECT_GE(st.agree, base ? std::min(agree_min, base->agree) : agree_min) << model << " " << what;
    EXPECT_LE(st.diff, base ? std::max(diff_rel * st.scale, 1.25f * base->diff) : diff_rel * st.scale)
        << model << " " << what;
  }
};

// One checkpoint in fast and parity mode, a batch of rows decoded step by step in both, and
// each row's solo fast-mode cache decoded alongside.
class BatchRun {
 public:
  explicit BatchRun(const std::string& name, bool ragged = false)
      : name_(name),
        ragged_(ragged),
        fast_(load_model(tiny_model_dir(name))),
        parity_(load_model(tiny_model_dir(name), ModelOptions::parity_mode())),
        vocab_(fast_.model->vocab_size()) {}

  // Prefills the prompts alone (fast and parity) and makes them the batch, or extends it.
  void add_rows(const std::vector<int>& lengths) {
    std::vector<const LayerCaches*> f, p;
    std::vector<LayerCaches> parity_solo;
    for (int len : lengths) {
      const int id = static_cast<int>(solo_.size());
      auto prompt = tokens(len, id + 1, vocab_);
      solo_.push_back(prefill_alone(*fast_.model, prompt));
      parity_solo.push_back(prefill_alone(*parity_.model, prompt));
      rows_.push_back(id);
    }
    for (size_t i = 0; i < lengths.size(); ++i) {
      f.push_back(&solo_[solo_.size() - lengths.size() + i]);
      p.push_back(&parity_solo[i]);
    }
    auto fb = ragged_ ? merge_ragged(f, fast_.kernels->kv_f16()) : merge(f), pb = merge(p);
    if (fast_batch_.empty()) {
      fast_batch_ = std::move(fb);
      parity_batch_ = std::move(pb);
      return;
    }
    for (size_t i = 0; i < fb.size(); ++i) {
      batch(fast_batch_[i]).extend(batch(fb[i]));
      batch(parity_batch_[i]).extend(batch(pb[i]));
    }
  }

  // Keeps batch rows `keep` (positions in the current batch).
  void filter(const std::vector<int>& keep) {
    for (auto* caches : {&fast_batch_, &parity_batch_})
      for (auto& c : *caches) batch(c).filter(keep);
    std::vector<int> rows;
    for (int k : keep) rows.push_back(rows_[k]);
    rows_ = rows;
  }

  // `steps` batched decode steps; returns the KV-cache copies the fast batched steps after the
  // first made (0: written in place).
  int64_t decode(int steps, Comparison& vs_parity, Comparison* vs_solo, Comparison* solo_vs_parity = nullptr) {
    int64_t copies = 0;
    for (int s = 0; s < steps; ++s, ++step_) {
      std::vector<int> toks;
      for (int r : rows_) toks.push_back(step_token(r, step_, vocab_));
      const int B = static_cast<int>(toks.size());
      auto ids = mx::array(toks.data(), {B, 1}, mx::int32);
      auto got = last((*fast_.model)(ids, &fast_batch_));
      auto names = primitive_names(got);
      EXPECT_TRUE(fused_graph(names)) << name_ << ": batched decode fell back to stock ops";
      EXPECT_FALSE(names.count("ScaledDotProductAttention") || names.count("QuantizedMatmul")) << name_;
      const int64_t before = fast_.kernels->cache_copies();
      mx::eval(got);
      if (s > 0) copies += fast_.kernels->cache_copies() - before;
      auto ref = last((*parity_.model)(ids, &parity_batch_));
      mx::eval(ref);
      vs_parity.add(ref, got);
      for (int b = 0; b < B && vs_solo; ++b) {
        auto one = last((*fast_.model)(mx::array(&toks[b], {1, 1}, mx::int32), &solo_[rows_[b]]));
        mx::eval(one);
        vs_solo->add(one, mx::slice(got, {b, 0}, {b + 1, vocab_}));
        if (solo_vs_parity) solo_vs_parity->add(mx::slice(ref, {b, 0}, {b + 1, vocab_}), one);
      }
    }
    return copies;
  }

  // Each row of the fast batch extracted and run one more (teacher-forced) token: bit for bit
  // its solo cache's next logits.
  void check_extract() {
    for (size_t b = 0; b < rows_.size(); ++b) {
      LayerCaches one;
      for (const auto& c : fast_batch_) one.push_back(batch(c).extract(static_cast<int>(b)));
      const int tok = step_token(rows_[b], step_, vocab_);
      auto ids = mx::array(&tok, {1, 1}, mx::int32);
      auto got = last((*fast_.model)(ids, &one));
      auto ref = last((*fast_.model)(ids, &solo_[rows_[b]]));
      mx::eval(got, ref);
      EXPECT_EQ(max_abs_diff(got, ref), 0.f) << name_ << ": extracted row " << b;
    }
    ++step_;
  }

  const std::string& name() const { return name_; }
  const LayerCaches& fast_batch() const { return fast_batch_; }

 private:
  std::string name_;
  bool ragged_;
  LoadedModel fast_, parity_;
  int vocab_;
  std::vector<LayerCaches> solo_;  // each row's own fast-mode caches (by row id)
  std::vector<int> rows_;          // the batch's row ids, in batch order
  LayerCaches fast_batch_, parity_batch_;
  int step_ = 0;
};

// The fast path's single-row bounds (test_fast_path.cpp, float16 KV cache).
constexpr float kKl = 5e-5f, kAgree = 0.97f, kDiff = 5e-3f;

class BatchFastPath : public ::testing::TestWithParam<std::string> {};

// Three prompts of different lengths, then a filter and an extend; Gemma 3's sliding layers
// (window 8) see rows longer than the window, left-padded.
TEST_P(BatchFastPath, DecodeMatchesParityAndSoloRows) {
  BatchRun run(GetParam());
  Comparison parity, solo, base;
  run.add_rows({13, 5, 150});  // 150 keys: attention splits the row's keys over the pool, as alone
  for (const auto& c : run.fast_batch()) ASSERT_TRUE(dynamic_cast<BatchKVCache*>(c.get())) << "fast mode: plain caches";
  EXPECT_EQ(run.decode(4, parity, &solo, &base), 0) << "batched steps copied their KV caches";
  // Drop the longest row: the others' common left padding is sliced off (the next step copies
  // those buffers once; the steps after it write in place again).
  run.filter({0, 1});
  EXPECT_EQ(run.decode(3, parity, &solo, &base), 0);
  run.add_rows({10});  // a new request joins mid-way
  EXPECT_EQ(run.decode(4, parity, &solo, &base), 0);
  const Stats alone = base.stats("each row alone (fast) vs batched parity", run.name());
  parity.check("batched fast vs batched parity", run.name(), kKl, kAgree, kDiff, &alone);
  // The projections' GEMV treats each row as alone, and so does attention (a row's keys are
  // split as alone): bit for bit a row's solo logits.
  solo.check("batched fast vs each row alone (fast)", run.name(), 0.f, 1.f, 0.f);
}

// The same schedule on ragged batches: no padding, a row joins or leaves without moving the
// others' keys, and each row comes out bit for bit as alone; extracted rows continue as their
// solo caches.
TEST_P(BatchFastPath, RaggedDecodeMatchesSoloRows) {
  BatchRun run(GetParam(), /*ragged=*/true);
  Comparison parity, solo, base;
  run.add_rows({13, 5, 150});
  for (const auto& c : run.fast_batch()) ASSERT_TRUE(dynamic_cast<RaggedKVCache*>(c.get()));
  run.decode(4, parity, &solo, &base);
  run.filter({0, 2});
  run.decode(3, parity, &solo, &base);
  run.add_rows({10, 300});  // joins: a short row and one longer than all others
  run.decode(4, parity, &solo, &base);
  run.filter({3, 1, 0});
  run.decode(2, parity, &solo, &base);
  const Stats alone = base.stats("each row alone (fast) vs batched parity", run.name());
  parity.check("ragged fast vs batched parity", run.name(), kKl, kAgree, kDiff, &alone);
  solo.check("ragged fast vs each row alone (fast)", run.name(), 0.f, 1.f, 0.f);
  run.check_extract();
}

// Prompts of different lengths prefilled together on an empty ragged batch, right-padded and
// in chunks (prepare/finalize, as the batch generator does), then decoded: every real
// position's logits and every step's are bit for bit the prompt's run alone. (Each prompt is
// longer than kI16MaxRows: a shorter one alone takes the few-rows kernel, which rounds
// differently from the GEMM a batch of prompts takes; and a multiple of the attention's query
// block: a block of real and padded queries scores its keys in other groups than the real
// ones alone.)
TEST_P(BatchFastPath, RaggedRightPaddedPrefillMatchesSolo) {
  const std::string name = GetParam();
  auto fast = load_model(tiny_model_dir(name));
  const int vocab = fast.model->vocab_size();
  constexpr int kBlock = kernels::kAttentionQueryBlock;
  static_assert(2 * kBlock > kernels::kI16MaxRows);
  const std::vector<int> lengths{2 * kBlock, 5 * kBlock, 3 * kBlock};
  const int n = 5 * kBlock, chunk = 2 * kBlock, B = 3;
  std::vector<int> ids, padding;
  std::vector<std::vector<int>> prompts;
  for (int b = 0; b < B; ++b) {
    prompts.push_back(tokens(lengths[b], b + 1, vocab));
    ids.insert(ids.end(), prompts[b].begin(), prompts[b].end());
    ids.insert(ids.end(), n - lengths[b], 0);
    padding.push_back(n - lengths[b]);
  }
  LayerCaches rc;
  for (size_t i = 0; i < fast.model->make_cache().size(); ++i) {
    rc.push_back(std::make_unique<RaggedKVCache>(B, fast.kernels->kv_f16()));
    batch(rc.back()).prepare({}, lengths, padding);
  }
  auto x = mx::array(ids.data(), {B, n}, mx::int32);
  std::vector<mx::array> got;
  for (int done = 0; done < n; done += chunk) {
    got.push_back((*fast.model)(mx::slice(x, {0, done}, {B, std::min(n, done + chunk)}), &rc));
    mx::eval(got.back());
  }
  for (auto& c : rc) batch(c).finalize();
  auto all = mx::concatenate(got, 1);
  std::vector<LayerCaches> solo;
  for (int b = 0; b < B; ++b) {
    solo.push_back(fast.model->make_cache());
    const auto& p = prompts[b];
    auto ref = (*fast.model)(mx::array(p.data(), {1, lengths[b]}, mx::int32), &solo[b]);
    mx::eval(ref);
    // Chunks of 16 against one call of the whole prompt: the kernels treat rows alike however
    // they are chunked (test_row_independence), so still bit for bit.
    EXPECT_EQ(max_abs_diff(mx::slice(all, {b, 0, 0}, {b + 1, lengths[b], vocab}), ref), 0.f) << name << " row " << b;
  }
  for (int s = 0; s < 3; ++s) {
    std::vector<int> toks;
    for (int b = 0; b < B; ++b) toks.push_back(step_token(b, s, vocab));
    auto g = last((*fast.model)(mx::array(toks.data(), {B, 1}, mx::int32), &rc));
    mx::eval(g);
    for (int b = 0; b < B; ++b) {
      auto r = last((*fast.model)(mx::array(&toks[b], {1, 1}, mx::int32), &solo[b]));
      mx::eval(r);
      EXPECT_EQ(max_abs_diff(mx::slice(g, {b, 0}, {b + 1, vocab}), r), 0.f) << name << " step " << s << " row " << b;
    }
  }
}

// Eleven rows: a decode step's projections still take the GEMV (up to kDecodeGemvMaxRows rows),
// so each row comes out exactly as alone; 36 rows: the GEMM, which rounds activations per
// quantization group where the GEMV rounds per row (the fast path's bounds).
TEST_P(BatchFastPath, ManyRows) {
  for (int rows : {11, 36}) {
    BatchRun run(GetParam());
    std::vector<int> lengths;
    for (int i = 0; i < rows; ++i) lengths.push_back(3 + (i * 7) % 19);
    Comparison parity, solo, base;
    run.add_rows(lengths);
    run.decode(3, parity, &solo, &base);
    const std::string tag = std::to_string(rows) + " rows: ";
    const Stats alone = base.stats((tag + "each row alone (fast) vs batched parity").c_str(), run.name());
    parity.check((tag + "batched fast vs batched parity").c_str(), run.name(), kKl, kAgree, kDiff, &alone);
    const std::string what = tag + "batched fast vs each row alone (fast)";
    if (rows <= kernels::kDecodeGemvMaxRows) solo.check(what.c_str(), run.name(), 0.f, 1.f, 0.f);
    else solo.check(what.c_str(), run.name(), kKl, kAgree, kDiff);
  }
}

// A batch cache for each layer of `m`, empty, with left padding (mlx-lm's batch prefill).
LayerCaches padded_caches(const Model& m, const std::vector<int>& lp) {
  LayerCaches out;
  for (auto& c : m.make_cache()) {
    if (auto* r = dynamic_cast<RotatingKVCache*>(c.get())) {
      out.push_back(std::make_unique<BatchRotatingKVCache>(r->max_size(), lp));
    } else {
      out.push_back(std::make_unique<BatchKVCache>(lp));
    }
  }
  return out;
}

// Left-padded prompts prefilled together (L > 1 with padding in the attention kernel), then
// decoded: the real positions' logits against parity mode.
TEST_P(BatchFastPath, PaddedPrefillMatchesParity) {
  const std::string name = GetParam();
  auto fast = load_model(tiny_model_dir(name));
  auto parity = load_model(tiny_model_dir(name), ModelOptions::parity_mode());
  const int vocab = fast.model->vocab_size();
  const std::vector<int> lengths{12, 19, 6};
  const int n = 19;
  std::vector<int> lp, ids;
  for (size_t b = 0; b < lengths.size(); ++b) {
    lp.push_back(n - lengths[b]);
    auto t = tokens(lengths[b], static_cast<int>(b) + 1, vocab);
    ids.insert(ids.end(), lp.back(), 0);
    ids.insert(ids.end(), t.begin(), t.end());
  }
  const int B = static_cast<int>(lengths.size());
  auto fc = padded_caches(*fast.model, lp), pc = padded_caches(*parity.model, lp);
  Comparison cmp;
  auto x = mx::array(ids.data(), {B, n}, mx::int32);
  auto got = (*fast.model)(x, &fc);
  EXPECT_TRUE(fused_graph(primitive_names(got))) << name;
  auto ref = (*parity.model)(x, &pc);
  mx::eval(got, ref);
  for (int b = 0; b < B; ++b) {  // the real positions only
    cmp.add(mx::reshape(mx::slice(ref, {b, lp[b], 0}, {b + 1, n, vocab}), {-1, vocab}),
            mx::reshape(mx::slice(got, {b, lp[b], 0}, {b + 1, n, vocab}), {-1, vocab}));
  }
  for (int s = 0; s < 3; ++s) {
    std::vector<int> toks;
    for (int b = 0; b < B; ++b) toks.push_back(step_token(b, s, vocab));
    auto step = mx::array(toks.data(), {B, 1}, mx::int32);
    auto g = last((*fast.model)(step, &fc)), r = last((*parity.model)(step, &pc));
    mx::eval(g, r);
    cmp.add(r, g);
  }
  cmp.check("padded batch prefill + decode, fast vs parity", name, kKl, kAgree, kDiff);
}

// Gemma 4: the donor layers' attention blocks over a left-padded BatchKVCache, the KV-shared
// layers over their donors' batch caches (stock ops, window-masked); rows of 13, 5 and 30 tokens
// (the sliding layers' window is 8) through 5 steps: each row's logits bit for bit its solo fast
// run's, and the batch within the single-row bounds of the same batch in parity mode.
TEST(BatchFastPathGemma4, SharedLayersReadTheDonorsBatchCaches) {
  const std::string name = "gemma4-text-q4g64";
  auto fast = load_model(tiny_model_dir(name));
  auto parity = load_model(tiny_model_dir(name), ModelOptions::parity_mode());
  const int vocab = fast.model->vocab_size();
  std::vector<LayerCaches> solo, parity_solo;
  std::vector<const LayerCaches*> f, p;
  const std::vector<int> lengths{13, 5, 30};
  for (size_t r = 0; r < lengths.size(); ++r) {
    auto prompt = tokens(lengths[r], static_cast<int>(r) + 1, vocab);
    solo.push_back(prefill_alone(*fast.model, prompt));
    parity_solo.push_back(prefill_alone(*parity.model, prompt));
  }
  for (size_t r = 0; r < lengths.size(); ++r) {
    f.push_back(&solo[r]);
    p.push_back(&parity_solo[r]);
  }
  auto fb = merge(f), pb = merge(p);
  for (const auto& c : fb) ASSERT_TRUE(dynamic_cast<BatchKVCache*>(c.get())) << "fast mode: plain caches";
  Comparison vs_parity, vs_solo;
  const int B = static_cast<int>(lengths.size());
  for (int s = 0; s < 5; ++s) {
    std::vector<int> toks;
    for (int b = 0; b < B; ++b) toks.push_back(step_token(b, s, vocab));
    auto ids = mx::array(toks.data(), {B, 1}, mx::int32);
    auto got = last((*fast.model)(ids, &fb));
    // Distinct attention-block primitives: one per donor layer.
    EXPECT_EQ(distinct_primitives(got)["MlxcppAttentionBlock"], 4u) << "step " << s;
    auto ref = last((*parity.model)(ids, &pb));
    mx::eval(got, ref);
    vs_parity.add(ref, got);
    for (int b = 0; b < B; ++b) {
      auto one = last((*fast.model)(mx::array(&toks[b], {1, 1}, mx::int32), &solo[b]));
      mx::eval(one);
      vs_solo.add(one, mx::slice(got, {b, 0}, {b + 1, vocab}));
    }
  }
  vs_parity.check("batched fast vs batched parity", name, kKl, kAgree, kDiff);
  vs_solo.check("batched fast vs each row alone (fast)", name, 0.f, 1.f, 0.f);
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (auto& c : s)
    if (c == '-') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, BatchFastPath,
                         ::testing::Values("llama-q4g64", "qwen2-q8g32", "smollm3-q4g64", "gemma3-text-q4g64",
                                           "phi3-longrope-q4g64", "minicpm-q4g64", "qwen3-moe-q4g64",
                                           "glm4-moe-q4g64", "glm4-q4g64"),
                         param_name);

}  // namespace
