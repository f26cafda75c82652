// KVCache: mlx-lm tests/test_models.py test_kv_cache and the KVCache parts of
// tests/test_prompt_cache.py (trim, copying, masks with a cache, window mask on a full cache).
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "cache/kv_cache.h"
#include "cache/prompt_cache.h"
#include "core/errors.h"

namespace mx = mlx::core;
using namespace mlxcpp;

namespace {

bool same_array(const mx::array& a, const mx::array& b) {
  return a.shape() == b.shape() && mx::array_equal(a, b).item<bool>();
}

mx::array rows(const mx::array& a, int start, int stop) {
  return mx::slice(a, {0, 0, start, 0}, {a.shape(0), a.shape(1), stop, a.shape(3)});
}

TEST(KVCache, GrowsInSteps) {  // test_kv_cache
  KVCache cache;
  EXPECT_TRUE(cache.empty());
  EXPECT_EQ(cache.nbytes(), 0);
  EXPECT_TRUE(cache.state().empty());

  auto k = mx::ones({1, 4, 1, 32}, mx::float16);
  auto v = mx::ones({1, 4, 1, 32}, mx::float16);
  auto [k_up, v_up] = cache.update_and_fetch(k, v);
  EXPECT_TRUE(same_array(k_up, k));
  EXPECT_TRUE(same_array(v_up, v));
  EXPECT_EQ(cache.offset(), 1);
  EXPECT_FALSE(cache.empty());
  // One step of 256 rows preallocated for keys and values.
  EXPECT_EQ(cache.state()[0].shape(), (mx::Shape{1, 4, 256, 32}));
  EXPECT_EQ(cache.nbytes(), 2 * 4 * 256 * 32 * 2);

  k = mx::ones({1, 4, KVCache::kStep, 32}, mx::float16);
  v = mx::ones({1, 4, KVCache::kStep, 32}, mx::float16);
  std::tie(k_up, v_up) = cache.update_and_fetch(k, v);
  auto expected = mx::ones({1, 4, KVCache::kStep + 1, 32}, mx::float16);
  EXPECT_TRUE(same_array(k_up, expected));
  EXPECT_TRUE(same_array(v_up, expected));
  EXPECT_EQ(cache.offset(), KVCache::kStep + 1);
  EXPECT_EQ(cache.size(), KVCache::kStep + 1);
  // prev (1) is not a multiple of the step: cut to 1 row, then add 256.
  EXPECT_EQ(cache.state()[0].shape(2), 257);
}

TEST(KVCache, DistinctValueHeadDim) {
  KVCache cache;
  auto k = mx::random::uniform({2, 3, 5, 8});
  auto v = mx::random::uniform({2, 3, 5, 6});
  auto [k_up, v_up] = cache.update_and_fetch(k, v);
  EXPECT_TRUE(same_array(k_up, k));
  EXPECT_TRUE(same_array(v_up, v));
  EXPECT_EQ(cache.state()[1].shape(), (mx::Shape{2, 3, 256, 6}));
}

TEST(KVCache, TrimAndCopy) {  // test_cache_copying
  LayerCaches caches;
  caches.push_back(std::make_unique<KVCache>());
  auto x = mx::random::uniform({1, 8, 10, 4});
  caches[0]->update_and_fetch(x, x);
  auto y = mx::random::uniform({1, 8, 1, 4});
  caches[0]->update_and_fetch(y, y);

  LayerCaches old = copy_prompt_cache(caches);
  EXPECT_EQ(trim_prompt_cache(caches, 1), 1);
  EXPECT_EQ(old[0]->offset(), 11);
  EXPECT_EQ(caches[0]->offset(), 10);

  auto z = mx::random::uniform({1, 8, 1, 4});
  caches[0]->update_and_fetch(z, z);
  EXPECT_TRUE(same_array(rows(old[0]->state()[0], 10, 11), y));
  EXPECT_TRUE(same_array(rows(caches[0]->state()[0], 10, 11), z));
}

TEST(KVCache, FetchedArraysAreSnapshots) {
  KVCache cache;
  auto x = mx::random::uniform({1, 2, 3, 4});
  auto [k1, v1] = cache.update_and_fetch(x, x);
  cache.trim(2);
  auto y = mx::random::uniform({1, 2, 2, 4});
  cache.update_and_fetch(y, y);
  EXPECT_TRUE(same_array(k1, x));
}

TEST(KVCache, TrimClampsToOffset) {  // test_trim_cache, KVCache part
  LayerCaches caches;
  for (int i = 0; i < 2; ++i) {
    caches.push_back(std::make_unique<KVCache>());
    auto x = mx::random::uniform({1, 8, 10, 4});
    caches.back()->update_and_fetch(x, x);
  }
  EXPECT_EQ(trim_prompt_cache(caches, 7), 7);
  EXPECT_EQ(trim_prompt_cache(caches, 4), 3);
  EXPECT_EQ(caches[1]->offset(), 0);
  EXPECT_THROW(caches[0]->trim(-1), Error);
}

TEST(KVCache, MakeMask) {  // test_make_mask_with_cache, KVCache part
  KVCache cache;
  EXPECT_TRUE(cache.make_mask(4).is_causal());
  EXPECT_TRUE(create_attention_mask(4, &cache).is_causal());
  auto m = cache.make_mask(4, std::nullopt, true);
  ASSERT_TRUE(m.is_array());
  EXPECT_TRUE(same_array(*m.array, create_causal_mask(4)));
  EXPECT_TRUE(cache.make_mask(1).is_none());

  auto kv = mx::zeros({1, 2, 16, 8});
  cache.update_and_fetch(kv, kv);
  m = create_attention_mask(4, &cache, std::nullopt, true);
  ASSERT_TRUE(m.is_array());
  EXPECT_EQ(m.array->shape(), (mx::Shape{4, 20}));
}

TEST(KVCache, WindowMaskWithFullCache) {  // test_window_mask_with_full_kv_cache
  KVCache cache;
  auto kv = mx::zeros({1, 1, 32, 128});
  cache.update_and_fetch(kv, kv);
  auto m = create_attention_mask(1, &cache, 4);
  ASSERT_TRUE(m.is_array());
  EXPECT_TRUE(same_array(*m.array, create_causal_mask(1, 32, 4)));
}

TEST(KVCache, StateRoundTrip) {  // test_save_load, minus the file
  KVCache cache;
  auto x = mx::random::uniform({1, 8, 10, 4});
  cache.update_and_fetch(x, x);
  auto st = cache.state();
  KVCache loaded;
  loaded.set_state(st[0], st[1], cache.offset());
  EXPECT_EQ(loaded.offset(), 10);
  EXPECT_TRUE(same_array(loaded.state()[0], st[0]));
  auto y = mx::random::uniform({1, 8, 1, 4});
  auto [k, v] = cache.update_and_fetch(y, y);
  auto [lk, lv] = loaded.update_and_fetch(y, y);
  EXPECT_TRUE(same_array(k, lk));
  EXPECT_TRUE(same_array(v, lv));

  EXPECT_THROW(loaded.set_state(st[0], st[1], 300), Error);
  EXPECT_THROW(loaded.set_state(mx::zeros({8, 10, 4}), st[1], 1), Error);
}

// Buffers of another dtype (the CPU fast path's float16 cache) keep it, also when they grow: new
// rows are rounded into them, and the fetched keys/values are float16.
TEST(KVCache, NewRowsTakeTheBuffersDtype) {
  KVCache c;
  auto k0 = mx::astype(mx::random::normal({1, 2, 3, 8}), mx::float16), v0 = mx::astype(mx::random::normal({1, 2, 3, 8}), mx::float16);
  c.set_state(k0, v0, 3);  // full: the update grows the buffers
  auto k1 = mx::random::normal({1, 2, 1, 8}), v1 = mx::random::normal({1, 2, 1, 8});
  auto [k, v] = c.update_and_fetch(k1, v1);
  EXPECT_EQ(k.dtype(), mx::float16);
  EXPECT_EQ(v.dtype(), mx::float16);
  ASSERT_EQ(k.shape(2), 4);
  EXPECT_TRUE(mx::array_equal(mx::slice(k, {0, 0, 0, 0}, {1, 2, 3, 8}), k0).item<bool>());
  EXPECT_TRUE(mx::array_equal(mx::slice(k, {0, 0, 3, 0}, {1, 2, 4, 8}), mx::astype(k1, mx::float16)).item<bool>());
  EXPECT_TRUE(mx::array_equal(mx::slice(v, {0, 0, 3, 0}, {1, 2, 4, 8}), mx::astype(v1, mx::float16)).item<bool>());
}

TEST(KVCache, RejectsMalformedUpdates) {
  KVCache cache;
  EXPECT_THROW(cache.update_and_fetch(mx::zeros({8, 10, 4}), mx::zeros({8, 10, 4})), Error);
  EXPECT_THROW(cache.update_and_fetch(mx::zeros({1, 8, 10, 4}), mx::zeros({1, 8, 9, 4})), Error);
  EXPECT_THROW(cache.update_and_fetch(mx::zeros({1, 8, 0, 4}), mx::zeros({1, 8, 0, 4})), Error);
  EXPECT_THROW(cache.keys_and_values(), Error);
  EXPECT_TRUE(cache.empty());
}

}  // namespace
