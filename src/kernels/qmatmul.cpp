#include "kernels/qmatmul.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernel_context.h"

namespace mlxcpp::kernels {

KernelContext::KernelContext(const KernelOptions& opts)
    : isa_(isa_supported(opts.isa) ? opts.isa : best_isa()),
      int_dot_(opts.int_dot),
      kv_f16_(opts.kv_f16),
      repack_(opts.repack && opts.int_dot && isa_ != Isa::kScalar),
      pool_(std::make_unique<ThreadPool>(opts.threads > 0 ? opts.threads : physical_cores())),
      profile_(opts.profile) {}

bool qmatmul_supported(int bits, int group) {
  return bits >= 2 && bits <= 8 && bits != 7 && (group == 32 || group == 64 || group == 128);
}

namespace {

// A kRows8 matrix: the integer-dot GEMV (<= kI16MaxRows rows of x, kDecodeGemvMaxRows decode
// rows) or GEMM (which widens its tiles from either layout); otherwise (scalar ISA, float
// products) the portable path, which dequantizes its rows.
QKernel pick_rows8(Isa isa, int bits, ScaleType st, int m, bool int_dot, bool decode, bool gemm_rows) {
  QKernel k;
  if (!int_dot || isa == Isa::kScalar) {
    // the portable path below
  } else if (!gemm_rows && m <= (decode ? kDecodeGemvMaxRows : kI16MaxRows)) {
    k = isa == Isa::kAvx512 && has_avx512_vnni() ? qmatmul_kernel_vnni_rows8(bits, st) : qmatmul_kernel_avx2_rows8(bits, st);
  } else {
    k = isa == Isa::kAvx512 && has_avx512_vnni() ? qmatmul_kernel_avx512_i16_gemm(bits, st)
                                                 : qmatmul_kernel_avx2_i16_gemm(bits, st);
  }
  return k.rows ? k : qmatmul_kernel_scalar(bits, st);
}

// gemm_rows: the prompt GEMM whatever m (QJob::gemm_rows).
QKernel pick(Isa isa, int bits, ScaleType st, int m, bool int_dot, QLayout layout = QLayout::kMlx,
             bool decode = false, bool gemm_rows = false) {
  if (layout == QLayout::kRows8) return pick_rows8(isa, bits, st, m, int_dot, decode, gemm_rows);
  QKernel k;
  const bool gemm = gemm_rows || m > kI16MaxRows;
  if (int_dot && isa != Isa::kScalar && !gemm) k = qmatmul_kernel_avx2_i16(bits, st);
  if (int_dot && isa != Isa::kScalar && gemm) {
    k = isa == Isa::kAvx512 && has_avx512_vnni() ? qmatmul_kernel_avx512_i16_gemm(bits, st)
                                                 : qmatmul_kernel_avx2_i16_gemm(bits, st);
  }
  if (k.rows) return k;
  if (isa == Isa::kAvx512) k = qmatmul_kernel_avx512(bits, st);
  if (!k.rows && isa != Isa::kScalar) k = qmatmul_kernel_avx2(bits, st);
  return k.rows ? k : qmatmul_kernel_scalar(bits, st);
}

// De-interleaves each block of `xb` values (even elements first) and sums x per group.
// (The integer-dot kernels' activations come from their QKernel::quantize instead.)
void prepare(const QKernel& kern, const float* x, int m, int k, int group, std::vector<float>& xp,
             std::vector<float>& xs) {
  if (kern.x_block > 0) {
    xp.resize(static_cast<size_t>(m) * k);
    const int xb = kern.x_block, half = xb / 2;
    for (long i = 0, n = static_cast<long>(m) * k; i < n; i += xb)
      for (int j = 0; j < half; ++j) {
        xp[i + j] = x[i + 2 * j];
        xp[i + half + j] = x[i + 2 * j + 1];
      }
  }
  if (kern.xsum) {
    const int groups = k / group;
    xs.resize(static_cast<size_t>(m) * groups);
    for (int r = 0; r < m; ++r)
      for (int g = 0; g < groups; ++g) {
        const float* p = x + static_cast<long>(r) * k + static_cast<long>(g) * group;
        float s = 0.f;
        for (int j = 0; j < group; ++j) s += p[j];
        xs[static_cast<size_t>(r) * groups + g] = s;
      }
  }
}

}  // namespace

bool qmatmul_int16(const KernelContext& ctx, int bits, int m, bool* group_steps, QLayout layout, bool decode) {
  const QKernel k = pick(ctx.isa(), bits, ScaleType::kF32, m, ctx.int_dot(), layout, decode);
  if (group_steps) *group_steps = k.group_steps;
  return k.quantize != nullptr;
}

void qmatmul(const KernelContext& ctx, const float* x, int m, const QMatrixView& q, float* out, bool decode) {
  const QJob job{q, x, m, out, decode};
  qmatmul_many(ctx, &job, 1);
}

void qmatmul_many(const KernelContext& ctx, const QJob* jobs, int count) {
  struct Prepared {
    QKernel kern;
    QInput in;
    std::vector<float> xp, xs, xd;
    std::vector<int16_t> xq;
    int rows_per_task, first_task;
  };
  std::vector<Prepared> prep(count);
  const int threads = ctx.threads();
  long work = 0;
  int tasks = 0;
  for (int j = 0; j < count; ++j) {
    auto& p = prep[j];
    const auto& q = jobs[j].q;
    p.kern = pick(ctx.isa(), q.bits, q.stype, jobs[j].m, ctx.int_dot(), q.layout, jobs[j].decode, jobs[j].gemm_rows);
    // Products of one x (q/k/v, gate/up) share its prepared form.
    int same = -1;
    for (int i = 0; i < j && same < 0; ++i) {
      const auto& o = prep[i];
      if (jobs[i].x == jobs[j].x && jobs[i].m == jobs[j].m && jobs[i].q.k == q.k && jobs[i].q.group == q.group &&
          o.kern.x_block == p.kern.x_block && o.kern.xsum == p.kern.xsum && o.kern.quantize == p.kern.quantize)
        same = i;
    }
    if (same >= 0) {
      p.in = prep[same].in;
    } else if (p.kern.quantize) {
      const int m = jobs[j].m, groups = q.k / q.group;
      p.xs.resize(static_cast<size_t>(m) * groups);
      const int steps = p.kern.group_steps ? groups : 1;
      p.xd.resize(static_cast<size_t>(m) * steps);
      p.xq.resize(static_cast<size_t>(m) * q.k);
      auto quantize = [&](int r) {
        p.kern.quantize(jobs[j].x + static_cast<long>(r) * q.k, q.k, q.group, p.xq.data() + static_cast<long>(r) * q.k,
                        p.xd.data() + static_cast<long>(r) * steps, p.xs.data() + static_cast<long>(r) * groups);
      };
      // A prompt's rows are quantized on the pool (a few hundred rows are a visible share of a
      // prefill GEMM done by one thread).
      if (m > kI16MaxRows && threads > 1) {
        const int per = (m + threads * 4 - 1) / (threads * 4);
        ctx.pool().parallel_for((m + per - 1) / per, [&](int t) {
          for (int r = t * per; r < std::min(m, (t + 1) * per); ++r) quantize(r);
        });
      } else {
        for (int r = 0; r < m; ++r) quantize(r);
      }
      p.in = QInput{jobs[j].x, p.xs.data(), m, p.xq.data(), p.xd.data()};
    } else {
      prepare(p.kern, jobs[j].x, jobs[j].m, q.k, q.group, p.xp, p.xs);
      p.in = QInput{p.kern.x_block > 0 ? p.xp.data() : jobs[j].x, p.kern.xsum ? p.xs.data() : nullptr, jobs[j].m};
    }
    // A few tasks per thread balance uneven finishing; rows stay multiples of 4 (of the
    // kernel's column block where larger: then at least threads * 4 tasks where there are
    // enough blocks, so that 2 threads split e.g. 20 blocks 10 / 10 rather than 12 / 8).
    if (p.kern.n_align > 4) {
      const int a = p.kern.n_align, blocks = (q.n + a - 1) / a;
      p.rows_per_task = std::max(1, blocks / (threads * 4)) * a;
    } else {
      int rows = (q.n + threads * 4 - 1) / (threads * 4);
      p.rows_per_task = std::max(16, (rows + 3) / 4 * 4);
    }
    p.first_task = tasks;
    tasks += (q.n + p.rows_per_task - 1) / p.rows_per_task;
    work += static_cast<long>(jobs[j].m) * q.n * q.k;
  }
  auto run_task = [&](int t) {
    int j = count - 1;
    while (prep[j].first_task > t) --j;
    const auto& p = prep[j];
    const auto& q = jobs[j].q;
    const int n0 = (t - p.first_task) * p.rows_per_task;
    p.kern.rows(p.in, q, n0, std::min(q.n, n0 + p.rows_per_task), jobs[j].out, q.n);
  };
  if (threads == 1 || work < 64 * 1024) {
    for (int t = 0; t < tasks; ++t) run_task(t);
    return;
  }
  ctx.pool().parallel_for(tasks, run_task);
}

}  // namespace mlxcpp::kernels
