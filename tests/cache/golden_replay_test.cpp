// Replays the op sequences recorded by tools/oracle/cache_goldens.py against our caches and
// requires every fetched key/value, state buffer, scalar and mask to equal mlx-lm's exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <mlx/mlx.h>

#include "cache/kv_cache.h"
#include "cache/prompt_cache.h"
#include "cache/rotating_kv_cache.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;

namespace {

using Golden = test::GoldenFile;

std::optional<Golden> load_golden(const std::string& name) {
  return test::load_golden_file("cache", name, "cache_goldens.py");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

::testing::AssertionResult same(const mx::array& got, const mx::array& want) { return test::same_array(got, want); }

using test::int64s;

void check_masks(const Golden& g, const std::string& prefix, const KVCacheBase& cache) {
  for (const auto& q : split(g.field("mask_queries"), ' ')) {
    auto parts = split(q, ':');
    int n = std::stoi(parts[0]), w = std::stoi(parts[1]), r = std::stoi(parts[2]);
    std::string name = prefix + ".mask.n" + parts[0] + ".w" + parts[1] + ".r" + parts[2];
    SCOPED_TRACE("mask " + name);
    auto window = w == 0 ? std::nullopt : std::optional<int>(w);
    AttentionMask m = cache.make_mask(n, window, r != 0);
    int want_kind = static_cast<int>(int64s(g.at(name + ".kind"))[0]);
    ASSERT_EQ(static_cast<int>(m.kind), want_kind);
    EXPECT_EQ(m.array.has_value(), m.is_array());
    if (m.is_array()) {
      EXPECT_TRUE(same(*m.array, g.at(name)));
    }
  }
}

void check_state(const Golden& g, const std::string& p, const KVCacheBase& cache, int trimmed) {
  auto want = int64s(g.at(p + ".scalars"));
  int idx = -1;
  if (auto* rot = dynamic_cast<const RotatingKVCache*>(&cache)) idx = rot->idx();
  std::vector<int64_t> got{cache.offset(), cache.size(),      cache.nbytes(), cache.empty(),
                           cache.is_trimmable(), trimmed, idx};
  EXPECT_EQ(got, want) << "[offset, size, nbytes, empty, is_trimmable, trimmed, idx]";
  auto state = cache.state();
  if (g.arrays.count(p + ".state_keys")) {
    ASSERT_EQ(state.size(), 2u);
    EXPECT_TRUE(same(state[0], g.at(p + ".state_keys"))) << "state keys";
    EXPECT_TRUE(same(state[1], g.at(p + ".state_values"))) << "state values";
  } else {
    EXPECT_TRUE(state.empty());
  }
  check_masks(g, p, cache);
}

void replay(const Golden& g) {
  LayerCaches caches;
  if (g.field("kind") == "kv") {
    caches.push_back(std::make_unique<KVCache>());
  } else {
    caches.push_back(std::make_unique<RotatingKVCache>(
        std::stoi(g.field("max_size")), std::stoi(g.field("keep"))));
  }
  KVCacheBase& cache = *caches[0];
  {
    SCOPED_TRACE("init");
    check_masks(g, "init", cache);
  }
  auto ops = split(g.field("ops"), ' ');
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string p = std::to_string(i);
    SCOPED_TRACE("step " + p + " (" + ops[i] + ")");
    const char code = ops[i][0];
    const int n = std::stoi(ops[i].substr(1));
    if (code == 'u' || code == 's') {
      const auto& in_k = g.at(p + ".in_keys");
      const auto& in_v = g.at(p + ".in_values");
      std::optional<std::pair<mx::array, mx::array>> kv;
      if (code == 'u') {
        kv = cache.update_and_fetch(in_k, in_v);
      } else {
        for (int j = 0; j < n; ++j) {
          auto sl = [j](const mx::array& a) {
            return mx::slice(a, {0, 0, j, 0}, {a.shape(0), a.shape(1), j + 1, a.shape(3)});
          };
          kv = cache.update_and_fetch(sl(in_k), sl(in_v));
        }
      }
      EXPECT_TRUE(same(kv->first, g.at(p + ".keys"))) << "fetched keys";
      EXPECT_TRUE(same(kv->second, g.at(p + ".values"))) << "fetched values";
      check_state(g, p, cache, -1);
    } else if (code == 't') {
      int trimmed = trim_prompt_cache(caches, n);
      check_state(g, p, cache, trimmed);
    } else {
      FAIL() << "unknown op " << ops[i];
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

class GoldenReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenReplay, MatchesMlxLm) {
  auto g = load_golden(GetParam());
  if (!g) return;
  replay(*g);
}

INSTANTIATE_TEST_SUITE_P(
    Cache,
    GoldenReplay,
    ::testing::Values(
        "kv_growth", "kv_f16_batch", "rot8_keep0", "rot8_keep2", "rot8_prefill7", "rot6_trim",
        "rot18_chat", "rot16_keep4", "rot300_keep4", "rot4_single"),
    [](const auto& info) { return info.param; });

// masks.safetensors: create_causal_mask and cache.py create_attention_mask over a grid.
TEST(MaskGoldens, MatchMlxLm) {
  auto g = load_golden("masks");
  if (!g) return;
  int checked = 0;
  for (int n = 1; n <= 6; ++n) {
    for (int off = 0; off <= 4; ++off) {
      for (int w : {0, 1, 2, 3, 7}) {
        auto window = w == 0 ? std::nullopt : std::optional<int>(w);
        std::string tag = ".n" + std::to_string(n) + ".o" + std::to_string(off) + ".w" + std::to_string(w);
        SCOPED_TRACE(tag);
        EXPECT_TRUE(same(create_causal_mask(n, off, window), g->at("causal" + tag)));
        for (int r : {0, 1}) {
          std::string key = "attn" + tag + ".r" + std::to_string(r);
          auto m = create_attention_mask(n, off, r != 0, window);
          ASSERT_EQ(static_cast<int>(m.kind), static_cast<int>(int64s(g->at(key + ".kind"))[0])) << key;
          if (m.is_array()) {
            EXPECT_TRUE(same(*m.array, g->at(key))) << key;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 5 * 5 * 2);
}

}  // namespace
