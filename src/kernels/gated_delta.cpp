#include "kernels/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <mlx/allocator.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/cpu_dispatch.h"
#include "kernels/vec_ops.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

// softplus as nn.softplus: logaddexp(x, 0).
inline float softplus(float x) { return std::max(x, 0.f) + std::log1p(std::exp(-std::abs(x))); }

// A [B, T] bool mask read through its strides into `scratch`.
const bool* read_mask(const mx::array& m, int B, int T, std::vector<uint8_t>& scratch) {
  scratch.resize(static_cast<size_t>(B) * T);
  const auto& st = m.strides();
  const bool* src = m.data<bool>();
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) scratch[static_cast<size_t>(b) * T + t] = src[b * st[0] + t * st[1]];
  }
  return reinterpret_cast<const bool*>(scratch.data());
}

// The chunked (WY) form of the recurrence, as flash-linear-attention's chunk_gated_delta_rule.
// Within a chunk of L tokens t = 1..L from the state S0 [Dv, Dk]: G_t = sum_{s <= t} log g_s
// (in double: differences of it stay exact to float), gamma_t = exp(G_t), and each token adds
// d_t k_t^T to the decayed state:
//   S_t = gamma_t S0 + sum_{j <= t} exp(G_t - G_j) d_j k_j^T,
//   d_t = beta_t (v_t - g_t S_{t-1} k_t)
//       = beta_t v_t - beta_t gamma_t S0 k_t - sum_{j < t} A_tj d_j,  A_tj = beta_t exp(G_t - G_j) k_t.k_j,
// so (I + A) D = R = beta V - (beta gamma K) S0^T with A strictly lower triangular: D = T R with
// T = (I + A)^-1, solved here by forward substitution without forming T. Then
//   y_t = S_t q_t = gamma_t S0 q_t + sum_{j <= t} exp(G_t - G_j) (q_t.k_j) d_j, i.e. Y = (gamma Q) S0^T + P D,
//   S_L = gamma_L S0 + sum_j exp(G_L - G_j) d_j k_j^T.
// Every decay factor is exp of a difference <= 0, never a quotient of decays. A padding token
// takes log g = 0 and beta = 0: its d_t is 0 and it leaves the state as it was (its y_t reads
// S_{t-1}; the per-token form's y of a padding token is as meaningless).
constexpr int kChunk = 64;
// Below this many tokens per call, the per-token form (decode, short chunks). One head of 128 x 128,
// one thread, AVX-512, chunked vs per-token: 0.67x at 8 tokens, 1.6x at 16, 2.1x at 64, 2.3x from
// 128 on (the chunked form does ~35% more multiply-adds, at near-peak GEMM speed).
constexpr int kChunkMinTokens = 16;
// Row blocks over which the triangular products skip their zero upper part.
constexpr int kTriBlock = 16;

// One (batch row, value head): token t's q, k, v at q + t * ld etc., its y at y + t * ldy.
struct HeadIo {
  const float *q, *k, *v;
  long ld;
  float* y;
  long ldy;
};

// Scratch of one (row, head) for its chunks, one allocation left uninitialized (every part is
// written before it is read): st is the state transposed ([Dk, Dv], B of the GEMMs).
struct ChunkScratch {
  ChunkScratch(int dk, int dv)
      : mem(new float[static_cast<size_t>(dk) * dv + (static_cast<size_t>(2) * dk + dv + 2 * kChunk) * kChunk]),
        st(mem.get()), kt(st + static_cast<size_t>(dk) * dv), x(kt + static_cast<size_t>(dk) * kChunk),
        r(x + static_cast<size_t>(dk) * kChunk), a(r + static_cast<size_t>(dv) * kChunk), p(a + kChunk * kChunk) {}
  std::unique_ptr<float[]> mem;
  float *st, *kt, *x, *r, *a, *p;
  double g[kChunk];
};

// dst[c, r] = src[r, c] for rows x cols, by 16 x 16 tiles (a column written whole at large
// strides thrashes the cache sets the column falls in).
void transpose(const float* src, long lds, int rows, int cols, float* dst, long ldd) {
  constexpr int kTile = 16;
  for (int r0 = 0; r0 < rows; r0 += kTile) {
    const int r1 = std::min(rows, r0 + kTile);
    for (int c0 = 0; c0 < cols; c0 += kTile) {
      const int c1 = std::min(cols, c0 + kTile);
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
      }
    }
  }
}

// C[m, n] = A[m, k] B[k, n] where only C's lower triangle (with its diagonal) is wanted, by row
// blocks: the columns past a block's last row are skipped (the block's own corner is computed).
void lower_gemm(const VecOps& vo, int m, int n, int k, const float* a, long lda, const float* b, long ldb, float* c,
                long ldc) {
  for (int i0 = 0; i0 < m; i0 += kTriBlock) {
    const int mb = std::min(kTriBlock, m - i0), nb = std::min(n, i0 + mb);
    for (int i = i0; i < i0 + mb; ++i) std::fill_n(c + i * ldc, nb, 0.f);
    vo.gemm_acc(mb, nb, k, a + i0 * lda, lda, 1, b, ldb, c + i0 * ldc, ldc);
  }
}

// Tokens t0..t0+L-1 of one head (the algebra above), w.st carried in and out.
void delta_chunk(const VecOps& vo, const HeadIo& io, int t0, int L, const float* log_g, const float* beta,
                 ChunkScratch& w, int Dk, int Dv) {
  double acc = 0.0;
  for (int t = 0; t < L; ++t) w.g[t] = acc += log_g[t0 + t];
  const float* q = io.q + t0 * io.ld;
  const float* k = io.k + t0 * io.ld;
  transpose(k, io.ld, L, Dk, w.kt, kChunk);
  // -A (strictly lower) from K K^T, P (lower) from Q K^T, scaled by their decays.
  lower_gemm(vo, L, L, Dk, k, io.ld, w.kt, kChunk, w.a, kChunk);
  lower_gemm(vo, L, L, Dk, q, io.ld, w.kt, kChunk, w.p, kChunk);
  for (int t = 0; t < L; ++t) {
    float* at = w.a + t * kChunk;
    float* pt = w.p + t * kChunk;
    const float nb = -beta[t0 + t];
    for (int j = 0; j <= t; ++j) {
      const float dec = std::exp(static_cast<float>(w.g[t] - w.g[j]));
      pt[j] *= dec;
      at[j] *= nb * dec;
    }
    std::fill(pt + t + 1, pt + std::min(L, (t / kTriBlock + 1) * kTriBlock), 0.f);  // the block's corner
  }
  // R = beta V - (beta gamma K) S0^T (into r); Y = (gamma Q) S0^T.
  for (int t = 0; t < L; ++t) {
    const float gam = std::exp(static_cast<float>(w.g[t])), bg = beta[t0 + t] * gam;
    for (int c = 0; c < Dk; ++c) w.x[static_cast<size_t>(t) * Dk + c] = bg * k[t * io.ld + c];
  }
  std::fill_n(w.r, static_cast<size_t>(L) * Dv, 0.f);
  vo.gemm_acc(L, Dv, Dk, w.x, Dk, 1, w.st, Dv, w.r, Dv);
  for (int t = 0; t < L; ++t) {
    const float* vt = io.v + (t0 + t) * io.ld;
    float* rt = w.r + static_cast<size_t>(t) * Dv;
    for (int i = 0; i < Dv; ++i) rt[i] = beta[t0 + t] * vt[i] - rt[i];
    const float gam = std::exp(static_cast<float>(w.g[t]));
    for (int c = 0; c < Dk; ++c) w.x[static_cast<size_t>(t) * Dk + c] = gam * q[t * io.ld + c];
  }
  float* y = io.y + t0 * io.ldy;
  for (int t = 0; t < L; ++t) std::fill_n(y + t * io.ldy, Dv, 0.f);
  vo.gemm_acc(L, Dv, Dk, w.x, Dk, 1, w.st, Dv, y, io.ldy);
  // (I + A) D = R by forward substitution in place (r becomes D), by row blocks: the rows before a
  // block through one GEMM, those inside it one by one.
  for (int i0 = 0; i0 < L; i0 += kTriBlock) {
    const int i1 = std::min(L, i0 + kTriBlock);
    if (i0 > 0) vo.gemm_acc(i1 - i0, Dv, i0, w.a + i0 * kChunk, kChunk, 1, w.r, Dv, w.r + i0 * Dv, Dv);
    for (int t = i0 + 1; t < i1; ++t) {
      for (int j = i0; j < t; ++j) vo.axpy(w.a[t * kChunk + j], w.r + j * Dv, w.r + t * Dv, Dv);
    }
  }
  // Y += P D.
  for (int i0 = 0; i0 < L; i0 += kTriBlock) {
    const int mb = std::min(kTriBlock, L - i0);
    vo.gemm_acc(mb, Dv, i0 + mb, w.p + i0 * kChunk, kChunk, 1, w.r, Dv, y + i0 * io.ldy, io.ldy);
  }
  // S^T = gamma_L S0^T + Kd^T D, Kd's rows exp(G_L - G_j) k_j.
  const float gam_l = std::exp(static_cast<float>(w.g[L - 1]));
  for (size_t e = 0; e < static_cast<size_t>(Dk) * Dv; ++e) w.st[e] *= gam_l;
  for (int j = 0; j < L; ++j) {
    const float dec = std::exp(static_cast<float>(w.g[L - 1] - w.g[j]));
    for (int c = 0; c < Dk; ++c) w.x[static_cast<size_t>(j) * Dk + c] = dec * k[j * io.ld + c];
  }
  vo.gemm_acc(Dk, Dv, L, w.x, 1, Dk, w.r, Dv, w.st, Dv);
}

// A head's S tokens one at a time (decode, short calls), a pass over the state per token.
void delta_rule_per_token(const VecOps& vo, const HeadIo& io, int S, const float* log_g, const float* beta,
                          const bool* mask, float* st, int Dk, int Dv) {
  for (int t = 0; t < S; ++t) {
    const bool keep = mask == nullptr || mask[t];
    const float gt = std::exp(log_g[t]);
    const float* vt = io.v + t * io.ld;
    float* yt = io.y + t * io.ldy;
    for (int i = 0; i < Dv; ++i) {
      yt[i] = vo.delta_rule_row(st + static_cast<long>(i) * Dk, io.k + t * io.ld, io.q + t * io.ld, gt, vt[i], beta[t],
                                Dk, keep);
    }
  }
}

// A head's S tokens chunk by chunk, its state st [Dv, Dk] updated in place. Chunks start at the
// row's first real token (a left-padded row chunks its tokens as its unpadded run would).
void delta_rule_chunked(const VecOps& vo, const HeadIo& io, int S, float* log_g, float* beta, const bool* mask,
                        float* st, int Dk, int Dv) {
  int first = 0;
  for (int t = 0; t < S; ++t) {
    if (mask && !mask[t]) log_g[t] = beta[t] = 0.f;
    log_g[t] = std::max(log_g[t], -1e4f);  // g = 0 all the same, and no -inf - -inf in G's differences
  }
  while (mask && first < S && !mask[first]) ++first;
  ChunkScratch w(Dk, Dv);
  transpose(st, Dk, Dv, Dk, w.st, Dv);
  for (int t0 = 0; t0 < first; t0 += kChunk) delta_chunk(vo, io, t0, std::min(kChunk, first - t0), log_g, beta, w, Dk, Dv);
  for (int t0 = first; t0 < S; t0 += kChunk) delta_chunk(vo, io, t0, std::min(kChunk, S - t0), log_g, beta, w, Dk, Dv);
  transpose(w.st, Dv, Dk, Dv, st, Dk);
}

// inputs: qkv, z, b, a, conv_state, state, conv_w, a_log, dt_bias, norm_w[, mask][, lengths];
// outputs: y, conv state, state.
class GatedDeltaCorePrimitive : public mx::Primitive {
 public:
  GatedDeltaCorePrimitive(mx::Stream s, FastPath ctx, GatedDeltaCoreShape sh, bool has_mask, bool has_lengths)
      : Primitive(s), ctx_(std::move(ctx)), sh_(sh), has_mask_(has_mask), has_lengths_(has_lengths) {}
  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw Error("[MlxcppGatedDeltaCore] CPU-only primitive built for a GPU stream");
  }
  const char* name() const override { return "MlxcppGatedDeltaCore"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    const auto* o = dynamic_cast<const GatedDeltaCorePrimitive*>(&other);
    return o && o->ctx_ == ctx_ && o->sh_.k_heads == sh_.k_heads && o->sh_.v_heads == sh_.v_heads &&
           o->sh_.k_dim == sh_.k_dim && o->sh_.v_dim == sh_.v_dim && o->sh_.kernel == sh_.kernel &&
           o->sh_.eps == sh_.eps && o->has_mask_ == has_mask_ && o->has_lengths_ == has_lengths_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& in) override {
    return {{in[0].shape(0), in[0].shape(1), sh_.v_heads * sh_.v_dim}, in[4].shape(), in[5].shape()};
  }

 private:
  FastPath ctx_;
  GatedDeltaCoreShape sh_;
  bool has_mask_, has_lengths_;
};

void GatedDeltaCorePrimitive::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  for (auto& o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));
  auto& enc = encoder_for(stream(), inputs, outputs);
  enc.dispatch([in = weak_copies(inputs), out = weak_copies(outputs), ctx = ctx_, sh = sh_, has_mask = has_mask_,
                has_lengths = has_lengths_]() mutable {
    KernelContext::Timer timer(*ctx);
    const int B = in[0].shape(0), S = in[0].shape(1), C = in[0].shape(2), K = sh.kernel, nk = K - 1;
    const int Hk = sh.k_heads, Hv = sh.v_heads, Dk = sh.k_dim, Dv = sh.v_dim, rep = Hv / Hk;
    std::vector<float> sc[10];
    const float* qkv = contiguous_f32(in[0], sc[0]);
    const float* z = contiguous_f32(in[1], sc[1]);
    const float* bb = contiguous_f32(in[2], sc[2]);
    const float* aa = contiguous_f32(in[3], sc[3]);
    const float* cs0 = contiguous_f32(in[4], sc[4]);
    const float* s0 = contiguous_f32(in[5], sc[5]);
    const float* w = contiguous_f32(in[6], sc[6]);
    const float* a_log = contiguous_f32(in[7], sc[7]);
    const float* dt = contiguous_f32(in[8], sc[8]);
    const float* nw = contiguous_f32(in[9], sc[9]);
    size_t next = 10;
    std::vector<uint8_t> mask_scratch;
    const bool* mask = has_mask ? read_mask(in[next++], B, S, mask_scratch) : nullptr;
    std::vector<int> lengths;
    if (has_lengths) {
      const auto& l = in[next];
      for (int r = 0; r < B; ++r) lengths.push_back(l.data<int32_t>()[r * l.strides()[0]]);  // may be negative
    }
    // Row u < S + K - 1 of batch row r's [conv_state | qkv (padding zeroed)], read in place; the
    // conv + SiLU into co (every element written), q/k normed in place.
    const std::vector<float> zeros(static_cast<size_t>(C), 0.f);
    auto conv_in = [&](int r, int u) -> const float* {
      if (u < nk) return cs0 + (static_cast<size_t>(r) * nk + u) * C;
      const size_t t = static_cast<size_t>(r) * S + (u - nk);
      return mask && !mask[t] ? zeros.data() : qkv + t * C;
    };
    std::unique_ptr<float[]> co(new float[static_cast<size_t>(B) * S * C]);
    const float inv = 1.f / std::sqrt(static_cast<float>(Dk)), inv2 = inv * inv, l2_eps = 1e-6f * inv2;
    const VecOps& vo = vec_ops(ctx->isa());
    // The kernel tap by tap ([K][C]), so the conv runs along contiguous channels.
    std::vector<float> wt(static_cast<size_t>(K) * C), ones(static_cast<size_t>(std::max(C, Dv)), 1.f);
    for (int c = 0; c < C; ++c) {
      for (int j = 0; j < K; ++j) wt[static_cast<size_t>(j) * C + c] = w[static_cast<size_t>(c) * K + j];
    }
    ctx->pool().parallel_for(B * S, [&](int task) {
      const int r = task / S, t = task % S;
      float* o = co.get() + (static_cast<size_t>(r) * S + t) * C;
      std::fill(o, o + C, 0.f);
      for (int j = 0; j < K; ++j) {
        const float* xj = conv_in(r, t + j);
        const float* wj = wt.data() + static_cast<size_t>(j) * C;
        for (int c = 0; c < C; ++c) o[c] += xj[c] * wj[c];
      }
      vo.silu_mul(o, ones.data(), o, C);
      for (int h = 0; h < 2 * Hk; ++h) {
        float* v = o + static_cast<size_t>(h) * Dk;
        const float scale = h < Hk ? inv2 : inv;
        const float rs = scale / std::sqrt(vo.sum_squares(v, Dk) / static_cast<float>(Dk) + l2_eps);
        for (int i = 0; i < Dk; ++i) v[i] *= rs;
      }
    });
    float* cs = out[1].data<float>();
    for (int r = 0; r < B; ++r) {
      const int end = has_lengths ? std::clamp(lengths[r], 0, S) : S;
      for (int i = 0; i < nk; ++i) std::copy_n(conv_in(r, end + i), C, cs + (static_cast<size_t>(r) * nk + i) * C);
    }
    float* y = out[0].data<float>();
    float* s = out[2].data<float>();
    const long head_state = static_cast<long>(Dv) * Dk;
    std::copy_n(s0, static_cast<long>(B) * Hv * head_state, s);
    const bool chunked = S >= kChunkMinTokens;
    ctx->pool().parallel_for(B * Hv, [&](int task) {
      const int r = task / Hv, h = task % Hv, hk = h / rep;
      float* st = s + (static_cast<long>(r) * Hv + h) * head_state;
      const float decay_rate = std::exp(a_log[h]);
      const float* tok0 = co.get() + static_cast<size_t>(r) * S * C;
      const bool* row_mask = mask ? mask + static_cast<size_t>(r) * S : nullptr;
      HeadIo io{tok0 + static_cast<size_t>(hk) * Dk, tok0 + static_cast<size_t>(Hk + hk) * Dk,
                tok0 + static_cast<size_t>(2 * Hk) * Dk + static_cast<size_t>(h) * Dv, C,
                y + static_cast<size_t>(r) * S * Hv * Dv + static_cast<size_t>(h) * Dv, static_cast<long>(Hv) * Dv};
      // Per token: log g = -exp(a_log) softplus(a + dt_bias) and beta = sigmoid(b).
      std::vector<float> log_g(S), beta(S);
      for (int t = 0; t < S; ++t) {
        const size_t gi = (static_cast<size_t>(r) * S + t) * Hv + h;
        log_g[t] = -decay_rate * softplus(aa[gi] + dt[h]);
        beta[t] = 1.f / (1.f + std::exp(-bb[gi]));
      }
      if (chunked) {
        delta_rule_chunked(vo, io, S, log_g.data(), beta.data(), row_mask, st, Dk, Dv);
      } else {
        delta_rule_per_token(vo, io, S, log_g.data(), beta.data(), row_mask, st, Dk, Dv);
      }
      // Qwen3NextRMSNormGated: rms_norm(y, norm_w) * silu(z).
      for (int t = 0; t < S; ++t) {
        float* yt = io.y + t * io.ldy;
        const float rn = 1.f / std::sqrt(vo.sum_squares(yt, Dv) / static_cast<float>(Dv) + sh.eps);
        const float* zt = z + (static_cast<size_t>(r) * S + t) * Hv * Dv + static_cast<size_t>(h) * Dv;
        for (int i = 0; i < Dv; ++i) yt[i] *= rn * nw[i];
        vo.silu_mul(zt, yt, yt, Dv);
      }
    });
  });
}

}  // namespace

std::optional<std::array<mx::array, 3>> gated_delta_core(const mx::array& qkv, const mx::array& z, const mx::array& b,
                                                         const mx::array& a, const mx::array& conv_state,
                                                         const mx::array& state, const mx::array& conv_w,
                                                         const mx::array& a_log, const mx::array& dt_bias,
                                                         const mx::array& norm_w, const std::optional<mx::array>& mask,
                                                         const std::optional<mx::array>& lengths,
                                                         const GatedDeltaCoreShape& sh, const FastPath& fast) {
  if (!use_fast(fast)) return std::nullopt;
  for (const auto* x : {&qkv, &z, &b, &a, &conv_state, &state, &conv_w, &a_log, &dt_bias, &norm_w}) {
    if (x->dtype() != mx::float32) return std::nullopt;
  }
  if (sh.k_heads <= 0 || sh.v_heads % sh.k_heads != 0 || sh.kernel < 2 || qkv.ndim() != 3) return std::nullopt;
  const int B = qkv.shape(0), S = qkv.shape(1), C = 2 * sh.k_heads * sh.k_dim + sh.v_heads * sh.v_dim;
  const int V = sh.v_heads * sh.v_dim;
  if (qkv.shape(2) != C || z.size() != static_cast<size_t>(B) * S * V) return std::nullopt;
  if (b.shape() != mx::Shape{B, S, sh.v_heads} || a.shape() != b.shape()) return std::nullopt;
  if (conv_state.shape() != mx::Shape{B, sh.kernel - 1, C} || conv_w.size() != static_cast<size_t>(C) * sh.kernel) {
    return std::nullopt;
  }
  if (state.shape() != mx::Shape{B, sh.v_heads, sh.v_dim, sh.k_dim}) return std::nullopt;
  if (a_log.size() != static_cast<size_t>(sh.v_heads) || dt_bias.size() != a_log.size() ||
      norm_w.size() != static_cast<size_t>(sh.v_dim)) {
    return std::nullopt;
  }
  std::vector<mx::array> inputs{qkv, z, b, a, conv_state, state, conv_w, a_log, dt_bias, norm_w};
  if (mask) {
    if (mask->dtype() != mx::bool_ || mask->shape() != mx::Shape{B, S}) return std::nullopt;
    inputs.push_back(*mask);
  }
  if (lengths) {
    if (lengths->dtype() != mx::int32 || lengths->ndim() != 1 || lengths->size() != static_cast<size_t>(B)) {
      return std::nullopt;
    }
    inputs.push_back(*lengths);
  }
  auto prim = std::make_shared<GatedDeltaCorePrimitive>(mx::default_stream(mx::Device::cpu), fast, sh,
                                                        mask.has_value(), lengths.has_value());
  auto outs = mx::array::make_arrays({{B, S, V}, conv_state.shape(), state.shape()},
                                     {mx::float32, mx::float32, mx::float32}, std::move(prim), std::move(inputs));
  return std::array<mx::array, 3>{outs[0], outs[1], outs[2]};
}

}  // namespace mlxcpp::kernels
