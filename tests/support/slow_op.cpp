#include "slow_op.h"

#include <thread>

#include <mlx/ops.h>
#include <mlx/primitives.h>

#include "kernels/cpu_dispatch.h"

namespace mx = mlx::core;

namespace mlxcpp::test {

namespace {

class SlowZero : public mx::UnaryPrimitive {
 public:
  SlowZero(mx::Stream s, std::shared_ptr<std::atomic<bool>> done, std::chrono::milliseconds sleep)
      : UnaryPrimitive(s), done_(std::move(done)), sleep_(sleep) {}
  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override {
    auto& enc = kernels::begin_unary(stream(), inputs, out);
    enc.dispatch([out = mx::array::unsafe_weak_copy(out), done = done_, sleep = sleep_]() mutable {
      std::this_thread::sleep_for(sleep);
      *out.data<float>() = 0.0f;
      done->store(true);
    });
  }
  void eval_gpu(const std::vector<mx::array>&, mx::array&) override { throw std::runtime_error("SlowZero: CPU only"); }
  const char* name() const override { return "TestSlowZero"; }
  bool is_equivalent(const mx::Primitive&) const override { return false; }

 private:
  std::shared_ptr<std::atomic<bool>> done_;
  std::chrono::milliseconds sleep_;
};

}  // namespace

LogitsProcessor SlowOp::processor() const {
  return [armed = armed, done = done, sleep = sleep](const mx::array&, const mx::array& logits) {
    if (!armed->load()) return logits;
    auto zero = mx::array({}, mx::float32, std::make_shared<SlowZero>(mx::default_stream(mx::Device::cpu), done, sleep),
                          {logits});
    return mx::add(logits, mx::astype(zero, logits.dtype()));
  };
}

}  // namespace mlxcpp::test
