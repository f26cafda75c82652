// PromptCacheStore: mlx-lm's LRUPromptCache behaviour (tests/test_prompt_cache.py
// test_lru_prompt_cache*) with this engine's rules (a hit leaves one prompt token to run,
// recency refreshed on fetch, oversized entries refused), on real KVCache/RotatingKVCache arrays.
#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <functional>
#include <numeric>
#include <thread>

#include <mlx/mlx.h>

#include "cache/kv_cache.h"
#include "cache/prompt_cache.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"
#include "scheduler/prompt_cache_store.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using mlxcpp::sched::PromptCacheStore;

namespace {

constexpr int kHeads = 2;
constexpr int kDim = 4;
// One KVCache layer holding <= 256 rows: a 256-row float32 buffer for keys and one for values.
constexpr int64_t kLayerBytes = 2 * kHeads * KVCache::kStep * kDim * 4;

// Keys whose every element is distinct and tagged by `base` (so the source entry is visible);
// values are the negated keys.
mx::array keys_for(int rows, int base) {
  return mx::reshape(mx::arange(base, base + rows * kHeads * kDim, mx::float32), {1, kHeads, rows, kDim});
}

mx::array rows_of(const mx::array& a, int start, int stop) {
  return mx::slice(a, {0, 0, start, 0}, {a.shape(0), a.shape(1), stop, a.shape(3)});
}

bool same_array(const mx::array& a, const mx::array& b) {
  return a.shape() == b.shape() && mx::array_equal(a, b).item<bool>();
}

// `layers` KVCache layers holding `rows` rows of keys_for(rows, base).
LayerCaches kv_caches(int rows, int base, int layers = 1) {
  LayerCaches caches;
  for (int l = 0; l < layers; ++l) {
    caches.push_back(std::make_unique<KVCache>());
    auto k = keys_for(rows, base);
    caches.back()->update_and_fetch(k, -k);
  }
  return caches;
}

LayerCaches rotating_caches(int rows, int max_size, int base) {
  LayerCaches caches;
  caches.push_back(std::make_unique<RotatingKVCache>(max_size));
  auto k = keys_for(rows, base);
  caches.back()->update_and_fetch(k, -k);
  return caches;
}

std::vector<int> iota_tokens(int n, int first = 1) {
  std::vector<int> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The hit's first layer holds exactly the first `rows` rows of keys_for(entry_rows, base).
void expect_kv_rows(const PromptCacheStore::Hit& hit, int rows, int entry_rows, int base) {
  ASSERT_EQ(hit.caches.size(), 1u);
  auto* kv = dynamic_cast<KVCache*>(hit.caches[0].get());
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->offset(), rows);
  auto [k, v] = kv->keys_and_values();
  auto expected = rows_of(keys_for(entry_rows, base), 0, rows);
  EXPECT_TRUE(same_array(k, expected));
  EXPECT_TRUE(same_array(v, -expected));
}

TEST(PromptCacheStore, MissOnEmptyAndOnPromptsTooShort) {
  PromptCacheStore store(1 << 20);
  auto hit = store.fetch({1, 2, 3});
  EXPECT_EQ(hit.tokens, 0);
  EXPECT_TRUE(hit.caches.empty());
  store.insert({5}, kv_caches(1, 0));
  EXPECT_EQ(store.entries(), 1u);
  // A one-token prompt must run its token: nothing can be used. An empty prompt neither.
  EXPECT_EQ(store.fetch({5}).tokens, 0);
  EXPECT_EQ(store.fetch({}).tokens, 0);
  EXPECT_EQ(store.hits(), 0u);
  EXPECT_EQ(store.misses(), 3u);
  // An empty key is never stored.
  store.insert({}, kv_caches(1, 0));
  EXPECT_EQ(store.entries(), 1u);
  EXPECT_THROW(PromptCacheStore(-1), ConfigError);
}

TEST(PromptCacheStore, ExactMatchTrimmedToNMinusOne) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3, 4}, kv_caches(4, 100));
  auto hit = store.fetch({1, 2, 3, 4});
  EXPECT_EQ(hit.tokens, 3);
  expect_kv_rows(hit, 3, 4, 100);
  // The stored entry is untouched: a longer prompt gets all four tokens.
  auto again = store.fetch({1, 2, 3, 4, 5});
  EXPECT_EQ(again.tokens, 4);
  expect_kv_rows(again, 4, 4, 100);
  EXPECT_EQ(store.bytes(), kLayerBytes);
}

// Kinds (the engine's float and quantized caches) are apart: a fetch sees its own kind's entries
// only, the same tokens may be stored once per kind, and the LRU and byte cap span all kinds.
TEST(PromptCacheStore, KindsKeepTheirOwnEntries) {
  PromptCacheStore store(3 * kLayerBytes);
  store.insert({1, 2, 3}, kv_caches(3, 0));
  store.insert({1, 2, 3}, kv_caches(3, 500), 8064);
  expect_kv_rows(store.fetch({1, 2, 3, 4}), 3, 3, 0);
  expect_kv_rows(store.fetch({1, 2, 3, 4}, 8064), 3, 3, 500);
  EXPECT_EQ(store.fetch({1, 2, 3, 4}, 4064).tokens, 0);  // a kind never stored
  EXPECT_EQ(store.entries(), 2u);
  store.insert({1, 2, 3, 4, 5}, kv_caches(5, 900), 8064);  // drops only its own kind's prefix
  EXPECT_EQ(store.entries(), 2u);
  expect_kv_rows(store.fetch({1, 2, 3, 9}), 3, 3, 0);
  store.insert({7, 8}, kv_caches(2, 50), 4064);
  store.insert({7, 9}, kv_caches(2, 60), 4064);  // over the cap: the least recent (kind 8064's) goes
  EXPECT_EQ(store.entries(), 3u);
  EXPECT_EQ(store.fetch({1, 2, 3, 4, 5, 6}, 8064).tokens, 0);
  expect_kv_rows(store.fetch({1, 2, 3, 9}), 3, 3, 0);
  expect_kv_rows(store.fetch({7, 9, 1}, 4064), 2, 2, 60);
}

TEST(PromptCacheStore, StoredPrefixOfPrompt) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3}, kv_caches(3, 0));
  auto hit = store.fetch({1, 2, 3, 4, 5});
  EXPECT_EQ(hit.tokens, 3);
  expect_kv_rows(hit, 3, 3, 0);
  EXPECT_EQ(store.fetch({2, 1}).tokens, 0);  // first token differs
}

TEST(PromptCacheStore, LongerStoredEntryTrimmed) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3, 4, 5, 6}, kv_caches(6, 0));
  auto hit = store.fetch({1, 2, 3});  // prompt is a prefix of the entry: n - 1 tokens
  EXPECT_EQ(hit.tokens, 2);
  expect_kv_rows(hit, 2, 6, 0);
  hit = store.fetch({1, 2, 3, 9, 9});  // diverges after 3 tokens: the common prefix
  EXPECT_EQ(hit.tokens, 3);
  expect_kv_rows(hit, 3, 6, 0);
  EXPECT_EQ(store.entries(), 1u);
}

TEST(PromptCacheStore, ShortestLongerEntryPreferredAndLongerBeatsShorterPrefix) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3, 4, 5, 6}, kv_caches(6, 0));
  store.insert({1, 2, 3, 7}, kv_caches(4, 500));
  store.insert({1, 2}, kv_caches(2, 900));  // shorter inserts keep longer entries
  EXPECT_EQ(store.entries(), 3u);
  // Both longer entries share {1,2,3}; mlx-lm takes the shortest one ({1,2,3,7}).
  auto hit = store.fetch({1, 2, 3, 8});
  EXPECT_EQ(hit.tokens, 3);
  expect_kv_rows(hit, 3, 4, 500);
  // A trimmed longer entry covering 4 tokens beats the stored prefix {1,2} (2 tokens).
  hit = store.fetch({1, 2, 3, 4, 9});
  EXPECT_EQ(hit.tokens, 4);
  expect_kv_rows(hit, 4, 6, 0);
  // Diverging right after {1,2}: the prefix entry needs no trim and covers as much.
  hit = store.fetch({1, 2, 8});
  EXPECT_EQ(hit.tokens, 2);
  expect_kv_rows(hit, 2, 2, 900);
}

TEST(PromptCacheStore, FetchedCopyIsIndependent) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3, 4}, kv_caches(4, 0));
  auto hit = store.fetch({1, 2, 3, 4});
  ASSERT_EQ(hit.tokens, 3);
  auto row = mx::full({1, kHeads, 1, kDim}, 99.0f);
  hit.caches[0]->update_and_fetch(row, row);
  hit.caches[0]->update_and_fetch(row, row);
  EXPECT_EQ(hit.caches[0]->offset(), 5);
  auto again = store.fetch({1, 2, 3, 4});
  EXPECT_EQ(again.tokens, 3);
  expect_kv_rows(again, 3, 4, 0);
  // Row 3 of the stored entry (trimmed away in the first copy, then overwritten there) survives.
  auto full = store.fetch({1, 2, 3, 4, 5});
  expect_kv_rows(full, 4, 4, 0);
  EXPECT_EQ(store.bytes(), kLayerBytes);
}

TEST(PromptCacheStore, InsertReplacesAndDropsPrefixes) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2}, kv_caches(2, 0));
  store.insert({1, 5}, kv_caches(2, 0));
  store.insert({1, 2, 3}, kv_caches(3, 10));  // {1,2} is a strict prefix: dropped
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.bytes(), 2 * kLayerBytes);
  // {1,2,9} is now served by trimming {1,2,3}.
  auto hit = store.fetch({1, 2, 9});
  EXPECT_EQ(hit.tokens, 2);
  expect_kv_rows(hit, 2, 3, 10);

  store.insert({1, 2, 3}, kv_caches(3, 20, /*layers=*/2));  // same tokens: replaced
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.bytes(), 3 * kLayerBytes);
  hit = store.fetch({1, 2, 3, 4});
  EXPECT_EQ(hit.tokens, 3);
  ASSERT_EQ(hit.caches.size(), 2u);
  auto [k, v] = dynamic_cast<KVCache&>(*hit.caches[1]).keys_and_values();
  EXPECT_TRUE(same_array(k, keys_for(3, 20)));
}

TEST(PromptCacheStore, LruEvictionUnderByteCap) {
  PromptCacheStore store(3 * kLayerBytes);
  EXPECT_EQ(store.max_bytes(), 3 * kLayerBytes);
  store.insert({1, 1}, kv_caches(2, 0));  // A
  store.insert({2, 2}, kv_caches(2, 0));  // B
  store.insert({3, 3}, kv_caches(2, 0));  // C
  EXPECT_EQ(store.bytes(), 3 * kLayerBytes);
  EXPECT_EQ(store.fetch({1, 1, 7}).tokens, 2);  // A is now the most recent: B is the LRU
  store.insert({4, 4}, kv_caches(2, 0));        // D evicts B
  EXPECT_EQ(store.entries(), 3u);
  EXPECT_EQ(store.bytes(), 3 * kLayerBytes);
  EXPECT_EQ(store.fetch({2, 2, 7}).tokens, 0);
  // Order now (oldest first): C, A, D. Refresh C; a two-layer entry needs two slots: A, D go.
  EXPECT_EQ(store.fetch({3, 3, 7}).tokens, 2);
  store.insert({5, 5}, kv_caches(2, 0, /*layers=*/2));
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.bytes(), 3 * kLayerBytes);
  EXPECT_EQ(store.fetch({1, 1, 7}).tokens, 0);
  EXPECT_EQ(store.fetch({4, 4, 7}).tokens, 0);
  EXPECT_EQ(store.fetch({3, 3, 7}).tokens, 2);
  EXPECT_EQ(store.fetch({5, 5, 7}).tokens, 2);
  // Order: C, {5,5}. Replacing C refreshes it, so the next insert evicts {5,5}, not C.
  store.insert({3, 3}, kv_caches(2, 1));
  store.insert({6, 6}, kv_caches(2, 0, /*layers=*/2));
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.fetch({3, 3, 7}).tokens, 2);
  EXPECT_EQ(store.fetch({5, 5, 7}).tokens, 0);
}

TEST(PromptCacheStore, EntryOverTheCapNotStored) {
  PromptCacheStore store(kLayerBytes);
  store.insert({1, 2}, kv_caches(2, 0));
  store.insert({1, 2, 3}, kv_caches(3, 0, /*layers=*/2));  // 2 * kLayerBytes > cap
  EXPECT_EQ(store.entries(), 1u);  // refused whole: the prefix {1,2} is not dropped either
  EXPECT_EQ(store.bytes(), kLayerBytes);
  auto hit = store.fetch({1, 2, 3});
  EXPECT_EQ(hit.tokens, 2);
  expect_kv_rows(hit, 2, 2, 0);
  PromptCacheStore none(0);
  none.insert({1, 2}, kv_caches(2, 0));
  EXPECT_EQ(none.entries(), 0u);
  EXPECT_EQ(none.bytes(), 0);
}

TEST(PromptCacheStore, RotatingNotWrappedIsTrimmed) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3, 4}, rotating_caches(4, 8, 0));
  auto hit = store.fetch({1, 2, 3, 4});
  EXPECT_EQ(hit.tokens, 3);
  ASSERT_EQ(hit.caches.size(), 1u);
  EXPECT_EQ(hit.caches[0]->offset(), 3);
  auto [k, v] = dynamic_cast<RotatingKVCache&>(*hit.caches[0]).keys_and_values();
  EXPECT_TRUE(same_array(k, rows_of(keys_for(4, 0), 0, 3)));
}

TEST(PromptCacheStore, RotatingWrappedUsableOnlyAsStrictPrefix) {
  PromptCacheStore store(1 << 20);
  const auto six = iota_tokens(6);
  auto wrapped = rotating_caches(6, 4, 0);
  ASSERT_FALSE(wrapped[0]->is_trimmable());
  const int64_t wrapped_bytes = prompt_cache_nbytes(wrapped);
  store.insert(six, std::move(wrapped));

  auto seven = iota_tokens(7);
  auto hit = store.fetch(seven);  // strict prefix: no trim needed
  EXPECT_EQ(hit.tokens, 6);
  ASSERT_EQ(hit.caches.size(), 1u);
  EXPECT_EQ(hit.caches[0]->offset(), 6);
  EXPECT_EQ(store.fetch(six).tokens, 0);              // exact: would need a trim
  EXPECT_EQ(store.fetch({1, 2, 3}).tokens, 0);        // longer entry: would need a trim
  EXPECT_EQ(store.fetch({1, 2, 3, 4, 5, 9}).tokens, 0);

  // A shorter trimmable entry is the fallback; the wrapped entry stays (shorter insert).
  store.insert({1, 2}, kv_caches(2, 50));
  EXPECT_EQ(store.entries(), 2u);
  hit = store.fetch(six);
  EXPECT_EQ(hit.tokens, 2);
  expect_kv_rows(hit, 2, 2, 50);
  hit = store.fetch({1, 2, 3, 4});
  EXPECT_EQ(hit.tokens, 2);

  // A non-trimmable insert keeps its prefixes (they serve prompts it cannot).
  store.insert(six, rotating_caches(6, 4, 0));
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.bytes(), wrapped_bytes + kLayerBytes);
  EXPECT_EQ(store.fetch(seven).tokens, 6);
}

TEST(PromptCacheStore, WrappedExactFallsBackToTrimmableLongerEntry) {
  PromptCacheStore store(1 << 20);
  store.insert(iota_tokens(8), kv_caches(8, 300));
  store.insert(iota_tokens(6), rotating_caches(6, 4, 0));  // wrapped, below the KV entry's path
  EXPECT_EQ(store.entries(), 2u);
  auto hit = store.fetch(iota_tokens(6));  // the exact entry can't be trimmed; {1..8} can
  EXPECT_EQ(hit.tokens, 5);
  expect_kv_rows(hit, 5, 8, 300);
  hit = store.fetch({1, 2, 3});
  EXPECT_EQ(hit.tokens, 2);
  expect_kv_rows(hit, 2, 8, 300);
}

TEST(PromptCacheStore, CountersAndClear) {
  PromptCacheStore store(1 << 20);
  store.insert({1, 2, 3}, kv_caches(3, 0));
  store.insert({4, 5, 6}, kv_caches(3, 0));
  EXPECT_EQ(store.fetch({1, 2, 3, 4}).tokens, 3);
  EXPECT_EQ(store.fetch({4, 5}).tokens, 1);
  EXPECT_EQ(store.fetch({7, 8}).tokens, 0);
  EXPECT_EQ(store.hits(), 2u);
  EXPECT_EQ(store.misses(), 1u);
  store.clear();
  EXPECT_EQ(store.entries(), 0u);
  EXPECT_EQ(store.bytes(), 0);
  EXPECT_EQ(store.fetch({1, 2, 3, 4}).tokens, 0);
  EXPECT_EQ(store.hits(), 2u);  // counters are cumulative metrics: clear() keeps them
  EXPECT_EQ(store.misses(), 2u);
  store.insert({1, 2, 3}, kv_caches(3, 7));  // usable again after clear()
  EXPECT_EQ(store.fetch({1, 2, 3, 4}).tokens, 3);
  EXPECT_EQ(store.bytes(), kLayerBytes);
}

// Runs fn on a thread with a 256 KiB stack (a recursive free of a long trie path overflows it).
void run_on_small_stack(const std::function<void()>& fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
  pthread_t thread;
  auto trampoline = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, trampoline, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(PromptCacheStore, EvictionPrunesTrieAndLongPromptsDoNotRecurse) {
  // One trie node per token: 200k tokens must be freed without deep recursion (clear(),
  // eviction and the destructor). The caches are made here; the store works on a small stack.
  const auto tokens = iota_tokens(200000);
  std::vector<LayerCaches> caches;
  for (int i = 0; i < 4; ++i) caches.push_back(kv_caches(i == 1 ? 2 : 1, 0));
  std::vector<int> results;
  run_on_small_stack([&] {
    PromptCacheStore store(kLayerBytes);
    store.insert(tokens, std::move(caches[0]));
    auto prompt = tokens;
    prompt.push_back(-1);
    results.push_back(store.fetch(prompt).tokens);
    store.insert({7, 7}, std::move(caches[1]));  // evicts the long entry and prunes its path
    results.push_back(static_cast<int>(store.entries()));
    results.push_back(store.fetch(prompt).tokens);
    store.insert(tokens, std::move(caches[2]));
    store.clear();
    store.insert(tokens, std::move(caches[3]));
    results.push_back(static_cast<int>(store.entries()));
  });  // the destructor ran on the small stack too
  EXPECT_EQ(results, (std::vector<int>{200000, 1, 0, 1}));
}

TEST(PromptCacheStore, MetricsReadableFromAnotherThread) {
  PromptCacheStore store(4 * kLayerBytes);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      EXPECT_LE(store.bytes(), 4 * kLayerBytes);
      EXPECT_LE(store.entries(), 4u);
      (void)store.hits();
    }
  });
  for (int i = 0; i < 50; ++i) {
    store.insert({i, i + 1}, kv_caches(2, i));
    store.fetch({i, i + 1, i + 2});
  }
  done = true;
  reader.join();
  EXPECT_EQ(store.entries(), 4u);
  EXPECT_EQ(store.hits(), 50u);
}

}  // namespace
