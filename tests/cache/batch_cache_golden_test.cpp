// Replays the scenarios recorded by tools/oracle/batch_cache_goldens.py (mlx-lm's BatchKVCache /
// BatchRotatingKVCache and the solo caches they merge and extract) against our caches: every
// fetched key/value, state buffer, offset, left padding, scalar and mask must equal mlx-lm's
// exactly. "probe" steps ran on a copy in mlx-lm (which may refuse them); here they must throw
// mlxcpp::Error or succeed as the scenario says.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "cache/batch_kv_cache.h"
#include "cache/batch_rotating_kv_cache.h"
#include "cache/rotating_kv_cache.h"
#include "core/errors.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using nlohmann::json;

namespace {

using Golden = test::GoldenFile;

std::optional<Golden> load_golden(const std::string& name) {
  return test::load_golden_file("batch_cache", name, "batch_cache_goldens.py");
}

::testing::AssertionResult same(const mx::array& got, const mx::array& want) { return test::same_array(got, want); }

using test::int64s;

std::vector<int64_t> widen(const std::vector<int>& v) { return {v.begin(), v.end()}; }

std::vector<int> int_list(const json& j) { return j.get<std::vector<int>>(); }

// [idx, tokens seen, rotated, batch size, empty, size], as the script records them.
std::vector<int64_t> scalars(const KVCacheBase& c) {
  std::vector<int64_t> s;
  if (auto* r = dynamic_cast<const BatchRotatingKVCache*>(&c)) {
    s = {r->idx(), r->tokens_seen(), r->rotated(), r->batch_size()};
  } else if (auto* b = dynamic_cast<const BatchCacheBase*>(&c)) {
    s = {b->offset(), b->offset(), 0, b->batch_size()};
  } else if (auto* rs = dynamic_cast<const RotatingKVCache*>(&c)) {
    s = {rs->idx(), rs->offset(), 0, 1};
  } else {
    s = {c.offset(), c.offset(), 0, 1};
  }
  s.push_back(c.empty());
  s.push_back(c.size());
  return s;
}

void check_cache(const Golden& g, const std::string& p, const KVCacheBase& c) {
  SCOPED_TRACE("cache " + p);
  auto state = c.state();
  if (g.has(p + ".keys")) {
    ASSERT_EQ(state.size(), 2u) << "the golden cache holds buffers";
    EXPECT_TRUE(same(state[0], g.at(p + ".keys"))) << "state keys";
    EXPECT_TRUE(same(state[1], g.at(p + ".values"))) << "state values";
  } else {
    EXPECT_TRUE(state.empty()) << "the golden cache is empty";
  }
  EXPECT_EQ(scalars(c), int64s(g.at(p + ".scalars"))) << "[idx, seen, rotated, B, empty, size]";
  if (auto* b = dynamic_cast<const BatchCacheBase*>(&c)) {
    EXPECT_EQ(widen(b->offsets()), int64s(g.at(p + ".offsets"))) << "offsets";
    EXPECT_EQ(widen(b->left_padding()), int64s(g.at(p + ".left_padding"))) << "left padding";
  } else {
    EXPECT_EQ(std::vector<int64_t>{c.offset()}, int64s(g.at(p + ".offsets"))) << "offset";
  }
  std::istringstream qs(g.field("mask_queries"));
  std::string q;
  while (qs >> q) {
    const int n = std::stoi(q.substr(0, q.find(':'))), w = std::stoi(q.substr(q.find(':') + 1));
    const std::string name = p + ".mask.n" + std::to_string(n) + ".w" + std::to_string(w);
    AttentionMask m = c.make_mask(n, w == 0 ? std::nullopt : std::optional<int>(w), false);
    ASSERT_EQ(static_cast<int>(m.kind), int64s(g.at(name + ".kind"))[0]) << name;
    if (m.is_array()) {
      EXPECT_TRUE(same(*m.array, g.at(name))) << name;
      // Where mlx-lm's mask hides valid keys (see fixed_rotated_mask in the script), ours differs.
      if (g.has(name + ".mlx_lm")) {
        EXPECT_FALSE(same(*m.array, g.at(name + ".mlx_lm"))) << name;
      }
    }
  }
}

using Caches = std::map<std::string, std::unique_ptr<KVCacheBase>>;

class Replayer {
 public:
  explicit Replayer(const Golden& g) : g_(g) {
    std::istringstream d(g.field("dims"));
    d >> h_ >> dk_ >> dv_;
  }

  // Runs op `o` of step `p` on `caches`; returns the names of the caches it touched.
  std::vector<std::string> apply(Caches& caches, const json& o, const std::string& p) {
    const std::string kind = o["op"];
    const std::string name = o.value("name", json()).is_string() ? o["name"].get<std::string>() : "";
    if (kind == "batch") {
      auto lp = int_list(o["left_padding"]);
      if (o["kind"] == "rot") {
        caches[name] = std::make_unique<BatchRotatingKVCache>(o["max_size"].get<int>(), lp);
      } else {
        caches[name] = std::make_unique<BatchKVCache>(lp);
      }
    } else if (kind == "solo") {
      if (o["kind"] == "rot") {
        caches[name] = std::make_unique<RotatingKVCache>(o["max_size"].get<int>());
      } else {
        caches[name] = std::make_unique<KVCache>();
      }
    } else if (kind == "update") {
      update(*caches.at(name), o, p);
    } else if (kind == "prepare") {
      auto get = [&](const char* k) { return o.contains(k) ? int_list(o[k]) : std::vector<int>{}; };
      batch(caches, name).prepare(get("left_padding"), get("lengths"), get("right_padding"));
    } else if (kind == "finalize") {
      batch(caches, name).finalize();
    } else if (kind == "trim") {
      const int trimmed = caches.at(name)->trim(o["n"].get<int>());
      if (g_.has(p + ".trimmed")) {
        EXPECT_EQ(trimmed, int64s(g_.at(p + ".trimmed"))[0]) << "trimmed";
      }
    } else if (kind == "filter") {
      batch(caches, name).filter(int_list(o["keep"]));
    } else if (kind == "extend") {
      batch(caches, name).extend(batch(caches, o["other"]));
      return {name, o["other"]};
    } else if (kind == "extract") {
      caches[o["into"]] = batch(caches, name).extract(o["row"].get<int>());
      return {name, o["into"]};
    } else if (kind == "merge") {
      std::vector<const KVCacheBase*> solos;
      for (const auto& n : o["names"]) solos.push_back(caches.at(n.get<std::string>()).get());
      caches[o["into"]] = merge_layer_caches(solos);
      return {o["into"]};
    } else {
      ADD_FAILURE() << "unknown op " << o.dump();
    }
    return {name};
  }

 private:
  static BatchCacheBase& batch(Caches& caches, const std::string& name) {
    auto* b = dynamic_cast<BatchCacheBase*>(caches.at(name).get());
    if (b == nullptr) throw std::runtime_error("cache '" + name + "' is not a batch cache");
    return *b;
  }

  void update(KVCacheBase& c, const json& o, const std::string& p) {
    const int s = o["S"];
    if (!g_.has(p + ".in_keys")) {  // a probe: mlx-lm recorded no inputs
      auto* b = dynamic_cast<BatchCacheBase*>(&c);
      const int rows = o.value("rows", b ? b->batch_size() : 1);
      c.update_and_fetch(mx::zeros({rows, h_, s, dk_}), mx::zeros({rows, h_, s, dv_}));
      return;
    }
    auto [k, v] = c.update_and_fetch(g_.at(p + ".in_keys"), g_.at(p + ".in_values"));
    EXPECT_TRUE(same(k, g_.at(p + ".keys"))) << "fetched keys";
    EXPECT_TRUE(same(v, g_.at(p + ".values"))) << "fetched values";
  }

  const Golden& g_;
  int h_ = 0, dk_ = 0, dv_ = 0;
};

Caches clone_all(const Caches& caches) {
  Caches out;
  for (const auto& [name, c] : caches) out[name] = c->clone();
  return out;
}

void replay(const Golden& g) {
  auto ops = json::parse(g.field("ops"));
  Replayer r(g);
  Caches caches;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string p = std::to_string(i);
    const json& o = ops[i];
    SCOPED_TRACE("step " + p + ": " + o.dump());
    if (o["op"] == "probe") {
      Caches trial = clone_all(caches);
      const std::string mlx_lm = g.field(p + ".mlx_lm");
      if (o["cpp"] == "throws") {
        EXPECT_THROW(r.apply(trial, o["of"], p), Error) << "mlx-lm: " << mlx_lm;
      } else {
        EXPECT_NO_THROW(r.apply(trial, o["of"], p)) << "mlx-lm: " << mlx_lm;
      }
      continue;
    }
    for (const auto& name : r.apply(caches, o, p)) check_cache(g, p + "." + name, *caches.at(name));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

class BatchCacheGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchCacheGolden, MatchesMlxLm) {
  auto g = load_golden(GetParam());
  if (!g) return;
  replay(*g);
}

INSTANTIATE_TEST_SUITE_P(Cache, BatchCacheGolden,
                         ::testing::Values("kv_left_padding", "kv_prepare", "kv_extend", "kv_merge", "rot_wrap",
                                           "rot_wrap_same_idx", "rot_prepare", "rot_merge", "probes"),
                         [](const auto& info) { return info.param; });

}  // namespace
