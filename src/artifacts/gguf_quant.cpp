#include "artifacts/gguf_quant.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mlx/mlx.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

static_assert(std::endian::native == std::endian::little, "GGML blocks are read in place as little-endian");

// ---------------------------------------------------------------------------------------------
// Scalars

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float32
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float f16_at(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// ---------------------------------------------------------------------------------------------
// Block decoders (ggml-common.h block_* structs, ggml-quants.c dequantize_row_*). Each turns one
// block into codes (unsigned, `bits` wide) and one scale (+ bias) per sub-block.

// A quantized type: x = scale * (code - offset) when offset > 0, else x = scale * code + bias.
// That is ggml's own arithmetic order; every product is exact in float32 (<= 24 significant
// bits), so the same x also equals MLX's q*scale + bias with bias = -offset*scale.
struct Codec {
  int sub_size;  // elements sharing one scale: 32 or 16
  int bits;      // code width
  int offset;
  void (*decode)(const uint8_t* block, uint8_t* codes, float* scales, float* biases);
};

// 32 4-bit codes: element j is the low nibble of qs[j], element j+16 the high one.
void nibbles32(const uint8_t* qs, uint8_t* c) {
  for (int j = 0; j < 16; ++j) {
    c[j] = qs[j] & 0x0f;
    c[j + 16] = qs[j] >> 4;
  }
}
// The 5th bit of 32 codes, bit j of a little-endian uint32.
void fifth_bits32(uint32_t qh, uint8_t* c) {
  for (int j = 0; j < 32; ++j) c[j] |= static_cast<uint8_t>(((qh >> j) & 1u) << 4);
}

void decode_q4_0(const uint8_t* b, uint8_t* c, float* s, float*) {  // d, qs[16]
  s[0] = f16_at(b);
  nibbles32(b + 2, c);
}
void decode_q4_1(const uint8_t* b, uint8_t* c, float* s, float* m) {  // d, m, qs[16]
  s[0] = f16_at(b);
  m[0] = f16_at(b + 2);
  nibbles32(b + 4, c);
}
void decode_q5_0(const uint8_t* b, uint8_t* c, float* s, float*) {  // d, qh[4], qs[16]
  s[0] = f16_at(b);
  nibbles32(b + 6, c);
  fifth_bits32(le32(b + 2), c);
}
void decode_q5_1(const uint8_t* b, uint8_t* c, float* s, float* m) {  // d, m, qh[4], qs[16]
  s[0] = f16_at(b);
  m[0] = f16_at(b + 2);
  nibbles32(b + 8, c);
  fifth_bits32(le32(b + 4), c);
}
void decode_q8_0(const uint8_t* b, uint8_t* c, float* s, float*) {  // d, int8 qs[32]
  s[0] = f16_at(b);
  for (int j = 0; j < 32; ++j) c[j] = b[2 + j] ^ 0x80;  // int8 q -> q + 128
}

// 256 2-bit codes in 64 bytes: element h*128 + k*32 + l is bits 2k..2k+1 of qs[h*32 + l].
void crumbs256(const uint8_t* qs, uint8_t* c) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) c[h * 128 + k * 32 + l] = (qs[h * 32 + l] >> (2 * k)) & 3;
}
// One extra bit (at `shift`) per code: element e's bit is bit e/32 of mask[e % 32].
void mask_bits256(const uint8_t* mask, int shift, uint8_t* c) {
  for (int e = 0; e < 256; ++e) c[e] |= static_cast<uint8_t>(((mask[e % 32] >> (e / 32)) & 1) << shift);
}

void decode_q2_k(const uint8_t* b, uint8_t* c, float* s, float* m) {  // sc[16], qs[64], d, dmin
  const float d = f16_at(b + 80);
  const float dmin = f16_at(b + 82);
  for (int i = 0; i < 16; ++i) {
    s[i] = d * static_cast<float>(b[i] & 0x0f);
    m[i] = -(dmin * static_cast<float>(b[i] >> 4));
  }
  crumbs256(b + 16, c);
}
void decode_q3_k(const uint8_t* b, uint8_t* c, float* s, float*) {  // hmask[32], qs[64], sc[12], d
  const uint8_t* sc = b + 96;
  const float d = f16_at(b + 108);
  for (int i = 0; i < 16; ++i) {  // 6-bit scales: low nibbles in sc[0..7], high pairs in sc[8..11]
    const int lo = (sc[i % 8] >> (4 * (i / 8))) & 0x0f;
    const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    s[i] = d * static_cast<float>((lo | (hi << 4)) - 32);
  }
  crumbs256(b + 32, c);
  mask_bits256(b, 2, c);  // ggml subtracts 4 where the mask bit is 0: code - 4 with the bit set
}

// Q4_K/Q5_K header: d, dmin, 12 bytes holding 8 6-bit scales and 8 6-bit mins (get_scale_min_k4).
void k_scales(const uint8_t* b, float* s, float* m) {
  const float d = f16_at(b);
  const float dmin = f16_at(b + 2);
  const uint8_t* q = b + 4;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, mn = 0;
    if (j < 4) {
      sc = q[j] & 63;
      mn = q[j + 4] & 63;
    } else {
      sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
      mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
    s[j] = d * static_cast<float>(sc);
    m[j] = -(dmin * static_cast<float>(mn));
  }
}
// 256 4-bit codes in 128 bytes: sub-block 2k is the low nibbles of qs[32k..], 2k+1 the high.
void nibbles256(const uint8_t* qs, uint8_t* c) {
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 32; ++l) {
      c[64 * k + l] = qs[32 * k + l] & 0x0f;
      c[64 * k + 32 + l] = qs[32 * k + l] >> 4;
    }
}
void decode_q4_k(const uint8_t* b, uint8_t* c, float* s, float* m) {  // d, dmin, sc[12], qs[128]
  k_scales(b, s, m);
  nibbles256(b + 16, c);
}
void decode_q5_k(const uint8_t* b, uint8_t* c, float* s, float* m) {  // ..., qh[32], qs[128]
  k_scales(b, s, m);
  nibbles256(b + 48, c);
  mask_bits256(b + 16, 4, c);
}
void decode_q6_k(const uint8_t* b, uint8_t* c, float* s, float*) {  // ql[128], qh[64], sc[16], d
  const float d = f16_at(b + 208);
  for (int i = 0; i < 16; ++i) s[i] = d * static_cast<float>(static_cast<int8_t>(b[192 + i]));
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    uint8_t* o = c + 128 * h;
    for (int l = 0; l < 32; ++l) {
      o[l] = (ql[l] & 0x0f) | ((qh[l] & 3) << 4);
      o[l + 32] = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
      o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The type table

struct TypeRow {
  GgmlType type;
  const char* name;
  int64_t block_size;
  int64_t type_size;
  const Codec* codec;  // quantized types this file decodes
  bool dense;          // stored as plain elements: kept as they are
};

constexpr Codec kQ4_0{32, 4, 8, decode_q4_0}, kQ4_1{32, 4, 0, decode_q4_1};
constexpr Codec kQ5_0{32, 5, 16, decode_q5_0}, kQ5_1{32, 5, 0, decode_q5_1};
constexpr Codec kQ8_0{32, 8, 128, decode_q8_0};
constexpr Codec kQ2_K{16, 2, 0, decode_q2_k}, kQ3_K{16, 3, 4, decode_q3_k};
constexpr Codec kQ4_K{32, 4, 0, decode_q4_k}, kQ5_K{32, 5, 0, decode_q5_k};
constexpr Codec kQ6_K{16, 6, 32, decode_q6_k};

const TypeRow* find_row(GgmlType type) {
  using T = GgmlType;
  static constexpr TypeRow kRows[] = {
      {T::F32, "F32", 1, 4, nullptr, true},        {T::F16, "F16", 1, 2, nullptr, true},
      {T::Q4_0, "Q4_0", 32, 18, &kQ4_0, false},    {T::Q4_1, "Q4_1", 32, 20, &kQ4_1, false},
      {T::Q5_0, "Q5_0", 32, 22, &kQ5_0, false},    {T::Q5_1, "Q5_1", 32, 24, &kQ5_1, false},
      {T::Q8_0, "Q8_0", 32, 34, &kQ8_0, false},    {T::Q8_1, "Q8_1", 32, 40, nullptr, false},
      {T::Q2_K, "Q2_K", 256, 84, &kQ2_K, false},   {T::Q3_K, "Q3_K", 256, 110, &kQ3_K, false},
      {T::Q4_K, "Q4_K", 256, 144, &kQ4_K, false},  {T::Q5_K, "Q5_K", 256, 176, &kQ5_K, false},
      {T::Q6_K, "Q6_K", 256, 210, &kQ6_K, false},  {T::Q8_K, "Q8_K", 256, 292, nullptr, false},
      {T::IQ2_XXS, "IQ2_XXS", 256, 66, nullptr, false},
      {T::IQ2_XS, "IQ2_XS", 256, 74, nullptr, false},
      {T::IQ3_XXS, "IQ3_XXS", 256, 98, nullptr, false},
      {T::IQ1_S, "IQ1_S", 256, 50, nullptr, false},  {T::IQ4_NL, "IQ4_NL", 32, 18, nullptr, false},
      {T::IQ3_S, "IQ3_S", 256, 110, nullptr, false}, {T::IQ2_S, "IQ2_S", 256, 82, nullptr, false},
      {T::IQ4_XS, "IQ4_XS", 256, 136, nullptr, false},
      {T::I8, "I8", 1, 1, nullptr, true},          {T::I16, "I16", 1, 2, nullptr, true},
      {T::I32, "I32", 1, 4, nullptr, true},        {T::I64, "I64", 1, 8, nullptr, true},
      {T::F64, "F64", 1, 8, nullptr, true},        {T::IQ1_M, "IQ1_M", 256, 56, nullptr, false},
      {T::BF16, "BF16", 1, 2, nullptr, true},      {T::TQ1_0, "TQ1_0", 256, 54, nullptr, false},
      {T::TQ2_0, "TQ2_0", 256, 66, nullptr, false}, {T::MXFP4, "MXFP4", 32, 17, nullptr, false},
  };
  for (const auto& r : kRows)
    if (r.type == type) return &r;
  return nullptr;
}

mx::Dtype dense_dtype_of(GgmlType type) {
  switch (type) {
    case GgmlType::F16: return mx::float16;
    case GgmlType::BF16: return mx::bfloat16;
    case GgmlType::I8: return mx::int8;
    case GgmlType::I16: return mx::int16;
    case GgmlType::I32: return mx::int32;
    case GgmlType::I64: return mx::int64;
    case GgmlType::F64: return mx::float64;
    default: return mx::float32;
  }
}

// ---------------------------------------------------------------------------------------------
// Validation and arrays

std::string what(const GgmlTensorView& t) {
  return fmt::format("tensor '{}' ({} [{}])", t.name, ggml_type_name(t.type), fmt::join(t.shape, ", "));
}

std::string supported_list() {
  return "F32, F16, BF16, I8, I16, I32, I64, F64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
         "Q5_K, Q6_K";
}

const TypeRow& supported_row(const GgmlTensorView& t) {
  check_ggml_tensor(t);
  const TypeRow* row = find_row(t.type);
  if (row->codec == nullptr && !row->dense) {
    throw WeightError(fmt::format("tensor '{}': unsupported ggml type '{}' (supported: {})", t.name,
                                  row->name, supported_list()));
  }
  return *row;
}

mx::Shape mlx_shape(const GgmlTensorView& t) {
  mx::Shape s;
  for (int64_t d : t.shape) {
    if (d > std::numeric_limits<int32_t>::max()) {
      throw WeightError(fmt::format("{}: dim {} is larger than MLX supports", what(t), d));
    }
    s.push_back(static_cast<int32_t>(d));
  }
  return s;
}

// A fresh, uninitialised array the caller fills through data<T>().
mx::array empty_array(const mx::Shape& shape, mx::Dtype dtype) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return mx::array(mx::allocator::malloc(std::max<size_t>(n * dtype.size(), 1)), shape, dtype);
}

int64_t element_count(const GgmlTensorView& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;  // bounded: check_ggml_tensor computed the byte size
  return n;
}

// Calls fn(block_index, codes, scales, biases) for every block, in order.
template <typename Fn>
void for_each_block(const GgmlTensorView& t, const TypeRow& row, Fn&& fn) {
  uint8_t codes[256];
  float scales[16];
  float biases[16] = {};
  const int64_t blocks = element_count(t) / row.block_size;
  for (int64_t i = 0; i < blocks; ++i) {
    row.codec->decode(t.data + i * row.type_size, codes, scales, biases);
    fn(i, codes, scales, biases);
  }
}

mx::array dense_copy(const GgmlTensorView& t) {
  auto out = empty_array(mlx_shape(t), dense_dtype_of(t.type));
  if (t.nbytes > 0) std::memcpy(out.data<uint8_t>(), t.data, t.nbytes);
  return out;
}

// Writes codes as one little-endian bitstream: code i at bit i*bits (MLX's affine packing for
// every width; rows stay word aligned because a row holds a multiple of 32 codes).
class BitWriter {
 public:
  explicit BitWriter(uint32_t* out) : out_(out) {}
  void put(uint32_t code, int bits) {
    acc_ |= static_cast<uint64_t>(code) << used_;
    used_ += bits;
    if (used_ >= 32) {
      *out_++ = static_cast<uint32_t>(acc_);
      acc_ >>= 32;
      used_ -= 32;
    }
  }

 private:
  uint32_t* out_;
  uint64_t acc_ = 0;
  int used_ = 0;
};

template <typename H>
bool fits(const float* v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (static_cast<float>(static_cast<H>(v[i])) != v[i]) return false;
  return true;
}

// Lossless affine form of a type whose sub-blocks are MLX groups of 32.
MlxAffine exact_affine(const GgmlTensorView& t, const TypeRow& row, const GgmlConvertOptions& o) {
  const Codec& k = *row.codec;
  mx::Shape shape = mlx_shape(t);
  mx::Shape wshape = shape, sshape = shape;
  wshape.back() = shape.back() / 32 * k.bits;
  sshape.back() = shape.back() / 32;
  auto weight = empty_array(wshape, mx::uint32);
  auto scales = empty_array(sshape, mx::float32);
  auto biases = empty_array(sshape, mx::float32);
  BitWriter bits(weight.data<uint32_t>());
  float* sp = scales.data<float>();
  float* bp = biases.data<float>();
  const int subs = static_cast<int>(row.block_size / 32);
  for_each_block(t, row, [&](int64_t i, const uint8_t* c, const float* s, const float* b) {
    for (int j = 0; j < subs; ++j) {
      *sp++ = s[j];
      *bp++ = k.offset > 0 ? -static_cast<float>(k.offset) * s[j] : b[j];  // exact: 2^n * s
    }
    for (int e = 0; e < row.block_size; ++e) bits.put(c[e], k.bits);
  });
  const size_t n = scales.size();
  const float* sv = scales.data<float>();
  const float* bv = biases.data<float>();
  auto exact_in = [&](mx::Dtype d) {
    if (d == mx::float32) return true;
    if (d == mx::float16) return fits<mx::float16_t>(sv, n) && fits<mx::float16_t>(bv, n);
    if (d == mx::bfloat16) return fits<mx::bfloat16_t>(sv, n) && fits<mx::bfloat16_t>(bv, n);
    return false;
  };
  mx::Dtype dtype = o.scales_dtype.value_or(exact_in(mx::float16) ? mx::float16 : mx::float32);
  const bool lossless = exact_in(dtype);
  if (dtype != mx::float32) {
    scales = mx::astype(scales, dtype);
    biases = mx::astype(biases, dtype);
    mx::eval(scales, biases);
  }
  return MlxAffine{weight, scales, biases, k.bits, 32, lossless};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

std::string ggml_type_name(GgmlType type) {
  const TypeRow* row = find_row(type);
  return row ? row->name : fmt::format("type {}", static_cast<uint32_t>(type));
}

std::optional<GgmlBlockInfo> ggml_block_info(GgmlType type) {
  const TypeRow* row = find_row(type);
  if (row == nullptr) return std::nullopt;
  return GgmlBlockInfo{row->block_size, row->type_size};
}

bool ggml_type_supported(GgmlType type) {
  const TypeRow* row = find_row(type);
  return row != nullptr && (row->codec != nullptr || row->dense);
}

size_t ggml_nbytes(GgmlType type, const std::vector<int64_t>& shape, const std::string& tensor) {
  const TypeRow* row = find_row(type);
  if (row == nullptr) {
    throw WeightError(fmt::format("tensor '{}': unknown ggml type {} (supported: {})", tensor,
                                  static_cast<uint32_t>(type), supported_list()));
  }
  const std::string where = fmt::format("tensor '{}' ({} [{}])", tensor, row->name, fmt::join(shape, ", "));
  const int64_t cols = shape.empty() ? 1 : shape.back();
  for (int64_t d : shape) {
    if (d < 0) throw WeightError(fmt::format("{}: negative dim {}", where, d));
  }
  if (cols % row->block_size != 0) {
    throw WeightError(fmt::format("{}: row length {} is not a multiple of the {} block size {}",
                                  where, cols, row->name, row->block_size));
  }
  // bytes = (rows * cols / block_size) * type_size, refused past 2^62.
  constexpr uint64_t kMax = uint64_t{1} << 62;
  uint64_t bytes = static_cast<uint64_t>(cols / row->block_size) * static_cast<uint64_t>(row->type_size);
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    const auto d = static_cast<uint64_t>(shape[i]);
    if (d != 0 && bytes > kMax / d) throw WeightError(fmt::format("{}: tensor is too large", where));
    bytes *= d;
  }
  if (bytes > kMax) throw WeightError(fmt::format("{}: tensor is too large", where));
  return static_cast<size_t>(bytes);
}

void check_ggml_tensor(const GgmlTensorView& t) {
  const size_t want = ggml_nbytes(t.type, t.shape, t.name);
  if (t.nbytes != want) {
    throw WeightError(fmt::format("{}: data is {} bytes, the shape needs {}", what(t), t.nbytes, want));
  }
  if (want > 0 && t.data == nullptr) throw WeightError(fmt::format("{}: no data", what(t)));
}

mx::array dequantize_ggml(const GgmlTensorView& t) {
  const TypeRow& row = supported_row(t);
  if (row.dense) {
    if (t.type == GgmlType::F32) return dense_copy(t);
    if (t.type != GgmlType::F16 && t.type != GgmlType::BF16) {
      throw WeightError(fmt::format("{}: not a floating-point type, cannot dequantize", what(t)));
    }
    auto out = empty_array(mlx_shape(t), mx::float32);
    float* o = out.data<float>();
    const int64_t n = element_count(t);
    for (int64_t i = 0; i < n; ++i) {
      const auto h = static_cast<uint16_t>(t.data[2 * i] | (t.data[2 * i + 1] << 8));
      o[i] = t.type == GgmlType::F16 ? f16_to_f32(h) : std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
    return out;
  }
  auto out = empty_array(mlx_shape(t), mx::float32);
  float* o = out.data<float>();
  const Codec& k = *row.codec;
  const int64_t bs = row.block_size;
  for_each_block(t, row, [&](int64_t i, const uint8_t* c, const float* s, const float* b) {
    float* y = o + i * bs;
    for (int64_t g = 0; g < bs / k.sub_size; ++g, c += k.sub_size, y += k.sub_size) {
      if (k.offset > 0) {
        for (int e = 0; e < k.sub_size; ++e) y[e] = s[g] * static_cast<float>(c[e] - k.offset);
      } else {
        for (int e = 0; e < k.sub_size; ++e) y[e] = s[g] * static_cast<float>(c[e]) + b[g];
      }
    }
  });
  return out;
}

std::variant<MlxAffine, mx::array> convert_ggml_tensor(const GgmlTensorView& t,
                                                       const GgmlConvertOptions& o) {
  const TypeRow& row = supported_row(t);
  if (row.dense) return dense_copy(t);
  if (t.shape.size() < 2) {
    auto w = dequantize_ggml(t);
    if (o.dense_dtype && *o.dense_dtype != mx::float32) {
      w = mx::astype(w, *o.dense_dtype);
      mx::eval(w);
    }
    return w;
  }
  if (row.codec->sub_size == 32) return exact_affine(t, row, o);
  auto w = dequantize_ggml(t);
  if (o.dense_dtype) {
    if (*o.dense_dtype != mx::float32) {
      w = mx::astype(w, *o.dense_dtype);
      mx::eval(w);
    }
    return w;
  }
  std::vector<mx::array> q;
  try {
    q = mx::quantize(w, o.requant_group_size, o.requant_bits);
  } catch (const std::invalid_argument& e) {
    throw WeightError(fmt::format("{}: requantizing to {} bits, group size {}: {}", what(t),
                                  o.requant_bits, o.requant_group_size, e.what()));
  }
  auto scales = mx::astype(q[1], o.requant_scales_dtype);
  auto biases = mx::astype(q[2], o.requant_scales_dtype);
  mx::eval(q[0], scales, biases);
  return MlxAffine{q[0], scales, biases, o.requant_bits, o.requant_group_size, false};
}

}  // namespace mlxcpp
