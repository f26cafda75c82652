#include "kernels/quant_attention.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <mlx/primitives.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/cpu_dispatch.h"
#include "kernels/vec_ops.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

constexpr int kTile = 128;    // key rows dequantized at a time
constexpr int kQBlock = 16;   // prompt queries a task
constexpr int kMinSlice = 256;  // keys of a decode step's slice, at least

struct QAttnShape {
  float scale;
  bool causal;
  int group, bits;
  int window = 0;  // > 0: query l also skips keys before last(l) - window + 1
};

// One quantized tensor of the cache inside the kernel: packed rows (strided over batch and
// head), scales and biases as contiguous float32 [B, H, S, D / group].
struct QRows {
  const uint32_t* w;
  long wb, wh, wj;  // element strides of batch, head and row
  const float* scales;
  const float* biases;
  int heads, rows, groups;
  const float* f = nullptr;  // a plain float32 cache instead (bits 0): rows at these strides

  const uint32_t* row(int b, int h, int j) const { return w + b * wb + h * wh + j * wj; }
  long srow(int b, int h, int j) const { return ((static_cast<long>(b) * heads + h) * rows + j) * groups; }
};

// MLX's packing: element i of a row at bits [i * Bits, (i + 1) * Bits) of the row's little-endian
// words, so byte i * Bits / 8 holds 8 / Bits consecutive elements, the first in the low bits.
template <int Bits>
void dequant_rows(const QRows& t, int b, int h, int j0, int n, int d, int group, float* out) {
  constexpr int per_byte = 8 / Bits;
  constexpr unsigned mask = (1u << Bits) - 1;
  for (int j = 0; j < n; ++j) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(t.row(b, h, j0 + j));
    const long s = t.srow(b, h, j0 + j);
    float* o = out + static_cast<long>(j) * d;
    for (int g = 0; g < t.groups; ++g) {
      const float sc = t.scales[s + g], bi = t.biases[s + g];
      const uint8_t* gb = bytes + g * group / per_byte;
      float* go = o + g * group;
      for (int k = 0; k < group / per_byte; ++k) {
        const unsigned byte = gb[k];
        for (int e = 0; e < per_byte; ++e) {
          go[k * per_byte + e] = static_cast<float>((byte >> (e * Bits)) & mask) * sc + bi;
        }
      }
    }
  }
}

void dequant(const QRows& t, int bits, int b, int h, int j0, int n, int d, int group, float* out) {
  if (bits == 0) {  // float32 rows: copied into the tile as they are
    for (int j = 0; j < n; ++j) std::copy_n(t.f + b * t.wb + h * t.wh + (j0 + j) * t.wj, d, out + static_cast<long>(j) * d);
    return;
  }
  switch (bits) {
    case 2: return dequant_rows<2>(t, b, h, j0, n, d, group, out);
    case 4: return dequant_rows<4>(t, b, h, j0, n, d, group, out);
    default: return dequant_rows<8>(t, b, h, j0, n, d, group, out);
  }
}

// An online-softmax part: out unnormalized (sum_j exp(s_j - m) v_j), m, sum.
void merge_part(float* o, float& m, float& s, const float* ot, float mt, float st, int d) {
  if (st == 0.f) return;
  const float mn = std::max(m, mt);
  const float a = m == -INFINITY ? 0.f : std::exp(m - mn), bt = std::exp(mt - mn);
  for (int i = 0; i < d; ++i) o[i] = o[i] * a + ot[i] * bt;
  s = s * a + st * bt;
  m = mn;
}

// inputs: q [B, Hq, L, D], kw, ks, kb, vw, vs, vb; output [B, Hq, L, D] float32.
class QuantAttentionPrimitive : public mx::UnaryPrimitive {
 public:
  QuantAttentionPrimitive(mx::Stream s, FastPath ctx, QAttnShape shape)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), sh_(shape) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw Error("[MlxcppQuantAttention] CPU-only primitive built for a GPU stream");
  }
  const char* name() const override { return "MlxcppQuantAttention"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    const auto* o = dynamic_cast<const QuantAttentionPrimitive*>(&other);
    return o && o->ctx_ == ctx_ && o->sh_.scale == sh_.scale && o->sh_.causal == sh_.causal &&
           o->sh_.group == sh_.group && o->sh_.bits == sh_.bits && o->sh_.window == sh_.window;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override { return {inputs[0].shape()}; }

 private:
  FastPath ctx_;
  QAttnShape sh_;
};

void QuantAttentionPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), in = weak_copies(inputs), ctx = ctx_, sh = sh_]() mutable {
    KernelContext::Timer timer(*ctx);
    const int B = in[0].shape(0), Hq = in[0].shape(1), L = in[0].shape(2), D = in[0].shape(3);
    const int Hkv = in[1].shape(1), S = in[1].shape(2), G = Hq / Hkv, groups = sh.bits == 0 ? 1 : D / sh.group;
    std::vector<float> qs, kss, kbs, vss, vbs;
    const float* q = contiguous_f32(in[0], qs);
    auto rows = [&](const mx::array& w, const mx::array& s, const mx::array& b, std::vector<float>& s_scratch,
                    std::vector<float>& b_scratch) {
      const auto& st = w.strides();
      if (st[3] != 1) throw Error("[MlxcppQuantAttention] packed cache rows must be contiguous");
      return QRows{w.data<uint32_t>(), static_cast<long>(st[0]), static_cast<long>(st[1]), static_cast<long>(st[2]),
                   contiguous_f32(s, s_scratch), contiguous_f32(b, b_scratch), Hkv, S, groups};
    };
    auto float_rows = [&](const mx::array& a) {  // [B, H, S, D] float32, rows contiguous
      const auto& st = a.strides();
      return QRows{nullptr, static_cast<long>(st[0]), static_cast<long>(st[1]), static_cast<long>(st[2]),
                   nullptr, nullptr, Hkv, S, 1, a.data<float>()};
    };
    const QRows K = sh.bits == 0 ? float_rows(in[1]) : rows(in[1], in[2], in[3], kss, kbs);
    const QRows V = sh.bits == 0 ? float_rows(in[2]) : rows(in[4], in[5], in[6], vss, vbs);
    const VecOps& v = vec_ops(ctx->isa());
    const int threads = ctx->threads();
    const int qblocks = L == 1 ? 1 : (L + kQBlock - 1) / kQBlock;
    const int keys = sh.window > 0 ? std::min(S, sh.window) : S;  // a decode step's
    const int sp = L == 1 ? std::max(1, std::min((4 * threads + B * Hkv - 1) / (B * Hkv), keys / kMinSlice)) : 1;
    const int tasks = B * Hkv * qblocks * sp;
    const long qrow = static_cast<long>(L) * D;  // one head's queries
    auto last_key = [&](int l) { return sh.causal ? S - L + l : S - 1; };
    auto first_key = [&](int l) { return sh.window > 0 ? std::max(0, last_key(l) - sh.window + 1) : 0; };
    // Decode slices' unnormalized parts: [task][G] (o [D], m, sum).
    std::vector<float> part_o(sp > 1 ? static_cast<size_t>(tasks) * G * D : 0),
        part_ms(sp > 1 ? static_cast<size_t>(tasks) * G * 2 : 0);
    float* o_out = out.data<float>();
    ctx->pool().parallel_for(tasks, [&](int task) {
      const int c = task % sp, qb = task / sp % qblocks, kvh = task / (sp * qblocks) % Hkv,
                b = task / (sp * qblocks * Hkv);
      const int l0 = qb * kQBlock, P = std::min(L, l0 + (L == 1 ? 1 : kQBlock)) - l0;
      const int k0 = first_key(l0), span = last_key(l0 + P - 1) - k0 + 1;
      const int lo = k0 + static_cast<int>(static_cast<long>(span) * c / sp),
                hi = k0 + static_cast<int>(static_cast<long>(span) * (c + 1) / sp) - 1;
      // One scratch per pool thread, reused from call to call (a decode step runs this for every
      // layer): the dequantized tiles, the queries, scores, a tile's part and the accumulators.
      thread_local std::vector<float> scratch;
      const long tile = static_cast<long>(kTile) * D, rows = static_cast<long>(P) * G;
      scratch.resize(2 * tile + 2L * G * D + static_cast<long>(G) * kTile + 2L * G + rows * (D + 2));
      float* const kf = scratch.data();
      float* const vf = kf + tile;
      float* const qg = vf + tile;
      float* const tile_o = qg + static_cast<long>(G) * D;
      float* const scores = tile_o + static_cast<long>(G) * D;
      float* const tile_ms = scores + static_cast<long>(G) * kTile;
      float* const acc_o = tile_ms + 2L * G;
      float* const acc_m = acc_o + rows * D;
      float* const acc_s = acc_m + rows;
      std::fill(acc_o, acc_o + rows * D, 0.f);
      std::fill(acc_m, acc_m + rows, -INFINITY);
      std::fill(acc_s, acc_s + rows, 0.f);
      for (int t0 = lo; t0 <= hi; t0 += kTile) {
        const int n = std::min(kTile, hi - t0 + 1);
        dequant(K, sh.bits, b, kvh, t0, n, D, sh.group, kf);
        dequant(V, sh.bits, b, kvh, t0, n, D, sh.group, vf);
        for (int p = 0; p < P; ++p) {
          const int last = std::min(t0 + n - 1, last_key(l0 + p)), first = std::max(t0, first_key(l0 + p));
          if (last < first) continue;
          for (int g = 0; g < G; ++g) {
            const float* src = q + (static_cast<long>(b) * Hq + kvh * G + g) * qrow + static_cast<long>(l0 + p) * D;
            std::copy_n(src, D, qg + static_cast<long>(g) * D);
          }
          v.attend_group(qg, G, kf, vf, D, first - t0, last - t0, sh.scale, scores, tile_o, tile_ms);
          for (int g = 0; g < G; ++g) {
            const long a = static_cast<long>(p) * G + g;
            merge_part(acc_o + a * D, acc_m[a], acc_s[a], tile_o + static_cast<long>(g) * D,
                       tile_ms[2 * g], tile_ms[2 * g + 1], D);
          }
        }
      }
      for (int p = 0; p < P; ++p) {
        for (int g = 0; g < G; ++g) {
          const long a = static_cast<long>(p) * G + g;
          if (sp > 1) {
            std::copy_n(acc_o + a * D, D, part_o.data() + (static_cast<long>(task) * G + g) * D);
            part_ms[2 * (static_cast<long>(task) * G + g)] = acc_m[a];
            part_ms[2 * (static_cast<long>(task) * G + g) + 1] = acc_s[a];
            continue;
          }
          float* o = o_out + (static_cast<long>(b) * Hq + kvh * G + g) * qrow + static_cast<long>(l0 + p) * D;
          const float inv = 1.f / acc_s[a];
          for (int i = 0; i < D; ++i) o[i] = acc_o[a * D + i] * inv;
        }
      }
    });
    if (sp == 1) return;
    std::vector<float> o(D);
    for (int b = 0; b < B; ++b) {
      for (int kvh = 0; kvh < Hkv; ++kvh) {
        for (int g = 0; g < G; ++g) {
          std::fill(o.begin(), o.end(), 0.f);
          float m = -INFINITY, s = 0.f;
          for (int c = 0; c < sp; ++c) {
            const long t = (static_cast<long>(b) * Hkv + kvh) * sp + c, a = t * G + g;
            merge_part(o.data(), m, s, part_o.data() + a * D, part_ms[2 * a], part_ms[2 * a + 1], D);
          }
          float* dst = o_out + (static_cast<long>(b) * Hq + kvh * G + g) * qrow;
          for (int i = 0; i < D; ++i) dst[i] = o[i] / s;
        }
      }
    }
  });
}

}  // namespace

std::optional<mx::array> float_kv_attention(const mx::array& queries, const mx::array& keys, const mx::array& values,
                                            float scale, bool causal, const FastPath& fast) {
  if (!use_fast(fast) || queries.dtype() != mx::float32 || queries.ndim() != 4) return std::nullopt;
  const int B = queries.shape(0), Hq = queries.shape(1), L = queries.shape(2), D = queries.shape(3);
  for (const auto* t : {&keys, &values}) {
    if (t->dtype() != mx::float32 || t->ndim() != 4 || t->shape(0) != B || t->shape(3) != D ||
        t->strides()[3] != 1 || t->shape(1) != keys.shape(1) || t->shape(2) != keys.shape(2)) {
      return std::nullopt;
    }
  }
  const int Hkv = keys.shape(1), S = keys.shape(2);
  if (Hkv <= 0 || Hq % Hkv != 0 || S < L) return std::nullopt;
  return mx::array(queries.shape(), mx::float32,
                   std::make_shared<QuantAttentionPrimitive>(mx::default_stream(mx::Device::cpu), fast,
                                                             QAttnShape{scale, causal, 0, 0, 0}),
                   {queries, keys, values});
}

std::optional<mx::array> quantized_kv_attention(const mx::array& queries, const mx::array (&keys)[3],
                                                const mx::array (&values)[3], float scale, bool causal, int group_size,
                                                int bits, const FastPath& fast, int window) {
  if (!use_fast(fast) || queries.dtype() != mx::float32 || queries.ndim() != 4 || (bits != 2 && bits != 4 && bits != 8)) {
    return std::nullopt;
  }
  const int B = queries.shape(0), Hq = queries.shape(1), L = queries.shape(2), D = queries.shape(3);
  for (const auto* t : {&keys, &values}) {
    const auto& [w, s, b] = *t;
    if (w.dtype() != mx::uint32 || w.ndim() != 4 || s.ndim() != 4 || b.ndim() != 4 || s.dtype() != b.dtype() ||
        (s.dtype() != mx::float32 && s.dtype() != mx::float16) || w.shape(0) != B || D % group_size != 0 ||
        w.shape(3) != D * bits / 32 || s.shape(3) != D / group_size || s.shape(2) != w.shape(2) ||
        b.shape() != s.shape() || w.shape(1) != keys[0].shape(1) || w.shape(2) != keys[0].shape(2)) {
      return std::nullopt;
    }
  }
  const int Hkv = keys[0].shape(1), S = keys[0].shape(2);
  if (Hkv <= 0 || Hq % Hkv != 0 || S < L || window < 0 || (window > 0 && !causal)) return std::nullopt;
  return mx::array(queries.shape(), mx::float32,
                   std::make_shared<QuantAttentionPrimitive>(mx::default_stream(mx::Device::cpu), fast,
                                                             QAttnShape{scale, causal, group_size, bits, window}),
                   {queries, keys[0], keys[1], keys[2], values[0], values[1], values[2]});
}

}  // namespace mlxcpp::kernels
