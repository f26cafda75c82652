// Sampled token ids read on the host without queuing anything: an op made to read them (an
// astype, a reshape) would be queued behind the step the caller has just queued, and waiting for
// it would wait for that step too — the host would then build the next step while the CPU stream
// idles (mlx-lm's pipelining lost).
#pragma once

#include <vector>

#include <mlx/array.h>

namespace mlxcpp {

// `t` (an earlier step's tokens, computed or queued) waited for and read as it is.
std::vector<int> host_ids(const mlx::core::array& t);

}  // namespace mlxcpp
