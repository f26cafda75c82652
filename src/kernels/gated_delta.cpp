#include "kernels/gated_delta.h"

#include <algorithm>
#include <vector>

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>

#include "core/errors.h"
#include "kernels/array_access.h"

namespace mx = mlx::core;

namespace mlxcpp::kernels {

namespace {

// inputs: q, k, v, g, beta, state[, mask]; outputs: y, new state.
class GatedDeltaPrimitive : public mx::Primitive {
 public:
  GatedDeltaPrimitive(mx::Stream s, FastPath ctx) : Primitive(s), ctx_(std::move(ctx)) {}
  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw Error("[MlxcppGatedDelta] CPU-only primitive built for a GPU stream");
  }
  const char* name() const override { return "MlxcppGatedDelta"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    const auto* o = dynamic_cast<const GatedDeltaPrimitive*>(&other);
    return o && o->ctx_ == ctx_;
  }
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& in) override {
    return {{in[0].shape(0), in[0].shape(1), in[2].shape(2), in[2].shape(3)}, in[5].shape()};
  }

 private:
  FastPath ctx_;
};

// One (row, value head): T tokens through the [Dv, Dk] state s (updated in place).
void run_head(const float* q, const float* k, const float* v, const float* g, const float* beta, const bool* mask,
              float* s, float* y, int T, long qk_step, long v_step, long gb_step, int Dk, int Dv) {
  for (int t = 0; t < T; ++t) {
    const float* qt = q + t * qk_step;
    const float* kt = k + t * qk_step;
    const float* vt = v + t * v_step;
    const float gt = g[t * gb_step], bt = beta[t * gb_step];
    const bool keep = mask == nullptr || mask[t];
    float* yt = y + t * v_step;
    for (int i = 0; i < Dv; ++i) {
      float* row = s + static_cast<long>(i) * Dk;
      float sk = 0.f;
      for (int j = 0; j < Dk; ++j) sk += row[j] * kt[j];
      const float delta = (vt[i] - gt * sk) * bt;
      float out = 0.f;
      if (keep) {
        for (int j = 0; j < Dk; ++j) {
          row[j] = gt * row[j] + delta * kt[j];
          out += row[j] * qt[j];
        }
      } else {  // the output of a padding token is never read; the state skips it
        for (int j = 0; j < Dk; ++j) out += (gt * row[j] + delta * kt[j]) * qt[j];
      }
      yt[i] = out;
    }
  }
}

void GatedDeltaPrimitive::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  for (auto& o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (const auto& in : inputs) enc.set_input_array(in);
  for (auto& o : outputs) enc.set_output_array(o);
  std::vector<mx::array> in, out;
  for (const auto& a : inputs) in.push_back(mx::array::unsafe_weak_copy(a));
  for (const auto& a : outputs) out.push_back(mx::array::unsafe_weak_copy(a));
  enc.dispatch([in = std::move(in), out = std::move(out), ctx = ctx_]() mutable {
    KernelContext::Timer timer(*ctx);
    const int B = in[0].shape(0), T = in[0].shape(1), Hk = in[0].shape(2), Dk = in[0].shape(3);
    const int Hv = in[2].shape(2), Dv = in[2].shape(3), rep = Hv / Hk;
    std::vector<float> qs, ks, vs, gs, bs, ss;
    const float* q = contiguous_f32(in[0], qs);
    const float* k = contiguous_f32(in[1], ks);
    const float* v = contiguous_f32(in[2], vs);
    const float* g = contiguous_f32(in[3], gs);
    const float* beta = contiguous_f32(in[4], bs);
    const float* s0 = contiguous_f32(in[5], ss);
    std::vector<uint8_t> mask_scratch;
    const bool* mask = nullptr;
    if (in.size() > 6) {
      const auto& m = in[6];
      mask_scratch.resize(static_cast<size_t>(B) * T);
      // Read through strides (a broadcast or sliced mask is fine).
      const auto& st = m.strides();
      const bool* src = m.data<bool>();
      for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) mask_scratch[static_cast<size_t>(b) * T + t] = src[b * st[0] + t * st[1]];
      }
      mask = reinterpret_cast<const bool*>(mask_scratch.data());
    }
    float* y = out[0].data<float>();
    float* s = out[1].data<float>();
    const long state_head = static_cast<long>(Dv) * Dk;
    std::copy_n(s0, static_cast<long>(B) * Hv * state_head, s);
    ctx->pool().parallel_for(B * Hv, [&](int task) {
      const int b = task / Hv, h = task % Hv, hk = h / rep;
      const long qk0 = (static_cast<long>(b) * T * Hk + hk) * Dk;
      const long v0 = (static_cast<long>(b) * T * Hv + h) * Dv;
      const long gb0 = static_cast<long>(b) * T * Hv + h;
      run_head(q + qk0, k + qk0, v + v0, g + gb0, beta + gb0, mask ? mask + static_cast<long>(b) * T : nullptr,
               s + (static_cast<long>(b) * Hv + h) * state_head, y + v0, T, static_cast<long>(Hk) * Dk,
               static_cast<long>(Hv) * Dv, Hv, Dk, Dv);
    });
  });
}

}  // namespace

std::optional<std::pair<mx::array, mx::array>> gated_delta(const mx::array& q, const mx::array& k, const mx::array& v,
                                                           const mx::array& g, const mx::array& beta,
                                                           const mx::array& state,
                                                           const std::optional<mx::array>& mask, const FastPath& fast) {
  if (!use_fast(fast)) return std::nullopt;
  for (const auto* a : {&q, &k, &v, &g, &beta, &state}) {
    if (a->dtype() != mx::float32) return std::nullopt;
  }
  if (q.ndim() != 4 || k.shape() != q.shape() || v.ndim() != 4 || state.ndim() != 4) return std::nullopt;
  const int B = q.shape(0), T = q.shape(1), Hk = q.shape(2), Dk = q.shape(3), Hv = v.shape(2), Dv = v.shape(3);
  if (v.shape(0) != B || v.shape(1) != T || Hk <= 0 || Hv % Hk != 0) return std::nullopt;
  if (g.shape() != mx::Shape{B, T, Hv} || beta.shape() != g.shape()) return std::nullopt;
  if (state.shape() != mx::Shape{B, Hv, Dv, Dk}) return std::nullopt;
  std::vector<mx::array> inputs{q, k, v, g, beta, state};
  if (mask) {
    if (mask->dtype() != mx::bool_ || mask->shape() != mx::Shape{B, T}) return std::nullopt;
    inputs.push_back(*mask);
  }
  auto outs = mx::array::make_arrays({{B, T, Hv, Dv}, state.shape()}, {mx::float32, mx::float32},
                                     std::make_shared<GatedDeltaPrimitive>(mx::default_stream(mx::Device::cpu), fast),
                                     std::move(inputs));
  return std::pair{outs[0], outs[1]};
}

}  // namespace mlxcpp::kernels
