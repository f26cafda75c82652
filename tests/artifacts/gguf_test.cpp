// GGUF header validation: valid files parse (metadata of every type, nested arrays, tensors,
// alignment); each malformed field is a WeightError naming the file and the field or tensor.
#include <gtest/gtest.h>

#include <cstdlib>

#include "artifacts/gguf.h"
#include "artifacts_test_util.h"
#include "core/errors.h"
#include "gguf_test_util.h"

namespace fs = std::filesystem;
using namespace mlxcpp;
using namespace mlxcpp::test;
using B = GgufBuilder;

namespace {

std::string f32_data(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += B::f32(static_cast<float>(i));
  return s;
}

class Gguf : public ::testing::Test {
 protected:
  TempDir dir_;
  fs::path file_ = dir_ / "model.gguf";

  GgufFile write_open(const GgufBuilder& b) {
    write_bytes(file_, b.build());
    return GgufFile::open(file_);
  }
  void expect_bad(const std::string& bytes, std::initializer_list<std::string> parts) {
    write_bytes(file_, bytes);
    auto msg = error_of<WeightError>([&] { GgufFile::open(file_); });
    expect_contains(msg, {file_.string()});
    expect_contains(msg, parts);
  }
  void expect_bad(const GgufBuilder& b, std::initializer_list<std::string> parts) { expect_bad(b.build(), parts); }

  static GgufBuilder two_tensors() {
    GgufBuilder b;
    b.kv_str("general.architecture", "llama");
    b.tensors.push_back({"a", {4, 2}, 0, f32_data(8), {}});
    b.tensors.push_back({"b", {3}, 0, f32_data(3), {}});
    return b;
  }
};

}  // namespace

TEST_F(Gguf, ParsesEveryValueTypeAndTensors) {
  GgufBuilder b = two_tensors();
  b.kv("u8", B::u32(0) + std::string(1, '\xff'));
  b.kv("i8", B::u32(1) + std::string(1, '\xfe'));
  b.kv("u16", B::u32(2) + B::raw<uint16_t>(65535));
  b.kv("i16", B::u32(3) + B::raw<int16_t>(-2));
  b.kv_u32("u32", 4000000000u);
  b.kv("i32", B::u32(5) + B::raw<int32_t>(-7));
  b.kv_f32("f32", 0.5f);
  b.kv_bool("flag", true);
  b.kv("u64", B::u32(10) + B::u64(1ull << 40));
  b.kv("i64", B::u32(11) + B::i64(-(1ll << 40)));
  b.kv("f64", B::u32(12) + B::raw<double>(2.25));
  b.kv_strs("tokens", {"a", "", "ccc"});
  b.kv_f32s("scores", {1.0f, -2.5f});
  // [[1, 2], []] : an array of int32 arrays
  b.kv("nested", B::u32(9) + B::u32(9) + B::u64(2) + B::u32(5) + B::u64(2) + B::raw<int32_t>(1) +
                     B::raw<int32_t>(2) + B::u32(5) + B::u64(0));
  auto f = write_open(b);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.req_string("general.architecture"), "llama");
  EXPECT_EQ(f.req_int("u8"), 255);
  EXPECT_EQ(f.req_int("i8"), -2);
  EXPECT_EQ(f.req_int("u16"), 65535);
  EXPECT_EQ(f.req_int("i16"), -2);
  EXPECT_EQ(f.req_int("u32"), 4000000000ll);
  EXPECT_EQ(f.req_int("i32"), -7);
  EXPECT_EQ(*f.opt_number("f32"), 0.5);
  EXPECT_EQ(*f.opt_bool("flag"), true);
  EXPECT_EQ(f.req_int("u64"), 1ll << 40);
  EXPECT_EQ(f.req_int("i64"), -(1ll << 40));
  EXPECT_EQ(*f.opt_number("f64"), 2.25);
  EXPECT_EQ(f.req_strings("tokens"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.req_floats("scores"), (std::vector<double>{1.0, -2.5}));
  const auto& nested = f.at("nested");
  ASSERT_EQ(nested.items.size(), 2u);
  EXPECT_EQ(nested.items[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(nested.items[1].ints.empty());

  ASSERT_EQ(f.tensors().size(), 2u);
  const auto* a = f.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(a->nbytes, 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  auto bytes = f.tensor_data(*f.find_tensor("b"));
  float v[3];
  std::memcpy(v, bytes.data(), 12);
  EXPECT_EQ(v[2], 2.0f);
}

TEST_F(Gguf, CustomAlignmentAndVersion2) {
  GgufBuilder b = two_tensors();
  b.version = 2;
  b.alignment = 64;
  b.kv_u32("general.alignment", 64);
  auto f = write_open(b);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.find_tensor("b")->offset, 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
}

TEST_F(Gguf, TypedAccessErrorsNameTheKey) {
  auto f = write_open(two_tensors());
  auto msg = error_of<ConfigError>([&] { f.req_int("general.architecture"); });
  expect_contains(msg, {file_.string(), "general.architecture", "expected an integer", "string"});
  msg = error_of<ConfigError>([&] { f.req_string("general.name"); });
  expect_contains(msg, {"general.name", "missing"});
}

TEST_F(Gguf, RejectsBadMagicVersionAndTruncation) {
  GgufBuilder b = two_tensors();
  b.magic = 0x12345678;
  expect_bad(b, {"bad magic", "0x12345678"});
  b = two_tensors();
  b.version = 1;
  expect_bad(b, {"version 1"});
  b.version = 7;
  expect_bad(b, {"unsupported GGUF version 7"});
  b.version = 0x03000000;
  expect_bad(b, {"big-endian"});
  expect_bad(std::string("GG"), {"too short"});
  std::string good = two_tensors().build();
  for (size_t cut : {6ul, 20ul, 30ul, 60ul}) expect_bad(good.substr(0, cut), {"truncated"});
  expect_bad(good.substr(0, good.size() - 4), {"tensor 'b'", "past the end"});
}

TEST_F(Gguf, RejectsCountsTheFileCannotHold) {
  GgufBuilder b = two_tensors();
  b.n_tensors_override = 1ull << 60;
  expect_bad(b, {"tensor count", "more than the file can hold"});
  b = two_tensors();
  b.n_kv_override = 1ull << 40;
  expect_bad(b, {"metadata count"});
  b = two_tensors();
  b.kv("big", B::u32(9) + B::u32(6) + B::u64(1ull << 61));
  expect_bad(b, {"metadata 'big'", "array length"});
  b = two_tensors();
  b.kv("s", B::u32(8) + B::u64(1ull << 62) + "x");
  expect_bad(b, {"metadata 's'", "string length"});
}

TEST_F(Gguf, RejectsBadValueTypesAndDuplicates) {
  GgufBuilder b = two_tensors();
  b.kv("weird", B::u32(13) + B::u32(0));
  expect_bad(b, {"metadata 'weird'", "unknown value type 13"});
  b = two_tensors();
  b.kv("arr", B::u32(9) + B::u32(42) + B::u64(0));
  expect_bad(b, {"metadata 'arr'", "unknown array element type 42"});
  b = two_tensors();
  b.kv_str("general.architecture", "again");
  expect_bad(b, {"'general.architecture' appears twice"});
  b = two_tensors();
  b.kv("flag", B::u32(7) + std::string(1, 5));
  expect_bad(b, {"metadata 'flag'", "bool value 5"});
  b = two_tensors();
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += B::u32(9) + B::u64(1);
  b.kv("deep", B::u32(9) + deep + B::u32(0) + B::u64(0));
  expect_bad(b, {"metadata 'deep'", "nested deeper"});
}

TEST_F(Gguf, RejectsBadAlignment) {
  GgufBuilder b = two_tensors();
  b.kv_u32("general.alignment", 48);
  expect_bad(b, {"general.alignment", "48", "power of two"});
  b = two_tensors();
  b.kv_f32("general.alignment", 32.0f);
  expect_bad(b, {"general.alignment", "expected uint32"});
}

TEST_F(Gguf, RejectsBadTensorInfos) {
  GgufBuilder b = two_tensors();
  b.tensors[0].ne = {1, 1, 1, 1, 1};
  expect_bad(b, {"tensor 'a'", "n_dims 5"});
  b = two_tensors();
  b.tensors[1].ne = {-3};
  expect_bad(b, {"tensor 'b'", "negative"});
  b = two_tensors();
  b.tensors[0].ne = {1ll << 40, 1ll << 40};
  expect_bad(b, {"tensor 'a'", "overflows"});
  b = two_tensors();
  b.tensors[0].type = 4;  // removed Q4_2
  expect_bad(b, {"tensor 'a'", "unknown ggml type 4"});
  b = two_tensors();
  b.tensors[0].type = 2;  // Q4_0 needs ne[0] % 32 == 0
  expect_bad(b, {"tensor 'a'", "not a multiple", "Q4_0", "32"});
  b = two_tensors();
  b.tensors[1].offset = 8;
  expect_bad(b, {"tensor 'b'", "offset 8", "alignment 32"});
  b = two_tensors();
  b.tensors[1].offset = 0;
  expect_bad(b, {"overlap"});
  b = two_tensors();
  b.tensors[1].name = "a";
  expect_bad(b, {"tensor 'a' appears twice"});
  b = two_tensors();
  b.tensors[1].offset = 1ull << 62;
  expect_bad(b, {"tensor 'b'", "past the end"});
}

TEST_F(Gguf, VocabularyFixturesParse) {
  const char* env = std::getenv("MLXCPP_GGUF_VOCAB_DIR");
  fs::path dir = env ? env : "/work/shared/fixtures/gguf-vocab";
  if (!fs::exists(dir)) GTEST_SKIP() << "no fixtures at " << dir;
  auto f = GgufFile::open(dir / "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(f.req_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.req_strings("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(f.req_floats("tokenizer.ggml.scores").size(), 32000u);
  EXPECT_TRUE(f.tensors().empty());
}

TEST_F(Gguf, NotAFile) {
  auto msg = error_of<WeightError>([&] { GgufFile::open(dir_ / "absent.gguf"); });
  expect_contains(msg, {"absent.gguf", "does not exist"});
  msg = error_of<WeightError>([&] { GgufFile::open(dir_.path()); });
  expect_contains(msg, {"not a regular file"});
}
