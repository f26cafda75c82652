#include "kernels/block_primitives.h"

#include <cmath>
#include <cstring>

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/cpu_dispatch.h"
#include "kernels/quant_attention.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

QLinearView view(const BlockArrays& in, const LinearSlot& s) {
  QLinearView v;
  // block_ok admitted only row-contiguous scales/biases of one type our kernels read.
  v.q = quantized_view(in[s.first], in[s.first + 1], in[s.first + 2], s.bits, s.group);
  v.bias = s.has_bias ? in[s.first + 3].data<float>() : nullptr;
  return v;
}

// Working buffers of the blocks, grown as needed and reused from block to block.
struct BlockScratch {
  std::vector<float> xn, a, b, c, d;
  static float* at_least(std::vector<float>& v, long n) {
    if (static_cast<long>(v.size()) < n) v.resize(n);
    return v.data();
  }
};

// o = h + o * scale (mlx-lm's x + r * scale; MiniCPM's scale_depth / sqrt(layers), else 1).
void add_residual(const float* h, float* o, long n, float scale) {
  if (scale == 1.f) {
    for (long i = 0; i < n; ++i) o[i] += h[i];
    return;
  }
  for (long i = 0; i < n; ++i) o[i] = h[i] + o[i] * scale;
}

// o = the MLP block of h (`rows` rows of d); o must not alias h. `decode`: each row is one
// sequence's next token (qmatmul's).
void run_mlp(const KernelContext& ctx, const MlpBlockSpec& s, const BlockArrays& in, const float* h,
             int rows, int d, float* o, BlockScratch& sc, bool decode) {
  const int hidden = s.slots[0].n;
  const VecOps& v = vec_ops(ctx.isa());
  const long nh = static_cast<long>(rows) * hidden;
  float* xn = BlockScratch::at_least(sc.xn, static_cast<long>(rows) * d);
  float* g = BlockScratch::at_least(sc.a, nh);
  float* u = BlockScratch::at_least(sc.b, nh);
  const float* x = h;
  if (s.norm >= 0) {
    rms_norm_rows(v, h, in[s.norm].data<float>(), s.eps, rows, d, xn);
    x = xn;
  }
  qlinear_many(ctx, {{view(in, s.slots[0]), g}, {view(in, s.slots[1]), u}}, x, rows, decode);
  (s.act == GluActivation::kSilu ? v.silu_mul : v.gelu_mul)(g, u, g, nh);
  qlinear(ctx, view(in, s.slots[2]), g, rows, o, decode);
  if (s.post_norm >= 0) rms_norm_rows(v, o, in[s.post_norm].data<float>(), s.eps, rows, d, o);
  add_residual(h, o, static_cast<long>(rows) * d, s.residual_scale);
}

// ministral3.py's _get_llama_4_attn_scale: rows l of q (width qd, RoPE position pos0 + l) *
// 1 + beta * log(1 + floor(position / original_max)), in float32 as MLX computes it.
void llama4_scale_rows(const AttentionBlockSpec& s, float* q, int L, int qd, int pos0) {
  for (int l = 0; l < L; ++l) {
    const float f = std::floor(static_cast<float>(pos0 + l) / static_cast<float>(s.llama4_original_max));
    const float t = 1.0f + *s.llama4_beta * std::log(1.0f + f);
    float* row = q + static_cast<long>(l) * qd;
    for (int i = 0; i < qd; ++i) row[i] *= t;
  }
}

// o = the attention block of h ([batch, L, d]); writes the new rows into the caches kc/vc
// ([batch, kv_heads, cap, head_dim]); o must not alias h. The projections take all batch*L
// rows at once (one pass over each weight matrix for the whole batch); rope, the cache write
// and attention go per batch row (its position, its left padding).
// The caches hold float32 or, with s.kv_f16, float16 (bit patterns).
// The caches one attention block writes: one [batch, kv_heads, cap, head_dim] pair, or (null
// kc/vc) the ragged rows of s.ragged.
struct CacheBuffers {
  int cap = 0;
  void* kc = nullptr;
  void* vc = nullptr;
  void* quant[6] = {};  // a quantized cache's buffers (AttentionBlockSpec::kv_bits), kc/vc unused
};

// Row b's cache: its key and value buffers and their capacity (ragged rows grown first for the
// L new rows).
struct RowCache {
  void *k, *v;
  int cap, pos;
};
RowCache row_cache(const AttentionBlockSpec& s, const CacheBuffers& c, int b) {
  if (!s.ragged) {
    const long entry = static_cast<long>(b) * s.kv_heads * c.cap * s.head_dim * (s.kv_f16 ? 2 : 4);
    return {static_cast<std::byte*>(c.kc) + entry, static_cast<std::byte*>(c.vc) + entry, c.cap, s.offset};
  }
  auto& row = *s.ragged->rows[b];
  const int pos = s.ragged->pos[b];
  row.reserve(s.kv_heads, s.head_dim, s.kv_f16, pos + s.L, pos);
  return {row.keys(), row.values(), row.cap(), pos};
}

// A quantized cache's buffer c (0..5: keys' packed rows, scales, biases, then values') of
// batch row b, head h, cache row j, and its row width in elements.
struct QuantBuf {
  std::byte* p;
  long width, elem;
};
QuantBuf quant_buf(const AttentionBlockSpec& s, const CacheBuffers& caches, int c) {
  const long width = c % 3 == 0 ? s.head_dim * s.kv_bits / 32 : s.head_dim / s.kv_group;
  const long elem = c % 3 == 0 ? 4 : s.kv_scales_f16 ? 2 : 4;
  return {static_cast<std::byte*>(caches.quant[c]), width, elem};
}
std::byte* quant_row(const AttentionBlockSpec& s, const CacheBuffers& caches, const QuantBuf& q, int b, int h, int j) {
  return q.p + (((static_cast<long>(b) * s.kv_heads + h) * caches.cap + j) * q.width) * q.elem;
}

// Batch row b's L new keys and values (rows of kv_heads * head_dim) quantized into its cache
// rows offset.. (mx.quantize's arithmetic).
void write_quantized(const AttentionBlockSpec& s, const CacheBuffers& caches, int b, int L, const float* k,
                     const float* val) {
  const long kvd = static_cast<long>(s.kv_heads) * s.head_dim;
  QuantBuf bufs[6];
  for (int c = 0; c < 6; ++c) bufs[c] = quant_buf(s, caches, c);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < s.kv_heads; ++h) {
      const long src = (static_cast<long>(b) * L + l) * kvd + static_cast<long>(h) * s.head_dim;
      for (int side = 0; side < 2; ++side) {
        const QuantBuf* t = bufs + 3 * side;
        auto row = [&](int c) { return quant_row(s, caches, t[c], b, h, s.offset + l); };
        quantize_affine((side == 0 ? k : val) + src, s.head_dim, s.kv_group, s.kv_bits,
                        reinterpret_cast<uint32_t*>(row(0)), row(1), row(2), s.kv_scales_f16);
      }
    }
  }
}

// The queries q ([batch, L, heads, head_dim]) attending the quantized cache -> att (same layout).
void attend_quantized(const KernelContext& ctx, const AttentionBlockSpec& s, const CacheBuffers& caches,
                      const float* q, float* att) {
  QuantKvRows side[2];
  for (int t = 0; t < 2; ++t) {
    const QuantBuf w = quant_buf(s, caches, 3 * t), sc = quant_buf(s, caches, 3 * t + 1),
                   bi = quant_buf(s, caches, 3 * t + 2);
    auto& r = side[t];
    r.w = reinterpret_cast<const uint32_t*>(w.p);
    r.wj = w.width;
    r.wh = r.wj * caches.cap;
    r.wb = r.wh * s.kv_heads;
    r.scales = sc.p;
    r.biases = bi.p;
    r.sj = sc.width;
    r.sh = r.sj * caches.cap;
    r.sb = r.sh * s.kv_heads;
    r.f16 = s.kv_scales_f16;
  }
  const long hd = s.head_dim, ql = static_cast<long>(s.heads) * hd;
  QuantAttentionArgs a{s.batch, s.heads, s.kv_heads, s.head_dim, s.L, s.offset + s.L, s.scale, /*causal=*/true,
                       s.kv_group, s.kv_bits, s.window.value_or(0), s.left_padding, ql * s.L, hd, ql,
                       ql * s.L, hd, ql};
  quant_attention_rows(ctx, a, q, side[0], side[1], att);
}

void run_attention(const KernelContext& ctx, const AttentionBlockSpec& s, const BlockArrays& in,
                   const float* h, const CacheBuffers& caches, float* o, BlockScratch& sc) {
  const int L = s.L, rows = s.batch * L;
  const int qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  const VecOps& v = vec_ops(ctx.isa());
  float* xn = BlockScratch::at_least(sc.xn, static_cast<long>(rows) * s.d);
  float* q = BlockScratch::at_least(sc.a, static_cast<long>(rows) * qd);
  float* k = BlockScratch::at_least(sc.b, static_cast<long>(rows) * kvd);
  float* val = BlockScratch::at_least(sc.c, static_cast<long>(rows) * kvd);
  float* att = BlockScratch::at_least(sc.d, static_cast<long>(rows) * qd);
  const float* x = h;
  if (s.norm >= 0) {
    rms_norm_rows(v, h, in[s.norm].data<float>(), s.eps, rows, s.d, xn);
    x = xn;
  }
  const bool decode = L == 1;
  qlinear_many(ctx, {{view(in, s.slots[0]), q}, {view(in, s.slots[1]), k}, {view(in, s.slots[2]), val}}, x, rows,
               decode);
  if (s.q_norm >= 0 && s.qk_norm_full) {  // one norm per row over every head
    rms_norm_rows(v, q, in[s.q_norm].data<float>(), s.eps, rows, qd, q);
    rms_norm_rows(v, k, in[s.k_norm].data<float>(), s.eps, rows, kvd, k);
  } else if (s.q_norm >= 0) {
    rms_norm_rows(v, q, in[s.q_norm].data<float>(), s.eps, rows * s.heads, s.head_dim, q);
    rms_norm_rows(v, k, in[s.k_norm].data<float>(), s.eps, rows * s.kv_heads, s.head_dim, k);
  }
  if (s.v_norm >= 0) rms_norm_rows(v, val, in[s.v_norm].data<float>(), s.eps, rows * s.kv_heads, s.head_dim, val);
  const bool padded = !s.left_padding.empty();
  std::vector<const void*> row_k, row_v;
  std::vector<int> row_cap;
  for (int b = 0; b < s.batch; ++b) {
    const RowCache rc = row_cache(s, caches, b);
    if (s.ragged) {
      row_k.push_back(rc.k);
      row_v.push_back(rc.v);
      row_cap.push_back(rc.cap);
    }
    const int pos0 = rc.pos - (padded ? s.left_padding[b] : 0);
    if (s.rope) {
      rope_rows(*s.rope, q + static_cast<long>(b) * L * qd, L, s.heads, s.head_dim, pos0);
      rope_rows(*s.rope, k + static_cast<long>(b) * L * kvd, L, s.kv_heads, s.head_dim, pos0);
    }
    if (s.llama4_beta) llama4_scale_rows(s, q + static_cast<long>(b) * L * qd, L, qd, pos0);  // after RoPE
    if (s.kv_bits) {
      write_quantized(s, caches, b, L, k, val);
      continue;
    }
    // Cache write: [kv_heads, cap, hd] rows pos..pos+L of this batch entry (float16 ones
    // rounded to nearest even, as MLX's astype).
    auto put = [&](void* cache, long row, const float* src) {
      if (s.kv_f16) v.to_half(src, static_cast<uint16_t*>(cache) + row, s.head_dim);
      else std::memcpy(static_cast<float*>(cache) + row, src, sizeof(float) * s.head_dim);
    };
    for (int l = 0; l < L; ++l)
      for (int hh = 0; hh < s.kv_heads; ++hh) {
        const long dst = (static_cast<long>(hh) * rc.cap + rc.pos + l) * s.head_dim;
        const long srco = ((static_cast<long>(b) * L + l) * s.kv_heads + hh) * s.head_dim;
        put(rc.k, dst, k + srco);
        put(rc.v, dst, val + srco);
      }
  }
  if (s.kv_bits) {
    attend_quantized(ctx, s, caches, q, att);
  } else {
    AttentionShape as{s.heads, s.kv_heads, s.head_dim, caches.cap, s.offset, L, s.scale, s.window, s.kv_f16, s.batch,
                      s.left_padding};
    if (s.ragged) {
      as.row_k = row_k;
      as.row_v = row_v;
      as.row_cap = row_cap;
      as.row_offset = s.ragged->pos;
    }
    attention(ctx, as, q, caches.kc, caches.vc, att);
  }
  qlinear(ctx, view(in, s.slots[3]), att, rows, o, decode);
  if (s.post_norm >= 0) rms_norm_rows(v, o, in[s.post_norm].data<float>(), s.eps, rows, s.d, o);
  add_residual(h, o, static_cast<long>(rows) * s.d, s.residual_scale);
}

// Output buffers of one attention block's caches (outputs[cache_out..]): the input buffers
// themselves when the cache object holds them alone, else new ones the block fills with a copy
// first (their bits set in the result, counted in the context).
unsigned cache_outputs(const KernelContext& ctx, const AttentionBlockSpec& s, const std::vector<mx::array>& inputs,
                       std::vector<mx::array>& outputs) {
  unsigned copies = 0;
  for (int c = 0; c < s.cache_arrays(); ++c) {
    const auto& src = inputs[s.cache_first + c];
    auto& dst = outputs[s.cache_out + c];
    if (!(s.exclusive && src.flags().row_contiguous)) {
      dst.set_data(mx::allocator::malloc(dst.nbytes()));
      ctx.count_cache_copy();
      copies |= 1u << c;
    } else {
      dst.copy_shared_buffer(src);
    }
  }
  return copies;
}

// Fills the copied caches (see cache_outputs) with their inputs' rows, in the caches' dtype.
void copy_caches(const AttentionBlockSpec& s, const std::vector<mx::array>& in, std::vector<mx::array>& out,
                 unsigned copies) {
  for (int c = 0; c < s.cache_arrays(); ++c) {
    if (copies & (1u << c)) copy_contiguous(in[s.cache_first + c], out[s.cache_out + c].data<void>());
  }
}

// The block's caches among the outputs (none for a ragged batch).
CacheBuffers cache_buffers(const AttentionBlockSpec& s, std::vector<mx::array>& out) {
  if (s.ragged) return {};
  CacheBuffers b{out[s.cache_out].shape(2), out[s.cache_out].data<void>(), out[s.cache_out + 1].data<void>()};
  if (s.kv_bits) {
    for (int c = 0; c < 6; ++c) b.quant[c] = out[s.cache_out + c].data<void>();
  }
  return b;
}

void add_cache_shapes(const AttentionBlockSpec& s, const std::vector<mx::array>& inputs, std::vector<mx::Shape>& shapes) {
  for (int c = 0; c < s.cache_arrays(); ++c) shapes.push_back(inputs[s.cache_first + c].shape());
}

}  // namespace

void MlpBlockPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([in = weak_copies(inputs), out = mx::array::unsafe_weak_copy(out), ctx = ctx_, s = spec_]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> hs;
    const float* h = contiguous_f32(in[0], hs);
    const int d = in[0].shape(-1);
    BlockScratch sc;
    const bool decode = in[0].ndim() >= 2 && in[0].shape(-2) == 1;  // [B, 1, d]: one token per sequence
    run_mlp(*ctx, s, {in, {}}, h, static_cast<int>(in[0].size() / d), d, out.data<float>(), sc, decode);
  });
}

void MlpBlockPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppMlpBlock] CPU-only primitive built for a GPU stream");
}

std::vector<mx::Shape> AttentionBlockPrimitive::output_shapes(const std::vector<mx::array>& inputs) {
  std::vector<mx::Shape> shapes{inputs[0].shape()};
  add_cache_shapes(spec_, inputs, shapes);
  return shapes;
}

void AttentionBlockPrimitive::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  outputs[0].set_data(mx::allocator::malloc(outputs[0].nbytes()));
  auto copy = cache_outputs(*ctx_, spec_, inputs, outputs);
  auto& enc = encoder_for(stream(), inputs, outputs);
  enc.dispatch([in = weak_copies(inputs), out = weak_copies(outputs), ctx = ctx_, s = spec_, copy]() mutable {
    KernelContext::Timer timer(*ctx);
    copy_caches(s, in, out, copy);
    std::vector<float> hs;
    const float* h = contiguous_f32(in[0], hs);
    BlockScratch sc;
    run_attention(*ctx, s, {in, {}}, h, cache_buffers(s, out), out[0].data<float>(), sc);
  });
}

void AttentionBlockPrimitive::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw Error("[MlxcppAttentionBlock] CPU-only primitive built for a GPU stream");
}

std::vector<mx::Shape> DecoderStackPrimitive::output_shapes(const std::vector<mx::array>& inputs) {
  std::vector<mx::Shape> shapes{inputs[0].shape()};
  for (const auto& a : spec_->attn) add_cache_shapes(a, inputs, shapes);
  return shapes;
}

void DecoderStackPrimitive::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  outputs[0].set_data(mx::allocator::malloc(outputs[0].nbytes()));
  std::vector<unsigned> copies;
  for (const auto& a : spec_->attn) copies.push_back(cache_outputs(*ctx_, a, inputs, outputs));
  auto& enc = encoder_for(stream(), inputs, outputs);
  enc.dispatch([in = weak_copies(inputs), out = weak_copies(outputs), ctx = ctx_, spec = spec_,
                copies = std::move(copies)]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> hs;
    const float* h = contiguous_f32(in[0], hs);
    const int d = in[0].shape(-1);
    const int rows = static_cast<int>(in[0].size() / d);
    // h flows in[0] -> mid (attention) -> out[0] (MLP) -> mid -> out[0] ...
    std::vector<float> mid(static_cast<size_t>(rows) * d);
    float* hout = out[0].data<float>();
    BlockScratch sc;
    const BlockArrays arrays{in, spec->held};
    const auto& attn = spec->attn;
    const auto& mlp = spec->mlp;
    for (size_t i = 0; i < attn.size(); ++i) {
      copy_caches(attn[i], in, out, copies[i]);
      run_attention(*ctx, attn[i], arrays, i == 0 ? h : hout, cache_buffers(attn[i], out), mid.data(), sc);
      run_mlp(*ctx, mlp[i], arrays, mid.data(), rows, d, hout, sc, in[0].shape(1) == 1);
    }
  });
}

void DecoderStackPrimitive::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw Error("[MlxcppDecoderStack] CPU-only primitive built for a GPU stream");
}

}  // namespace mlxcpp::kernels
