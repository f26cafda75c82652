#include "kernels/moe_ops.h"

#include <algorithm>

#include <mlx/ops.h>
#include <mlx/primitives.h>
#include <mlx/transforms.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/cpu_dispatch.h"
#include "kernels/qmatmul.h"
#include "kernels/vec_ops.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

struct ExpertsShape {
  int experts, n, k, bits, group;
};

// inputs: x [..., d], indices [..., top_k], scores [..., top_k], then gate, up and down as
// (w, scales, biases) each (ExpertsLinear's arrays); output [..., d] float32 (moe_glu).
class MoeGluPrimitive : public mx::UnaryPrimitive {
 public:
  MoeGluPrimitive(mx::Stream s, FastPath ctx, std::array<ExpertsShape, 3> shapes, GluActivation act)
      : UnaryPrimitive(s), ctx_(std::move(ctx)), shapes_(shapes), act_(act) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw Error("[MlxcppMoeGlu] CPU-only primitive built for a GPU stream");
  }
  const char* name() const override { return "MlxcppMoeGlu"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    const auto* o = dynamic_cast<const MoeGluPrimitive*>(&other);
    auto same = [](const ExpertsShape& a, const ExpertsShape& b) {
      return a.experts == b.experts && a.n == b.n && a.k == b.k && a.bits == b.bits && a.group == b.group;
    };
    return o && o->ctx_ == ctx_ && o->act_ == act_ && same(o->shapes_[0], shapes_[0]) &&
           same(o->shapes_[1], shapes_[1]) && same(o->shapes_[2], shapes_[2]);
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override { return {inputs[0].shape()}; }

 private:
  FastPath ctx_;
  std::array<ExpertsShape, 3> shapes_;
  GluActivation act_;
};

// Expert e's matrix within the stacked one.
QMatrixView expert_view(const mx::array& w, const mx::array& s, const mx::array& b, const ExpertsShape& sh, long e) {
  QMatrixView q = quantized_view(w, s, b, sh.bits, sh.group);
  q.n = sh.n;
  q.w += e * sh.n * w.shape(1);
  if (q.layout == QLayout::kMlx) {
    const long sbytes = static_cast<long>(sh.n) * s.shape(1) * scale_bytes(q.stype);
    q.scales = static_cast<const char*>(q.scales) + e * sbytes;
    q.biases = static_cast<const char*>(q.biases) + e * sbytes;
  }
  return q;
}

void MoeGluPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  std::vector<mx::array> in;
  for (const auto& a : inputs) in.push_back(mx::array::unsafe_weak_copy(a));
  enc.dispatch([out = mx::array::unsafe_weak_copy(out), in = std::move(in), ctx = ctx_, sh = shapes_,
                act = act_]() mutable {
    KernelContext::Timer timer(*ctx);
    const auto &x = in[0], &idx_a = in[1], &sc_a = in[2];
    const int d = x.shape(-1), top_k = idx_a.shape(-1), hidden = sh[0].n;
    const long tokens = static_cast<long>(x.size()) / d;
    const bool decode = x.ndim() >= 2 && x.shape(-2) == 1;  // [B, 1, d]: each row its own sequence
    std::vector<float> xs, ss;
    const float* xf = contiguous_f32(x, xs);
    const float* sf = contiguous_f32(sc_a, ss);
    const VecOps& v = vec_ops(ctx->isa());
    const auto glu = act == GluActivation::kGeluApprox ? v.gelu_mul : v.silu_mul;
    const int threads = ctx->threads();
    // Tokens a chunk at a time: the gathered activations and the experts' outputs stay within
    // ~0.2 GB reused from chunk to chunk (a batch of 8 prompts of 512 tokens in one call was
    // ~0.7 GB of fresh buffers a layer, most of its time page faults). Rows come out the same
    // however they are chunked (the prompt GEMM treats rows alike).
    constexpr long kChunkTokens = 1024;
    std::vector<long> idx, order, pos;
    std::vector<float> xg, g, u, og;
    std::vector<QJob> gu, dn;
    for (long t0 = 0; t0 < tokens; t0 += kChunkTokens) {
      const long nt = std::min(kChunkTokens, tokens - t0), np = nt * top_k, p0 = t0 * top_k;
      idx.resize(np);
      for (long p = 0; p < np; ++p) idx[p] = row_index_any(idx_a, p0 + p, sh[0].experts);
      // Pairs in expert order (stable: a token's rows keep their order within an expert).
      order.resize(np);
      pos.resize(np);
      for (long p = 0; p < np; ++p) order[p] = p;
      std::stable_sort(order.begin(), order.end(), [&](long a, long b) { return idx[a] < idx[b]; });
      for (long i = 0; i < np; ++i) pos[order[i]] = i;
      xg.resize(np * d), g.resize(np * hidden), u.resize(np * hidden), og.resize(np * d);
      for (long i = 0; i < np; ++i) std::copy_n(xf + (t0 + order[i] / top_k) * d, d, xg.data() + i * d);
      gu.clear();
      dn.clear();
      for (long at = 0, end = 0; at < np; at = end) {
        const long e = idx[order[at]];
        for (end = at; end < np && idx[order[end]] == e; ++end) {
        }
        const int m = static_cast<int>(end - at);
        // A prompt's rows take the GEMM whatever their count per expert (which depends on the
        // batch's other tokens), so each token comes out as in any other batch.
        gu.push_back({expert_view(in[3], in[4], in[5], sh[0], e), xg.data() + at * d, m, g.data() + at * hidden, decode, !decode});
        gu.push_back({expert_view(in[6], in[7], in[8], sh[1], e), xg.data() + at * d, m, u.data() + at * hidden, decode, !decode});
        dn.push_back({expert_view(in[9], in[10], in[11], sh[2], e), g.data() + at * hidden, m, og.data() + at * d, decode, !decode});
      }
      qmatmul_many(*ctx, gu.data(), static_cast<int>(gu.size()));
      const long per = std::max(1L, (np + threads - 1) / threads);
      ctx->pool().parallel_for(static_cast<int>((np + per - 1) / per), [&](int t) {
        const long a = t * per, b = std::min(np, a + per);
        glu(g.data() + a * hidden, u.data() + a * hidden, g.data() + a * hidden, (b - a) * hidden);
      });
      qmatmul_many(*ctx, dn.data(), static_cast<int>(dn.size()));
      for (long t = 0; t < nt; ++t) {
        float* row = out.data<float>() + (t0 + t) * d;
        std::fill_n(row, d, 0.f);
        for (int j = 0; j < top_k; ++j) {
          const long p = t * top_k + j;
          const float s = sf[p0 + p];
          const float* y = og.data() + pos[p] * d;
          for (int c = 0; c < d; ++c) row[c] += s * y[c];
        }
      }
    }
  });
}

bool experts_ok(const ExpertsLinear& l) {
  return qmatmul_supported(l.bits, l.group) && kernel_scale_pair(l.w, l.scales, l.biases) && l.w.dtype() == mx::uint32 &&
         l.w.ndim() == 2 && l.w.shape(0) == l.experts * l.n && l.w.flags().row_contiguous &&
         l.scales.flags().row_contiguous && l.biases.flags().row_contiguous && l.experts > 0 &&
         quantized_k(l.w, l.scales, l.biases, l.bits, l.group) == l.k;
}

}  // namespace

std::optional<std::array<mx::array, 3>> experts_layout(const mx::array& w, const mx::array& scales,
                                                       const mx::array& biases, int bits, int group, const FastPath& fast) {
  if (!fast || w.ndim() != 3 || scales.ndim() != 3 || biases.ndim() != 3 || w.dtype() != mx::uint32 ||
      !qmatmul_supported(bits, group)) {
    return std::nullopt;
  }
  const int rows = w.shape(0) * w.shape(1);
  auto w2 = mx::reshape(w, {rows, w.shape(2)});
  auto s2 = mx::reshape(scales, {rows, scales.shape(2)}), b2 = mx::reshape(biases, {rows, biases.shape(2)});
  auto kept = kernel_scales(s2, b2, *fast);
  const mx::array& s = kept ? kept->first : s2;
  const mx::array& b = kept ? kept->second : b2;
  // kRows8 blocks of 8 rows never straddle two experts when each has a multiple of 8 rows.
  if (w.shape(1) % 8 == 0) {
    if (auto r = fast_path_layout(w2, s, b, bits, group, fast)) return r;
  }
  auto wc = mx::contiguous(w2), sc = mx::contiguous(s), bc = mx::contiguous(b);
  mx::eval({wc, sc, bc});
  if (!scale_type(sc.dtype()) || sc.dtype() != bc.dtype()) return std::nullopt;
  return std::array<mx::array, 3>{wc, sc, bc};
}

std::optional<mx::array> moe_glu(const mx::array& x, const mx::array& indices, const mx::array& scores,
                                 const ExpertsLinear& gate, const ExpertsLinear& up, const ExpertsLinear& down,
                                 const FastPath& fast, GluActivation act) {
  if (!use_fast(fast) || x.dtype() != mx::float32 || x.ndim() < 1 || x.size() == 0 || !index_dtype(indices.dtype()) ||
      scores.dtype() != mx::float32 || indices.ndim() != x.ndim() || scores.shape() != indices.shape() ||
      !experts_ok(gate) || !experts_ok(up) || !experts_ok(down)) {
    return std::nullopt;
  }
  const int d = x.shape(-1);
  for (int a = 0; a + 1 < static_cast<int>(x.ndim()); ++a) {
    if (indices.shape(a) != x.shape(a)) return std::nullopt;
  }
  if (gate.k != d || up.k != d || gate.n != up.n || down.k != gate.n || down.n != d || gate.experts != up.experts ||
      down.experts != gate.experts) {
    return std::nullopt;
  }
  auto shape = [](const ExpertsLinear& l) { return ExpertsShape{l.experts, l.n, l.k, l.bits, l.group}; };
  return mx::array(x.shape(), mx::float32,
                   std::make_shared<MoeGluPrimitive>(mx::default_stream(mx::Device::cpu), fast,
                                                     std::array<ExpertsShape, 3>{shape(gate), shape(up), shape(down)},
                                                     act),
                   {x, indices, scores, gate.w, gate.scales, gate.biases, up.w, up.scales, up.biases, down.w,
                    down.scales, down.biases});
}

}  // namespace mlxcpp::kernels
