#include "nn/gated_delta.h"

#include <cmath>

#include <mlx/compile.h>
#include <mlx/fast.h>
#include <mlx/ops.h>

#include "cache/arrays_cache.h"
#include "core/errors.h"
#include "kernels/gated_delta.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// Python's compiled helpers, traced once per process (mx::compile keys on the function).
std::vector<mx::array> decay_impl(const std::vector<mx::array>& in) {
  // exp(-exp(A_log.astype(f32)) * softplus(a + dt_bias)); nn.softplus (compiled, inlined) is
  // logaddexp(x, 0).
  auto sp = mx::logaddexp(mx::add(in[1], in[2]), mx::array(0, in[1].dtype()));
  return {mx::exp(mx::multiply(mx::negative(mx::exp(mx::astype(in[0], mx::float32))), sp))};
}

std::vector<mx::array> silu_impl(const std::vector<mx::array>& in) {
  return {mx::multiply(in[0], mx::sigmoid(in[0]))};
}

// activations.precise_swiglu(h, gate, x): silu(gate in f32) * x in f32, cast to h's dtype.
std::vector<mx::array> precise_swiglu_impl(const std::vector<mx::array>& in) {
  auto g = mx::astype(in[1], mx::float32);
  g = mx::multiply(g, mx::sigmoid(g));
  return {mx::astype(mx::multiply(g, mx::astype(in[2], mx::float32)), in[0].dtype())};
}

mx::array silu(const mx::array& x) { return mx::compile(silu_impl, /*shapeless=*/true)({x})[0]; }

// t[:, i] of a [B, T, ...] array.
mx::array at_step(const mx::array& t, int i) {
  auto start = mx::Shape(t.ndim(), 0), stop = t.shape();
  start[1] = i;
  stop[1] = i + 1;
  return mx::squeeze(mx::slice(t, start, stop), 1);
}

// gated_delta._gated_delta_step_ops with scalar gating.
std::pair<mx::array, mx::array> step_ops(const mx::array& q, const mx::array& k, const mx::array& v,
                                         const mx::array& g, const mx::array& beta, const mx::array& state,
                                         const std::optional<mx::array>& mask) {
  const auto old_state = state;
  auto s = mx::multiply(state, mx::expand_dims(g, {-1, -2}));
  auto k4 = mx::expand_dims(k, -2);
  auto kv_mem = mx::sum(mx::multiply(s, k4), -1);
  auto delta = mx::multiply(mx::subtract(v, kv_mem), mx::expand_dims(beta, -1));
  s = mx::add(s, mx::multiply(k4, mx::expand_dims(delta, -1)));
  auto y = mx::sum(mx::multiply(s, mx::expand_dims(q, -2)), -1);
  if (mask) s = mx::where(mx::expand_dims(*mask, {1, 2, 3}), s, old_state);
  return {mx::astype(y, q.dtype()), s};
}

// gated_delta.normalize_qk: rms_norm with the l2 eps rescaled, q scaled by Dk^-1, k by Dk^-0.5.
std::pair<mx::array, mx::array> normalize_qk(const mx::array& q, const mx::array& k, int dk) {
  const double inv_scale = std::pow(static_cast<double>(dk), -0.5);
  const double inv2 = inv_scale * inv_scale;
  const float rms_eps = static_cast<float>(1e-6 * inv2);
  auto qn = mx::multiply(mx::array(static_cast<float>(inv2)), mx::fast::rms_norm(q, std::nullopt, rms_eps));
  auto kn = mx::multiply(mx::array(static_cast<float>(inv_scale)), mx::fast::rms_norm(k, std::nullopt, rms_eps));
  return {qn, kn};
}

mx::array last_axis_part(const mx::array& t, int begin, int end) {
  auto start = mx::Shape(t.ndim(), 0), stop = t.shape();
  start.back() = begin;
  stop.back() = end;
  return mx::slice(t, start, stop);
}

}  // namespace

mx::array gated_delta_decay(const mx::array& a_log, const mx::array& a, const mx::array& dt_bias) {
  return mx::compile(decay_impl, /*shapeless=*/true)({a_log, a, dt_bias})[0];
}

std::pair<mx::array, mx::array> gated_delta_ops(mx::array q, mx::array k, const mx::array& v, const mx::array& g,
                                                const mx::array& beta, mx::array state,
                                                const std::optional<mx::array>& mask) {
  const int T = q.shape(1), Hk = q.shape(2), Hv = v.shape(2);
  if (Hv / Hk > 1) {
    q = mx::repeat(q, Hv / Hk, -2);
    k = mx::repeat(k, Hv / Hk, -2);
  }
  std::vector<mx::array> ys;
  ys.reserve(T);
  for (int t = 0; t < T; ++t) {
    auto m = mask ? std::optional<mx::array>(at_step(*mask, t)) : std::nullopt;
    auto [y, s] = step_ops(at_step(q, t), at_step(k, t), at_step(v, t), at_step(g, t), at_step(beta, t), state, m);
    ys.push_back(std::move(y));
    state = std::move(s);
  }
  return {mx::stack(ys, 1), state};
}

GatedDeltaNet GatedDeltaNet::load(const LoadContext& ctx, const std::string& p, const GatedDeltaArgs& a) {
  if (a.k_heads <= 0 || a.v_heads <= 0 || a.v_heads % a.k_heads != 0) {
    throw ConfigError("[GatedDeltaNet] linear_num_value_heads must be a positive multiple of linear_num_key_heads");
  }
  GatedDeltaNet n(a, Linear::load(ctx, p + ".out_proj", a.value_dim(), a.hidden, false));
  if (a.layout == GatedDeltaArgs::Layout::kSplit) {
    n.in_.push_back(Linear::load(ctx, p + ".in_proj_qkv", a.hidden, a.conv_dim(), false));
    n.in_.push_back(Linear::load(ctx, p + ".in_proj_z", a.hidden, a.value_dim(), false));
    n.in_.push_back(Linear::load(ctx, p + ".in_proj_b", a.hidden, a.v_heads, false));
    n.in_.push_back(Linear::load(ctx, p + ".in_proj_a", a.hidden, a.v_heads, false));
  } else {
    n.in_.push_back(Linear::load(ctx, p + ".in_proj_qkvz", a.hidden, a.conv_dim() + a.value_dim(), false));
    n.in_.push_back(Linear::load(ctx, p + ".in_proj_ba", a.hidden, 2 * a.v_heads, false));
  }
  const std::string conv = p + ".conv1d.weight";
  // sanitize(): Hugging Face stores the depthwise kernel as [C, 1, K]; MLX as [C, K, 1].
  if (ctx.weights.has(conv) && a.conv_kernel != 1 && ctx.weights.peek(conv).ndim() == 3 &&
      ctx.weights.peek(conv).shape(2) == a.conv_kernel) {
    n.conv_w_ = mx::moveaxis(ctx.take(conv, mx::Shape{a.conv_dim(), 1, a.conv_kernel}), 2, 1);
  } else {
    n.conv_w_ = ctx.take(conv, mx::Shape{a.conv_dim(), a.conv_kernel, 1});
  }
  n.dt_bias_ = ctx.take(p + ".dt_bias", mx::Shape{a.v_heads});
  n.a_log_ = ctx.take(p + ".A_log", mx::Shape{a.v_heads});
  n.norm_w_ = ctx.take(p + ".norm.weight", mx::Shape{a.v_dim});
  n.fast_ = ctx.fast;
  return n;
}

void GatedDeltaNet::collect(std::vector<mx::array>& out) const {
  for (const auto& l : in_) l.collect(out);
  out_proj_.collect(out);
  for (const auto* w : {&conv_w_, &dt_bias_, &a_log_, &norm_w_}) out.push_back(*w);
}

GatedDeltaNet::Projected GatedDeltaNet::project(const mx::array& x) const {
  const int B = x.shape(0), S = x.shape(1);
  const int nk = a_.k_heads, dk = a_.k_dim, nv = a_.v_heads, dv = a_.v_dim;
  if (a_.layout == GatedDeltaArgs::Layout::kSplit) {
    return {in_[0](x), mx::reshape(in_[1](x), {B, S, nv, dv}), in_[2](x), in_[3](x)};
  }
  // qwen3_next fix_query_key_value_ordering: per key head [q | k | v... | z...] and [b... | a...].
  auto qkvz = mx::reshape(in_[0](x), {B, S, nk, -1});
  auto ba = mx::reshape(in_[1](x), {B, S, nk, -1});
  const int vpk = nv / nk * dv;
  auto parts = mx::split(qkvz, mx::Shape{dk, 2 * dk, 2 * dk + vpk}, -1);
  auto bap = mx::split(ba, mx::Shape{nv / nk}, -1);
  auto qkv = mx::concatenate({mx::reshape(parts[0], {B, S, -1}), mx::reshape(parts[1], {B, S, -1}),
                              mx::reshape(mx::reshape(parts[2], {B, S, -1, dv}), {B, S, -1})},
                             -1);
  return {qkv, mx::reshape(parts[3], {B, S, -1, dv}), mx::reshape(bap[0], {B, S, nv}), mx::reshape(bap[1], {B, S, nv})};
}

mx::array GatedDeltaNet::operator()(const mx::array& x, const std::optional<mx::array>& mask,
                                    KVCacheBase* cache_base) const {
  const int B = x.shape(0), S = x.shape(1);
  RecurrentState* cache = recurrent_state(cache_base);
  if (cache_base && !cache) throw Error("[GatedDeltaNet] a linear-attention layer needs a recurrent (arrays) cache");
  auto [qkv, z, b, a] = project(x);
  const int n_keep = a_.conv_kernel - 1;
  auto conv_state = (cache && cache->slot(0)) ? *cache->slot(0) : mx::zeros({B, n_keep, a_.conv_dim()}, x.dtype());
  if (fast_) {  // everything between the projections in one primitive
    auto state = (cache && cache->slot(1)) ? *cache->slot(1)
                                           : mx::zeros({B, a_.v_heads, a_.v_dim, a_.k_dim}, mx::float32);
    const kernels::GatedDeltaCoreShape sh{a_.k_heads, a_.v_heads, a_.k_dim, a_.v_dim, a_.conv_kernel, a_.eps};
    auto core = kernels::gated_delta_core(qkv, z, b, a, conv_state, state, conv_w_, a_log_, dt_bias_, norm_w_, mask,
                                          cache ? cache->lengths() : std::nullopt, sh, fast_);
    if (core) {
      if (cache) {
        cache->set_slot(0, (*core)[1]);
        cache->set_slot(1, (*core)[2]);
        cache->advance(S);
      }
      return out_proj_((*core)[0]);
    }
  }
  if (mask) qkv = mx::where(mx::expand_dims(*mask, -1), qkv, mx::array(0, qkv.dtype()));
  auto conv_input = mx::concatenate({conv_state, qkv}, 1);
  if (cache) {
    if (const auto& lengths = cache->lengths()) {
      auto ends = mx::clip(*lengths, mx::array(0), mx::array(S));
      auto positions = mx::expand_dims(mx::add(mx::expand_dims(ends, 1), mx::arange(n_keep)), -1);
      cache->set_slot(0, mx::take_along_axis(conv_input, positions, 1));
    } else {
      const int L = conv_input.shape(1);
      cache->set_slot(0, mx::contiguous(mx::slice(conv_input, {0, L - n_keep, 0}, {B, L, a_.conv_dim()})));
    }
  }
  auto conv_out = silu(mx::conv1d(conv_input, conv_w_, 1, 0, 1, a_.conv_dim()));
  const int kd = a_.key_dim();
  auto q = mx::reshape(last_axis_part(conv_out, 0, kd), {B, S, a_.k_heads, a_.k_dim});
  auto k = mx::reshape(last_axis_part(conv_out, kd, 2 * kd), {B, S, a_.k_heads, a_.k_dim});
  auto v = mx::reshape(last_axis_part(conv_out, 2 * kd, a_.conv_dim()), {B, S, a_.v_heads, a_.v_dim});
  std::optional<mx::array> state;
  if (cache && cache->slot(1)) state = *cache->slot(1);
  std::tie(q, k) = normalize_qk(q, k, a_.k_dim);
  // gated_delta_update
  auto beta = mx::sigmoid(b);
  auto g = gated_delta_decay(a_log_, a, dt_bias_);
  if (!state) state = mx::zeros({B, a_.v_heads, a_.v_dim, a_.k_dim}, mx::float32);
  auto out = gated_delta_ops(q, k, v, g, beta, *state, mask);
  if (cache) {
    cache->set_slot(1, out.second);
    cache->advance(S);
  }
  // Qwen3NextRMSNormGated(out, z)
  auto normed = mx::fast::rms_norm(out.first, norm_w_, a_.eps);
  auto y = mx::compile(precise_swiglu_impl, /*shapeless=*/true)({out.first, z, normed})[0];
  return out_proj_(mx::reshape(y, {B, S, -1}));
}

}  // namespace mlxcpp
