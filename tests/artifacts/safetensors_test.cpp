// Safetensors header validation: every malformed file is a WeightError naming the file (and
// the tensor, where one is at fault) before MLX maps a byte; valid files parse and load.
#include <gtest/gtest.h>

#include <cstring>

#include <mlx/io.h>
#include <mlx/mlx.h>

#include "artifacts/safetensors.h"
#include "artifacts_test_util.h"
#include "core/errors.h"

namespace fs = std::filesystem;
namespace mx = mlx::core;
using namespace mlxcpp;
using namespace mlxcpp::test;
using nlohmann::json;

namespace {

json tensor(const std::string& dtype, std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
  return json{{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

std::string f32_bytes(std::vector<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

class Safetensors : public ::testing::Test {
 protected:
  TempDir dir_;
  fs::path file_ = dir_ / "model.safetensors";

  // Writes `header` over 64 zero bytes (unless `data` is given) and expects a WeightError
  // naming the file and every part.
  void expect_bad(const json& header, std::initializer_list<std::string> parts,
                  const std::string& data = std::string(64, '\0')) {
    write_safetensors(file_, header, data);
    expect_bad_file(parts);
  }
  void expect_bad_file(std::initializer_list<std::string> parts) {
    auto msg = error_of<WeightError>([&] { read_safetensors_header(file_); });
    expect_contains(msg, {file_.string()});
    expect_contains(msg, parts);
    // load_safetensors validates first, so it fails the same way.
    EXPECT_EQ(error_of<WeightError>([&] { load_safetensors(file_); }), msg);
  }
};

}  // namespace

TEST_F(Safetensors, ValidHeaderParses) {
  json h = {{"__metadata__", {{"format", "mlx"}, {"note", "x"}}},
            {"b", tensor("BF16", {4}, 24, 32)},  // listed first, stored second
            {"a", tensor("F32", {2, 3}, 0, 24)}};
  write_raw_safetensors(file_, h.dump(), std::string(32, '\0'));
  auto header = read_safetensors_header(file_);
  EXPECT_EQ(header.header_size, h.dump().size());
  EXPECT_EQ(header.data_size, 32u);
  ASSERT_EQ(header.tensors.size(), 2u);
  EXPECT_EQ(header.tensors[0].name, "a");  // sorted by offset
  EXPECT_EQ(header.tensors[0].dtype, "F32");
  EXPECT_EQ(header.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(header.tensors[1].name, "b");
  EXPECT_EQ(header.tensors[1].begin, 24u);
  EXPECT_EQ(header.tensors[1].end, 32u);
  EXPECT_EQ(header.metadata.size(), 2u);
  EXPECT_EQ(header.metadata.at("format"), "mlx");
}

TEST_F(Safetensors, LoadsValues) {
  json h = {{"w", tensor("F32", {2, 2}, 0, 16)}, {"empty", tensor("F32", {0}, 16, 16)}};
  write_safetensors(file_, h, f32_bytes({1, 2, 3, 4}));
  auto arrays = load_safetensors(file_);
  ASSERT_EQ(arrays.size(), 2u);
  auto expected = mx::array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  EXPECT_TRUE(mx::array_equal(arrays.at("w"), expected).item<bool>());
  EXPECT_EQ(arrays.at("empty").size(), 0u);
}

TEST_F(Safetensors, RealCheckpointMatchesMlx) {
  auto f = golden_dir() / "models" / "llama-q4g64" / "model.safetensors";
  auto header = read_safetensors_header(f);
  auto [ref, meta] = mx::load_safetensors(f.string());
  EXPECT_EQ(header.tensors.size(), ref.size());
  EXPECT_EQ(header.metadata, (std::map<std::string, std::string>(meta.begin(), meta.end())));
  for (const auto& t : header.tensors) {
    ASSERT_TRUE(ref.count(t.name)) << t.name;
    EXPECT_EQ(mx::Shape(t.shape.begin(), t.shape.end()), ref.at(t.name).shape()) << t.name;
  }
  EXPECT_EQ(load_safetensors(f).size(), ref.size());
}

TEST_F(Safetensors, MissingFileOrDirectory) {
  auto msg = error_of<WeightError>([&] { read_safetensors_header(dir_ / "absent.safetensors"); });
  expect_contains(msg, {"absent.safetensors", "does not exist"});
  fs::create_directories(dir_ / "dir.safetensors");
  msg = error_of<WeightError>([&] { load_safetensors(dir_ / "dir.safetensors"); });
  expect_contains(msg, {"dir.safetensors", "not a regular file"});
}

TEST_F(Safetensors, FileShorterThan8Bytes) {
  for (std::string bytes : {std::string(), std::string("\x02\0\0\0\0", 5)}) {
    write_bytes(file_, bytes);
    expect_bad_file({"too short"});
  }
}

TEST_F(Safetensors, HeaderSizeLargerThanFile) {
  write_raw_safetensors(file_, "{}", "", 1000);
  expect_bad_file({"header size 1000", "past the end"});
}

TEST_F(Safetensors, HeaderSizeOverTheCap) {
  write_raw_safetensors(file_, "{}", "", kMaxSafetensorsHeader + 1);
  expect_bad_file({"exceeds", "cap"});
  write_raw_safetensors(file_, "{}", "", ~uint64_t{0});  // would overflow 8 + n
  expect_bad_file({"exceeds", "cap"});
}

TEST_F(Safetensors, HeaderNotJson) {
  write_raw_safetensors(file_, "{\"a\": {\"dtype\": ", std::string(8, '\0'));
  expect_bad_file({"not valid JSON"});
  write_raw_safetensors(file_, std::string("\xff\xfe\0\0", 4), "");
  expect_bad_file({"not valid JSON"});
}

TEST_F(Safetensors, HeaderNotAnObject) {
  for (const char* text : {"[1, 2]", "42", "\"str\"", "null"}) {
    write_raw_safetensors(file_, text, "");
    expect_bad_file({"not a JSON object"});
  }
}

TEST_F(Safetensors, EntryNotAnObject) {
  expect_bad({{"w", 5}}, {"tensor 'w'", "not an object"});
}

TEST_F(Safetensors, MissingOrIllTypedFields) {
  expect_bad({{"w", {{"shape", {2}}, {"data_offsets", {0, 8}}}}}, {"tensor 'w'", "'dtype'"});
  expect_bad({{"w", {{"dtype", 4}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}, {"tensor 'w'", "'dtype'"});
  expect_bad({{"w", {{"dtype", "F32"}, {"data_offsets", {0, 8}}}}}, {"tensor 'w'", "'shape'"});
  expect_bad(json{{"w", tensor("F32", {-2}, 0, 8)}}, {"tensor 'w'", "bad dimension -2"});
  expect_bad({{"w", {{"dtype", "F32"}, {"shape", {2.0}}, {"data_offsets", {0, 8}}}}}, {"tensor 'w'", "bad dimension"});
  expect_bad({{"w", {{"dtype", "F32"}, {"shape", {2}}}}}, {"tensor 'w'", "data_offsets"});
  expect_bad({{"w", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0}}}}}, {"tensor 'w'", "data_offsets"});
  expect_bad({{"w", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {-8, 0}}}}}, {"tensor 'w'", "data_offsets"});
  expect_bad({{"w", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", "0-8"}}}}, {"tensor 'w'", "data_offsets"});
}

TEST_F(Safetensors, UnknownDtype) {
  expect_bad(json{{"w", tensor("F128", {2}, 0, 8)}}, {"tensor 'w'", "unknown dtype 'F128'"});
  expect_bad(json{{"w", tensor("f32", {2}, 0, 8)}}, {"tensor 'w'", "unknown dtype 'f32'"});
}

TEST_F(Safetensors, DtypesMatchWhatMlxMaps) {
  // MLX cannot map F64 or F8_E5M2: reject them here, naming the tensor, not deep inside MLX.
  expect_bad(json{{"w", tensor("F64", {2}, 0, 16)}}, {"tensor 'w'", "unknown dtype 'F64'"});
  expect_bad(json{{"w", tensor("F8_E5M2", {2}, 0, 2)}}, {"tensor 'w'", "unknown dtype 'F8_E5M2'"});
  // ... and accept the ones it does map (F8_E4M3 arrives as uint8, C64 as complex64).
  json h = {{"f8", tensor("F8_E4M3", {4}, 0, 4)}, {"c", tensor("C64", {1}, 8, 16)},
            {"b", tensor("BOOL", {2}, 4, 6)}, {"i", tensor("I64", {1}, 16, 24)}};
  write_safetensors(file_, h, std::string(24, '\0'));
  auto arrays = load_safetensors(file_);
  ASSERT_EQ(arrays.size(), 4u);
  EXPECT_EQ(arrays.at("f8").dtype(), mx::uint8);
  EXPECT_EQ(arrays.at("c").dtype(), mx::complex64);
  EXPECT_EQ(arrays.at("b").dtype(), mx::bool_);
  EXPECT_EQ(arrays.at("i").dtype(), mx::int64);
}

TEST_F(Safetensors, OffsetsOutOfBounds) {
  expect_bad(json{{"w", tensor("F32", {32}, 0, 128)}}, {"tensor 'w'", "past the end of the data"});
  expect_bad(json{{"w", tensor("U8", {1}, 64, 65)}}, {"tensor 'w'", "past the end"});
}

TEST_F(Safetensors, ReversedOffsets) {
  expect_bad(json{{"w", tensor("F32", {2}, 16, 8)}}, {"tensor 'w'", "reversed"});
}

TEST_F(Safetensors, ShapeTimesDtypeSizeDiffersFromByteLength) {
  expect_bad(json{{"w", tensor("F32", {2, 3}, 0, 16)}}, {"tensor 'w'", "needs 24 bytes", "span 16"});
  expect_bad(json{{"w", tensor("BF16", {4}, 0, 16)}}, {"tensor 'w'", "needs 8 bytes"});
  expect_bad(json{{"w", tensor("F32", {}, 0, 8)}}, {"tensor 'w'", "needs 4 bytes"});  // scalar
}

TEST_F(Safetensors, HugeShapesDoNotOverflow) {
  expect_bad(json{{"w", tensor("F32", {2147483648LL}, 0, 8)}}, {"tensor 'w'", "too large"});
  std::vector<int64_t> shape(12, 2147483647);  // product far beyond 128 bits
  expect_bad(json{{"w", tensor("U8", shape, 0, 8)}}, {"tensor 'w'", "needs more than 64 bytes"});
  shape.push_back(0);  // ... but a zero dimension anywhere still means zero bytes
  write_safetensors(file_, json{{"w", tensor("U8", shape, 0, 0)}}, "");
  EXPECT_EQ(read_safetensors_header(file_).tensors.at(0).shape.size(), 13u);
}

TEST_F(Safetensors, OverlappingTensors) {
  json h = {{"a", tensor("F32", {2}, 0, 8)}, {"b", tensor("F32", {2}, 4, 12)}};
  expect_bad(h, {"tensor 'b'", "overlap tensor 'a'"});
  h = {{"a", tensor("F32", {4}, 0, 16)}, {"b", tensor("F32", {4}, 0, 16)}};  // aliased
  expect_bad(h, {"overlap", "'a'", "'b'"});
}

TEST_F(Safetensors, EmptyTensorDoesNotHideAnOverlap) {
  // Sorted: big [0,32), empty [8,8), small [16,24): only the non-adjacent pair overlaps.
  json h = {{"big", tensor("F32", {8}, 0, 32)},
            {"empty", tensor("F32", {0}, 8, 8)},
            {"small", tensor("F32", {2}, 16, 24)}};
  expect_bad(h, {"tensor 'small'", "overlap tensor 'big'"});
  // Empty tensors anywhere are fine on their own.
  h = {{"a", tensor("F32", {2}, 0, 8)}, {"e", tensor("F32", {0, 3}, 4, 4)}, {"b", tensor("F32", {2}, 8, 16)}};
  write_safetensors(file_, h, std::string(16, '\0'));
  EXPECT_EQ(read_safetensors_header(file_).tensors.size(), 3u);
}

TEST_F(Safetensors, NullMetadataAsMlxWritesIt) {
  mlx::core::save_safetensors(file_.string(), {{"a", mlx::core::zeros({2})}});  // "__metadata__": null
  auto header = read_safetensors_header(file_);
  EXPECT_TRUE(header.metadata.empty());
  EXPECT_EQ(load_safetensors(file_).size(), 1u);
}

TEST_F(Safetensors, BadMetadata) {
  expect_bad({{"__metadata__", {1, 2}}}, {"'__metadata__'", "expected an object"});
  expect_bad({{"__metadata__", {{"format", 1}}}}, {"'__metadata__.format'", "expected a string"});
}

TEST_F(Safetensors, TruncatedRealFile) {
  // A download cut short: the header is intact, the data is not.
  auto src = golden_dir() / "models" / "llama-q4g64" / "model.safetensors";
  auto bytes = read_bytes(src);
  auto header = read_safetensors_header(src);
  ASSERT_GT(header.tensors.size(), 2u);
  const auto& last = header.tensors.back();
  const uint64_t cut = 8 + header.header_size + last.begin + 1;  // inside the last tensor
  write_bytes(file_, bytes.substr(0, cut));
  expect_bad_file({"tensor '" + last.name + "'", "past the end of the data", "truncated"});
  write_bytes(file_, bytes.substr(0, 8 + header.header_size / 2));  // header cut too
  expect_bad_file({"past the end of the file"});
}

TEST_F(Safetensors, DataTrailingTheLastTensorIsAccepted) {
  // MLX itself does not require the data to be fully indexed; neither do we.
  write_safetensors(file_, json{{"w", tensor("F32", {1}, 0, 4)}}, std::string(12, '\0'));
  EXPECT_EQ(load_safetensors(file_).size(), 1u);
}
