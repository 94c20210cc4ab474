// A uniform cluster: identical devices, each with its own link to the others.
//
// The simplest cluster ddlsim describes, used by the synthetic scenarios until the
// topology catalog and builders (switches, fat trees, tori) arrive: every device computes
// at the same sustained rate and owns one full-duplex link of the given bandwidth and
// latency, which all its transfers share.
#pragma once

#include <cstdint>

#include "sim/core/units.hpp"

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

}  // namespace ddlsim
