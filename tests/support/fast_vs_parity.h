// Fast path against parity mode on real models: teacher-forced logits and their agreement.
#pragma once

#include <map>
#include <set>
#include <string>

#include <mlx/array.h>

#include "models/model.h"

namespace mlxcpp::test {

// Logits [T, V] for ids [T]: a prefill of the first `prefill` ids (in chunks of `chunk` ids; 0: one
// forward), then one cached step each.
mlx::core::array teacher_forced(const Model& m, const mlx::core::array& ids, int prefill, int chunk = 0);

// KL(ref || got) per row of two logit matrices [T, V] (nats), and top-1 agreement.
struct Agreement {
  float mean_kl, max_kl, top1;
};
Agreement agreement(const mlx::core::array& ref, const mlx::core::array& got);

// The primitives of the graph behind `out`, one entry per op (which kernels a call took).
std::multiset<std::string> primitive_names(const mlx::core::array& out);
// The same by name, counting each primitive object once (a multi-output primitive, e.g. a block
// that also returns its caches, is reached through several of its outputs).
std::map<std::string, size_t> distinct_primitives(const mlx::core::array& out);

}  // namespace mlxcpp::test
