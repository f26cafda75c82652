// A streaming-read memory bandwidth probe: the ceiling a memory-bound decode step can reach
// (weights are read once per step), so `mlxcpp bench` can say how close decode gets to it.
#pragma once

#include <cstddef>
#include <vector>

namespace mlxcpp::cli {

struct BandwidthResult {
  size_t bytes = 0;            // buffer size read per pass
  int threads = 0;
  std::vector<double> gbps;    // one per timed pass (1e9 bytes / s)
  double median_gbps = 0;
  double max_gbps = 0;
};

// Fills a `bytes` buffer (each thread first-touches its slice), then times `passes` reads of
// the whole buffer by `threads` threads summing their slices with the widest vector loads.
BandwidthResult measure_read_bandwidth(size_t bytes, int threads, int passes);

}  // namespace mlxcpp::cli
