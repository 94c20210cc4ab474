#include "strategies/data_parallel.hpp"

#include <algorithm>

#include "sim/compute_stream.hpp"
#include "sim/shared_channel.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"

namespace ddlsim {

DataParallelPlan read_data_parallel_plan(JsonObject& strategy, std::int64_t layers) {
  DataParallelPlan p;
  p.name = strategy.string("name");
  if (p.name.empty()) throw InputError(strategy.field_path("name") + ": expected a non-empty string, got \"\"");
  p.overlap = strategy.boolean_or("overlap", true);
  p.bucket_layers = strategy.positive_int_or("bucket_layers", 1);
  if (p.bucket_layers > layers) {
    throw InputError(strategy.field_path("bucket_layers") + ": expected at most workload.layers (" +
                     std::to_string(layers) + "), got " + std::to_string(p.bucket_layers));
  }
  strategy.finish();
  return p;
}

std::uint64_t data_parallel_task_count(const SyntheticModel& model, const UniformCluster& cluster,
                                       const DataParallelPlan& plan) {
  const auto p = static_cast<std::uint64_t>(cluster.devices);
  const auto layers = static_cast<std::uint64_t>(model.layers);
  const std::uint64_t buckets = (layers + plan.bucket_layers - 1) / plan.bucket_layers;
  return p * (5 * layers + (p > 1 ? 2 : 1) * buckets) + buckets + 1;
}

LoweredStep lower_data_parallel(const SyntheticModel& model, const UniformCluster& cluster,
                                const DataParallelPlan& plan) {
  LoweredStep out;
  const auto p = static_cast<std::uint32_t>(cluster.devices);
  const auto layers = static_cast<std::uint32_t>(model.layers);
  const auto bucket = static_cast<std::uint32_t>(plan.bucket_layers);
  const std::uint32_t buckets = (layers + bucket - 1) / bucket;
  const double ring_factor = 2.0 * (p - 1) / p;
  const Seconds ring_latency = cluster.link_latency * (2.0 * (p - 1));
  const Seconds fwd_time = model.forward_flops / cluster.device_flops;
  const Seconds bwd_time = fwd_time * model.backward_to_forward;
  const Flops bwd_flops = model.forward_flops * model.backward_to_forward;

  for (std::uint32_t d = 0; d < p; ++d) {
    const std::string dev = "dev" + std::to_string(d);
    out.compute.emplace_back(static_cast<std::uint32_t>(out.resources.size()));
    out.resources.push_back(std::make_unique<ComputeStream>(dev + ".compute"));
    out.links.emplace_back(static_cast<std::uint32_t>(out.resources.size()));
    out.resources.push_back(std::make_unique<SharedChannel>(dev + ".link", cluster.link_bandwidth, ring_latency));
    out.pool_names.push_back(dev + ".hbm");
  }

  TaskGraph& g = out.graph;
  g.reserve(static_cast<std::size_t>(p) * (5 * layers + 2 * buckets) + buckets + 1);
  // Bucket b holds layers [first, last] counted from the output: b = 0 is the last layers.
  auto bucket_low_layer = [&](std::uint32_t b) {
    return layers > (b + 1) * bucket ? layers - (b + 1) * bucket : 0u;
  };
  std::vector<TaskId> allreduce_done(buckets);
  for (std::uint32_t b = 0; b < buckets; ++b) {
    allreduce_done[b] = g.add(Marker{}, "allreduce B" + std::to_string(b) + " done").id();
  }
  const TaskId step_end = g.add(Marker{}, "step end").id();

  for (std::uint32_t d = 0; d < p; ++d) {
    const PoolId pool(d);
    TaskId prev;
    for (std::uint32_t l = 0; l < layers; ++l) {
      const std::string L = std::to_string(l);
      TaskRef alloc = g.add(Allocate{pool, model.activation_bytes}, "activations L" + L);
      TaskRef fwd = g.add(Compute{out.compute[d], fwd_time, model.forward_flops}, "fwd L" + L);
      if (prev.valid()) g.add_edge(prev, alloc.id());
      alloc.precede(fwd);
      prev = fwd.id();
    }
    // Backward, bucket by bucket; remember where each bucket's gradients are complete.
    std::vector<TaskId> bucket_ready(buckets);
    std::vector<Bytes> bucket_bytes(buckets, Bytes(0.0));
    for (std::uint32_t b = 0; b < buckets; ++b) {
      const std::uint32_t low = bucket_low_layer(b);
      const std::uint32_t high = layers - b * bucket - 1;
      for (std::uint32_t l = high + 1; l-- > low;) {
        const std::string L = std::to_string(l);
        TaskRef grad = g.add(Allocate{pool, model.gradient_bytes}, "gradients L" + L);
        TaskRef bwd = g.add(Compute{out.compute[d], bwd_time, bwd_flops}, "bwd L" + L);
        TaskRef free_act = g.add(Free{pool, model.activation_bytes}, "free activations L" + L);
        g.add_edge(prev, grad.id());
        grad.precede(bwd);
        bwd.precede(free_act);
        prev = bwd.id();
        bucket_bytes[b] += model.gradient_bytes;
      }
      bucket_ready[b] = prev;
    }
    // Gradient all-reduce per bucket: after its own backward (overlap) or after the whole
    // backward pass (no overlap).
    for (std::uint32_t b = 0; b < buckets; ++b) {
      const std::string B = std::to_string(b);
      const TaskId ready = plan.overlap ? bucket_ready[b] : prev;
      if (p > 1) {
        const Transfer share{out.links[d], EndpointId(d), EndpointId((d + 1) % p), bucket_bytes[b] * ring_factor};
        TaskRef xfer = g.add(share, "allreduce B" + B);
        g.add_edge(ready, xfer.id());
        g.add_edge(xfer.id(), allreduce_done[b]);
      } else {
        g.add_edge(ready, allreduce_done[b]);
      }
      TaskRef free_grad = g.add(Free{pool, bucket_bytes[b]}, "free gradients B" + B);
      g.add_edge(allreduce_done[b], free_grad.id());
      g.add_edge(free_grad.id(), step_end);
    }
  }
  return out;
}

}  // namespace ddlsim
