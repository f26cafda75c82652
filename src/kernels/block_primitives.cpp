#include "kernels/block_primitives.h"

#include <cstring>

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>

#include "core/errors.h"
#include "kernels/array_access.h"
#include "kernels/cpu_dispatch.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

QLinearView view(const std::vector<mx::array>& in, const LinearSlot& s) {
  QLinearView v;
  // block_ok admitted only row-contiguous scales/biases of one type our kernels read.
  const auto& sc = in[s.first + 1];
  v.q = QMatrixView{in[s.first].data<uint32_t>(), sc.data<void>(), in[s.first + 2].data<void>(), s.n, s.k, s.bits,
                    s.group, *scale_type(sc.dtype())};
  v.bias = s.has_bias ? in[s.first + 3].data<float>() : nullptr;
  return v;
}

std::vector<mx::array> weak_copies(const std::vector<mx::array>& in) {
  std::vector<mx::array> out;
  out.reserve(in.size());
  for (const auto& a : in) out.push_back(mx::array::unsafe_weak_copy(a));
  return out;
}

}  // namespace

void MlpBlockPrimitive::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  auto& enc = begin_unary(stream(), inputs, out);
  enc.dispatch([in = weak_copies(inputs), out = mx::array::unsafe_weak_copy(out), ctx = ctx_, eps = eps_,
                slots = slots_, act = act_, post = post_norm_]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> hs;
    const float* h = contiguous_f32(in[0], hs);
    const int d = in[0].shape(-1);
    const int rows = static_cast<int>(in[0].size() / d);
    const int hidden = slots[0].n;
    const VecOps& v = vec_ops(ctx->isa());
    std::vector<float> xn(static_cast<size_t>(rows) * d), g(static_cast<size_t>(rows) * hidden),
        u(static_cast<size_t>(rows) * hidden);
    rms_norm_rows(v, h, in[1].data<float>(), eps, rows, d, xn.data());
    qlinear_many(*ctx, {{view(in, slots[0]), g.data()}, {view(in, slots[1]), u.data()}}, xn.data(), rows);
    (act == GluActivation::kSilu ? v.silu_mul : v.gelu_mul)(g.data(), u.data(), g.data(), static_cast<long>(rows) * hidden);
    float* o = out.data<float>();
    qlinear(*ctx, view(in, slots[2]), g.data(), rows, o);
    if (post >= 0) rms_norm_rows(v, o, in[post].data<float>(), eps, rows, d, o);
    for (long i = 0, n = static_cast<long>(rows) * d; i < n; ++i) o[i] += h[i];
  });
}

void MlpBlockPrimitive::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw Error("[MlxcppMlpBlock] CPU-only primitive built for a GPU stream");
}

std::vector<mx::Shape> AttentionBlockPrimitive::output_shapes(const std::vector<mx::array>& inputs) {
  return {inputs[0].shape(), inputs[spec_.cache_first].shape(), inputs[spec_.cache_first + 1].shape()};
}

void AttentionBlockPrimitive::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  outputs[0].set_data(mx::allocator::malloc(outputs[0].nbytes()));
  // The caches: updated in place when the cache object holds them alone, else copied first.
  bool copy_cache[2];
  for (int c = 0; c < 2; ++c) {
    const auto& src = inputs[spec_.cache_first + c];
    copy_cache[c] = !(spec_.exclusive && src.flags().row_contiguous && src.dtype() == mx::float32);
    if (copy_cache[c]) {
      outputs[1 + c].set_data(mx::allocator::malloc(outputs[1 + c].nbytes()));
      ctx_->count_cache_copy();
    } else {
      outputs[1 + c].copy_shared_buffer(src);
    }
  }
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (const auto& in : inputs) enc.set_input_array(in);
  for (auto& o : outputs) enc.set_output_array(o);
  enc.dispatch([in = weak_copies(inputs), out = weak_copies(outputs), ctx = ctx_, s = spec_,
                c0 = copy_cache[0], c1 = copy_cache[1]]() mutable {
    KernelContext::Timer timer(*ctx);
    std::vector<float> scratch;
    float* kc = out[1].data<float>();
    float* vc = out[2].data<float>();
    for (int c = 0; c < 2; ++c) {
      if (!(c == 0 ? c0 : c1)) continue;
      std::vector<float> tmp;
      const float* src = contiguous_f32(in[s.cache_first + c], tmp);
      std::memcpy(c == 0 ? kc : vc, src, out[1 + c].nbytes());
    }
    const float* h = contiguous_f32(in[0], scratch);
    const int rows = s.L;
    const int qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
    const int cap = out[1].shape(2);
    const VecOps& v = vec_ops(ctx->isa());
    std::vector<float> xn(static_cast<size_t>(rows) * s.d), q(static_cast<size_t>(rows) * qd),
        k(static_cast<size_t>(rows) * kvd), val(static_cast<size_t>(rows) * kvd), att(static_cast<size_t>(rows) * qd);
    float* o = out[0].data<float>();
    for (int b = 0; b < s.batch; ++b) {
      const float* hb = h + static_cast<long>(b) * rows * s.d;
      rms_norm_rows(v, hb, in[1].data<float>(), s.eps, rows, s.d, xn.data());
      qlinear_many(*ctx,
                   {{view(in, s.slots[0]), q.data()}, {view(in, s.slots[1]), k.data()}, {view(in, s.slots[2]), val.data()}},
                   xn.data(), rows);
      if (s.q_norm >= 0) {
        rms_norm_rows(v, q.data(), in[s.q_norm].data<float>(), s.eps, rows * s.heads, s.head_dim, q.data());
        rms_norm_rows(v, k.data(), in[s.k_norm].data<float>(), s.eps, rows * s.kv_heads, s.head_dim, k.data());
      }
      if (s.rope) {
        rope_rows(*s.rope, q.data(), rows, s.heads, s.head_dim, s.offset);
        rope_rows(*s.rope, k.data(), rows, s.kv_heads, s.head_dim, s.offset);
      }
      // Cache write: [kv_heads, cap, hd] rows offset..offset+L of this batch entry.
      float* kb = kc + static_cast<long>(b) * s.kv_heads * cap * s.head_dim;
      float* vb = vc + static_cast<long>(b) * s.kv_heads * cap * s.head_dim;
      for (int l = 0; l < rows; ++l)
        for (int hh = 0; hh < s.kv_heads; ++hh) {
          const long dst = (static_cast<long>(hh) * cap + s.offset + l) * s.head_dim;
          const long srco = (static_cast<long>(l) * s.kv_heads + hh) * s.head_dim;
          std::memcpy(kb + dst, k.data() + srco, sizeof(float) * s.head_dim);
          std::memcpy(vb + dst, val.data() + srco, sizeof(float) * s.head_dim);
        }
      AttentionShape as{s.heads, s.kv_heads, s.head_dim, cap, s.offset, rows, s.scale, s.window};
      attention(*ctx, as, q.data(), kb, vb, att.data());
      float* ob = o + static_cast<long>(b) * rows * s.d;
      qlinear(*ctx, view(in, s.slots[3]), att.data(), rows, ob);
      if (s.post_norm >= 0) rms_norm_rows(v, ob, in[s.post_norm].data<float>(), s.eps, rows, s.d, ob);
      for (long i = 0, n = static_cast<long>(rows) * s.d; i < n; ++i) ob[i] += hb[i];
    }
  });
}

void AttentionBlockPrimitive::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw Error("[MlxcppAttentionBlock] CPU-only primitive built for a GPU stream");
}

}  // namespace mlxcpp::kernels
