// src/artifacts/gguf_quant against gguf-py (tools/oracle/gguf_quant_goldens.py): our float32
// dequantization and MLX's dequantize of our affine arrays must equal gguf-py's bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <mlx/mlx.h>
#include <nlohmann/json.hpp>

#include "artifacts/gguf_quant.h"
#include "artifacts_test_util.h"
#include "core/errors.h"

namespace mx = mlx::core;
using mlxcpp::GgmlConvertOptions;
using mlxcpp::GgmlTensorView;
using mlxcpp::GgmlType;
using mlxcpp::MlxAffine;
using mlxcpp::WeightError;

namespace {

struct Case {
  std::string name, type, source;
  GgmlType id = GgmlType::F32;
  std::vector<int64_t> shape;
  mx::array bytes = mx::array(0);
  mx::array expected = mx::array(0);
  GgmlTensorView view() const {
    return GgmlTensorView{name, id, shape, bytes.data<uint8_t>(), bytes.nbytes()};
  }
};

std::filesystem::path case_dir() { return mlxcpp::test::golden_dir() / "gguf_quant"; }

std::vector<Case> load_cases() {
  std::ifstream in(case_dir() / "cases.json");
  if (!in) throw std::runtime_error("missing " + (case_dir() / "cases.json").string() + " (make goldens)");
  auto doc = nlohmann::json::parse(in);
  std::vector<Case> out;
  for (const auto& c : doc.at("cases")) {
    Case k;
    k.name = c.at("name");
    k.type = c.at("type");
    k.source = c.at("source");
    k.id = static_cast<GgmlType>(std::stoul(c.at("type_id").get<std::string>()));
    std::stringstream ss(c.at("shape").get<std::string>());
    for (std::string d; std::getline(ss, d, ',');) k.shape.push_back(std::stoll(d));
    auto [arrays, meta] = mx::load_safetensors((case_dir() / (k.name + ".safetensors")).string());
    k.bytes = arrays.at("bytes");
    k.expected = arrays.at("expected");
    mx::eval(k.bytes, k.expected);
    out.push_back(std::move(k));
  }
  return out;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = load_cases();
  return all;
}

bool is(const Case& c, std::initializer_list<const char*> types) {
  for (const char* t : types)
    if (c.type == t) return true;
  return false;
}

// Bitwise equality of two float32 arrays (so -0 vs +0 and NaN payloads count).
bool same_bits(const mx::array& a, const mx::array& b) {
  if (a.shape() != b.shape() || a.dtype() != mx::float32 || b.dtype() != mx::float32) return false;
  auto ca = mx::contiguous(a), cb = mx::contiguous(b);
  mx::eval(ca, cb);
  return std::memcmp(ca.data<float>(), cb.data<float>(), ca.nbytes()) == 0;
}

mx::array mlx_dequantize(const MlxAffine& q) {
  return mx::dequantize(q.weight, mx::astype(q.scales, mx::float32), mx::astype(q.biases, mx::float32),
                        q.group_size, q.bits);
}

TEST(GgufQuant, DequantizeEqualsGgufPyBitwise) {
  ASSERT_FALSE(cases().empty());
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto got = mlxcpp::dequantize_ggml(c.view());
    EXPECT_EQ(got.dtype(), mx::float32);
    EXPECT_EQ(mlxcpp::test::max_abs_diff(got, c.expected), 0.0f);
    EXPECT_TRUE(same_bits(got, c.expected));
  }
}

// Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q5_K: MLX affine, group 32, same values as ggml.
TEST(GgufQuant, LosslessTypesBecomeExactMlxAffine) {
  const std::map<std::string, int> bits = {{"Q4_0", 4}, {"Q4_1", 4}, {"Q5_0", 5}, {"Q5_1", 5},
                                           {"Q8_0", 8}, {"Q4_K", 4}, {"Q5_K", 5}};
  int n = 0;
  for (const auto& c : cases()) {
    if (!bits.count(c.type)) continue;
    SCOPED_TRACE(c.name);
    ++n;
    auto r = mlxcpp::convert_ggml_tensor(c.view());
    ASSERT_TRUE(std::holds_alternative<MlxAffine>(r));
    const auto& q = std::get<MlxAffine>(r);
    EXPECT_EQ(q.bits, bits.at(c.type));
    EXPECT_EQ(q.group_size, 32);
    EXPECT_TRUE(q.lossless);
    EXPECT_EQ(q.weight.dtype(), mx::uint32);
    // float16 holds d, m, -8d, -16d, -128d exactly unless they overflow; d*sc needs float32.
    const bool f16 = !is(c, {"Q4_K", "Q5_K"}) && c.source != "big_d";
    EXPECT_EQ(q.scales.dtype(), f16 ? mx::float16 : mx::float32);
    EXPECT_EQ(q.biases.dtype(), q.scales.dtype());
    auto deq = mlx_dequantize(q);
    EXPECT_EQ(mlxcpp::test::max_abs_diff(deq, c.expected), 0.0f);
    if (!f16) {  // MLX's own dequantize in the scales dtype, float32 here
      EXPECT_EQ(mlxcpp::test::max_abs_diff(mx::dequantize(q.weight, q.scales, q.biases, 32, q.bits),
                                           c.expected), 0.0f);
    }
  }
  EXPECT_EQ(n, 2 * 2 * 5 + 2 * 2 + 2);
}

// The quantized matmul of a model uses the arrays as they are (float32 scales included).
TEST(GgufQuant, QuantizedMatmulAcceptsConvertedArrays) {
  for (const auto& c : cases()) {
    if (c.shape.size() != 2 || c.source != "random_blocks" || !is(c, {"Q4_K", "Q5_K", "Q5_0", "Q8_0"}))
      continue;
    SCOPED_TRACE(c.name);
    auto q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(c.view()));
    auto x = mx::random::normal({3, static_cast<int>(c.shape[1])}, mx::float32, 0.0f, 1.0f,
                                mx::random::key(7));
    auto got = mx::quantized_matmul(x, q.weight, q.scales, q.biases, true, 32, q.bits);
    auto want = mx::matmul(x, mx::transpose(c.expected));
    EXPECT_EQ(got.dtype(), mx::float32);
    EXPECT_TRUE(mx::allclose(got, want, 1e-4, 1e-4).item<bool>());
  }
}

// Q2_K/Q3_K/Q6_K (sub-blocks of 16): requantized to MLX affine 8-bit g32; error reported.
TEST(GgufQuant, SixteenWideTypesAreRequantized) {
  int n = 0;
  for (const auto& c : cases()) {
    if (!is(c, {"Q2_K", "Q3_K", "Q6_K"})) continue;
    SCOPED_TRACE(c.name);
    ++n;
    auto q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(c.view()));
    EXPECT_EQ(q.bits, 8);
    EXPECT_EQ(q.group_size, 32);
    EXPECT_FALSE(q.lossless);
    EXPECT_EQ(q.scales.dtype(), mx::float32);
    auto deq = mlx_dequantize(q);
    // Per group of 32, in steps of s = (max - min)/255: mx::quantize makes zero exact (bias =
    // the larger-magnitude end, scale = edge/rint(edge/s)), which can clip the other end by up to
    // one step (s is at least 1e-7); float32 rounding at the group's magnitude adds a few ulps.
    auto e = mx::reshape(c.expected, {-1, 32});
    auto err = mx::max(mx::abs(mx::subtract(mx::reshape(deq, {-1, 32}), e)), -1);
    auto step = mx::maximum(mx::divide(mx::subtract(mx::max(e, -1), mx::min(e, -1)), mx::array(255.0f)),
                            mx::array(1e-7f));  // mx::quantize's smallest scale
    auto ulps = mx::multiply(mx::max(mx::abs(e), -1), mx::array(std::ldexp(1.0f, -21)));
    auto steps = mx::max(mx::divide(err, mx::add(step, ulps))).item<float>();
    float max_err = mlxcpp::test::max_abs_diff(deq, c.expected);
    float max_w = mx::max(mx::abs(c.expected)).item<float>();
    auto sq = [](const mx::array& a) { return std::sqrt(mx::mean(mx::square(a)).item<float>()); };
    float rms = sq(mx::subtract(deq, c.expected));
    std::printf("  requant %-22s max|d| %.3g (max|w| %.3g)  rms %.3g (%.2f%% of rms w)  worst %.3f steps\n",
                c.name.c_str(), max_err, max_w, rms, 100 * rms / sq(c.expected), steps);
    EXPECT_LE(steps, 1.0f);
  }
  EXPECT_EQ(n, 7);
}

// A stack of matrices (a MoE layer's experts, [E, rows, cols]) converts as each matrix alone:
// every slice of the weight, scales and biases equals the 2-D conversion of that slice's bytes.
TEST(GgufQuant, StackConvertsAsItsMatrices) {
  int n = 0;
  for (const auto& c : cases()) {
    if (c.shape.size() != 3 || is(c, {"F32", "F16", "BF16"})) continue;
    SCOPED_TRACE(c.name);
    ++n;
    auto stack = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(c.view()));
    const int experts = static_cast<int>(c.shape[0]);
    const size_t bytes = c.bytes.nbytes() / experts;
    for (int e = 0; e < experts; ++e) {
      GgmlTensorView one{c.name, c.id, {c.shape[1], c.shape[2]}, c.bytes.data<uint8_t>() + e * bytes, bytes};
      auto q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(one));
      EXPECT_EQ(q.bits, stack.bits);
      for (auto [got, want] : {std::pair{stack.weight, q.weight}, {stack.scales, q.scales}, {stack.biases, q.biases}}) {
        auto slice = mx::squeeze(mx::slice(got, {e, 0, 0}, {e + 1, got.shape(1), got.shape(2)}), 0);
        EXPECT_TRUE(mlxcpp::test::same_array(slice, want)) << "expert " << e;
      }
    }
  }
  EXPECT_EQ(n, 5 + 10);  // quantize_2x3x64 of the five 32-wide types, random_2x2x256 of all ten
}

TEST(GgufQuant, DenseTypesAreKeptAsTheyAre) {
  for (const auto& c : cases()) {
    if (!is(c, {"F32", "F16", "BF16"})) continue;
    SCOPED_TRACE(c.name);
    auto r = mlxcpp::convert_ggml_tensor(c.view());
    ASSERT_TRUE(std::holds_alternative<mx::array>(r));
    const auto& a = std::get<mx::array>(r);
    EXPECT_EQ(a.dtype(), c.type == "F32" ? mx::float32 : c.type == "F16" ? mx::float16 : mx::bfloat16);
    EXPECT_EQ(a.nbytes(), c.bytes.nbytes());
    EXPECT_EQ(std::memcmp(a.data<uint8_t>(), c.bytes.data<uint8_t>(), a.nbytes()), 0);
  }
}

const Case& find_case(const std::string& name) {
  for (const auto& c : cases())
    if (c.name == name) return c;
  throw std::runtime_error("no golden case " + name);
}

TEST(GgufQuant, OptionsChooseDenseAndScaleDtypes) {
  const auto& q6 = find_case("q6_k_random_6x512");
  GgmlConvertOptions dense;
  dense.dense_dtype = mx::bfloat16;
  auto a = std::get<mx::array>(mlxcpp::convert_ggml_tensor(q6.view(), dense));
  EXPECT_EQ(a.dtype(), mx::bfloat16);
  EXPECT_TRUE(mx::array_equal(a, mx::astype(q6.expected, mx::bfloat16)).item<bool>());

  GgmlConvertOptions f16;
  f16.scales_dtype = mx::float16;
  const auto& q4k = find_case("q4_k_random_6x512");
  auto q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(q4k.view(), f16));
  EXPECT_EQ(q.scales.dtype(), mx::float16);
  EXPECT_FALSE(q.lossless);  // d*sc does not fit float16
  const auto& q40 = find_case("q4_0_random_6x512");
  GgmlConvertOptions f32;
  f32.scales_dtype = mx::float32;
  q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(q40.view(), f32));
  EXPECT_EQ(q.scales.dtype(), mx::float32);
  EXPECT_TRUE(q.lossless);

  GgmlConvertOptions g64;
  g64.requant_group_size = 64;
  g64.requant_scales_dtype = mx::float16;
  q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(q6.view(), g64));
  EXPECT_EQ(q.group_size, 64);
  EXPECT_EQ(q.scales.dtype(), mx::float16);
  EXPECT_EQ(q.scales.shape(), (mx::Shape{6, 8}));
}

// A hand-built Q4_0 block, independent of the goldens: d = 0.5, codes 0..15 then 15..0.
TEST(GgufQuant, HandBuiltQ4_0Block) {
  std::vector<uint8_t> block = {0x00, 0x38};  // fp16 0.5
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  GgmlTensorView t{"blk.0.w", GgmlType::Q4_0, {1, 32}, block.data(), block.size()};
  auto w = mlxcpp::dequantize_ggml(t);
  std::vector<float> want;
  for (int j = 0; j < 16; ++j) want.push_back(0.5f * static_cast<float>(j - 8));
  for (int j = 0; j < 16; ++j) want.push_back(0.5f * static_cast<float>(7 - j));
  EXPECT_TRUE(mx::array_equal(w, mx::array(want.data(), {1, 32})).item<bool>());
  auto q = std::get<MlxAffine>(mlxcpp::convert_ggml_tensor(t));
  EXPECT_EQ(q.weight.shape(), (mx::Shape{1, 4}));
  EXPECT_EQ(q.weight.data<uint32_t>()[0], 0x76543210u);  // value i at bits 4i
  EXPECT_EQ(q.weight.data<uint32_t>()[3], 0x01234567u);
  // A 1-D quantized tensor comes back dense.
  GgmlTensorView v{"norm", GgmlType::Q4_0, {32}, block.data(), block.size()};
  EXPECT_TRUE(std::holds_alternative<mx::array>(mlxcpp::convert_ggml_tensor(v)));
}

TEST(GgufQuant, BlockMath) {
  EXPECT_EQ(mlxcpp::ggml_nbytes(GgmlType::Q4_K, {4096, 4096}, "x"), 4096u * 16 * 144);
  EXPECT_EQ(mlxcpp::ggml_nbytes(GgmlType::Q4_K, {2, 3, 512}, "x"), 2u * 3 * 2 * 144);
  EXPECT_EQ(mlxcpp::ggml_nbytes(GgmlType::Q8_0, {10, 64}, "x"), 10u * 2 * 34);
  EXPECT_EQ(mlxcpp::ggml_nbytes(GgmlType::BF16, {7}, "x"), 14u);
  EXPECT_EQ(mlxcpp::ggml_type_name(GgmlType::IQ4_XS), "IQ4_XS");
  EXPECT_EQ(mlxcpp::ggml_type_name(static_cast<GgmlType>(4)), "type 4");
  EXPECT_FALSE(mlxcpp::ggml_block_info(static_cast<GgmlType>(31)).has_value());
  EXPECT_EQ(mlxcpp::ggml_block_info(GgmlType::Q6_K)->type_size, 210);
  EXPECT_TRUE(mlxcpp::ggml_type_supported(GgmlType::Q3_K));
  EXPECT_FALSE(mlxcpp::ggml_type_supported(GgmlType::IQ2_XS));
}

TEST(GgufQuant, ErrorsNameTheTensorAndType) {
  using mlxcpp::test::error_of;
  using mlxcpp::test::expect_contains;
  std::vector<uint8_t> buf(144 * 4, 0);
  GgmlTensorView t{"blk.3.ffn_up.weight", GgmlType::Q4_K, {2, 512}, buf.data(), buf.size() - 1};
  auto short_buf = error_of<WeightError>([&] { mlxcpp::dequantize_ggml(t); });
  expect_contains(short_buf, {"blk.3.ffn_up.weight", "Q4_K", "575 bytes", "576"});

  t.nbytes = buf.size() + 144;
  expect_contains(error_of<WeightError>([&] { mlxcpp::convert_ggml_tensor(t); }), {"720 bytes"});

  t.shape = {2, 300};
  t.nbytes = buf.size();
  expect_contains(error_of<WeightError>([&] { mlxcpp::convert_ggml_tensor(t); }),
                  {"blk.3.ffn_up.weight", "Q4_K", "row length 300", "block size 256"});

  t.shape = {2, -256};
  expect_contains(error_of<WeightError>([&] { mlxcpp::convert_ggml_tensor(t); }), {"negative dim"});

  GgmlTensorView u{"tok_embd.weight", static_cast<GgmlType>(4), {1, 32}, buf.data(), 18};
  expect_contains(error_of<WeightError>([&] { mlxcpp::convert_ggml_tensor(u); }),
                  {"tok_embd.weight", "unknown ggml type 4"});

  GgmlTensorView iq{"output.weight", GgmlType::IQ2_XS, {1, 256}, buf.data(), 74};
  expect_contains(error_of<WeightError>([&] { mlxcpp::convert_ggml_tensor(iq); }),
                  {"output.weight", "unsupported ggml type 'IQ2_XS'"});
  expect_contains(error_of<WeightError>([&] { mlxcpp::dequantize_ggml(iq); }), {"IQ2_XS"});

  GgmlTensorView i32{"ids", GgmlType::I32, {2}, buf.data(), 8};
  expect_contains(error_of<WeightError>([&] { mlxcpp::dequantize_ggml(i32); }), {"I32", "cannot dequantize"});
  EXPECT_EQ(std::get<mx::array>(mlxcpp::convert_ggml_tensor(i32)).dtype(), mx::int32);

  GgmlConvertOptions bad;
  bad.requant_group_size = 48;
  GgmlTensorView q6{"w", GgmlType::Q6_K, {1, 256}, buf.data(), 210};
  expect_contains(error_of<WeightError>([&] { mlxcpp::convert_ggml_tensor(q6, bad); }),
                  {"'w'", "Q6_K", "group size 48"});
}

}  // namespace
