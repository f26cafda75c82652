#include "kernels/qmatmul.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernel_context.h"

namespace mlxcpp::kernels {

KernelContext::KernelContext(const KernelOptions& opts)
    : isa_(isa_supported(opts.isa) ? opts.isa : best_isa()),
      int_dot_(opts.int_dot),
      pool_(std::make_unique<ThreadPool>(opts.threads > 0 ? opts.threads : physical_cores())),
      profile_(opts.profile) {}

bool qmatmul_supported(int bits, int group) {
  return bits >= 2 && bits <= 8 && bits != 7 && (group == 32 || group == 64 || group == 128);
}

namespace {

QKernel pick(Isa isa, int bits, ScaleType st, int m, bool int_dot) {
  QKernel k;
  if (int_dot && isa != Isa::kScalar && m <= kI16MaxRows) k = qmatmul_kernel_avx2_i16(bits, st);
  if (k.rows) return k;
  if (isa == Isa::kAvx512) k = qmatmul_kernel_avx512(bits, st);
  if (!k.rows && isa != Isa::kScalar) k = qmatmul_kernel_avx2(bits, st);
  return k.rows ? k : qmatmul_kernel_scalar(bits, st);
}

// int16 levels of each row of x (de-interleaved in blocks of `xb` when xb > 0) and the
// per-row step d: x ~= xq * d with the row's largest |x| at 32767.
void quantize_rows(const float* x, int m, int k, int xb, std::vector<int16_t>& xq, std::vector<float>& xd) {
  xq.resize(static_cast<size_t>(m) * k);
  xd.resize(m);
  for (int r = 0; r < m; ++r) {
    const float* xr = x + static_cast<long>(r) * k;
    float amax = 0.f;
    for (int i = 0; i < k; ++i) amax = std::max(amax, std::fabs(xr[i]));
    const float d = amax > 0.f ? amax / 32767.f : 1.f;
    const float inv = 1.f / d;
    xd[r] = d;
    int16_t* q = xq.data() + static_cast<long>(r) * k;
    // Round half away from zero (inline, unlike lrint); |x * inv| <= 32767 by construction.
    auto level = [&](int i) {
      const float v = xr[i] * inv;
      return static_cast<int16_t>(v + (v >= 0.f ? 0.5f : -0.5f));
    };
    if (xb > 0) {
      const int half = xb / 2;
      for (int i = 0; i < k; i += xb)
        for (int j = 0; j < half; ++j) {
          q[i + j] = level(i + 2 * j);
          q[i + half + j] = level(i + 2 * j + 1);
        }
    } else {
      for (int i = 0; i < k; ++i) q[i] = level(i);
    }
  }
}

// De-interleaves each block of `xb` values (even elements first) and sums x per group.
void prepare(const QKernel& kern, const float* x, int m, int k, int group, std::vector<float>& xp,
             std::vector<float>& xs) {
  if (kern.x_block > 0 && !kern.i16) {
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

void qmatmul(const KernelContext& ctx, const float* x, int m, const QMatrixView& q, float* out) {
  const QJob job{q, x, m, out};
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
    p.kern = pick(ctx.isa(), q.bits, q.stype, jobs[j].m, ctx.int_dot());
    prepare(p.kern, jobs[j].x, jobs[j].m, q.k, q.group, p.xp, p.xs);
    p.in = QInput{p.kern.x_block > 0 && !p.kern.i16 ? p.xp.data() : jobs[j].x, p.kern.xsum ? p.xs.data() : nullptr,
                  jobs[j].m};
    if (p.kern.i16) {
      quantize_rows(jobs[j].x, jobs[j].m, q.k, p.kern.x_block, p.xq, p.xd);
      p.in.xq = p.xq.data();
      p.in.xd = p.xd.data();
    }
    // A few tasks per thread balance uneven finishing; rows stay multiples of 4.
    int rows = (q.n + threads * 4 - 1) / (threads * 4);
    p.rows_per_task = std::max(16, (rows + 3) / 4 * 4);
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
