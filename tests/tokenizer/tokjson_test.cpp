// The bridge's parse-once path (mlxcpp_tokjson_*): a tokenizer built from the skeleton with the
// vocab and merges put back must equal the one tokenizers builds from the same text itself, for
// every model type (the fixtures only cover BPE), and the vocab lookups must keep the semantics
// hf_compat relied on when it read model.vocab from its own DOM.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tokenizer/bridge_util.h"

namespace mlxcpp {
namespace {

using TokJson = bridge::TokJsonHandle;

TokJson parse(const std::string& text) {
  bridge::Status st;
  MlxcppTokJson* raw = nullptr;
  st.rc = mlxcpp_tokjson_parse(bridge::bytes(text), text.size(), &raw, &st.err);
  if (!st.ok()) throw std::runtime_error("parse: " + st.message());
  return TokJson(raw);
}

// A bridge call that fills a buffer: its text, or an exception with its message.
template <class Call>
std::string buffer_of(const char* what, Call call) {
  bridge::Status st;
  MlxcppBuf out{nullptr, 0};
  st.rc = call(&out, &st.err);
  if (!st.ok()) throw std::runtime_error(what + (": " + st.message()));
  return bridge::take(out);
}

std::string skeleton(const TokJson& h) {
  return buffer_of("skeleton",
                   [&](MlxcppBuf* out, MlxcppBuf* err) { return mlxcpp_tokjson_skeleton(h.get(), out, err); });
}

std::string pipeline(const bridge::TokenizerHandle& t) {
  return buffer_of("to_json",
                   [&](MlxcppBuf* out, MlxcppBuf* err) { return mlxcpp_tokenizer_to_json(t.get(), out, err); });
}

// The pipeline tokenizers builds from the text by itself ("error: ..." when it refuses it).
std::string direct(const std::string& text) {
  bridge::Status st;
  MlxcppTokenizer* raw = nullptr;
  st.rc = mlxcpp_tokenizer_new(bridge::bytes(text), text.size(), &raw, &st.err);
  if (!st.ok()) return "error: " + st.message();
  return pipeline(bridge::TokenizerHandle(raw));
}

// The same through parse -> skeleton (unedited) -> from_tokjson.
std::string via_skeleton(const std::string& text) {
  TokJson h = parse(text);
  std::string skel = skeleton(h);
  bridge::Status st;
  MlxcppTokenizer* raw = nullptr;
  st.rc = mlxcpp_tokenizer_from_tokjson(h.get(), bridge::bytes(skel), skel.size(), &raw, &st.err);
  if (!st.ok()) return "error: " + st.message();
  return pipeline(bridge::TokenizerHandle(raw));
}

std::string doc(const std::string& model, const std::string& added = "[]") {
  return R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)" + added +
         R"(,"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,)"
         R"("model":)" + model + "}";
}

const std::string kAdded =
    R"([{"id":3,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)"
    R"({"id":7,"content":"<new>","single_word":false,"lstrip":true,"rstrip":false,"normalized":true,"special":false}])";

TEST(TokJson, EveryModelTypeBuildsLikeTokenizersItself) {
  const std::string models[] = {
      R"({"type":"BPE","dropout":null,"unk_token":null,"vocab":{"a":0,"b":1,"ab":2,"<s>":3},"merges":[["a","b"]]})",
      R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"],"byte_fallback":false})",  // legacy merges
      R"({"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##",)"
      R"("max_input_chars_per_word":100,"vocab":{"[UNK]":0,"a":1,"##b":2,"<s>":3}})",
      R"({"type":"WordLevel","unk_token":"<unk>","vocab":{"<unk>":0,"ab":1,"c":2}})",
      R"({"type":"Unigram","unk_id":0,"byte_fallback":false,)"
      R"("vocab":[["<unk>",0.0],["a",-1.5],["b",-2.25],["ab",-0.125],["<s>",0.0]]})",
      R"({"unk_token":"<unk>","vocab":{"<unk>":0,"ab":1}})",  // no "type": tokenizers' legacy guess
  };
  for (const auto& m : models) {
    for (const auto& added : {std::string("[]"), kAdded}) {
      std::string text = doc(m, added);
      std::string want = direct(text);
      EXPECT_EQ(want.rfind("error: ", 0), std::string::npos) << text << "\n" << want;
      EXPECT_EQ(via_skeleton(text), want) << text;
    }
  }
}

TEST(TokJson, BadModelsAreRefusedLikeTokenizersRefusesThem) {
  for (const std::string m : {R"({"type":"BPE","vocab":{"a":"x"},"merges":[]})", R"({"type":"Nope","vocab":{}})",
                              R"({"type":"Unigram","vocab":[["a"]]})"}) {
    std::string text = doc(m);
    EXPECT_EQ(direct(text).rfind("error: ", 0), 0u) << text;
    EXPECT_EQ(via_skeleton(text).rfind("error: ", 0), 0u) << text;
  }
}

TEST(TokJson, SkeletonLacksOnlyVocabAndMerges) {
  TokJson h = parse(doc(R"({"type":"BPE","vocab":{"a":0},"merges":[],"fuse_unk":true})"));
  EXPECT_EQ(skeleton(h),
            R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,)"
            R"("pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,)"
            R"("model":{"type":"BPE","fuse_unk":true}})");
}

TEST(TokJson, FileMergesWinOverOnesTheSkeletonGained) {
  std::string text = doc(R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]})");
  TokJson h = parse(text);
  // What hf_compat's rebuild does: the skeleton gets "merges": [] (and other scalar fields).
  std::string edited = doc(R"({"type":"BPE","merges":[],"dropout":null})");
  bridge::Status st;
  MlxcppTokenizer* raw = nullptr;
  st.rc = mlxcpp_tokenizer_from_tokjson(h.get(), bridge::bytes(edited), edited.size(), &raw, &st.err);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(pipeline(bridge::TokenizerHandle(raw)), direct(text));
  // The vocab and merges moved into that tokenizer: the handle cannot build a second one.
  st.rc = mlxcpp_tokenizer_from_tokjson(h.get(), bridge::bytes(edited), edited.size(), &raw, &st.err);
  EXPECT_FALSE(st.ok());
}

int64_t size_of(const std::string& model) { return mlxcpp_tokjson_vocab_size(parse(doc(model)).get()); }

std::optional<int64_t> id_of(const std::string& model, const std::string& token) {
  TokJson h = parse(doc(model));
  int64_t id = -1;
  int rc = mlxcpp_tokjson_vocab_id(h.get(), bridge::bytes(token), token.size(), &id);
  if (rc < 0) throw std::runtime_error("vocab_id: bad argument");
  return rc == 1 ? std::optional<int64_t>(id) : std::nullopt;
}

TEST(TokJson, VocabSizeCountsLikeNlohmann) {
  EXPECT_EQ(size_of(R"({"type":"BPE","vocab":{"a":0,"b":1}})"), 2);
  EXPECT_EQ(size_of(R"({"type":"Unigram","vocab":[["a",0.0],["b",0.0],["c",0.0]]})"), 3);
  EXPECT_EQ(size_of(R"({"type":"BPE","vocab":null})"), 0);
  EXPECT_EQ(size_of(R"({"type":"BPE","vocab":"odd"})"), 1);
  EXPECT_EQ(size_of(R"({"type":"BPE"})"), -1);  // no vocab at all
  EXPECT_EQ(mlxcpp_tokjson_vocab_size(parse(R"({"model":"BPE"})").get()), -1);
}

TEST(TokJson, VocabIdFindsIntegerIdsAndFirstUnigramPiece) {
  const std::string bpe = R"({"type":"BPE","vocab":{"a":5,"b":"6","c":7.0,"ü":9}})";
  EXPECT_EQ(id_of(bpe, "a"), 5);
  EXPECT_EQ(id_of(bpe, "ü"), 9);
  EXPECT_EQ(id_of(bpe, "b"), std::nullopt);  // not an integer
  EXPECT_EQ(id_of(bpe, "c"), std::nullopt);
  EXPECT_EQ(id_of(bpe, "z"), std::nullopt);
  const std::string uni = R"({"type":"Unigram","vocab":[["x",0.0],"y",["a",-1.0],["a",-2.0],[]]})";
  EXPECT_EQ(id_of(uni, "a"), 2);
  EXPECT_EQ(id_of(uni, "y"), std::nullopt);  // an entry that is not a [piece, score] pair
  EXPECT_EQ(id_of(R"({"type":"BPE"})", "a"), std::nullopt);
}

TEST(TokJson, SyntaxErrorsGiveLineAndColumn) {
  std::string text = "{\"model\": {\"type\": \"BPE\", ";
  bridge::Status st;
  MlxcppTokJson* raw = nullptr;
  st.rc = mlxcpp_tokjson_parse(bridge::bytes(text), text.size(), &raw, &st.err);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("line 1 column"), std::string::npos);
  EXPECT_NO_THROW(parse("\xef\xbb\xbf{\"model\": {}}"));  // a byte order mark is skipped, as nlohmann did
}

}  // namespace
}  // namespace mlxcpp
