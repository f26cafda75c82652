#include "fast_vs_parity.h"

#include <algorithm>

#include <mlx/mlx.h>
#include <mlx/primitives.h>

namespace mx = mlx::core;

namespace mlxcpp::test {

mx::array teacher_forced(const Model& m, const mx::array& ids, int prefill, int chunk) {
  auto caches = m.make_cache();
  std::vector<mx::array> rows;
  for (int a = 0; a < prefill; a += chunk > 0 ? chunk : prefill) {
    const int b = chunk > 0 ? std::min(prefill, a + chunk) : prefill;
    rows.push_back(mx::squeeze(m(mx::expand_dims(mx::slice(ids, {a}, {b}), 0), &caches), 0));
    mx::eval(rows.back());
  }
  for (int i = prefill, n = static_cast<int>(ids.size()); i < n; ++i) {
    rows.push_back(mx::reshape(m(mx::reshape(mx::slice(ids, {i}, {i + 1}), {1, 1}), &caches), {1, -1}));
    mx::eval(rows.back());
  }
  return mx::concatenate(rows, 0);
}

Agreement agreement(const mx::array& ref, const mx::array& got) {
  auto lp = mx::subtract(ref, mx::logsumexp(ref, -1, true));
  auto lq = mx::subtract(got, mx::logsumexp(got, -1, true));
  auto kl = mx::sum(mx::multiply(mx::exp(lp), mx::subtract(lp, lq)), -1);
  auto top1 = mx::mean(mx::astype(mx::equal(mx::argmax(ref, -1), mx::argmax(got, -1)), mx::float32));
  return {mx::mean(kl).item<float>(), mx::max(kl).item<float>(), top1.item<float>()};
}

namespace {

// Each array of the graph behind `out` that has a primitive, once.
template <class F>
void walk_graph(const mx::array& out, F&& visit) {
  std::vector<mx::array> stack{out};
  std::set<std::uintptr_t> seen;
  while (!stack.empty()) {
    auto a = stack.back();
    stack.pop_back();
    if (!seen.insert(a.id()).second || !a.has_primitive()) continue;
    visit(a);
    for (const auto& in : a.inputs()) stack.push_back(in);
  }
}

}  // namespace

std::multiset<std::string> primitive_names(const mx::array& out) {
  std::multiset<std::string> names;
  walk_graph(out, [&](const mx::array& a) { names.insert(a.primitive().name()); });
  return names;
}

std::map<std::string, size_t> distinct_primitives(const mx::array& out) {
  std::map<std::string, std::set<const void*>> seen;
  walk_graph(out, [&](const mx::array& a) { seen[a.primitive().name()].insert(&a.primitive()); });
  std::map<std::string, size_t> counts;
  for (const auto& [name, prims] : seen) counts[name] = prims.size();
  return counts;
}

}  // namespace mlxcpp::test
