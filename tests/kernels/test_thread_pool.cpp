#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "kernels/thread_pool.h"

using mlxcpp::kernels::ThreadPool;

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  ThreadPool pool(3);
  for (int job = 0; job < 2000; ++job) {
    const int tasks = 1 + job % 37;
    std::vector<std::atomic<int>> hits(tasks);
    pool.parallel_for(tasks, [&](int t) { hits[t].fetch_add(1); });
    for (int t = 0; t < tasks; ++t) ASSERT_EQ(hits[t].load(), 1) << "job " << job << " task " << t;
  }
}

TEST(ThreadPool, CreatedAndDestroyedWithoutJobsOrRightAfterOne) {
  // A worker that starts after the pool is already shutting down must still exit.
  for (int i = 0; i < 200; ++i) {
    ThreadPool idle(2);
  }
  for (int i = 0; i < 200; ++i) {
    ThreadPool pool(2);
    std::atomic<int> n{0};
    pool.parallel_for(4, [&](int) { n.fetch_add(1); });
    ASSERT_EQ(n.load(), 4);
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  int sum = 0;
  pool.parallel_for(10, [&](int t) { sum += t; });
  EXPECT_EQ(sum, 45);
}
