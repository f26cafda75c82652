// What a batch of quantized caches shares: mx.quantize's three tensors (packed rows, scales,
// biases) each held as a plane of a batch cache kind (BatchKVCache, BatchRotatingKVCache), the
// three moved in lockstep, so padding, growth, the ring, prepare / finalize, filter and extend are
// that kind's own. Attention reads the rows through QuantizedFetch.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <mlx/array.h>

#include "cache/batch_kv_cache.h"
#include "cache/quantized_kv_cache.h"
#include "core/errors.h"

namespace mlxcpp {

template <class Plane>
class QuantizedPlanes : public BatchCacheBase, public QuantizedFetch {
 public:
  std::pair<QuantizedRows, QuantizedRows> update_and_fetch_quantized(const mlx::core::array& keys,
                                                                     const mlx::core::array& values) override {
    auto qk = quantize_rows(keys, group_size_, bits_), qv = quantize_rows(values, group_size_, bits_);
    auto k0 = planes_[0]->update_and_fetch(qk.w, qv.w);
    auto k1 = planes_[1]->update_and_fetch(qk.scales, qv.scales);
    auto k2 = planes_[2]->update_and_fetch(qk.biases, qv.biases);
    sync();
    return {QuantizedRows{k0.first, k1.first, k2.first}, QuantizedRows{k0.second, k1.second, k2.second}};
  }
  // Dense keys/values cannot come out of it: throws Error.
  std::pair<mlx::core::array, mlx::core::array> update_and_fetch(const mlx::core::array&,
                                                                 const mlx::core::array&) override {
    throw Error("[" + name_ + "] holds quantized keys/values: attention must read them with update_and_fetch_quantized");
  }
  int group_size() const override { return group_size_; }
  int bits() const override { return bits_; }

  int offset() const override { return planes_[0]->offset(); }
  AttentionMask make_mask(int n, std::optional<int> window_size = std::nullopt,
                          bool return_array = false) const override {
    return planes_[0]->make_mask(n, window_size, return_array);
  }
  bool is_trimmable() const override { return planes_[0]->is_trimmable(); }
  int trim(int n) override {
    int got = 0;
    for (auto& p : planes_) got = p->trim(n);
    sync();
    return got;
  }
  int size() const override { return planes_[0]->size(); }
  bool empty() const override { return planes_[0]->empty(); }
  int64_t nbytes() const override {
    int64_t n = 0;
    for (const auto& p : planes_) n += p->nbytes();
    return n;
  }
  std::vector<mlx::core::array> state() const override { return gather([](const Plane& p) { return p.state(); }); }
  std::vector<mlx::core::array> state_to_eval() const override {
    return gather([](const Plane& p) { return p.state_to_eval(); });
  }

  void prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
               const std::vector<int>& right_padding) override {
    for (auto& p : planes_) p->prepare(left_padding, lengths, right_padding);
    sync();
  }
  void finalize() override {
    for (auto& p : planes_) p->finalize();
    sync();
  }
  void filter(const std::vector<int>& keep) override {
    for (auto& p : planes_) p->filter(keep);
    sync();
  }
  // Appends other's rows: the same kind, quantized the same way (Error otherwise).
  void extend(BatchCacheBase& other_base) override {
    auto* other = dynamic_cast<QuantizedPlanes*>(&other_base);
    if (other == nullptr || typeid(*other) != typeid(*this) || other->group_size_ != group_size_ ||
        other->bits_ != bits_) {
      throw Error("[" + name_ + "::extend] the other cache is not quantized the same way");
    }
    for (int c = 0; c < 3; ++c) planes_[c]->extend(*other->planes_[c]);
    sync();
  }

 protected:
  using Planes = std::array<std::unique_ptr<Plane>, 3>;  // w, scales, biases
  QuantizedPlanes(Planes planes, int group_size, int bits, std::string name)
      : BatchCacheBase(planes[0]->left_padding()),
        planes_(std::move(planes)),
        group_size_(group_size),
        bits_(bits),
        name_(std::move(name)) {
    sync();
  }
  Planes cloned_planes() const {
    Planes out;
    for (int c = 0; c < 3; ++c) out[c].reset(static_cast<Plane*>(planes_[c]->clone().release()));
    return out;
  }
  void sync() {  // the base's padding and offsets from the planes'
    left_padding_ = planes_[0]->left_padding();
    offsets_ = planes_[0]->offsets();
  }

  Planes planes_;
  int group_size_, bits_;

 private:
  template <class F>
  std::vector<mlx::core::array> gather(F f) const {
    std::vector<mlx::core::array> out;
    for (const auto& p : planes_) {
      for (auto& a : f(*p)) out.push_back(std::move(a));
    }
    return out;
  }
  std::string name_;
};

}  // namespace mlxcpp
