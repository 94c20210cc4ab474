#include "strategies/data_parallel.hpp"

#include <algorithm>

#include "sim/collectives.hpp"
#include "sim/core/compute_stream.hpp"
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
  // Per device: 5 tasks per layer and a gradient free per bucket; per bucket a done
  // marker, and with p > 1 a ring all-reduce of 2(p-1) p transfers between two markers.
  return p * (5 * layers + buckets) + buckets * (1 + (p > 1 ? 2 * (p - 1) * p + 2 : 0)) + 1;
}

LoweredStep lower_data_parallel(const SyntheticModel& model, const UniformCluster& cluster,
                                const DataParallelPlan& plan, NetworkModelKind network,
                                std::optional<CollectiveAlgorithm> allreduce) {
  LoweredStep out;
  const auto p = static_cast<std::uint32_t>(cluster.devices);
  const auto layers = static_cast<std::uint32_t>(model.layers);
  const auto bucket = static_cast<std::uint32_t>(plan.bucket_layers);
  const std::uint32_t buckets = (layers + bucket - 1) / bucket;
  const Seconds fwd_time = model.forward_flops / cluster.device_flops;
  const Seconds bwd_time = fwd_time * model.backward_to_forward;
  const Flops bwd_flops = model.forward_flops * model.backward_to_forward;

  for (std::uint32_t d = 0; d < p; ++d) {
    const std::string dev = "dev" + std::to_string(d);
    out.compute.emplace_back(static_cast<std::uint32_t>(out.resources.size()));
    out.resources.push_back(std::make_unique<ComputeStream>(dev + ".compute"));
    out.pool_names.push_back(dev + ".hbm");
  }
  ResourceId net;
  if (p > 1) {
    out.cluster = std::make_unique<Cluster>(uniform_star_cluster(cluster));
    // The scenario's link bandwidth is what collectives reach: efficiency 1.
    out.fabric = std::make_unique<NetworkFabric>(*out.cluster, std::vector<double>(out.cluster->link_count(), 1.0));
    net = ResourceId(static_cast<std::uint32_t>(out.resources.size()));
    out.links.push_back(net);
    out.resources.push_back(make_network(network, "network", *out.fabric));
  }

  TaskGraph& g = out.graph;
  g.reserve(data_parallel_task_count(model, cluster, plan));
  // Bucket b holds layers [first, last] counted from the output: b = 0 is the last layers.
  auto bucket_low_layer = [&](std::uint32_t b) {
    return layers > (b + 1) * bucket ? layers - (b + 1) * bucket : 0u;
  };
  std::vector<TaskId> allreduce_done(buckets);
  for (std::uint32_t b = 0; b < buckets; ++b) {
    allreduce_done[b] = g.add(Marker{}, "allreduce B" + std::to_string(b) + " done").id();
  }
  const TaskId step_end = g.add(Marker{}, "step end").id();

  std::vector<Bytes> bucket_bytes(buckets, Bytes(0.0));
  std::vector<std::vector<TaskId>> ready(buckets, std::vector<TaskId>(p));  // [bucket][device]
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
        if (d == 0) bucket_bytes[b] += model.gradient_bytes;
      }
      bucket_ready[b] = prev;
    }
    // A bucket's gradients are ready after its own backward (overlap) or after the whole
    // backward pass (no overlap); they are freed once its all-reduce is done.
    for (std::uint32_t b = 0; b < buckets; ++b) {
      ready[b][d] = plan.overlap ? bucket_ready[b] : prev;
      TaskRef free_grad = g.add(Free{pool, bucket_bytes[b]}, "free gradients B" + std::to_string(b));
      g.add_edge(allreduce_done[b], free_grad.id());
      g.add_edge(free_grad.id(), step_end);
    }
  }

  // One all-reduce per bucket, in the order backward produces them.
  const CollectiveGroup group = p > 1 ? CollectiveGroup::of(*out.fabric) : CollectiveGroup{};
  for (std::uint32_t b = 0; b < buckets; ++b) {
    if (p == 1) {
      g.add_edge(ready[b][0], allreduce_done[b]);
      continue;
    }
    const double bytes = bucket_bytes[b].value();
    CollectiveSpec spec = allreduce ? CollectiveSpec{} : chosen_spec(*out.fabric, group, CollectiveOp::kAllReduce, bytes);
    if (allreduce) {  // forced: an all-reduce (the default op) of this algorithm
      spec.bytes = bytes;
      spec.algorithm = *allreduce;
    }
    if (std::string why = unsupported_reason(group, spec.op, spec.algorithm); !why.empty()) {
      throw InputError("simulation.collective_algorithm: " + why);
    }
    const LoweredCollective ar =
        lower_collective(g, net, group, spec, network == NetworkModelKind::kAnalytical ? out.fabric.get() : nullptr);
    for (std::uint32_t d = 0; d < p; ++d) g.add_edge(ready[b][d], ar.start);
    g.add_edge(ar.end, allreduce_done[b]);
  }
  return out;
}

}  // namespace ddlsim
