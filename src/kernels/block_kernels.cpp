#include "kernels/block_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace mlxcpp::kernels {

void rms_norm_rows(const VecOps& v, const float* x, const float* w, float eps, int rows, int d, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<long>(r) * d;
    float* o = out + static_cast<long>(r) * d;
    const float inv = 1.0f / std::sqrt(v.sum_squares(xr, d) / static_cast<float>(d) + eps);
    for (int i = 0; i < d; ++i) o[i] = xr[i] * inv * w[i];
  }
}

void log_softmax_rows(const KernelContext& ctx, const float* x, int rows, long n, float* out) {
  // Chunks of a row per pool task: the row's max, then sum(exp(x - max)), then the subtraction.
  constexpr long kChunk = 8192;
  const VecOps& v = vec_ops(ctx.isa());
  const int chunks = static_cast<int>((n + kChunk - 1) / kChunk);
  std::vector<float> part_max(chunks);
  std::vector<double> part_sum(chunks);
  auto over_chunks = [&](auto&& fn) {
    if (chunks == 1) fn(0);
    else ctx.pool().parallel_for(chunks, fn);
  };
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    over_chunks([&](int c) {
      float m = -std::numeric_limits<float>::infinity();
      for (long i = c * kChunk, e = std::min(n, i + kChunk); i < e; ++i) m = std::max(m, xr[i]);
      part_max[c] = m;
    });
    const float mx = *std::max_element(part_max.begin(), part_max.end());
    if (!std::isfinite(mx)) {  // all -inf (or a nan/inf logit): as stock, no finite answer
      for (long i = 0; i < n; ++i) o[i] = xr[i] - mx;
      continue;
    }
    over_chunks([&](int c) {
      const long i = c * kChunk;
      part_sum[c] = v.sum_exp(xr + i, std::min(n, i + kChunk) - i, mx);
    });
    double total = 0;
    for (double s : part_sum) total += s;
    const float lse = mx + static_cast<float>(std::log(total));
    over_chunks([&](int c) {
      for (long i = c * kChunk, e = std::min(n, i + kChunk); i < e; ++i) o[i] = xr[i] - lse;
    });
  }
}

void argmax_rows(const KernelContext& ctx, const float* x, int rows, long n, uint32_t* out) {
  const VecOps& v = vec_ops(ctx.isa());
  auto one = [&](int r) {
    const float* xr = x + static_cast<long>(r) * n;
    const float m = v.max_value(xr, n);
    long i = 0;
    if (m == m) {
      while (xr[i] != m) ++i;  // the first value equal to the maximum (-0 == +0)
    } else {
      while (xr[i] == xr[i]) ++i;  // the first NaN
    }
    out[r] = static_cast<uint32_t>(i);
  };
  if (rows == 1) one(0);
  else ctx.pool().parallel_for(rows, one);
}

void rope_rows(const RopeSpec& rope, float* x, int rows, int heads, int head_dim, int pos0) {
  const int half = rope.dims / 2;
  std::vector<float> cs(half), sn(half);
  for (int r = 0; r < rows; ++r) {
    const float pos = static_cast<float>(pos0 + r) * rope.scale;
    for (int i = 0; i < half; ++i) {
      const float a = pos * rope.inv_freq[i];
      cs[i] = std::cos(a);
      sn[i] = std::sin(a);
    }
    for (int h = 0; h < heads; ++h) {
      float* p = x + (static_cast<long>(r) * heads + h) * head_dim;
      if (rope.mscale != 1.f)
        for (int i = 0; i < rope.dims; ++i) p[i] *= rope.mscale;
      for (int i = 0; i < half; ++i) {
        const int a = rope.traditional ? 2 * i : i, b = rope.traditional ? 2 * i + 1 : i + half;
        const float x1 = p[a], x2 = p[b];
        p[a] = x1 * cs[i] - x2 * sn[i];
        p[b] = x1 * sn[i] + x2 * cs[i];
      }
    }
  }
}

namespace {

void add_bias(const QLinearView& l, int m, float* out) {
  if (!l.bias) return;
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < l.q.n; ++j) out[static_cast<long>(r) * l.q.n + j] += l.bias[j];
}

}  // namespace

void qlinear(const KernelContext& ctx, const QLinearView& l, const float* x, int m, float* out, bool decode) {
  qmatmul(ctx, x, m, l.q, out, decode);
  add_bias(l, m, out);
}

void qlinear_many(const KernelContext& ctx, std::initializer_list<std::pair<QLinearView, float*>> outs, const float* x,
                  int m, bool decode) {
  std::vector<QJob> jobs;
  for (const auto& [l, out] : outs) jobs.push_back(QJob{l.q, x, m, out, decode});
  qmatmul_many(ctx, jobs.data(), static_cast<int>(jobs.size()));
  for (const auto& [l, out] : outs) add_bias(l, m, out);
}

namespace {

// The cache rows query l of batch row b attends: first..last.
struct KeyRange {
  int first, last;
};
KeyRange key_range(const AttentionShape& s, int b, int l) {
  const int last = (s.row_offset.empty() ? s.offset : s.row_offset[b]) + l;
  int first = s.window ? std::max(0, last - *s.window + 1) : 0;
  if (!s.key_start.empty()) first = std::max(first, s.key_start[b]);
  return {std::min(first, last), last};  // a padded query: its own key alone (see AttentionShape)
}

// Row b's [kv_heads, cap, hd] keys or values and its capacity (a ragged batch's own buffers).
template <class T>
const T* row_cache(const AttentionShape& s, const T* base, std::span<const void* const> rows, int b) {
  if (!rows.empty()) return static_cast<const T*>(rows[b]);
  return base + static_cast<long>(b) * s.kv_heads * s.cap * s.head_dim;
}
int row_cap(const AttentionShape& s, int b) { return s.row_cap.empty() ? s.cap : s.row_cap[b]; }

// The VecOps attention routines for a cache of T (float, or float16 bit patterns).
auto attend_group_fn(const VecOps& v, const float*) { return v.attend_group; }
auto attend_group_fn(const VecOps& v, const uint16_t*) { return v.attend_group_h; }
auto attend_tile_fn(const VecOps& v, const float*) { return v.attend_tile; }
auto attend_tile_fn(const VecOps& v, const uint16_t*) { return v.attend_tile_h; }

// One decode query per batch row (L = 1): one pool task per (batch row, kv head, slice of its
// keys) attends all the query heads of that kv head at once (VecOps::attend_group: the cache
// rows come from memory once per kv head, not once per query head), every row in one pass over
// the pool. A row's keys are split (splits[b] slices) so that there are a few tasks per thread
// (3 kv heads on 2 threads alone run 2 against 1); the slices' unnormalized outputs merge by
// their maxima and sums (as flash-decoding does).
template <class T>
void attention_decode(const KernelContext& ctx, const AttentionShape& s, const std::vector<int>& splits,
                      const float* q, const T* kc, const T* vc, float* out) {
  const VecOps& v = vec_ops(ctx.isa());
  const int group = s.heads / s.kv_heads, hd = s.head_dim;
  const long qrow = static_cast<long>(s.heads) * hd;
  // Row b's tasks are first_task[b].. (kv_head * splits[b] + slice); task t owns group rows of
  // part_out and group pairs of part.
  std::vector<int> first_task(s.batch + 1, 0);
  bool merge = false;
  for (int b = 0; b < s.batch; ++b) {
    first_task[b + 1] = first_task[b] + s.kv_heads * splits[b];
    merge = merge || splits[b] > 1;
  }
  const int tasks = first_task[s.batch];
  std::vector<float> part_out(merge ? static_cast<size_t>(tasks) * group * hd : 0),
      part(merge ? static_cast<size_t>(tasks) * group * 2 : 0);
  ctx.pool().parallel_for(tasks, [&](int task) {
    const int b =
        static_cast<int>(std::upper_bound(first_task.begin(), first_task.end(), task) - first_task.begin()) - 1;
    const int sp = splits[b], kvh = (task - first_task[b]) / sp, c = (task - first_task[b]) % sp;
    const auto [first, last] = key_range(s, b, 0);
    const int span = last - first + 1;
    const int lo = first + static_cast<int>(static_cast<long>(span) * c / sp);
    const int hi = first + static_cast<int>(static_cast<long>(span) * (c + 1) / sp) - 1;
    const long kv = static_cast<long>(kvh) * row_cap(s, b) * hd;
    const T* kb = row_cache(s, kc, s.row_k, b) + kv;
    const T* vb = row_cache(s, vc, s.row_v, b) + kv;
    const float* qh = q + b * qrow + static_cast<long>(kvh) * group * hd;
    std::vector<float> scores(static_cast<size_t>(group) * (hi - lo + 1));
    // One slice: the final rows; several: unnormalized parts for the merge below.
    float* o = sp == 1 ? out + b * qrow + static_cast<long>(kvh) * group * hd
                       : part_out.data() + static_cast<long>(task) * group * hd;
    attend_group_fn(v, kc)(qh, group, kb, vb, hd, lo, hi, s.scale, scores.data(), o,
                           sp == 1 ? nullptr : part.data() + 2L * task * group);
  });
  if (!merge) return;
  for (int b = 0; b < s.batch; ++b) {
    const int sp = splits[b];
    if (sp == 1) continue;
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / group, i = h % group;
      auto slot = [&](int c) {
        return (static_cast<long>(first_task[b]) + static_cast<long>(kvh) * sp + c) * group + i;
      };
      float m = -INFINITY;
      for (int c = 0; c < sp; ++c) m = std::max(m, part[2 * slot(c)]);
      float* o = out + b * qrow + static_cast<long>(h) * hd;
      std::fill(o, o + hd, 0.f);
      float sum = 0.f;
      for (int c = 0; c < sp; ++c) {
        const float w = std::exp(part[2 * slot(c)] - m);
        sum += w * part[2 * slot(c) + 1];
        v.axpy(w, part_out.data() + slot(c) * hd, o, hd);
      }
      for (int d = 0; d < hd; ++d) o[d] /= sum;
    }
  }
}

template <class T>
void attention_t(const KernelContext& ctx, const AttentionShape& s, const float* q, const T* kc, const T* vc,
                 float* out) {
  const VecOps& v = vec_ops(ctx.isa());
  const int group = s.heads / s.kv_heads;
  const int hd = s.head_dim;
  if (s.L == 1) {
    // Slices of at least kMinKeys keys, up to ~4 tasks per thread over a row's kv heads: each
    // row is split as it would be alone, so that it comes out bit for bit as alone. A single
    // row with too few keys to split and fewer kv heads than threads: the tiles below.
    constexpr int kMinKeys = 64;
    const int want = (4 * ctx.threads() + s.kv_heads - 1) / s.kv_heads;
    std::vector<int> splits(s.batch);
    bool split = false;
    for (int b = 0; b < s.batch; ++b) {
      const auto [first, last] = key_range(s, b, 0);
      splits[b] = std::max(1, std::min(want, (last - first + 1) / kMinKeys));
      split = split || splits[b] > 1;
    }
    if (split || s.batch > 1 || s.kv_heads >= ctx.threads()) return attention_decode(ctx, s, splits, q, kc, vc, out);
  }
  // One task per (batch row, kv head, block of queries): each owns its output rows. The query
  // heads of the kv head at all positions of the block are attended together (attend_tile:
  // each key and value row is read about once for all of them, not once per position and head).
  constexpr int kQBlock = kAttentionQueryBlock;
  const int qblocks = (s.L + kQBlock - 1) / kQBlock, per_row = s.kv_heads * qblocks;
  ctx.pool().parallel_for(s.batch * per_row, [&](int task) {
    const int b = task / per_row, kvh = task % per_row / qblocks, qb = task % qblocks;
    const long kv = static_cast<long>(kvh) * row_cap(s, b) * hd;
    const T* K = row_cache(s, kc, s.row_k, b) + kv;
    const T* V = row_cache(s, vc, s.row_v, b) + kv;
    const int l0 = qb * kQBlock, P = std::min(s.L, l0 + kQBlock) - l0;
    int first[kQBlock], last[kQBlock];
    for (int p = 0; p < P; ++p) {
      const auto r = key_range(s, b, l0 + p);
      first[p] = r.first;
      last[p] = r.last;
    }
    std::vector<float> scores(static_cast<size_t>(group) * P * (last[P - 1] - first[0] + 1));
    const long row = ((static_cast<long>(b) * s.L + l0) * s.heads + static_cast<long>(kvh) * group) * hd;
    const long stride = static_cast<long>(s.heads) * hd;
    attend_tile_fn(v, K)(q + row, stride, group, P, first, last, K, V, hd, s.scale, scores.data(), out + row, stride);
  });
}

}  // namespace

void attention(const KernelContext& ctx, const AttentionShape& s, const float* q, const void* kc, const void* vc,
               float* out) {
  if (s.kv_f16) {
    attention_t(ctx, s, q, static_cast<const uint16_t*>(kc), static_cast<const uint16_t*>(vc), out);
  } else {
    attention_t(ctx, s, q, static_cast<const float*>(kc), static_cast<const float*>(vc), out);
  }
}

}  // namespace mlxcpp::kernels
