// RaggedKVCache's bookkeeping (no model): solo caches merged, filtered, extended, split and
// extracted come back bit for bit; the row buffers keep their rows when they grow; bad input
// and the stock-ops entry points throw named errors. (Its decode and prefill through the fused
// blocks: tests/models/test_batch_fast_path.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include <mlx/mlx.h>

#include "cache/batch_kv_cache.h"
#include "cache/ragged_kv_cache.h"
#include "core/errors.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;

namespace {

constexpr int kH = 2, kD = 4;

// A solo cache holding `len` random tokens (empty for 0).
std::unique_ptr<KVCache> solo(int len, uint64_t seed) {
  auto c = std::make_unique<KVCache>();
  if (len > 0) {
    auto [k, v] = c->update_and_fetch(test::randn({1, kH, len, kD}, seed), test::randn({1, kH, len, kD}, seed + 1));
    mx::eval(k, v);
  }
  return c;
}

void expect_same(const KVCacheBase& got, const KVCache& want, const char* what) {
  ASSERT_EQ(got.offset(), want.offset()) << what;
  if (want.offset() == 0) {
    EXPECT_TRUE(got.empty()) << what;
    return;
  }
  auto [gk, gv] = dynamic_cast<const KVCache&>(got).keys_and_values();
  auto [wk, wv] = want.keys_and_values();
  EXPECT_EQ(gk.shape(), wk.shape()) << what;
  EXPECT_TRUE(mx::array_equal(gk, wk).item<bool>()) << what;
  EXPECT_TRUE(mx::array_equal(gv, wv).item<bool>()) << what;
}

std::vector<const KVCache*> ptrs(const std::vector<std::unique_ptr<KVCache>>& v) {
  std::vector<const KVCache*> out;
  for (const auto& c : v) out.push_back(c.get());
  return out;
}

TEST(RaggedKVCache, MergeFilterExtendSplitExtractRoundTrip) {
  std::vector<std::unique_ptr<KVCache>> a, b;
  for (int len : {5, 0, 300}) a.push_back(solo(len, 10 + len));
  for (int len : {1, 17}) b.push_back(solo(len, 20 + len));
  auto batch = RaggedKVCache::merge(ptrs(a), false);
  EXPECT_EQ(batch->offsets(), (std::vector<int>{5, 0, 300}));
  EXPECT_EQ(batch->left_padding(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(batch->offset(), 300);
  // Rows hold their own lengths only (capacity in steps of 256), not the longest row's.
  EXPECT_EQ(batch->nbytes(), int64_t{2} * kH * kD * 4 * (256 + 512));
  auto other = RaggedKVCache::merge(ptrs(b), false);
  batch->filter({2, 0});
  batch->extend(*other);
  EXPECT_EQ(other->batch_size(), 0) << "extend moves the rows over";
  EXPECT_EQ(batch->offsets(), (std::vector<int>{300, 5, 1, 17}));
  const std::vector<const KVCache*> want{a[2].get(), a[0].get(), b[0].get(), b[1].get()};
  for (int r = 0; r < 4; ++r) expect_same(*batch->extract(r), *want[r], "extracted row");
  auto part = batch->split_off({3, 1});
  EXPECT_EQ(part->offsets(), (std::vector<int>{17, 5}));
  expect_same(*part->extract(0), *b[1], "split row");
  auto copy = batch->clone();
  expect_same(*static_cast<RaggedKVCache&>(*copy).extract(0), *a[2], "cloned row");
  EXPECT_EQ(batch->trim(10), 10);
  EXPECT_EQ(batch->offsets(), (std::vector<int>{290, 0, 0, 7}));
  // Right padding: finalize forgets the padded rows of each row.
  auto padded = std::make_unique<RaggedKVCache>(2, false);
  padded->prepare({}, {3, 5}, {2, 0});
  EXPECT_EQ(padded->offsets(), (std::vector<int>{0, 0}));
  padded->finalize();
  EXPECT_EQ(padded->offsets(), (std::vector<int>{0, 0}));
}

TEST(RaggedKVCache, Float16RowsConvertOnMerge) {
  std::vector<std::unique_ptr<KVCache>> a;
  a.push_back(solo(9, 3));
  auto batch = RaggedKVCache::merge(ptrs(a), true);
  auto row = batch->extract(0);
  auto [k, v] = dynamic_cast<KVCache&>(*row).keys_and_values();
  auto [wk, wv] = a[0]->keys_and_values();
  EXPECT_EQ(k.dtype(), mx::float16);
  EXPECT_TRUE(mx::array_equal(k, mx::astype(wk, mx::float16)).item<bool>());
  EXPECT_TRUE(mx::array_equal(v, mx::astype(wv, mx::float16)).item<bool>());
}

TEST(KVRowBuffer, GrowingKeepsTheRows) {
  kernels::KVRowBuffer row;
  EXPECT_FALSE(row.laid_out());
  row.reserve(kH, kD, false, 3, 0);
  EXPECT_EQ(row.cap(), kernels::KVRowBuffer::kStep);
  std::vector<float> k(kH * 3 * kD), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i), v[i] = -static_cast<float>(i);
  row.copy_in(3, k.data(), v.data());
  row.reserve(kH, kD, false, kernels::KVRowBuffer::kStep + 1, 3);
  EXPECT_EQ(row.cap(), 2 * kernels::KVRowBuffer::kStep);
  std::vector<float> k2(k.size()), v2(v.size());
  row.copy_out(3, k2.data(), v2.data());
  EXPECT_EQ(k2, k);
  EXPECT_EQ(v2, v);
  EXPECT_EQ(row.nbytes(), int64_t{2} * kH * kD * 4 * 2 * kernels::KVRowBuffer::kStep);
  EXPECT_THROW(row.reserve(kH, kD, true, 1, 0), Error) << "another layout";
  EXPECT_THROW(row.reserve(kH, kD, false, 1, row.cap() + 1), Error) << "keeping rows it does not have";
  EXPECT_THROW(row.copy_out(row.cap() + 1, k2.data(), v2.data()), Error);
}

TEST(RaggedKVCache, BadInputThrowsError) {
  RaggedKVCache c(2, false);
  auto x = test::randn({2, kH, 1, kD}, 1);
  EXPECT_THROW(c.update_and_fetch(x, x), Error) << "stock ops cannot write a ragged batch";
  EXPECT_THROW(c.make_mask(1), Error);
  EXPECT_THROW(c.prepare({1, 0}, {}, {}), Error) << "left padding";
  EXPECT_THROW(c.prepare({}, {}, {1}), Error) << "right padding for another batch size";
  EXPECT_THROW(c.prepare({}, {}, {-1, 0}), Error);
  EXPECT_THROW(c.extract(2), Error);
  EXPECT_THROW(c.filter({0, 5}), Error);
  EXPECT_THROW(c.split_off({-1}), Error);
  EXPECT_THROW(c.trim(-1), Error);
  BatchKVCache padded({0, 0});
  EXPECT_THROW(c.extend(padded), Error) << "a left-padded batch";
  RaggedKVCache half(1, true);
  EXPECT_THROW(c.extend(half), Error) << "another dtype";
  KVCache two;
  two.update_and_fetch(test::randn({2, kH, 3, kD}, 2), test::randn({2, kH, 3, kD}, 3));
  EXPECT_THROW(RaggedKVCache::merge({&two}, false), Error) << "two sequences in one row's cache";
}

}  // namespace
