// Row kernels the block primitives are composed of (float32, contiguous rows).
#pragma once

#include <initializer_list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/kernel_context.h"
#include "kernels/qmatmul.h"
#include "kernels/vec_ops.h"

namespace mlxcpp::kernels {

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w   (mx.fast.rms_norm)
void rms_norm_rows(const VecOps& v, const float* x, const float* w, float eps, int rows, int d, float* out);

// out[r] = x[r] - logsumexp(x[r]) for `rows` rows of n (x - max, exp summed in double, log): the
// log-probabilities mlx-lm takes over the vocabulary; long rows split over the context's pool.
void log_softmax_rows(const KernelContext& ctx, const float* x, int rows, long n, float* out);
// MLX's argmax over each row of n values: the first maximum, or the first NaN if any (MLX
// 0.32's CPU loop); rows on the pool.
void argmax_rows(const KernelContext& ctx, const float* x, int rows, long n, uint32_t* out);
// The gated activation of an MLP block (VecOps::silu_mul / gelu_mul).
enum class GluActivation { kSilu, kGeluApprox };

// The rotation of mx.fast.rope for `dims` leading features of each head: angle = pos * scale *
// inv_freq[i]; traditional rotates pairs (2i, 2i+1), otherwise (i, i + dims/2). `mscale`
// multiplies the rotated features first (yarn).
struct RopeSpec {
  int dims = 0;
  bool traditional = false;
  float scale = 1.f;
  float mscale = 1.f;
  std::vector<float> inv_freq;  // dims/2
};

// x: [rows, heads, head_dim] where row r sits at position pos0 + r.
void rope_rows(const RopeSpec& rope, float* x, int rows, int heads, int head_dim, int pos0);

// A quantized projection as the kernels see it (+ optional float32 bias [n]).
struct QLinearView {
  QMatrixView q;
  const float* bias = nullptr;
};
// out [m, n] = x [m, k] @ W.T (+ bias); `decode`: x's rows are separate sequences' next tokens
// (qmatmul's).
void qlinear(const KernelContext& ctx, const QLinearView& l, const float* x, int m, float* out, bool decode = false);
// Several projections of the same x in one pass over the pool.
void qlinear_many(const KernelContext& ctx, std::initializer_list<std::pair<QLinearView, float*>> outs, const float* x,
                  int m, bool decode = false);

// Causal attention of L new queries (cache rows offset..offset+L-1) over a cache holding keys
// 0..offset+L-1, for `batch` rows: q [batch, L, heads, hd] -> out [batch, L, heads, hd]; k/v
// cache [batch, kv_heads, cap, hd], float32 or, with kv_f16, float16 (bit patterns).
// `window`: keys older than row - window + 1 are skipped (sliding window, by cache row).
// `key_start` (empty, or one per batch row: its left padding): row b's keys before
// key_start[b] are skipped too (mlx-lm's create_causal_mask with left_padding). A query with
// no key of its own yet (a padded prompt position) attends just its own key (finite; unused).
// Prefill queries are attended in blocks of this many positions (from the first new one): a
// query's result depends on its block's other queries (their key ranges group the scores), so
// chunked prefill matches an unchunked one exactly when chunks are multiples of it.
inline constexpr int kAttentionQueryBlock = 8;

struct AttentionShape {
  int heads, kv_heads, head_dim, cap, offset, L;
  float scale;
  std::optional<int> window;
  bool kv_f16 = false;
  int batch = 1;
  std::span<const int> key_start = {};
  // A ragged batch (one buffer per row; kc/vc unused): row b's keys and values at
  // row_k[b] / row_v[b] ([kv_heads, row_cap[b], hd]), its new queries at cache rows
  // row_offset[b].. (instead of offset..).
  std::span<const void* const> row_k = {}, row_v = {};
  std::span<const int> row_cap = {}, row_offset = {};
};
void attention(const KernelContext& ctx, const AttentionShape& s, const float* q, const void* kc, const void* vc,
               float* out);

}  // namespace mlxcpp::kernels
