// Round-trip properties of the batch caches (no oracle): a sequence that goes through merge →
// filter → extend → extract comes out as the solo cache it came from, and a batch row (or an
// extracted row) continues exactly like that solo cache: for every query the same (key, value)
// rows are visible. Also where mlx-lm refuses (an emptied batch, a batch without keys) and the
// errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <mlx/mlx.h>

#include "cache/arrays_cache.h"
#include "cache/batch_kv_cache.h"
#include "cache/batch_rotating_kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;

namespace {

constexpr int kH = 2, kDk = 4, kDv = 3;

mx::array rnd(int b, int s, int d, uint64_t seed) { return test::randn({b, kH, s, d}, seed); }

std::vector<float> floats(const mx::array& a) {
  auto c = mx::contiguous(mx::astype(a, mx::float32));
  c.eval();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.size());
}

// Whether query i of n sees fetched row j (of len), row b of the batch: mask None, "causal",
// (len) for a rotating single query, (n, len) for a solo cache or (B, 1, n, len) for a batch.
bool visible(const AttentionMask& m, const std::vector<float>& mask, int b, int i, int j, int n, int len) {
  if (m.is_none()) return true;
  if (m.is_causal()) return j <= len - n + i;
  switch (m.array->ndim()) {
    case 1: return mask[j] != 0;
    case 2: return mask[i * len + j] != 0;
    default: return mask[(b * n + i) * len + j] != 0;
  }
}

// For each query, the (key, value) rows that row b of a fetch sees, sorted: the same sets
// attend the same way whatever the buffer's layout.
using Visible = std::vector<std::vector<std::vector<float>>>;
Visible visible_rows(const std::pair<mx::array, mx::array>& kv, const AttentionMask& m, int b, int n) {
  const auto& [k, v] = kv;
  const int len = k.shape(2);
  auto kf = floats(k), vf = floats(v), mf = m.is_array() ? floats(*m.array) : std::vector<float>{};
  const int dk = k.shape(3), dv = v.shape(3);
  Visible out(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < len; ++j) {
      if (!visible(m, mf, b, i, j, n, len)) continue;
      std::vector<float> row;
      for (int h = 0; h < kH; ++h) {
        auto kb = kf.begin() + ((b * kH + h) * len + j) * dk;
        auto vb = vf.begin() + ((b * kH + h) * len + j) * dv;
        row.insert(row.end(), kb, kb + dk);
        row.insert(row.end(), vb, vb + dv);
      }
      out[i].push_back(std::move(row));
    }
    std::sort(out[i].begin(), out[i].end());
  }
  return out;
}

// n tokens of row `row` at step `seed`: what both the batch row and its solo twin are fed.
std::pair<mx::array, mx::array> tokens(int n, uint64_t seed, int row) {
  return {rnd(1, n, kDk, seed * 100 + row), rnd(1, n, kDv, seed * 100 + 50 + row)};
}

void feed(KVCacheBase& c, int n, uint64_t seed) {
  auto [k, v] = tokens(n, seed, 0);
  c.update_and_fetch(k, v);
}

::testing::AssertionResult same_visible(const Visible& got, const Visible& want);

// Feeds n tokens to every row of `batch` and to its twins; each row must see what its twin sees.
void step_together(KVCacheBase& batch, const std::vector<KVCacheBase*>& twins, int n, uint64_t seed) {
  SCOPED_TRACE("step of " + std::to_string(n) + " tokens, seed " + std::to_string(seed));
  std::vector<mx::array> ks, vs;
  std::vector<Visible> want;
  for (size_t r = 0; r < twins.size(); ++r) {
    auto [k, v] = tokens(n, seed, static_cast<int>(r));
    ks.push_back(k);
    vs.push_back(v);
    auto m = twins[r]->make_mask(n, std::nullopt, false);
    want.push_back(visible_rows(twins[r]->update_and_fetch(k, v), m, 0, n));
  }
  auto bm = batch.make_mask(n);
  auto got = batch.update_and_fetch(mx::concatenate(ks, 0), mx::concatenate(vs, 0));
  for (size_t r = 0; r < twins.size(); ++r) {
    EXPECT_TRUE(same_visible(visible_rows(got, bm, static_cast<int>(r), n), want[r])) << "row " << r;
    if (auto* b = dynamic_cast<BatchCacheBase*>(&batch)) {
      EXPECT_EQ(b->offsets()[r], twins[r]->offset()) << "row " << r;
    }
  }
}

// The last min(offset, max_size) tokens of a cache in temporal order (all tokens of a KVCache).
std::pair<mx::array, mx::array> recent(const KVCacheBase& c) {
  if (auto* r = dynamic_cast<const RotatingKVCache*>(&c)) {
    auto [k, v] = r->temporal_keys_values();
    const int n = std::min(r->offset(), r->max_size()), len = k.shape(2);
    auto tail = [&](const mx::array& a) { return mx::slice(a, {0, 0, len - n, 0}, {1, kH, len, a.shape(3)}); };
    return {tail(k), tail(v)};
  }
  return dynamic_cast<const KVCache&>(c).keys_and_values();
}

// Short failure messages: per query, how many rows each side sees and how many they share.
::testing::AssertionResult same_visible(const Visible& got, const Visible& want) {
  if (got == want) return ::testing::AssertionSuccess();
  auto fail = ::testing::AssertionFailure();
  for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
    if (i >= got.size() || i >= want.size() || got[i] != want[i]) {
      size_t shared = 0;
      if (i < got.size() && i < want.size()) {
        for (const auto& row : got[i]) shared += std::binary_search(want[i].begin(), want[i].end(), row);
      }
      fail << "query " << i << ": sees " << (i < got.size() ? got[i].size() : 0) << " rows, want "
           << (i < want.size() ? want[i].size() : 0) << ", shared " << shared << "; ";
    }
  }
  return fail;
}

bool same(const mx::array& a, const mx::array& b) { return a.shape() == b.shape() && mx::array_equal(a, b).item<bool>(); }

void expect_same_cache(const KVCacheBase& got, const KVCacheBase& want) {
  ASSERT_EQ(typeid(got), typeid(want));
  EXPECT_EQ(got.offset(), want.offset());
  if (want.empty()) {  // mlx-lm extracts a row without tokens as zero-length buffers
    EXPECT_EQ(got.size(), 0);
    return;
  }
  auto [gk, gv] = recent(got);
  auto [wk, wv] = recent(want);
  EXPECT_TRUE(same(gk, wk)) << "keys";
  EXPECT_TRUE(same(gv, wv)) << "values";
}

// An extracted row and its twin fed the same tokens: the same rows visible (and for a
// KVCache, whose layout is temporal in both, the very same fetched arrays).
void continue_together(KVCacheBase& extracted, KVCacheBase& twin, uint64_t seed) {
  for (int n : {1, 1, 3, 1, 1, 1, 1, 2, 1}) {
    auto [k, v] = tokens(n, ++seed, 0);
    auto em = extracted.make_mask(n, std::nullopt, false), tm = twin.make_mask(n, std::nullopt, false);
    auto e = extracted.update_and_fetch(k, v), t = twin.update_and_fetch(k, v);
    EXPECT_TRUE(same_visible(visible_rows(e, em, 0, n), visible_rows(t, tm, 0, n))) << "step of " << n;
    if (dynamic_cast<KVCache*>(&twin)) {
      EXPECT_TRUE(same(e.first, t.first) && same(e.second, t.second)) << "fetched arrays";
    }
    EXPECT_EQ(extracted.offset(), twin.offset());
  }
}

std::vector<KVCacheBase*> ptrs(const std::vector<std::unique_ptr<KVCacheBase>>& v, const std::vector<int>& which) {
  std::vector<KVCacheBase*> out;
  for (int i : which) out.push_back(v[i].get());
  return out;
}

// merge → steps → filter → extend → steps → extract every row; each row equals its twin and
// continues like it. `solos[i]` is fed `prefill[i]`; the first three form the batch, the
// others join it.
void round_trip(std::vector<std::unique_ptr<KVCacheBase>> solos, const std::vector<std::vector<int>>& prefill) {
  for (size_t i = 0; i < solos.size(); ++i) {
    for (size_t j = 0; j < prefill[i].size(); ++j) feed(*solos[i], prefill[i][j], 1000 + i * 50 + j);
  }
  std::vector<std::unique_ptr<KVCacheBase>> twins;
  for (auto& s : solos) twins.push_back(s->clone());
  auto batch = merge_layer_caches({solos[0].get(), solos[1].get(), solos[2].get()});
  for (int r = 0; r < 3; ++r) expect_same_cache(*batch->extract(r), *twins[r]);
  for (uint64_t s = 1; s <= 3; ++s) step_together(*batch, ptrs(twins, {0, 1, 2}), 1, s);
  batch->filter({2, 0});
  auto other = merge_layer_caches({solos[3].get(), solos[4].get()});
  step_together(*other, ptrs(twins, {3, 4}), 1, 4);
  batch->extend(*other);
  const std::vector<int> order{2, 0, 3, 4};
  for (uint64_t s = 5; s <= 12; ++s) step_together(*batch, ptrs(twins, order), s == 8 ? 3 : 1, s);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    auto x = batch->extract(r);
    expect_same_cache(*x, *twins[order[r]]);
    continue_together(*x, *twins[order[r]], 100 + r);
  }
}

std::vector<std::unique_ptr<KVCacheBase>> kv_solos(int n) {
  std::vector<std::unique_ptr<KVCacheBase>> v;
  for (int i = 0; i < n; ++i) v.push_back(std::make_unique<KVCache>());
  return v;
}

std::vector<std::unique_ptr<KVCacheBase>> rot_solos(int n, int max_size) {
  std::vector<std::unique_ptr<KVCacheBase>> v;
  for (int i = 0; i < n; ++i) v.push_back(std::make_unique<RotatingKVCache>(max_size));
  return v;
}

TEST(BatchKVCache, RoundTripMergeFilterExtendExtract) {
  round_trip(kv_solos(5), {{5, 1}, {2}, {}, {7, 1, 1}, {1}});
}

TEST(BatchRotatingKVCache, RoundTripAfterTheRingWrapped) {
  // Ring of 6: wrapped in place, over-long after one prefill, growing, empty; the batch wraps
  // again after the extend.
  round_trip(rot_solos(5, 6), {{4, 1, 1, 1, 1, 1, 1, 1}, {9}, {1, 1}, {}, {3, 1, 1, 1, 1}});
}

TEST(BatchRotatingKVCache, RoundTripPrefillLongerThanRing) {
  round_trip(rot_solos(5, 4), {{3, 7}, {1, 1, 1, 1, 1, 1}, {5}, {2, 1, 1}, {8, 1}});
}

// Right-padded prompts prefilled in chunks then finalized: each row equals a solo cache fed
// its prompt alone (for the ring, the last max_size tokens: padding never evicts a token).
template <class Batch>
void prefill_right_padded(std::unique_ptr<Batch> batch, std::vector<std::unique_ptr<KVCacheBase>> twins) {
  const std::vector<int> lengths{10, 6, 3};
  const int longest = 10;
  std::vector<int> padding;
  for (int l : lengths) padding.push_back(longest - l);
  batch->prepare({}, lengths, padding);
  std::vector<mx::array> ks, vs;
  for (int r = 0; r < 3; ++r) {
    auto [k, v] = tokens(longest, 7, r);  // the last padding[r] tokens are padding
    ks.push_back(k);
    vs.push_back(v);
    auto cut = [&](const mx::array& a) { return mx::slice(a, {0, 0, 0, 0}, {1, kH, lengths[r], a.shape(3)}); };
    twins[r]->update_and_fetch(cut(k), cut(v));
  }
  auto all_k = mx::concatenate(ks, 0), all_v = mx::concatenate(vs, 0);
  for (int start : {0, 4, 8}) {
    const int stop = std::min(longest, start + 4);
    auto chunk = [&](const mx::array& a) { return mx::slice(a, {0, 0, start, 0}, {3, kH, stop, a.shape(3)}); };
    batch->update_and_fetch(chunk(all_k), chunk(all_v));
  }
  batch->finalize();
  for (int r = 0; r < 3; ++r) expect_same_cache(*batch->extract(r), *twins[r]);
  for (uint64_t s = 1; s <= 8; ++s) step_together(*batch, ptrs(twins, {0, 1, 2}), 1, s);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    auto x = batch->extract(r);
    expect_same_cache(*x, *twins[r]);
    continue_together(*x, *twins[r], 200 + r);
  }
}

TEST(BatchKVCache, RightPaddedChunkedPrefill) {
  prefill_right_padded(std::make_unique<BatchKVCache>(std::vector<int>{0, 0, 0}), kv_solos(3));
}

TEST(BatchRotatingKVCache, RightPaddedChunkedPrefillLongerThanRing) {
  prefill_right_padded(std::make_unique<BatchRotatingKVCache>(8, std::vector<int>{0, 0, 0}), rot_solos(3, 8));
}

// Where mlx-lm refuses: filter to no rows, a batch of no rows joined by a running one
// (float32 left padding there makes extract raise), extract from a batch without keys.
template <class MakeSolo>
void emptied_batches_work(MakeSolo make_solo) {
  std::vector<std::unique_ptr<KVCacheBase>> solos, twins;
  for (int i = 0; i < 2; ++i) {
    solos.push_back(make_solo());
    feed(*solos[i], 3 + 4 * i, 300 + i);
    for (int j = 0; j < 6; ++j) feed(*solos[i], 1, 310 + 10 * i + j);
    twins.push_back(solos[i]->clone());
  }
  auto batch = merge_layer_caches({solos[0].get()});
  batch->filter({});
  EXPECT_EQ(batch->batch_size(), 0);
  EXPECT_TRUE(batch->empty());
  auto running = merge_layer_caches({solos[0].get(), solos[1].get()});
  batch->extend(*running);
  step_together(*batch, ptrs(twins, {0, 1}), 1, 1);
  auto none = merge_layer_caches({solos[0].get()});
  none->filter({});
  none->extend(*batch);  // an empty batch (no keys, no rows) takes the running one
  step_together(*none, ptrs(twins, {0, 1}), 1, 2);
  for (int r = 0; r < 2; ++r) {
    auto x = none->extract(r);
    expect_same_cache(*x, *twins[r]);
    continue_together(*x, *twins[r], 400 + r);
  }
  // A batch whose rows have no keys yet extracts fresh caches that continue like new ones.
  auto fresh = merge_layer_caches({make_solo().get()});
  auto x = fresh->extract(0);
  EXPECT_TRUE(x->empty());
  auto twin = make_solo();
  continue_together(*x, *twin, 500);
}

TEST(BatchKVCache, EmptiedBatchesWork) {
  emptied_batches_work([] { return std::make_unique<KVCache>(); });
}

TEST(BatchRotatingKVCache, EmptiedBatchesWork) {
  emptied_batches_work([] { return std::make_unique<RotatingKVCache>(5); });
}

template <class F>
void expect_error(F f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no Error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(BatchCaches, BadInputThrowsError) {
  BatchKVCache kv({1, 0});
  kv.update_and_fetch(rnd(2, 3, kDk, 1), rnd(2, 3, kDv, 2));
  BatchRotatingKVCache rot(4, {0, 1});
  rot.update_and_fetch(rnd(2, 3, kDk, 3), rnd(2, 3, kDv, 4));
  BatchRotatingKVCache rot8(8, {0});
  expect_error([&] { kv.extend(rot); }, "[BatchKVCache::extend] the other cache is not a BatchKVCache");
  expect_error([&] { rot.extend(kv); }, "[BatchRotatingKVCache::extend] the other cache is not a BatchRotatingKVCache");
  expect_error([&] { rot.extend(rot8); }, "max_size 4 and 8 differ");
  expect_error([&] { kv.filter({0, 2}); }, "[BatchKVCache::filter] row 2 is outside the batch of 2");
  expect_error([&] { rot.filter({-1}); }, "[BatchRotatingKVCache::filter] row -1 is outside the batch of 2");
  expect_error([&] { kv.extract(5); }, "[BatchKVCache::extract] row 5 is outside the batch of 2");
  expect_error([&] { rot.extract(2); }, "[BatchRotatingKVCache::extract] row 2 is outside the batch of 2");
  expect_error([&] { kv.prepare({1, 1}, {}, {}); }, "left padding can only be added to an empty cache");
  expect_error([&] { rot.prepare({1, 1}, {}, {}); }, "left padding can only be added to an empty cache");
  expect_error([&] { kv.update_and_fetch(rnd(3, 1, kDk, 5), rnd(3, 1, kDv, 6)); }, "3 rows for a batch of 2");
  expect_error([&] { rot.update_and_fetch(rnd(1, 1, kDk, 5), rnd(1, 1, kDv, 6)); }, "1 rows for a batch of 2");
  BatchRotatingKVCache pending(4, {0, 0});
  pending.prepare({}, {3, 2}, {0, 1});
  pending.update_and_fetch(rnd(2, 3, kDk, 7), rnd(2, 3, kDv, 8));
  expect_error([&] { pending.update_and_fetch(rnd(2, 1, kDk, 9), rnd(2, 1, kDv, 9)); }, "finalize()");
  KVCache solo;
  RotatingKVCache ring4(4), ring8(8);
  expect_error([&] { merge_layer_caches({}); }, "[merge_layer_caches] no caches to merge");
  expect_error([&] { merge_layer_caches({&solo, &ring4}); }, "mix KVCache and RotatingKVCache");
  expect_error([&] { merge_layer_caches({&ring4, &ring8}); }, "max_size differ");
  expect_error([&] { merge_layer_caches({&kv}); },
               "only KVCache, RotatingKVCache, their quantized caches and ArraysCache layers can be batched");
  QuantizedKVCache quantized(64, 8);
  ArraysCache arrays(2);
  expect_error([&] { merge_layer_caches({&quantized, &solo}); }, "mix quantized and plain ones");
  expect_error([&] { merge_layer_caches({&arrays, &solo}); }, "mix recurrent and KV caches");
}

}  // namespace
