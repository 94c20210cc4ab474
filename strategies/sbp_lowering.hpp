// An SBP plan for a chain of linear layers (strategies/sbp_search.hpp) lowered to a task
// graph, so that the replay judges what the search's analytical cost estimated.
//
// Every device of the mesh has a compute stream. Forward, in the schedule's order
// (sbp_schedule): each re-layout is, for every boxing step (strategies/sbp.hpp), one
// collective per line of devices along that mesh dimension, which each device of the
// line joins after its previous task and leaves for its next; each layer is one compute
// task per device (its local GEMM's forward time). Backward, in reverse: each layer's
// backward compute task, then its weight gradient's re-layout to the weights' (the
// gradient all-reduces) as collectives that overlap with the rest of the backward; each
// activation re-layout whose gradient flows back runs its dual (B and P exchanged: an
// all-gather's dual is a reduce-scatter, and so on). The step ends when every device and
// every gradient collective is done. Rings are streamed (CollectiveSpec::streamed).
#pragma once

#include <memory>
#include <vector>

#include "sim/core/resource_model.hpp"
#include "sim/core/task_graph.hpp"
#include "sim/network.hpp"
#include "strategies/sbp_search.hpp"

namespace ddlsim {

struct LoweredSbpStep {
  TaskGraph graph;
  std::vector<std::unique_ptr<ResourceModel>> resources;  // indexed by ResourceId
  ResourceId network;
  std::vector<ResourceId> compute;  // per device, in mesh order
  std::uint64_t collectives = 0;
};

/// Throws InputError when the mesh needs more devices than given.
LoweredSbpStep lower_sbp_chain(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                               NetworkFabric& fabric, const ComputeModel& compute, NetworkModelKind network);

/// The SBP a tensor's gradient has when the tensor has `s`: splits stay, a broadcast
/// tensor's gradient is a partial sum and a partial sum's gradient is broadcast.
NdSbp gradient_sbp(const NdSbp& s);

}  // namespace ddlsim
