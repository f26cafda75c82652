// RotatingKVCache: mlx-lm tests/test_models.py test_rotating_kv_cache(_chat_mode) and
// tests/test_prompt_cache.py test_rotating_cache_mask, test_rotating_cache_updates,
// test_trim_cache (rotating part), test_save_load_rotating_cache (minus the file).
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "cache/prompt_cache.h"
#include "cache/rotating_kv_cache.h"
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

std::vector<bool> bools(const mx::array& a) {
  auto b = mx::astype(a, mx::uint8);
  b.eval();
  return std::vector<bool>(b.data<uint8_t>(), b.data<uint8_t>() + b.size());
}

TEST(RotatingKVCache, UpdatesAndRotation) {  // test_rotating_kv_cache
  const int b = 1, h = 2, d = 32;
  RotatingKVCache cache(8);

  auto k = mx::random::uniform({b, h, 2, d});
  auto v = mx::random::uniform({b, h, 2, d});
  auto [k_up, v_up] = cache.update_and_fetch(k, v);
  EXPECT_TRUE(same_array(k_up, k));
  EXPECT_TRUE(same_array(v_up, v));
  EXPECT_EQ(cache.offset(), 2);

  k = mx::random::uniform({b, h, 5, d});
  v = mx::random::uniform({b, h, 5, d});
  std::tie(k_up, v_up) = cache.update_and_fetch(k, v);
  EXPECT_TRUE(same_array(rows(k_up, 2, 7), k));
  EXPECT_TRUE(same_array(rows(v_up, 2, 7), v));

  k = mx::random::uniform({b, h, 4, d});
  v = mx::random::uniform({b, h, 4, d});
  std::tie(k_up, v_up) = cache.update_and_fetch(k, v);
  int len = k_up.shape(2);
  EXPECT_TRUE(same_array(rows(k_up, len - 4, len), k));
  EXPECT_TRUE(same_array(rows(v_up, len - 4, len), v));

  int idx = 0;
  for (int i = 0; i < 10; ++i) {
    k = mx::random::uniform({b, h, 1, d});
    v = mx::random::uniform({b, h, 1, d});
    std::tie(k_up, v_up) = cache.update_and_fetch(k, v);
    EXPECT_TRUE(same_array(rows(k_up, idx, idx + 1), k)) << "step " << i;
    EXPECT_TRUE(same_array(rows(v_up, idx, idx + 1), v)) << "step " << i;
    idx = (idx + 1) % 8;
  }

  // Non-zero keep: a large update is returned whole, then the ring starts after `keep`.
  RotatingKVCache kept(8, 2);
  k = mx::random::uniform({b, h, 20, d});
  v = mx::random::uniform({b, h, 20, d});
  const auto prefill = k;
  std::tie(k_up, v_up) = kept.update_and_fetch(k, v);
  EXPECT_TRUE(same_array(k_up, k));
  EXPECT_TRUE(same_array(v_up, v));
  EXPECT_EQ(kept.offset(), 20);
  idx = 2;
  for (int i = 0; i < 10; ++i) {
    k = mx::random::uniform({b, h, 1, d});
    v = mx::random::uniform({b, h, 1, d});
    std::tie(k_up, v_up) = kept.update_and_fetch(k, v);
    EXPECT_TRUE(same_array(rows(k_up, idx, idx + 1), k)) << "step " << i;
    EXPECT_TRUE(same_array(rows(v_up, idx, idx + 1), v)) << "step " << i;
    EXPECT_EQ(kept.offset(), 21 + i);
    EXPECT_EQ(k_up.shape(2), 8);
    if (++idx >= 8) idx = 2;
  }
  // The kept prefix never moves.
  EXPECT_TRUE(same_array(rows(kept.state()[0], 0, 2), rows(prefill, 0, 2)));
}

TEST(RotatingKVCache, ChatMode) {  // test_rotating_kv_cache_chat_mode
  const int d = 4, h = 2;
  RotatingKVCache cache(18);
  struct Step { int s, len, offset; };
  // len -1: only the tail is checked (the buffer was re-linearized and trimmed).
  for (Step st : {Step{8, 8, 8}, Step{1, 9, 9}, Step{2, 11, 11}, Step{3, 14, 14},
                  Step{6, -1, 20}, Step{2, -1, 22}}) {
    auto x = mx::random::uniform({1, h, st.s, d});
    auto [k, v] = cache.update_and_fetch(x, x);
    if (st.len >= 0) {
      EXPECT_EQ(k.shape(2), st.len);
    }
    EXPECT_EQ(cache.offset(), st.offset);
    int len = k.shape(2);
    EXPECT_TRUE(same_array(rows(k, len - st.s, len), x)) << "offset " << st.offset;
  }
}

TEST(RotatingKVCache, ConcatAfterRotation) {  // test_rotating_cache_updates
  RotatingKVCache cache(8);
  auto kv = mx::zeros({1, 1, 10, 1});
  cache.update_and_fetch(kv, kv);
  for (int i = 0; i < 3; ++i) {
    kv = mx::zeros({1, 1, 1, 1});
    cache.update_and_fetch(kv, kv);
  }
  kv = mx::zeros({1, 1, 3, 1});
  auto [k, v] = cache.update_and_fetch(kv, kv);
  EXPECT_EQ(k.shape(2), 10);
  EXPECT_EQ(v.shape(2), 10);
}

TEST(RotatingKVCache, Masks) {  // test_rotating_cache_mask
  RotatingKVCache cache(8);
  EXPECT_TRUE(cache.make_mask(4, 5).is_causal());
  EXPECT_TRUE(create_attention_mask(4, &cache, 5).is_causal());
  auto m = create_attention_mask(4, &cache, 5, true);
  ASSERT_TRUE(m.is_array());
  EXPECT_EQ(m.array->dtype(), mx::bool_);
  EXPECT_EQ(m.array->shape(), (mx::Shape{4, 4}));

  m = cache.make_mask(6, 5);
  ASSERT_TRUE(m.is_array());
  EXPECT_EQ(m.array->dtype(), mx::bool_);
  EXPECT_EQ(mx::max(mx::sum(*m.array, -1)).item<int>(), 5);
  EXPECT_TRUE(same_array(*create_attention_mask(6, &cache, 5).array, *m.array));

  EXPECT_TRUE(cache.make_mask(1, 5).is_none());
  EXPECT_TRUE(create_attention_mask(1, &cache, 5).is_none());

  auto kv = mx::zeros({1, 1, 10, 32});
  cache.update_and_fetch(kv, kv);
  m = cache.make_mask(3, 5);
  ASSERT_TRUE(m.is_array());
  EXPECT_EQ(m.array->shape(), (mx::Shape{3, 10}));
  EXPECT_TRUE(mx::all(mx::equal(mx::sum(*m.array, -1), mx::array(5))).item<bool>());
  // offset = min(max_size - 1, 10) = 7: query i sees keys 3 + i .. 7 + i.
  auto flat = bools(*m.array);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 10; ++j) {
      EXPECT_EQ(flat[i * 10 + j], j >= 3 + i && j <= 7 + i) << i << "," << j;
    }
  }
  EXPECT_TRUE(same_array(*create_attention_mask(3, &cache, 5).array, *m.array));

  EXPECT_TRUE(cache.make_mask(1).is_none());
  EXPECT_TRUE(create_attention_mask(1, &cache).is_none());

  m = cache.make_mask(1, 5);
  ASSERT_TRUE(m.is_array());
  EXPECT_EQ(bools(*m.array), (std::vector<bool>{true, false, false, false, true, true, true, true}));
  EXPECT_TRUE(same_array(*create_attention_mask(1, &cache, 5).array, *m.array));

  kv = mx::zeros({1, 1, 1, 32});
  cache.update_and_fetch(kv, kv);
  m = cache.make_mask(1, 5);
  ASSERT_TRUE(m.is_array());
  EXPECT_EQ(bools(*m.array), (std::vector<bool>{true, true, false, false, false, true, true, true}));
}

TEST(RotatingKVCache, TrimBeforeWrapNotAfter) {  // test_trim_cache, rotating part
  LayerCaches caches;
  for (int i = 0; i < 2; ++i) {
    caches.push_back(std::make_unique<RotatingKVCache>(6));
    auto x = mx::random::uniform({1, 8, 5, 4});
    caches.back()->update_and_fetch(x, x);
  }
  EXPECT_TRUE(can_trim_prompt_cache(caches));
  EXPECT_EQ(trim_prompt_cache(caches, 4), 4);
  EXPECT_EQ(caches[0]->offset(), 1);
  EXPECT_EQ(static_cast<RotatingKVCache&>(*caches[0]).idx(), 1);

  for (auto& c : caches) {
    auto x = mx::random::uniform({1, 8, 10, 4});
    c->update_and_fetch(x, x);
  }
  EXPECT_FALSE(can_trim_prompt_cache(caches));
  EXPECT_EQ(trim_prompt_cache(caches, 4), 0);
  EXPECT_EQ(caches[0]->offset(), 11);
  EXPECT_EQ(caches[0]->size(), 6);
}

TEST(RotatingKVCache, StateRoundTrip) {  // test_save_load_rotating_cache, minus the file
  RotatingKVCache cache(8, 2);
  auto x = mx::random::uniform({1, 8, 10, 4});
  cache.update_and_fetch(x, x);
  for (int i = 0; i < 2; ++i) {  // rotate
    auto y = mx::random::uniform({1, 8, 1, 4});
    cache.update_and_fetch(y, y);
  }
  auto st = cache.state();
  RotatingKVCache loaded(1);
  loaded.set_state(st[0], st[1], cache.offset(), cache.keep(), cache.max_size(), cache.idx());
  EXPECT_EQ(loaded.offset(), cache.offset());
  EXPECT_EQ(loaded.keep(), 2);
  EXPECT_EQ(loaded.max_size(), 8);
  auto z = mx::random::uniform({1, 8, 1, 4});
  auto [k, v] = cache.update_and_fetch(z, z);
  auto [lk, lv] = loaded.update_and_fetch(z, z);
  EXPECT_EQ(cache.offset(), loaded.offset());
  EXPECT_TRUE(same_array(k, lk));
  EXPECT_TRUE(same_array(v, lv));

  EXPECT_THROW(loaded.set_state(st[0], st[1], 5, 8, 8, 0), ConfigError);
  EXPECT_THROW(loaded.set_state(st[0], st[1], 5, 0, 8, 9), Error);
}

TEST(RotatingKVCache, CloneIsIndependent) {
  RotatingKVCache cache(4);
  auto x = mx::random::uniform({1, 2, 3, 4});
  cache.update_and_fetch(x, x);
  auto copy = cache.clone();
  auto y = mx::random::uniform({1, 2, 2, 4});
  cache.update_and_fetch(y, y);
  EXPECT_EQ(copy->offset(), 3);
  EXPECT_EQ(cache.offset(), 5);
  EXPECT_TRUE(same_array(copy->state()[0], x));
}

TEST(RotatingKVCache, RejectsBadSizes) {
  EXPECT_THROW(RotatingKVCache(0), ConfigError);
  EXPECT_THROW(RotatingKVCache(4, 4), ConfigError);
  EXPECT_THROW(RotatingKVCache(4, -1), ConfigError);
  EXPECT_NO_THROW(RotatingKVCache(4, 3));
  RotatingKVCache cache(4);
  EXPECT_THROW(cache.keys_and_values(), Error);
  EXPECT_THROW(cache.trim(-2), Error);
  EXPECT_EQ(cache.nbytes(), 0);
  EXPECT_TRUE(cache.empty());
}

}  // namespace
