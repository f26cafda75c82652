// tokenizer.json / tokenizer_config.json rebuilt from tokenizer.ggml.* metadata: structure for the
// byte-level BPE and SentencePiece layouts, SPM merges derived from scores, clear errors. (Token ids
// against the original HF tokenizers are checked by tools/oracle/gguf_vocab_check.py.)
#include <gtest/gtest.h>

#include "artifacts/gguf_tokenizer.h"
#include "artifacts_test_util.h"
#include "core/errors.h"
#include "gguf_test_util.h"

namespace fs = std::filesystem;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

class GgufTokenizer : public ::testing::Test {
 protected:
  TempDir dir_;
  GgufFile open(const GgufBuilder& b) {
    write_bytes(dir_ / "v.gguf", b.build());
    return GgufFile::open(dir_ / "v.gguf");
  }
  static GgufBuilder gpt2() {
    GgufBuilder b;
    b.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "gpt-2");
    b.kv_strs("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "<|endoftext|>"});
    b.kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3});
    b.kv_strs("tokenizer.ggml.merges", {"a b", "\xc4\xa0 ab"});
    b.kv_u32("tokenizer.ggml.bos_token_id", 5).kv_u32("tokenizer.ggml.eos_token_id", 5);
    b.kv_str("tokenizer.chat_template", "{{ messages }}");
    return b;
  }
  static GgufBuilder spm() {
    GgufBuilder b;
    b.kv_str("tokenizer.ggml.model", "llama");
    b.kv_strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81" "ab"});
    b.kv_f32s("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -2, -3, -4, -5});
    b.kv_i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1, 1});
    b.kv_u32("tokenizer.ggml.bos_token_id", 1).kv_u32("tokenizer.ggml.eos_token_id", 2);
    return b;
  }
  std::string error(const GgufBuilder& b) {
    auto g = open(b);
    return error_of<ConfigError>([&] { build_hf_tokenizer(g); });
  }
};

}  // namespace

TEST_F(GgufTokenizer, ByteLevelBpeLayout) {
  auto g = open(gpt2());
  auto files = build_hf_tokenizer(g);
  const json& t = files.tokenizer;
  EXPECT_EQ(t["model"]["type"], "BPE");
  EXPECT_EQ(t["model"]["vocab"]["ab"], 2);
  EXPECT_EQ(t["model"]["merges"], json::parse(R"([["a","b"],["\u0120","ab"]])"));
  const json& pre = t["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(pre.size(), 2u);
  EXPECT_EQ(pre[0]["type"], "Split");
  EXPECT_EQ(pre[0]["behavior"], "Isolated");
  EXPECT_EQ(pre[1]["type"], "ByteLevel");
  EXPECT_EQ(pre[1]["use_regex"], false);
  EXPECT_EQ(t["decoder"]["type"], "ByteLevel");
  ASSERT_EQ(t["added_tokens"].size(), 1u);
  EXPECT_EQ(t["added_tokens"][0]["content"], "<|endoftext|>");
  EXPECT_EQ(t["added_tokens"][0]["special"], true);
  const json& c = files.tokenizer_config;
  EXPECT_EQ(c["bos_token"], "<|endoftext|>");
  EXPECT_EQ(c["add_bos_token"], false);
  EXPECT_EQ(c["chat_template"], "{{ messages }}");
  EXPECT_EQ(c["added_tokens_decoder"]["5"]["special"], true);
}

TEST_F(GgufTokenizer, SentencePieceLayoutAndMergesByScore) {
  auto g = open(spm());
  auto files = build_hf_tokenizer(g);
  const json& t = files.tokenizer;
  EXPECT_EQ(t["model"]["byte_fallback"], true);
  EXPECT_EQ(t["model"]["unk_token"], "<unk>");
  // "ab" (score -4) before "▁ab" (-5): merges follow the merged token's score.
  EXPECT_EQ(t["model"]["merges"], json::parse(R"([["a","b"],["\u2581","ab"]])"));
  EXPECT_EQ(t["normalizer"]["normalizers"][0]["type"], "Prepend");
  EXPECT_EQ(t["post_processor"]["type"], "TemplateProcessing");  // add_bos defaults to true for SPM
  EXPECT_EQ(files.tokenizer_config["add_bos_token"], true);
  EXPECT_EQ(files.tokenizer_config["unk_token"], "<unk>");
  // <0x0A> is a byte token: it stays in the vocabulary, not an added token.
  for (const auto& a : t["added_tokens"]) EXPECT_NE(a["content"], "<0x0A>");

  GgufBuilder b = spm();
  b.kv_bool("tokenizer.ggml.add_space_prefix", false);  // Gemma
  auto g2 = open(b);
  auto t2 = build_hf_tokenizer(g2).tokenizer;
  EXPECT_EQ(t2["normalizer"]["normalizers"].size(), 1u);
  EXPECT_EQ(t2["normalizer"]["normalizers"][0]["type"], "Replace");
}

TEST_F(GgufTokenizer, WritesBothFiles) {
  auto g = open(gpt2());
  write_hf_tokenizer(g, dir_.path());
  EXPECT_TRUE(fs::exists(dir_ / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(dir_ / "tokenizer_config.json"));
}

TEST_F(GgufTokenizer, UnsupportedModelAndPreAreNamed) {
  GgufBuilder b = gpt2();
  b.kv_bytes.clear();
  b.n_kv = 0;
  b.kv_str("tokenizer.ggml.model", "bert").kv_strs("tokenizer.ggml.tokens", {"a"});
  expect_contains(error(b), {"tokenizer.ggml.model", "'bert' is not supported", "gpt2, llama"});
  b = GgufBuilder();
  b.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "mystery");
  b.kv_strs("tokenizer.ggml.tokens", {"a"}).kv_strs("tokenizer.ggml.merges", {});
  expect_contains(error(b), {"tokenizer.ggml.pre", "'mystery' is not supported", "llama-bpe", "smollm"});
}

TEST_F(GgufTokenizer, InconsistentMetadataIsNamed) {
  GgufBuilder b;
  b.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "gpt-2");
  b.kv_strs("tokenizer.ggml.tokens", {"a", "b", "a"}).kv_strs("tokenizer.ggml.merges", {});
  expect_contains(error(b), {"tokenizer.ggml.tokens", "'a' appears twice", "ids 0 and 2"});

  b = GgufBuilder();
  b.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "gpt-2");
  b.kv_strs("tokenizer.ggml.tokens", {"a", "b"}).kv_i32s("tokenizer.ggml.token_type", {1});
  expect_contains(error(b), {"tokenizer.ggml.token_type", "1 entries for 2 tokens"});

  b = gpt2();
  b.kv_u32("tokenizer.ggml.padding_token_id", 99);
  expect_contains(error(b), {"tokenizer.ggml.padding_token_id", "99 is outside the vocabulary"});

  b = GgufBuilder();
  b.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "gpt-2");
  b.kv_strs("tokenizer.ggml.tokens", {"a"}).kv_strs("tokenizer.ggml.merges", {"nospace"});
  expect_contains(error(b), {"tokenizer.ggml.merges", "entry 0 'nospace'"});

  b = spm();
  b.kv_bytes.clear();
  b.n_kv = 0;
  b.kv_str("tokenizer.ggml.model", "llama").kv_strs("tokenizer.ggml.tokens", {"a"});
  expect_contains(error(b), {"tokenizer.ggml.scores", "missing"});
}
