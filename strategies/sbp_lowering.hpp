// An SBP plan for a chain of linear layers (strategies/sbp_search.hpp) lowered to a task
// graph, so that the replay judges what the search's analytical cost estimated.
//
// Every device of the mesh has a compute stream. Forward, in the schedule's order
// (sbp_schedule): each re-layout is, for every boxing step (strategies/sbp.hpp), one
// collective per line of devices along that mesh dimension, which each device of the
// line joins after its previous task and leaves for its next; each layer is one compute
// task per device (its local GEMM's forward time). Backward, in reverse: each layer's
// backward compute task, then its weight gradient's re-layout to the weights' (the
// gradient all-reduces) as collectives that overlap with the rest of the backward, one
// after another (one communication stream, as DDP's buckets run); each
// activation re-layout whose gradient flows back runs its dual (B and P exchanged: an
// all-gather's dual is a reduce-scatter, and so on). Each device closes the step with
// its optimizer step (strategies/stage_costs: optimizer_step_time on its local
// parameters) once its gradient collectives are done. Rings are streamed (CollectiveSpec::streamed). The
// operators after a layer (attention, norms, ...) are one compute task per device, forward
// and backward, on the shards of the output they follow; those before the first layer
// (embedding) open the forward and close the backward.
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
  std::vector<ResourceId> compute;  // per device, in mesh order (folded: device 0's only)
  ComputeParts compute_parts;       // each device's compute stream's tasks by purpose (all alike)
  std::uint64_t collectives = 0;    // lowered (folded: device 0's)
  bool folded = false;
  bool fold_exact = true;  // folded: every line of every collective cost the same
};

/// Throws InputError when the mesh needs more devices than given, the plan does not fit
/// the chain (sbp_plan_problem) or a layer stands for others (repeat: cut chains are for
/// the analytical cost only).
///
/// `fold`, under the analytical network (ignored under flow): only device 0 is lowered,
/// each of its collectives one task on a delay pool lasting the slowest of that
/// collective's lines (every line along the mesh dimension runs it). When every line
/// costs the same (fold_exact: a symmetric mesh), every device does the same work at the
/// same times and concurrent collectives do not slow each other under the analytical
/// model, so this is the full replay's step time from a graph mesh-size times smaller;
/// otherwise it is the lock-step approximation (each collective waits for its slowest line).
LoweredSbpStep lower_sbp_chain(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                               NetworkFabric& fabric, const ComputeModel& compute, NetworkModelKind network,
                               bool fold = false);

/// The SBP a tensor's gradient has when the tensor has `s`: splits stay, a broadcast
/// tensor's gradient is a partial sum and a partial sum's gradient is broadcast.
NdSbp gradient_sbp(const NdSbp& s);

}  // namespace ddlsim
