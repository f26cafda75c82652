// GGUF import of the sparse families on bad input: a sparse layer's missing expert tensor, an
// expert count its tensors do not have, a top-k past the experts, an unsupported router, each a
// clear error naming the tensor or the key, before anything is written. The files are built
// byte by byte (gguf_test_util.h): only the metadata and a layer's sparse tensors.
#include <gtest/gtest.h>

#include "artifacts/gguf_convert.h"
#include "artifacts_test_util.h"
#include "core/errors.h"
#include "gguf_test_util.h"

namespace fs = std::filesystem;
using namespace mlxcpp;
using namespace mlxcpp::test;

namespace {

constexpr uint32_t kHidden = 32, kFf = 32, kExperts = 4;

// A one-layer sparse model's metadata and tensors (zeros, F32); `skip` leaves a tensor out,
// `experts_of` gives one tensor another expert count.
GgufBuilder sparse_model(const std::string& arch, const std::string& skip = "", const std::string& experts_of = "",
                         uint32_t used = 2) {
  GgufBuilder b;
  b.kv_str("general.architecture", arch);
  for (auto [key, v] : {std::pair<const char*, uint32_t>{"block_count", 1}, {"embedding_length", kHidden},
                        {"feed_forward_length", 64}, {"attention.head_count", 2}, {"attention.head_count_kv", 1},
                        {"attention.key_length", 16}, {"expert_count", kExperts}, {"expert_used_count", used},
                        {"expert_feed_forward_length", kFf}}) {
    b.kv_u32(arch + "." + key, v);
  }
  auto tensor = [&](const std::string& name, std::vector<int64_t> ne) {
    if (name == skip) return;
    if (name == experts_of) ne.back() = kExperts - 1;
    int64_t n = 1;
    for (auto d : ne) n *= d;
    b.tensors.push_back({name, ne, 0, std::string(static_cast<size_t>(n) * 4, '\0'), std::nullopt});
  };
  tensor("token_embd.weight", {kHidden, 16});
  tensor("blk.0.ffn_gate_inp.weight", {kHidden, kExperts});
  tensor("blk.0.ffn_gate_exps.weight", {kHidden, kFf, kExperts});
  tensor("blk.0.ffn_up_exps.weight", {kHidden, kFf, kExperts});
  tensor("blk.0.ffn_down_exps.weight", {kFf, kHidden, kExperts});
  if (arch == "glm4moe") {
    b.kv_u32("glm4moe.rope.dimension_count", 8);
    tensor("blk.0.exp_probs_b.bias", {kExperts});
  }
  return b;
}

class GgufMoeErrors : public ::testing::Test {
 protected:
  // The message of the E convert_gguf throws on `b`; nothing may have been written.
  template <class E>
  std::string convert_error(const GgufBuilder& b) {
    write_bytes(file_, b.build());
    auto msg = error_of<E>([&] { convert_gguf(file_, out_.path()); });
    expect_contains(msg, {file_.string()});
    EXPECT_TRUE(fs::is_empty(out_.path()));
    return msg;
  }

  TempDir dir_, out_;
  fs::path file_ = dir_ / "moe.gguf";
};

TEST_F(GgufMoeErrors, MissingExpertTensorIsNamed) {
  auto msg = convert_error<WeightError>(sparse_model("qwen3moe", "blk.0.ffn_down_exps.weight"));
  expect_contains(msg, {"tensor 'blk.0.ffn_down_exps.weight'", "missing", "qwen3moe.expert_count"});
  msg = convert_error<WeightError>(sparse_model("glm4moe", "blk.0.exp_probs_b.bias"));
  expect_contains(msg, {"tensor 'blk.0.exp_probs_b.bias'", "missing"});
}

TEST_F(GgufMoeErrors, WrongExpertCountNamesTensorAndKey) {
  auto msg = convert_error<WeightError>(sparse_model("qwen3moe", "", "blk.0.ffn_up_exps.weight"));
  expect_contains(msg, {"tensor 'blk.0.ffn_up_exps.weight'", "ne [32, 32, 3]", "expected [32, 32, 4]",
                        "'qwen3moe.expert_count' 4"});
  msg = convert_error<WeightError>(sparse_model("glm4moe", "", "blk.0.ffn_gate_inp.weight"));
  expect_contains(msg, {"tensor 'blk.0.ffn_gate_inp.weight'", "ne [32, 3]", "'glm4moe.expert_count' 4"});
}

TEST_F(GgufMoeErrors, ExpertKeysAreChecked) {
  auto b = sparse_model("qwen3moe", "", "", 5);
  auto msg = convert_error<ConfigError>(b);
  expect_contains(msg, {"metadata 'qwen3moe.expert_used_count'", "5 is not in 1..expert_count (4)"});
  b = sparse_model("glm4moe");
  b.kv_u32("glm4moe.expert_gating_func", 1);
  msg = convert_error<ConfigError>(b);
  expect_contains(msg, {"metadata 'glm4moe.expert_gating_func'", "1 is not supported"});
  b = sparse_model("qwen3moe");
  b.kv_str("qwen3moe.rope.scaling.type", "yarn");
  msg = convert_error<ConfigError>(b);
  expect_contains(msg, {"metadata 'qwen3moe.rope.scaling.type'", "not supported for qwen3_moe"});
}

}  // namespace
