// A logits processor whose work runs late on MLX's CPU stream: it adds zero through an op that
// sleeps before writing its output and then raises a flag. For tests of what an owner does with
// work it queued (wait for it, or not) — the op is still queued when the call that built it returns.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include <mlx/array.h>

#include "generate/logits_processors.h"

namespace mlxcpp::test {

struct SlowOp {
  std::shared_ptr<std::atomic<bool>> armed = std::make_shared<std::atomic<bool>>(false);  // add the op from now
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);   // an op finished
  std::chrono::milliseconds sleep{150};
  // logits + 0 through the op once armed; logits as they are before.
  LogitsProcessor processor() const;
};

}  // namespace mlxcpp::test
