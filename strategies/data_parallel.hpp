// Data parallelism for the synthetic layered model, lowered to a task graph.
//
// Every device holds the whole model and runs the same step on its share of the batch:
// forward through the layers, backward in reverse, and an all-reduce of the gradients.
// Gradients are grouped into buckets of `bucket_layers` consecutive layers (in the order
// backward produces them). With `overlap`, a bucket's all-reduce starts as soon as its
// last backward finishes, so communication hides behind the remaining backward work;
// without it, all all-reduces start after the whole backward pass.
//
// Each bucket's all-reduce (ring unless told otherwise) is lowered to point-to-point transfers
// (sim/collectives) over the uniform cluster's star (each device's link into one
// switch), replayed on the chosen network model: alone it takes 2(p-1)a + 2(p-1)/p S/B;
// concurrent buckets share the links (flow model) or not (analytical model). A bucket's
// all-reduce starts when every device has its gradients (the devices are identical).
//
// Memory (one pool per device): a layer's activations are allocated before its forward
// and freed after its backward; its gradients are allocated before its backward and freed
// once their bucket's all-reduce has finished.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/resource_model.hpp"
#include "sim/core/task_graph.hpp"
#include "sim/collectives.hpp"
#include "sim/network.hpp"
#include "sim/network_fabric.hpp"
#include "topology/uniform_cluster.hpp"
#include "workloads/synthetic_model.hpp"

namespace ddlsim {

class JsonObject;

struct DataParallelPlan {
  std::string name;
  bool overlap = true;
  std::int64_t bucket_layers = 1;
};

/// Reads one element of the scenario's "strategies" array.
DataParallelPlan read_data_parallel_plan(JsonObject& strategy, std::int64_t layers);

/// A training step lowered to a task graph, with the resource models it runs on.
struct LoweredStep {
  // The network's cluster and fabric come first so that they outlive the models.
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<NetworkFabric> fabric;
  TaskGraph graph;
  std::vector<std::unique_ptr<ResourceModel>> resources;  // indexed by ResourceId
  std::vector<ResourceId> compute;                        // per device
  std::vector<ResourceId> links;                          // the network (none with one device)
  std::vector<std::string> pool_names;                    // per PoolId (one per device)
};

/// The number of tasks lower_data_parallel will create (to refuse absurd sizes up front).
std::uint64_t data_parallel_task_count(const SyntheticModel& model, const UniformCluster& cluster,
                                       const DataParallelPlan& plan);

/// `allreduce` forces the buckets' all-reduce algorithm; nullopt lets choose_algorithm
/// pick by size (ring when it cannot run, InputError naming the reason).
LoweredStep lower_data_parallel(const SyntheticModel& model, const UniformCluster& cluster,
                                const DataParallelPlan& plan, NetworkModelKind network = NetworkModelKind::kFlow,
                                std::optional<CollectiveAlgorithm> allreduce = CollectiveAlgorithm::kRing);

}  // namespace ddlsim
