// Bad inputs give a TokenizerError that names the file (and field), never a crash.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace mlxcpp {
namespace {

namespace fs = std::filesystem;

// A scratch model directory (removed at the end of the test).
class ScratchDir {
 public:
  ScratchDir() {
    path_ = fs::temp_directory_path() /
            ("mlxcpp_tok_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  fs::path path_;
};

// The smallest fixture (llama2, ~1.8 MB), for tests that need one valid tokenizer.
fs::path fixture_dir() {
  auto path = test::golden_dir() / "tokenizer" / "llama2.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + " is missing: run 'make goldens'");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str())["dir"].get<std::string>();
}

std::string load_error(const fs::path& dir) {
  try {
    Tokenizer::load(dir);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kTinyBpe =
    R"({"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,)"
    R"("decoder":null,"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}})";

TEST(TokenizerErrors, MissingDirectoryNamesTheFile) {
  std::string msg = load_error("/nonexistent/mlxcpp/model");
  EXPECT_NE(msg.find("/nonexistent/mlxcpp/model/tokenizer.json: file not found"), std::string::npos) << msg;
}

TEST(TokenizerErrors, MalformedJsonNamesTheFile) {
  ScratchDir d;
  d.write("tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  std::string msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer.json: invalid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 1 column"), std::string::npos) << msg;
  d.write("tokenizer.json", "{\"model\": {\"type\": \"\xff\"}}");  // not UTF-8
  msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer.json: invalid JSON"), std::string::npos) << msg;
}

TEST(TokenizerErrors, MissingModelNamesTheField) {
  ScratchDir d;
  d.write("tokenizer.json", R"({"version": "1.0", "added_tokens": []})");
  std::string msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer.json: field 'model'"), std::string::npos) << msg;
}

TEST(TokenizerErrors, MissingVocabNamesTheField) {
  // The vocab stays in the bridge (C++ sees a skeleton without it), yet its absence is still ours to report.
  ScratchDir d;
  d.write("tokenizer.json", R"({"model": {"type": "BPE", "merges": []}})");
  std::string msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer.json: field 'model.vocab': missing"), std::string::npos) << msg;
}

TEST(TokenizerErrors, ByteOrderMarkIsSkipped) {
  ScratchDir d;
  d.write("tokenizer.json", "\xef\xbb\xbf" + kTinyBpe);
  EXPECT_EQ(Tokenizer::load(d.path()).encode("ab", false), (std::vector<int32_t>{2}));
}

TEST(TokenizerErrors, InvalidModelIsReportedByTheBridge) {
  ScratchDir d;
  d.write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": "not an id"}, "merges": []}})");
  std::string msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer.json: "), std::string::npos) << msg;
  EXPECT_NE(msg, "(no error)");
}

TEST(TokenizerErrors, MalformedConfigNamesTheFile) {
  ScratchDir d;
  d.write("tokenizer.json", kTinyBpe);
  d.write("tokenizer_config.json", "{ not json");
  std::string msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer_config.json: invalid JSON"), std::string::npos) << msg;
}

TEST(TokenizerErrors, WrongConfigFieldTypeNamesTheField) {
  ScratchDir d;
  d.write("tokenizer.json", kTinyBpe);
  d.write("tokenizer_config.json", R"({"add_prefix_space": "yes"})");
  std::string msg = load_error(d.path());
  EXPECT_NE(msg.find("tokenizer_config.json: field 'add_prefix_space'"), std::string::npos) << msg;
  d.write("tokenizer_config.json", R"({"bos_token": {"lstrip": false}})");
  msg = load_error(d.path());
  EXPECT_NE(msg.find("field 'bos_token'"), std::string::npos) << msg;
  d.write("tokenizer_config.json", R"({"chat_template": 42})");
  msg = load_error(d.path());
  EXPECT_NE(msg.find("field 'chat_template'"), std::string::npos) << msg;
}

TEST(TokenizerErrors, TinyTokenizerLoadsAndRoundTrips) {
  ScratchDir d;
  d.write("tokenizer.json", kTinyBpe);
  Tokenizer tok = Tokenizer::load(d.path());
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{2}));
  EXPECT_EQ(tok.decode({2}), "ab");
  EXPECT_EQ(tok.token_to_id("b"), 1);
  EXPECT_EQ(tok.id_to_token(2), "ab");
  EXPECT_FALSE(tok.id_to_token(99).has_value());
  EXPECT_FALSE(tok.token_to_id("zz").has_value());
}

TEST(TokenizerErrors, InvalidUtf8TextIsAnError) {
  Tokenizer tok = Tokenizer::load(fixture_dir());
  try {
    tok.encode(std::string("ok \xff\xfe bad"), true);
    FAIL() << "expected TokenizerError";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok.decode({-1}), TokenizerError);
  EXPECT_THROW(tok.token_to_id(std::string("\xff")), TokenizerError);
}

TEST(TokenizerErrors, OutOfRangeIdsDecodeLikeTransformers) {
  // HF tokenizers skips ids it does not know; decode must not crash.
  Tokenizer tok = Tokenizer::load(fixture_dir());
  std::string s = tok.decode({1, 15043, 1000000});
  EXPECT_FALSE(s.empty());
  auto stream = tok.stream_decoder();
  EXPECT_NO_THROW(stream.push(1000000));
}

TEST(TokenizerErrors, NoChatTemplateIsATemplateError) {
  Tokenizer tok = Tokenizer::load(fixture_dir());  // llama2 ships none
  EXPECT_TRUE(tok.chat_templates().empty());
  EXPECT_THROW(tok.chat_template(), TemplateError);
}

}  // namespace
}  // namespace mlxcpp
