// A uniform cluster: identical devices, each with its own link to the others.
//
// The simplest cluster ddlsim describes, used by the synthetic scenarios: every device
// computes at the same sustained rate and owns one full-duplex link of the given
// bandwidth and latency into a non-blocking switch, which all its transfers share.
#pragma once

#include <cstdint>

#include "sim/core/units.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

class JsonObject;

struct UniformCluster {
  std::int64_t devices = 0;
  FlopsPerSecond device_flops{0.0};      // sustained, not peak
  BytesPerSecond link_bandwidth{0.0};    // per direction
  Seconds link_latency{0.0};             // per transfer
  Bytes device_memory{0.0};              // capacity, for the out-of-memory check
};

/// Reads the scenario's "cluster" object (fields: devices, device_tflops,
/// link_gbytes_per_s, link_latency_us, device_memory_gib).
UniformCluster read_uniform_cluster(JsonObject& cluster);

/// The uniform cluster as a graph: accelerators "dev0", "dev1", ... (node ids 0 to
/// devices-1) each joined to one switch "switch" by a link of the given bandwidth (kind
/// "uniform") and half the latency per hop, so that a transfer between two devices
/// crosses two hops and pays one link latency.
Cluster uniform_star_cluster(const UniformCluster& c);

}  // namespace ddlsim
