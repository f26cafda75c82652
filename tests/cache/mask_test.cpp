// create_causal_mask / create_attention_mask: mlx-lm tests/test_models.py test_mask_with_window
// and the cache-free cases of tests/test_prompt_cache.py test_make_mask_with_cache.
#include <gtest/gtest.h>

#include <mlx/mlx.h>

#include "cache/mask.h"

namespace mx = mlx::core;
using namespace mlxcpp;

namespace {

bool same_array(const mx::array& a, const mx::array& b) {
  return a.shape() == b.shape() && mx::array_equal(a, b).item<bool>();
}

std::vector<int> row_sums(const mx::array& mask) {
  auto s = mx::astype(mx::sum(mask, 1), mx::int32);
  s.eval();
  return std::vector<int>(s.data<int>(), s.data<int>() + s.size());
}

// The definition, entry by entry.
mx::array reference_mask(int n, int offset, std::optional<int> window) {
  std::vector<bool> v;
  std::vector<uint8_t> cells;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < offset + n; ++j) {
      int q = offset + i;
      cells.push_back(j <= q && (!window || q < j + *window));
    }
  }
  mx::array a(cells.begin(), {n, offset + n}, mx::uint8);
  return mx::astype(a, mx::bool_);
}

TEST(CausalMask, MatchesDefinition) {
  for (int n = 1; n <= 5; ++n) {
    for (int offset = 0; offset <= 6; ++offset) {
      for (std::optional<int> w : {std::optional<int>(), std::optional<int>(1),
                                   std::optional<int>(2), std::optional<int>(4)}) {
        auto m = create_causal_mask(n, offset, w);
        EXPECT_EQ(m.dtype(), mx::bool_);
        EXPECT_TRUE(same_array(m, reference_mask(n, offset, w)))
            << "n=" << n << " offset=" << offset << " window=" << (w ? *w : -1);
      }
    }
  }
}

TEST(CausalMask, WithWindow) {  // test_mask_with_window
  auto mask = create_causal_mask(5, 0, 3);
  EXPECT_EQ(row_sums(mask), (std::vector<int>{1, 2, 3, 3, 3}));

  mask = create_causal_mask(5, 1, 3);
  EXPECT_EQ(mask.shape(), (mx::Shape{5, 6}));
  EXPECT_EQ(row_sums(mask), (std::vector<int>{2, 3, 3, 3, 3}));

  mask = create_causal_mask(5, 2, 3);
  EXPECT_EQ(mask.shape(), (mx::Shape{5, 7}));
  EXPECT_EQ(row_sums(mask), (std::vector<int>{3, 3, 3, 3, 3}));
}

TEST(AttentionMask, CacheModuleRules) {  // cache.py create_attention_mask
  EXPECT_TRUE(create_attention_mask(1, 5, false, std::nullopt).is_none());
  EXPECT_TRUE(create_attention_mask(1, 5, true, std::nullopt).is_none());
  EXPECT_TRUE(create_attention_mask(4, 5, false, std::nullopt).is_causal());
  auto m = create_attention_mask(4, 5, true, std::nullopt);
  ASSERT_TRUE(m.is_array());
  EXPECT_TRUE(same_array(*m.array, create_causal_mask(4, 5)));
  // A window always gives an array, even for one query.
  m = create_attention_mask(1, 32, false, 4);
  ASSERT_TRUE(m.is_array());
  EXPECT_TRUE(same_array(*m.array, create_causal_mask(1, 32, 4)));
}

TEST(AttentionMask, WithoutCache) {  // test_make_mask_with_cache, cache=None
  const KVCacheBase* none = nullptr;
  EXPECT_TRUE(create_attention_mask(1, none, std::nullopt, false).is_none());
  EXPECT_TRUE(create_attention_mask(1, none, std::nullopt, true).is_none());
  EXPECT_TRUE(create_attention_mask(4, none, std::nullopt, false).is_causal());
  auto m = create_attention_mask(4, none, std::nullopt, true);
  ASSERT_TRUE(m.is_array());
  EXPECT_TRUE(same_array(*m.array, create_causal_mask(4)));
  EXPECT_TRUE(create_attention_mask(4, none, 4, false).is_causal());
  m = create_attention_mask(4, none, 3, false);
  ASSERT_TRUE(m.is_array());
  EXPECT_TRUE(same_array(*m.array, create_causal_mask(4, 0, 3)));
}

TEST(AttentionMask, Helpers) {
  EXPECT_TRUE(AttentionMask::none().is_none());
  EXPECT_FALSE(AttentionMask::none().array.has_value());
  EXPECT_TRUE(AttentionMask::causal().is_causal());
  EXPECT_FALSE(AttentionMask::causal().array.has_value());
  auto m = AttentionMask::of(mx::array({true, false}));
  EXPECT_TRUE(m.is_array());
  EXPECT_TRUE(m.array.has_value());
  EXPECT_EQ(AttentionMask{}.kind, AttentionMask::Kind::None);
}

}  // namespace
