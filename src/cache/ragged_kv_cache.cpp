#include "cache/ragged_kv_cache.h"

#include <algorithm>

#include <fmt/format.h>
#include <mlx/allocator.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "core/errors.h"

namespace mx = mlx::core;

namespace mlxcpp {

namespace {


template <class T>
std::vector<T> pick(const std::vector<T>& v, const std::vector<int>& idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (int i : idx) out.push_back(v[i]);
  return out;
}

}  // namespace

RaggedKVCache::RaggedKVCache(int rows, bool f16) : BatchCacheBase(std::vector<int>(rows, 0)), f16_(f16) {
  for (int i = 0; i < rows; ++i) rows_.push_back(std::make_shared<kernels::KVRowBuffer>());
}

std::pair<mx::array, mx::array> RaggedKVCache::update_and_fetch(const mx::array&, const mx::array&) {
  throw Error("[RaggedKVCache::update_and_fetch] a ragged batch is written by the fused CPU blocks only");
}

AttentionMask RaggedKVCache::make_mask(int, std::optional<int>, bool) const {
  throw Error("[RaggedKVCache::make_mask] a ragged batch is attended by the fused CPU blocks only");
}

int RaggedKVCache::offset() const {
  return offsets_.empty() ? 0 : *std::max_element(offsets_.begin(), offsets_.end());
}

int RaggedKVCache::trim(int n) {
  if (n < 0) throw Error(fmt::format("[RaggedKVCache::trim] n must be >= 0, got {}", n));
  n = std::min(n, offset());
  for (int& o : offsets_) o = std::max(0, o - n);
  return n;
}

int64_t RaggedKVCache::nbytes() const {
  int64_t total = 0;
  for (const auto& r : rows_) total += r->nbytes();
  return total;
}

void RaggedKVCache::wait() const {
  if (!pending_.empty()) mx::eval(pending_);
}

std::unique_ptr<KVCacheBase> RaggedKVCache::clone() const {
  wait();
  auto c = std::make_unique<RaggedKVCache>(0, f16_);
  for (int b = 0; b < batch_size(); ++b) c->rows_.push_back(rows_[b]->prefix(offsets_[b]));
  c->offsets_ = offsets_;
  c->left_padding_ = left_padding_;
  c->right_padding_ = right_padding_;
  return c;
}

void RaggedKVCache::prepare(const std::vector<int>& left_padding, const std::vector<int>& lengths,
                            const std::vector<int>& right_padding) {
  if (std::any_of(left_padding.begin(), left_padding.end(), [](int p) { return p != 0; })) {
    throw Error("[RaggedKVCache::prepare] a ragged batch takes no left padding");
  }
  if (!lengths.empty() && static_cast<int>(lengths.size()) != batch_size()) {
    throw Error(fmt::format("[RaggedKVCache::prepare] {} lengths for a batch of {}", lengths.size(), batch_size()));
  }
  if (right_padding.empty()) return;
  if (static_cast<int>(right_padding.size()) != batch_size() ||
      std::any_of(right_padding.begin(), right_padding.end(), [](int p) { return p < 0; })) {
    throw Error(fmt::format("[RaggedKVCache::prepare] right padding for {} rows in a batch of {}", right_padding.size(),
                            batch_size()));
  }
  right_padding_ = right_padding;
}

void RaggedKVCache::finalize() {
  // A row's right padding was written after its tokens: dropping it is forgetting those rows.
  for (size_t b = 0; b < right_padding_.size(); ++b) offsets_[b] = std::max(0, offsets_[b] - right_padding_[b]);
  right_padding_.clear();
}

void RaggedKVCache::filter(const std::vector<int>& keep) {
  for (int b : keep) check_row("RaggedKVCache::filter", b);
  rows_ = pick(rows_, keep);
  offsets_ = pick(offsets_, keep);
  left_padding_ = pick(left_padding_, keep);
  if (!right_padding_.empty()) right_padding_ = pick(right_padding_, keep);
}

void RaggedKVCache::extend(BatchCacheBase& other_base) {
  auto* other = dynamic_cast<RaggedKVCache*>(&other_base);
  if (other == nullptr || other->f16_ != f16_) {
    throw Error("[RaggedKVCache::extend] only a ragged batch of the same dtype can join a ragged batch");
  }
  if (!right_padding_.empty() || !other->right_padding_.empty()) {
    throw Error("[RaggedKVCache::extend] a batch awaits finalize()");
  }
  for (size_t b = 0; b < other->rows_.size(); ++b) {
    rows_.push_back(std::move(other->rows_[b]));
    offsets_.push_back(other->offsets_[b]);
    left_padding_.push_back(0);
  }
  for (auto& p : other->pending_) pending_.push_back(std::move(p));
  other->rows_.clear();
  other->offsets_.clear();
  other->left_padding_.clear();
  other->pending_.clear();
}

std::unique_ptr<KVCacheBase> RaggedKVCache::extract(int row) const {
  check_row("RaggedKVCache::extract", row);
  wait();
  auto out = std::make_unique<KVCache>();
  const auto& r = *rows_[row];
  const int n = offsets_[row];
  if (n == 0 || !r.laid_out()) return out;
  const mx::Dtype dt = r.f16() ? mx::float16 : mx::float32;
  const mx::Shape shape{1, r.kv_heads(), n, r.head_dim()};
  const size_t bytes = static_cast<size_t>(r.kv_heads()) * n * r.head_dim() * mx::size_of(dt);
  mx::array k(mx::allocator::malloc(bytes), shape, dt), v(mx::allocator::malloc(bytes), shape, dt);
  r.copy_out(n, k.data<void>(), v.data<void>());
  out->set_state(std::move(k), std::move(v), n);
  return out;
}

std::unique_ptr<BatchCacheBase> RaggedKVCache::split_off(const std::vector<int>& rows) const {
  for (int b : rows) check_row("RaggedKVCache::split_off", b);
  auto c = std::make_unique<RaggedKVCache>(0, f16_);
  c->rows_ = pick(rows_, rows);
  c->offsets_ = pick(offsets_, rows);
  c->left_padding_ = pick(left_padding_, rows);
  if (!right_padding_.empty()) c->right_padding_ = pick(right_padding_, rows);
  c->pending_ = pending_;
  return c;
}

std::unique_ptr<RaggedKVCache> RaggedKVCache::merge(const std::vector<const KVCache*>& caches, bool f16) {
  auto c = std::make_unique<RaggedKVCache>(0, f16);
  const mx::Dtype dt = f16 ? mx::float16 : mx::float32;
  for (const auto* solo : caches) {
    auto row = std::make_shared<kernels::KVRowBuffer>();
    const int n = solo->offset();
    if (!solo->empty() && n > 0) {
      auto [k, v] = solo->keys_and_values();
      if (k.shape(0) != 1 || k.shape(3) != v.shape(3) || k.shape(1) != v.shape(1)) {
        throw Error(fmt::format("[RaggedKVCache::merge] a row's cache must hold one sequence with equal key and value "
                                "sizes (keys [{}, {}, {}, {}])",
                                k.shape(0), k.shape(1), k.shape(2), k.shape(3)));
      }
      k = mx::contiguous(mx::astype(k, dt));
      v = mx::contiguous(mx::astype(v, dt));
      mx::eval(k, v);
      row->reserve(k.shape(1), k.shape(3), f16, n, 0);
      row->copy_in(n, k.data<void>(), v.data<void>());
    }
    c->rows_.push_back(std::move(row));
    c->offsets_.push_back(n);
    c->left_padding_.push_back(0);
  }
  return c;
}

std::shared_ptr<const kernels::RaggedRows> RaggedKVCache::rows_for_update() const {
  // Right-padded prompts write their padding after their tokens: finalize() forgets it.
  return std::make_shared<const kernels::RaggedRows>(kernels::RaggedRows{rows_, offsets_});
}

void RaggedKVCache::commit_update(int n, mx::array writer) {
  for (int& o : offsets_) o += n;
  pending_ = {std::move(writer)};
}

}  // namespace mlxcpp
