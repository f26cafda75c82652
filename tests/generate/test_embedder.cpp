// Embeddings (last-token pooling + L2 normalization) against mlx-lm's final normed hidden states
// on the tiny qwen3 checkpoints (tools/oracle/embedding_goldens.py): bit-identical in parity mode
// (normalized, raw, Matryoshka-truncated, chunked through a cache, a two-row batch); the fast
// path within cosine 0.9999; a batch of mixed lengths equals each input run alone.
#include <cmath>

#include <gtest/gtest.h>
#include <mlx/mlx.h>

#include "core/errors.h"
#include "generate/embedder.h"
#include "golden_model.h"
#include "test_support.h"

namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

std::vector<int> ids_of(const mx::array& a) {
  std::vector<int> out;
  for (int64_t v : int64s(a)) out.push_back(static_cast<int>(v));
  return out;
}

mx::array vec(const std::vector<float>& v) { return mx::array(v.data(), {static_cast<int>(v.size())}, mx::float32); }

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

class EmbedderTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto g = load_golden_file("embedding", GetParam(), "embedding_goldens.py");
    ASSERT_TRUE(g.has_value());
    golden_ = std::move(*g);
    count_ = std::stoi(golden_.field("count"));
    dimensions_ = std::stoi(golden_.field("dimensions"));
    chunk_ = std::stoi(golden_.field("chunk"));
    for (int i = 0; i < count_; ++i) inputs_.push_back(ids_of(golden_.at("ids_" + std::to_string(i))));
  }
  LoadedModel load(bool parity) const {
    return load_model(tiny_model_dir(GetParam()), parity ? ModelOptions::parity_mode() : ModelOptions{});
  }
  const mx::array& at(const std::string& key, int i) const { return golden_.at(key + "_" + std::to_string(i)); }

  GoldenFile golden_;
  int count_ = 0, dimensions_ = 0, chunk_ = 0;
  std::vector<std::vector<int>> inputs_;
};

TEST_P(EmbedderTest, ParityEqualsMlxLm) {
  auto loaded = load(true);
  EmbedOptions raw, dims, chunked;
  raw.normalize = false;
  dims.dimensions = dimensions_;
  chunked.step_size = chunk_;
  for (int i = 0; i < count_; ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i) + " (" + std::to_string(inputs_[i].size()) + " tokens)");
    const std::vector<std::vector<int>> one{inputs_[i]};
    auto e = embed(*loaded.model, one).at(0);
    ASSERT_EQ(e.size(), static_cast<size_t>(loaded.model->hidden_size()));
    EXPECT_EQ(max_abs_diff(vec(e), at("emb", i)), 0.0f);
    EXPECT_EQ(max_abs_diff(vec(embed(*loaded.model, one, raw).at(0)), at("hidden", i)), 0.0f);
    auto d = embed(*loaded.model, one, dims).at(0);
    ASSERT_EQ(d.size(), static_cast<size_t>(dimensions_));
    EXPECT_EQ(max_abs_diff(vec(d), at("dim", i)), 0.0f);
    EXPECT_EQ(max_abs_diff(vec(embed(*loaded.model, one, chunked).at(0)), at("chunked", i)), 0.0f);
  }
}

TEST_P(EmbedderTest, ParityBatchEqualsMlxLmBatch) {
  auto loaded = load(true);
  auto batch = golden_.at("batch_ids");
  const int length = batch.shape(1);
  auto flat = ids_of(batch);
  std::vector<std::vector<int>> rows{{flat.begin(), flat.begin() + length}, {flat.begin() + length, flat.end()}};
  auto e = embed(*loaded.model, rows);
  auto want = golden_.at("batch_emb");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(max_abs_diff(vec(e[r]), mx::squeeze(mx::slice(want, {r, 0}, {r + 1, want.shape(1)}), 0)), 0.0f);
  }
}

TEST_P(EmbedderTest, FastPathWithinCosine) {
  auto loaded = load(false);
  auto all = embed(*loaded.model, inputs_);
  for (int i = 0; i < count_; ++i) {
    auto want = at("emb", i);
    mx::eval(want);
    std::vector<float> w(want.data<float>(), want.data<float>() + want.size());
    EXPECT_GE(cosine(all[i], w), 0.9999) << "prompt " << i;
  }
}

// Inputs of mixed lengths (some repeated, so some run as a batch) come out as each does alone.
TEST_P(EmbedderTest, BatchEqualsOneByOne) {
  for (bool parity : {true, false}) {
    SCOPED_TRACE(parity ? "parity" : "fast path");
    auto loaded = load(parity);
    std::vector<std::vector<int>> mixed{inputs_[2], inputs_[0], inputs_[3], inputs_[2], inputs_[1], inputs_[3]};
    mixed[3][0] = mixed[3][0] == 5 ? 6 : 5;  // same length as mixed[0], other content
    EmbedOptions o;
    o.dimensions = dimensions_;
    auto together = embed(*loaded.model, mixed, o);
    ASSERT_EQ(together.size(), mixed.size());
    for (size_t i = 0; i < mixed.size(); ++i) {
      auto alone = embed(*loaded.model, {mixed[i]}, o).at(0);
      EXPECT_EQ(together[i], alone) << "input " << i;
    }
    EXPECT_NE(together[0], together[3]);
  }
}

TEST_P(EmbedderTest, BadInputsNameTheInput) {
  auto loaded = load(true);
  const auto& m = *loaded.model;
  auto message = [&](const std::vector<std::vector<int>>& in, EmbedOptions o) -> std::string {
    try {
      embed(m, in, o);
    } catch (const RequestError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({{1, 2}, {}}, {}).find("input 1 is empty"), std::string::npos);
  EXPECT_NE(message({{1, m.vocab_size()}}, {}).find("outside the vocabulary"), std::string::npos);
  EmbedOptions too_wide;
  too_wide.dimensions = m.hidden_size() + 1;
  EXPECT_NE(message({{1}}, too_wide).find("dimensions"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Qwen3, EmbedderTest, ::testing::Values("qwen3-bf16", "qwen3-q4g64"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

}  // namespace
