// List helpers over per-layer caches (tests/test_prompt_cache.py test_trim_cache: all layers
// must be trimmable).
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "cache/prompt_cache.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"

namespace mx = mlx::core;
using namespace mlxcpp;

namespace {

TEST(PromptCache, EmptyListTrimsNothing) {
  LayerCaches none;
  EXPECT_TRUE(can_trim_prompt_cache(none));
  EXPECT_EQ(trim_prompt_cache(none, 3), 0);
  EXPECT_EQ(prompt_cache_nbytes(none), 0);
}

TEST(PromptCache, AllLayersMustBeTrimmable) {
  LayerCaches caches;
  caches.push_back(std::make_unique<KVCache>());
  caches.push_back(std::make_unique<RotatingKVCache>(4));
  auto x = mx::random::uniform({1, 2, 6, 4});
  for (auto& c : caches) c->update_and_fetch(x, x);
  EXPECT_TRUE(caches[0]->is_trimmable());
  EXPECT_FALSE(caches[1]->is_trimmable());
  EXPECT_FALSE(can_trim_prompt_cache(caches));
  EXPECT_EQ(trim_prompt_cache(caches, 1), 0);
  EXPECT_EQ(caches[0]->offset(), 6);
  EXPECT_EQ(caches[1]->offset(), 6);
}

TEST(PromptCache, TrimReturnsFirstLayersCount) {
  LayerCaches caches;
  caches.push_back(std::make_unique<KVCache>());
  caches.push_back(std::make_unique<KVCache>());
  caches[0]->update_and_fetch(mx::zeros({1, 1, 3, 2}), mx::zeros({1, 1, 3, 2}));
  caches[1]->update_and_fetch(mx::zeros({1, 1, 5, 2}), mx::zeros({1, 1, 5, 2}));
  EXPECT_EQ(trim_prompt_cache(caches, 4), 3);
  EXPECT_EQ(caches[0]->offset(), 0);
  EXPECT_EQ(caches[1]->offset(), 1);
  EXPECT_THROW(trim_prompt_cache(caches, -1), Error);
}

TEST(PromptCache, NbytesAndCopy) {
  LayerCaches caches;
  caches.push_back(std::make_unique<KVCache>());
  caches.push_back(std::make_unique<RotatingKVCache>(8, 2));
  auto x = mx::zeros({1, 2, 3, 4}, mx::float16);
  for (auto& c : caches) c->update_and_fetch(x, x);
  // KVCache preallocates 256 rows; the rotating cache holds the 3 concatenated rows.
  EXPECT_EQ(prompt_cache_nbytes(caches), 2 * (2 * 256 * 4 * 2) + 2 * (2 * 3 * 4 * 2));
  LayerCaches copy = copy_prompt_cache(caches);
  ASSERT_EQ(copy.size(), 2u);
  trim_prompt_cache(caches, 2);
  EXPECT_EQ(copy[0]->offset(), 3);
  EXPECT_EQ(copy[1]->offset(), 3);
  EXPECT_EQ(caches[0]->offset(), 1);
  EXPECT_NE(dynamic_cast<RotatingKVCache*>(copy[1].get()), nullptr);
}

}  // namespace
