#include "topology/uniform_cluster.hpp"

#include <cmath>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"

namespace ddlsim {

UniformCluster read_uniform_cluster(JsonObject& cluster) {
  UniformCluster c;
  c.devices = cluster.positive_int("devices");
  if (c.devices > 1'000'000) {
    throw InputError(cluster.field_path("devices") + ": at most 1000000 devices, got " + std::to_string(c.devices));
  }
  c.device_flops = FlopsPerSecond(cluster.number("device_tflops", 1e-6, 1e6) * 1e12);
  c.link_bandwidth = BytesPerSecond(cluster.number("link_gbytes_per_s", 1e-6, 1e6) * 1e9);
  c.link_latency = Seconds(cluster.number_or("link_latency_us", 0.0, 1e9, 0.0) * 1e-6);
  c.device_memory = Bytes(std::round(cluster.number("device_memory_gib", 1e-6, 1e9) * kGiB));  // whole bytes
  cluster.finish();
  return c;
}

Cluster uniform_star_cluster(const UniformCluster& u) {
  Cluster c;
  std::vector<NodeId> devices;
  for (std::int64_t d = 0; d < u.devices; ++d) {
    devices.push_back(c.add_node(NodeKind::kAccelerator, "dev" + std::to_string(d)));
  }
  const NodeId hub = c.add_node(NodeKind::kSwitch, "switch");
  for (NodeId d : devices) c.connect(d, hub, u.link_bandwidth, u.link_latency * 0.5, "uniform");
  return c;
}

}  // namespace ddlsim
