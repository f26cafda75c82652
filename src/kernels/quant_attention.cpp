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

constexpr int kTile = 64;     // key rows dequantized at a time (K and V tiles fit L1 at head_dim 64)
constexpr int kQBlock = 16;   // prompt queries a task
constexpr int kMinSlice = 256;  // keys of a decode step's slice, at least

struct QAttnShape {
  float scale;
  bool causal;
  int group, bits;
  int window = 0;  // > 0: query l also skips keys before last(l) - window + 1
  std::vector<int> key_start = {};  // per batch row (its left padding); empty: none
};

// n rows j0.. of (b, h) dequantized (or copied, for a float cache) into out, d floats apart.
void dequant(const VecOps& v, const QuantKvRows& t, int bits, int group, int b, int h, int j0, int n, int d,
             float* out) {
  if (bits == 0) {  // float rows: copied into the tile as they are (float16 ones converted)
    for (int j = 0; j < n; ++j) {
      const long at = b * t.wb + h * t.wh + (j0 + j) * t.wj;
      if (t.f16) v.from_half(static_cast<const uint16_t*>(t.f) + at, out + static_cast<long>(j) * d, d);
      else std::copy_n(static_cast<const float*>(t.f) + at, d, out + static_cast<long>(j) * d);
    }
    return;
  }
  const long esize = t.f16 ? 2 : 4;
  const auto* bytes = reinterpret_cast<const uint8_t*>(t.w + b * t.wb + h * t.wh + j0 * t.wj);
  const long srow = (b * t.sb + h * t.sh + j0 * t.sj) * esize;
  v.dequant_rows(bytes, t.wj * 4, n, bits, d, group, static_cast<const std::byte*>(t.scales) + srow,
                 static_cast<const std::byte*>(t.biases) + srow, t.sj, t.f16, out);
}

// The packed side of the cache for (b, h), as VecOps::attend_group_q reads it.
PackedKv packed_side(const QuantKvRows& t, int b, int h) {
  const long esize = t.f16 ? 2 : 4;
  return {reinterpret_cast<const uint8_t*>(t.w + b * t.wb + h * t.wh), t.wj * 4,
          static_cast<const std::byte*>(t.scales) + (b * t.sb + h * t.sh) * esize,
          static_cast<const std::byte*>(t.biases) + (b * t.sb + h * t.sh) * esize, t.sj, t.f16};
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

// One side of the cache among a primitive's inputs (w, scales, biases at `first`; or a float
// cache), as the host kernel reads it: scales and biases are read in place when their groups
// are contiguous, else gathered into `scratch` first.
QuantKvRows kv_rows(const std::vector<mx::array>& in, int first, int bits, std::vector<float> (&scratch)[2]) {
  const auto& w = in[first];
  const auto& st = w.strides();
  if (st[3] != 1) throw Error("[MlxcppQuantAttention] cache rows must be contiguous");
  QuantKvRows r;
  if (bits == 0) {  // float32 or float16 rows (f then points at the half bit patterns)
    r.f = w.data<void>();
    r.f16 = w.dtype() == mx::float16;
    r.wb = st[0], r.wh = st[1], r.wj = st[2];
    return r;
  }
  r.w = w.data<uint32_t>();
  r.wb = st[0], r.wh = st[1], r.wj = st[2];
  const auto& s = in[first + 1];
  const auto& b = in[first + 2];
  const bool in_place = s.strides() == b.strides() && s.strides()[3] == 1 && s.dtype() == b.dtype() &&
                        (s.dtype() == mx::float32 || s.dtype() == mx::float16);
  if (in_place) {
    r.scales = s.data<void>();
    r.biases = b.data<void>();
    r.f16 = s.dtype() == mx::float16;
    r.sb = s.strides()[0], r.sh = s.strides()[1], r.sj = s.strides()[2];
  } else {
    r.scales = contiguous_f32(s, scratch[0]);
    r.biases = contiguous_f32(b, scratch[1]);
    r.sj = s.shape(3), r.sh = r.sj * s.shape(2), r.sb = r.sh * s.shape(1);
  }
  return r;
}

// inputs: q [B, Hq, L, D], kw, ks, kb, vw, vs, vb (or k, v: float rows); output [B, Hq, L, D] float32.
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
           o->sh_.group == sh_.group && o->sh_.bits == sh_.bits && o->sh_.window == sh_.window &&
           o->sh_.key_start == sh_.key_start;
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
    std::vector<float> qs, ks[2], vs[2];
    const float* q = contiguous_f32(in[0], qs);
    const QuantKvRows K = kv_rows(in, 1, sh.bits, ks);
    const QuantKvRows V = kv_rows(in, sh.bits == 0 ? 2 : 4, sh.bits, vs);
    const long ql = D, qh = static_cast<long>(L) * D, qb = qh * Hq;
    QuantAttentionArgs a{B, Hq, in[1].shape(1), D, L, in[1].shape(2), sh.scale, sh.causal, sh.group, sh.bits, sh.window,
                         sh.key_start, qb, qh, ql, qb, qh, ql};
    quant_attention_rows(*ctx, a, q, K, V, out.data<float>());
  });
}

}  // namespace

void quant_attention_rows(const KernelContext& ctx, const QuantAttentionArgs& a, const float* q, const QuantKvRows& K,
                          const QuantKvRows& V, float* o_out) {
  const int B = a.batch, Hkv = a.kv_heads, L = a.L, D = a.head_dim, S = a.keys, G = a.q_heads / a.kv_heads;
  const VecOps& v = vec_ops(ctx.isa());
  const int threads = ctx.threads();
  const int qblocks = L == 1 ? 1 : (L + kQBlock - 1) / kQBlock;
  auto last_key = [&](int l) { return a.causal ? S - L + l : S - 1; };
  auto first_key = [&](int b, int l) {
    const int start = a.key_start.empty() ? 0 : a.key_start[b];
    const int first = std::max(start, a.window > 0 ? last_key(l) - a.window + 1 : 0);
    return std::min(first, last_key(l));  // a padded query with no key of its own yet: just its own
  };
  // A decode step splits each row's keys into slices of at least kMinSlice, at most 2 per
  // thread (each slice pays its query preparation and first prefetches; at 4096 keys 2 a thread
  // beat 4 by ~5% on SmolLM2's and Gemma 3's heads, and 1 left Gemma's single kv head unbalanced):
  // how many depends on that row's own keys only, so a row batched with others (or left padded)
  // sums exactly as it does alone. sp: the most any row takes (tasks past a row's count are empty).
  const int max_split = 2 * threads;
  auto row_split = [&](int b) {
    return L == 1 ? std::max(1, std::min(max_split, (last_key(0) - first_key(b, 0) + 1) / kMinSlice)) : 1;
  };
  int sp = 1;
  for (int b = 0; b < B; ++b) sp = std::max(sp, row_split(b));
  const int tasks = B * Hkv * qblocks * sp;
  auto qrow = [&](int b, int h, int l) { return q + b * a.qb + h * a.qh + l * a.ql; };
  auto orow = [&](int b, int h, int l) { return o_out + b * a.ob + h * a.oh + l * a.ol; };
  // Decode slices' unnormalized parts: [task][G] (o [D], m, sum).
  std::vector<float> part_o(sp > 1 ? static_cast<size_t>(tasks) * G * D : 0),
      part_ms(sp > 1 ? static_cast<size_t>(tasks) * G * 2 : 0);
  ctx.pool().parallel_for(tasks, [&](int task) {
    const int c = task % sp, qb = task / sp % qblocks, kvh = task / (sp * qblocks) % Hkv,
              b = task / (sp * qblocks * Hkv);
    const int l0 = qb * kQBlock, P = std::min(L, l0 + (L == 1 ? 1 : kQBlock)) - l0;
    const int k0 = first_key(b, l0), span = last_key(l0 + P - 1) - k0 + 1, parts = row_split(b);
    const int lo = c < parts ? k0 + static_cast<int>(static_cast<long>(span) * c / parts) : 1;
    int hi = c < parts ? k0 + static_cast<int>(static_cast<long>(span) * (c + 1) / parts) - 1 : 0;
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
    if (L == 1 && a.bits != 0 && v.attend_group_q && lo <= hi) {  // a decode slice read as packed
      thread_local std::vector<float> packed_scratch;
      const int n = hi - lo + 1;
      packed_scratch.resize(packed_scratch_floats(G, n, D, a.group));
      const PackedKv pk = packed_side(K, b, kvh), pv = packed_side(V, b, kvh);
      for (int g = 0; g < G; ++g) std::copy_n(qrow(b, kvh * G + g, l0), D, qg + static_cast<long>(g) * D);
      if (v.attend_group_q(qg, G, pk, pv, a.bits, a.group, D, lo, hi, a.scale, packed_scratch.data(), tile_o,
                           tile_ms)) {
        for (int g = 0; g < G; ++g)
          merge_part(acc_o + static_cast<long>(g) * D, acc_m[g], acc_s[g], tile_o + static_cast<long>(g) * D,
                     tile_ms[2 * g], tile_ms[2 * g + 1], D);
        hi = lo - 1;  // done: no tiles below
      }
    }
    for (int t0 = lo; t0 <= hi; t0 += kTile) {
      const int n = std::min(kTile, hi - t0 + 1);
      dequant(v, K, a.bits, a.group, b, kvh, t0, n, D, kf);
      dequant(v, V, a.bits, a.group, b, kvh, t0, n, D, vf);
      for (int p = 0; p < P; ++p) {
        const int last = std::min(t0 + n - 1, last_key(l0 + p)), first = std::max(t0, first_key(b, l0 + p));
        if (last < first) continue;
        for (int g = 0; g < G; ++g) std::copy_n(qrow(b, kvh * G + g, l0 + p), D, qg + static_cast<long>(g) * D);
        v.attend_group(qg, G, kf, vf, D, first - t0, last - t0, a.scale, scores, tile_o, tile_ms);
        for (int g = 0; g < G; ++g) {
          const long r = static_cast<long>(p) * G + g;
          merge_part(acc_o + r * D, acc_m[r], acc_s[r], tile_o + static_cast<long>(g) * D, tile_ms[2 * g],
                     tile_ms[2 * g + 1], D);
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      for (int g = 0; g < G; ++g) {
        const long r = static_cast<long>(p) * G + g;
        if (sp > 1) {
          std::copy_n(acc_o + r * D, D, part_o.data() + (static_cast<long>(task) * G + g) * D);
          part_ms[2 * (static_cast<long>(task) * G + g)] = acc_m[r];
          part_ms[2 * (static_cast<long>(task) * G + g) + 1] = acc_s[r];
          continue;
        }
        float* o = orow(b, kvh * G + g, l0 + p);
        const float inv = 1.f / acc_s[r];
        for (int i = 0; i < D; ++i) o[i] = acc_o[r * D + i] * inv;
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
          const long t = (static_cast<long>(b) * Hkv + kvh) * sp + c, r = t * G + g;
          merge_part(o.data(), m, s, part_o.data() + r * D, part_ms[2 * r], part_ms[2 * r + 1], D);
        }
        float* dst = orow(b, kvh * G + g, 0);
        for (int i = 0; i < D; ++i) dst[i] = o[i] / s;
      }
    }
  }
}

void quantize_affine(const float* x, int n, int group, int bits, uint32_t* w, void* scales, void* biases,
                     bool scales_f16) {
  const float n_bins = static_cast<float>((1 << bits) - 1), eps = 1e-7f;
  const int per_word = 32 / bits;
  for (int g = 0; g < n / group; ++g) {
    const float* xg = x + static_cast<long>(g) * group;
    float w_min = INFINITY, w_max = -INFINITY;
    for (int j = 0; j < group; ++j) {
      w_max = std::max(w_max, xg[j]);
      w_min = std::min(w_min, xg[j]);
    }
    const bool mask = std::abs(w_min) > std::abs(w_max);
    float scale = std::max((w_max - w_min) / n_bins, eps);
    scale = mask ? scale : -scale;
    const float edge = mask ? w_min : w_max;
    const float q0 = std::rint(edge / scale);
    float bias = 0;
    if (q0 != 0) {
      scale = edge / q0;
      bias = edge;
    }
    uint32_t* wg = w + static_cast<long>(g) * group / per_word;
    for (int j = 0; j < group / per_word; ++j) {
      uint32_t word = 0;
      for (int k = 0; k < per_word; ++k) {
        float e = std::rint((xg[j * per_word + k] - bias) / scale);
        e = std::min(std::max(e, 0.0f), n_bins);
        word |= static_cast<uint32_t>(e) << (k * bits);
      }
      wg[j] = word;
    }
    if (scales_f16) {
      static_cast<mx::float16_t*>(scales)[g] = static_cast<mx::float16_t>(scale);
      static_cast<mx::float16_t*>(biases)[g] = static_cast<mx::float16_t>(bias);
    } else {
      static_cast<float*>(scales)[g] = scale;
      static_cast<float*>(biases)[g] = bias;
    }
  }
}

std::optional<mx::array> float_kv_attention(const mx::array& queries, const mx::array& keys, const mx::array& values,
                                            float scale, bool causal, const FastPath& fast, int window,
                                            std::vector<int> key_start) {
  if (!use_fast(fast) || queries.dtype() != mx::float32 || queries.ndim() != 4) return std::nullopt;
  if (!key_start.empty() && (static_cast<int>(key_start.size()) != queries.shape(0) || !causal)) return std::nullopt;
  if (window < 0 || (window > 0 && !causal)) return std::nullopt;
  const int B = queries.shape(0), Hq = queries.shape(1), L = queries.shape(2), D = queries.shape(3);
  if (keys.dtype() != values.dtype() || (keys.dtype() != mx::float32 && keys.dtype() != mx::float16)) return std::nullopt;
  for (const auto* t : {&keys, &values}) {
    if (t->ndim() != 4 || t->shape(0) != B || t->shape(3) != D ||
        t->strides()[3] != 1 || t->shape(1) != keys.shape(1) || t->shape(2) != keys.shape(2)) {
      return std::nullopt;
    }
  }
  const int Hkv = keys.shape(1), S = keys.shape(2);
  if (Hkv <= 0 || Hq % Hkv != 0 || S < L) return std::nullopt;
  return mx::array(queries.shape(), mx::float32,
                   std::make_shared<QuantAttentionPrimitive>(mx::default_stream(mx::Device::cpu), fast,
                                                             QAttnShape{scale, causal, 0, 0, window, std::move(key_start)}),
                   {queries, keys, values});
}

std::optional<mx::array> quantized_kv_attention(const mx::array& queries, const mx::array (&keys)[3],
                                                const mx::array (&values)[3], float scale, bool causal, int group_size,
                                                int bits, const FastPath& fast, int window, std::vector<int> key_start) {
  if (!key_start.empty() && (static_cast<int>(key_start.size()) != queries.shape(0) || !causal)) return std::nullopt;
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
                                                             QAttnShape{scale, causal, group_size, bits, window,
                                                                        std::move(key_start)}),
                   {queries, keys[0], keys[1], keys[2], values[0], values[1], values[2]});
}

}  // namespace mlxcpp::kernels
