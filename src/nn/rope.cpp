#include "nn/rope.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>
#include <mlx/fast.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {

// A Python float operand: a weakly typed float32 scalar.
mx::array f32(double v) { return mx::array(static_cast<float>(v)); }

mx::array llama3_freqs(const RopeParams& p, const JsonView& s) {
  const double factor = s.req_number("factor");
  const double low_freq_factor = s.number_or("low_freq_factor", 1.0);
  const double high_freq_factor = s.number_or("high_freq_factor", 4.0);
  const double old_context_len = s.number_or("original_max_position_embeddings", 8192);
  const double low_freq_wavelen = old_context_len / low_freq_factor;
  const double high_freq_wavelen = old_context_len / high_freq_factor;

  // freqs = base ** (mx.arange(0, dims, 2) / dims)
  auto freqs = mx::power(f32(p.base), mx::divide(mx::arange(0, p.dims, 2), mx::array(p.dims)));
  auto wavelens = mx::multiply(f32(2 * std::numbers::pi), freqs);
  freqs = mx::where(mx::greater(wavelens, f32(low_freq_wavelen)), mx::multiply(freqs, f32(factor)), freqs);
  auto is_medium = mx::logical_and(mx::greater(wavelens, f32(high_freq_wavelen)),
                                   mx::less(wavelens, f32(low_freq_wavelen)));
  auto smooth = mx::divide(mx::subtract(mx::divide(f32(old_context_len), wavelens), f32(low_freq_factor)),
                           f32(high_freq_factor - low_freq_factor));
  auto denom = mx::add(mx::divide(mx::subtract(f32(1), smooth), f32(factor)), smooth);
  auto smooth_freqs = mx::divide(freqs, denom);
  return mx::where(is_medium, smooth_freqs, freqs);
}

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

mx::array yarn_freqs(const RopeParams& p, const JsonView& s, double* mscale_out) {
  const double factor = s.req_number("factor");
  const double orig = s.number_or("original_max_position_embeddings", 4096);
  const double beta_fast = s.number_or("beta_fast", 32);
  const double beta_slow = s.number_or("beta_slow", 1);
  const double mscale = s.number_or("mscale", 1);
  const double mscale_all_dim = s.number_or("mscale_all_dim", 0);
  const int dims = p.dims;
  auto correction_dim = [&](double rotations) {
    return (dims * std::log(orig / (rotations * 2 * std::numbers::pi))) / (2 * std::log(p.base));
  };
  const int low = std::max(static_cast<int>(std::floor(correction_dim(beta_fast))), 0);
  const int high = std::min(static_cast<int>(std::ceil(correction_dim(beta_slow))), dims - 1);
  *mscale_out = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim);

  auto freq_extra = mx::power(f32(p.base), mx::divide(mx::arange(0, dims, 2, mx::float32), mx::array(dims)));
  auto freq_inter = mx::multiply(f32(factor), freq_extra);
  // yarn_linear_ramp_mask(low, high, dims // 2)
  mx::array ramp = mx::array(0.0f);
  auto pos = mx::arange(dims / 2, mx::float32);
  if (low == high) {
    ramp = mx::divide(mx::subtract(pos, mx::array(low)), f32(high + 0.001 - low));
  } else {
    ramp = mx::divide(mx::subtract(pos, mx::array(low)), mx::array(high - low));
  }
  ramp = mx::clip(ramp, mx::array(0), mx::array(1));
  auto freq_mask = mx::subtract(f32(1.0), ramp);
  return mx::divide(mx::multiply(freq_inter, freq_extra),
                    mx::add(mx::multiply(freq_inter, freq_mask),
                            mx::multiply(freq_extra, mx::subtract(mx::array(1), freq_mask))));
}

// SuScaledRoPE (phi3, longrope): long_factor * base ** (arange(0, dims, 2) / dims), whatever the
// sequence length (mlx-lm never switches to short_factor), and the input scale
// sqrt(1 + log(factor) / log(original)) where max_position_embeddings / original > 1.
mx::array su_freqs(const RopeParams& p, const JsonView& s, double* mscale_out) {
  if (!s.has("long_factor")) s.fail("long_factor", "missing (su/longrope rope_scaling needs it)");
  if (!s.has("short_factor")) s.fail("short_factor", "missing (su/longrope rope_scaling needs it)");
  if (!p.max_position_embeddings) s.fail("type", "su/longrope needs max_position_embeddings");
  const double orig = p.original_max_position_embeddings
                          ? static_cast<double>(*p.original_max_position_embeddings)
                          : s.req_number("original_max_position_embeddings");
  if (orig <= 0) s.fail("original_max_position_embeddings", "must be positive");
  const auto& lf = s.node()["long_factor"];
  mx::array factor = mx::array(0.0f);
  if (lf.is_number()) {
    factor = f32(lf.get<double>());
  } else {
    if (!lf.is_array() || lf.size() != static_cast<size_t>(p.dims / 2)) {
      s.fail("long_factor", fmt::format("expected a number or a list of {} numbers (rotary dims / 2)", p.dims / 2));
    }
    std::vector<float> v;
    for (const auto& e : lf) {
      if (!e.is_number()) s.fail("long_factor", "expected numbers");
      v.push_back(static_cast<float>(e.get<double>()));
    }
    factor = mx::array(v.data(), {static_cast<int>(v.size())}, mx::float32);
  }
  const double f = static_cast<double>(*p.max_position_embeddings) / orig;
  *mscale_out = f <= 1.0 ? 1.0 : std::sqrt(1 + std::log(f) / std::log(orig));
  auto freqs = mx::power(f32(p.base), mx::divide(mx::arange(0, p.dims, 2, mx::float32), mx::array(p.dims)));
  return mx::multiply(factor, freqs);
}

// ProportionalRoPE (Gemma 4's full-attention layers): factor * base ** (arange(0, rotated, 2) /
// dims) over the first rotated = int(dims * partial_rotary_factor) dims, inf (no rotation) after.
mx::array proportional_freqs(const RopeParams& p, const JsonView& s) {
  const int rotated = static_cast<int>(p.dims * s.number_or("partial_rotary_factor", 1.0));
  if (rotated > p.dims || rotated < 0) {
    s.fail("partial_rotary_factor", fmt::format("{} rotates {} of {} dims", s.number_or("partial_rotary_factor", 1.0),
                                                rotated, p.dims));
  }
  auto exponents = mx::divide(mx::arange(0, rotated, 2, mx::float32), mx::array(p.dims));
  auto freqs = mx::multiply(f32(s.number_or("factor", 1.0)), mx::power(f32(p.base), exponents));
  return mx::concatenate({freqs, mx::full({(p.dims - rotated) / 2}, std::numeric_limits<float>::infinity())});
}

}  // namespace

bool Rope::su() const { return type_ == "su" || type_ == "longrope"; }

Rope Rope::create(const RopeParams& p, const std::optional<JsonView>& scaling) {
  Rope r;
  r.p_ = p;
  if (scaling) {
    r.type_ = scaling->has("type") ? scaling->req_string("type") : scaling->string_or("rope_type", "default");
  }
  if (r.type_ == "default") {
    r.spec_ = r.build_spec();
    return r;
  }
  if (r.type_ == "linear") {
    r.scale_ = static_cast<float>(1.0 / scaling->req_number("factor"));
  } else if (r.type_ == "dynamic") {
    if (!p.max_position_embeddings) scaling->fail("type", "'dynamic' needs max_position_embeddings");
    r.dynamic_factor_ = scaling->req_number("factor");
  } else if (r.type_ == "llama3") {
    r.freqs_ = llama3_freqs(p, *scaling);
  } else if (r.type_ == "yarn") {
    r.freqs_ = yarn_freqs(p, *scaling, &r.mscale_);
  } else if (r.type_ == "proportional") {
    r.freqs_ = proportional_freqs(p, *scaling);
  } else if (r.su()) {
    r.p_.traditional = false;  // SuScaledRoPE always rotates halves
    r.freqs_ = su_freqs(p, *scaling, &r.mscale_);
  } else {
    scaling->fail(scaling->has("type") ? "type" : "rope_type",
                  fmt::format("'{}' is not supported (known: default, linear, dynamic, llama3, yarn, longrope, su, "
                              "proportional)",
                              r.type_));
  }
  if (r.freqs_) mx::eval(*r.freqs_);
  r.spec_ = r.build_spec();
  return r;
}

mx::array Rope::scaled_input(const mx::array& x) const {
  if (mscale_ == 1.0) return x;
  // x.at[..., :dims].multiply(mscale)
  if (p_.dims == x.shape(-1)) return mx::multiply(x, f32(mscale_));
  mx::Shape start(x.ndim(), 0), stop = x.shape();
  stop.back() = p_.dims;
  return mx::slice_update(x, mx::multiply(mx::slice(x, start, stop), f32(mscale_)), start, stop);
}

template <class Offset>
mx::array Rope::rotate(const mx::array& x, const Offset& offset) const {
  namespace fast = mx::fast;
  if (type_ == "llama3" || type_ == "proportional") {
    return fast::rope(x, p_.dims, p_.traditional, std::nullopt, 1.0f, offset, freqs_);
  }
  if (type_ == "yarn" || su()) {
    return fast::rope(scaled_input(x), p_.dims, p_.traditional, std::nullopt, 1.0f, offset, freqs_);
  }
  return fast::rope(x, p_.dims, p_.traditional, static_cast<float>(p_.base), scale_, offset);
}

mx::array Rope::operator()(const mx::array& x_in, int offset) const {
  namespace fast = mx::fast;
  if (type_ == "dynamic") {
    const double seq_len = std::max<double>(x_in.shape(-2) + offset, static_cast<double>(*p_.max_position_embeddings));
    const double f = dynamic_factor_;
    const double base = p_.base * std::pow((f * seq_len / *p_.max_position_embeddings) - (f - 1),
                                           static_cast<double>(p_.dims) / (p_.dims - 2));
    return fast::rope(x_in, p_.dims, p_.traditional, static_cast<float>(base), 1.0f, offset);
  }
  return rotate(x_in, offset);
}

mx::array Rope::operator()(const mx::array& x_in, const mx::array& offsets) const {
  if (type_ == "dynamic") {
    // The base depends on each row's length: mlx-lm cannot batch it; rope the rows one by one.
    auto offs = mx::astype(offsets, mx::int32);
    mx::eval(offs);
    std::vector<mx::array> rows;
    for (int b = 0; b < x_in.shape(0); ++b) {
      mx::Shape lo(x_in.ndim(), 0), hi = x_in.shape();
      lo[0] = b;
      hi[0] = b + 1;
      rows.push_back((*this)(mx::slice(x_in, lo, hi), offs.data<int32_t>()[b]));
    }
    return mx::concatenate(rows, 0);
  }
  return rotate(x_in, offsets);
}

mx::array Rope::apply(const mx::array& x, const KVCacheBase* cache) const {
  if (cache == nullptr) return (*this)(x, 0);
  if (auto offs = cache->row_offsets()) return (*this)(x, *offs);
  return (*this)(x, cache->offset());
}

std::shared_ptr<const kernels::RopeSpec> Rope::build_spec() const {
  if (type_ == "dynamic") return nullptr;
  auto spec = std::make_shared<kernels::RopeSpec>();
  spec->dims = p_.dims;
  spec->traditional = p_.traditional;
  spec->scale = scale_;
  spec->mscale = static_cast<float>(mscale_);
  spec->inv_freq.resize(p_.dims / 2);
  if (freqs_) {
    auto f = mx::astype(*freqs_, mx::float32);
    mx::eval(f);
    for (int i = 0; i < p_.dims / 2; ++i) spec->inv_freq[i] = 1.0f / f.data<float>()[i];
  } else {
    for (int i = 0; i < p_.dims / 2; ++i)
      spec->inv_freq[i] = static_cast<float>(std::pow(p_.base, -2.0 * i / p_.dims));
  }
  return spec;
}

}  // namespace mlxcpp
