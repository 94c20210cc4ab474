// One training step of a transformer under a parallel plan, lowered to a task graph on a
// real cluster.
//
// Devices are the cluster's first dp x pp x tp accelerators, ranks laid out in the plan's
// axis order (plan.order; by default tp innermost, then pp, then dp). Each pipeline
// stage of each data-parallel replica runs its schedule's program (strategies/pipeline)
// on one compute stream: per micro-batch and model chunk, the embedding (first stage),
// per layer the attention half and the MLP half (costs from strategies/stage_costs,
// recomputation added before each backward), the output layer and loss (last stage).
//
// What is exploited, and why the result stays the full replay's: the tp ranks of a stage
// compute identical work and meet at every tensor-parallel all-reduce, so one compute
// stream stands for all of them; those all-reduces run inside the scale-up domain (plan
// ranks tp-innermost put a group on one server), on links no other traffic of the step
// uses, so each is priced once by the analytical model of its collective (equal to its
// transfers' replay when nothing else shares the links) on a per-group stream. Everything
// that crosses servers is replayed transfer by transfer on the network model: pipeline
// sends (each tp rank sends its 1/t of the activations, Megatron's scatter-gather) and the
// data-parallel gradient collectives of every tp rank. A stage's next pass starts only
// once its sends are done, as Megatron's blocking p2p calls make it (unless
// plan.overlap_p2p).
//
// Data parallelism: gradients are reduced in buckets of about plan.bucket_bytes (2 bytes
// per parameter), in the order the last micro-batch's backward produces them, each bucket
// starting as soon as it is complete on every replica (or, without
// plan.overlap_grad_reduce, all of them after the stage's whole backward; with a pipeline
// and plan.align_grad_reduce when the schedule launches them: a stage's or model chunk's
// all at once, at the same moment on every stage, as Megatron-Core's schedules do): all-reduce, or
// for ZeRO-1/2 reduce-scatter and, after the optimizer step, all-gather of the updated
// 16-bit weights. ZeRO-3 (FSDP) keeps only 1/dp of every weight: before each layer's
// forward and again before its backward, in every micro-batch, the data-parallel group
// all-gathers the layer's 16-bit weights (the next layer's gather prefetched while this
// one computes, one gather in flight), and reduce-scatters its gradients after its
// backward; the embedding and the output layer are gathered the same way. The optimizer
// step over the parameters a device updates is priced by optimizer_step_time
// (strategies/stage_costs.hpp); no stage starts it before every stage's gradients are
// reduced (the gradient-norm and overflow all-reduces over the model-parallel ranks).
//
// Expert parallelism (plan.ep > 1, a mixture of experts): every layer is a unit of its
// own; its MLP half runs in three parts (router and dispatch; the experts; combine and
// the rest) with an all-to-all of the dispatched tokens after the first two, in the
// forward, in a recomputed forward and (of their gradients) in the backward, per tp rank
// among the ep consecutive data-parallel replicas of a group, which share it as ZeRO-3's
// replicas share their gathers. Each gradient bucket is reduced in two parts: the
// routed experts' over the dp / ep replicas holding the same experts, the rest over all.
// With plan.overlap_ep_comm (combined 1F1B) each steady-state forward and the backward
// after it start together and share the compute stream, the next pass waiting for both;
// priced, the all-to-alls of one communicator run on a queue of their own in the order
// they become ready.
//
// Interference (the device's overlap_slowdown > 0): communication that runs beside the
// compute slows it (TaskGraph::add_interference). While a data-parallel or ZeRO
// collective or an expert-parallel all-to-all runs, every lowered device in it has its
// compute stream slowed; likewise both ends of a pipeline send under plan.overlap_p2p
// (without it the sender waits for the send, and the receiver in Megatron too), and a
// stage's stream while its tensor-parallel collective runs beside a weight gradient
// (plan.overlap_tp_backward), and under combined 1F1B (plan.overlap_ep_comm) its
// tensor-parallel collectives and amax reductions, which may run beside the paired pass.
// Transformer Engine's overlap (tp_comm_overlap) prices the slowdown in its closed forms
// instead; otherwise FP8's amax reductions run in line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/collective_kinds.hpp"
#include "sim/compute_model.hpp"
#include "sim/core/resource_model.hpp"
#include "sim/core/task_graph.hpp"
#include "sim/network.hpp"
#include "sim/network_fabric.hpp"
#include "strategies/plan.hpp"

namespace ddlsim {

struct TrainingStepInputs {
  const TransformerConfig* model = nullptr;
  const ParallelPlan* plan = nullptr;
  NetworkFabric* fabric = nullptr;  // over the cluster
  const ComputeModel* compute = nullptr;
  NetworkModelKind network = NetworkModelKind::kFlow;
  // With the analytical network: each data-parallel collective as one task of its
  // analytical time (price_collectives), and a single replica replayed when all are
  // provably identical (fold_replicas). Both leave the step exactly what replaying every
  // transfer of every replica gives (up to rounding); off only to show that.
  bool price_collectives = true;
  bool fold_replicas = true;
  // Data-parallel rings replayed as streams (CollectiveSpec::streamed) rather than step
  // by step: far fewer flows for the flow model, the same time for a ring alone.
  bool stream_rings = true;
  // The most transfers the lowering may add (pipeline sends and unpriced collectives):
  // past it lower_training_step throws TooLargeError before the task graph and the flow
  // network's state outgrow memory (20 million: about 1.5 GB of graph, and 0.3 GB more
  // where each slows the compute streams at its two ends: interference), and before
  // building anything when the transfers of every micro-batch, counted first, are past
  // it. Priced collectives (the analytical network) add none.
  std::uint64_t max_transfers = 20'000'000;
  // The most compute tasks (plan_size_problem's estimate) a plan may need: past it
  // lower_training_step throws TooLargeError before building anything.
  double max_compute_tasks = 60e6;
};

struct LoweredTrainingStep {
  TaskGraph graph;
  std::vector<std::unique_ptr<ResourceModel>> resources;  // indexed by ResourceId
  ResourceId collectives;             // the DelayPool of priced collectives, when they are
  std::vector<ResourceId> compute;  // per lowered (dp, pp) stage replica, dp-major
  std::vector<ResourceId> tp_comm;  // per (dp, pp) when tp > 1
  // Per (dp, pp) with overlap_tp_backward: each tensor-parallel collective and the
  // weight-gradient task that runs beside it (their overlap is communication hidden).
  std::vector<std::vector<std::pair<TaskId, TaskId>>> tp_overlaps;
  std::vector<TaskId> last_backward;  // per (dp, pp): the last compute task of its pipeline program
  // Per (dp, pp) under ZeRO-3: for each unit, the task before it and its weights'
  // gather: a unit waits on the gather for max(0, gather end - that task's end).
  std::vector<std::vector<std::pair<TaskId, TaskId>>> zero3_waits;
  // Per (dp, pp) under expert parallelism: for each all-to-all, the task before it and
  // its end: what follows waits max(0, its end - that task's end).
  std::vector<std::vector<std::pair<TaskId, TaskId>>> a2a_waits;
  // Per (dp, pp) with overlap_param_gather: for each unit's first forward, the task before
  // it and the point its weights are gathered: it waits max(0, that - the task's end).
  std::vector<std::vector<std::pair<TaskId, TaskId>>> param_waits;
  // Per (dp, pp) with FP8 GEMMs: seconds of its passes' amax reductions (in line with
  // its compute, each pass's last task: stage_costs.hpp, amax_reduction_bytes).
  std::vector<double> amax_s;
  std::vector<std::vector<TaskId>> amax_tasks;  // per (dp, pp) under combined 1F1B: those reductions
  ResourceId amax;  // where they run (a DelayPool: each in its pass's chain), when they do
  std::vector<std::string> pool_names;  // per (dp, pp): its memory pool (PoolId = the same index)
  std::vector<TaskId> optimizer;      // per (dp, pp): its optimizer step
  std::vector<ComputeParts> compute_parts;  // per (dp, pp): its compute stream's tasks by purpose
  // Per (dp, pp) under the zero-bubble schedule: seconds of its deferred weight-gradient
  // passes (W, counted in compute_parts.backward too); empty for the other schedules.
  std::vector<double> weight_pass_s;
  std::vector<CollectiveUse> collective_uses;  // in the order of (dim tp, dp, copies; op; algorithm; channels; ranks)
  std::vector<TaskId> gradients_reduced;  // per pp stage: every replica's backward done and its gradients reduced
  std::vector<TaskId> weights_gathered;   // per pp stage under ZeRO-1/2 with dp > 1: updated weights all-gathered (else empty)
  // Copies within a replica (a tied embedding split by the pipeline, key-value groups
  // replicated over tp ranks): their gradients summed (else invalid).
  TaskId copies_summed;
  ResourceId network;
  const NetworkModel* network_model = nullptr;  // resources[network], for its per-link bytes
  std::uint64_t tp_collectives = 0;  // priced analytically
  std::uint64_t transfers = 0;       // replayed on the network model (pipeline and data-parallel)
  // Of them, counted before the graph is built (checked against max_transfers up front):
  // the pipeline sends and the ZeRO collectives of every micro-batch, all but the
  // step's closing gradient and weight collectives.
  double counted_transfers = 0;
  std::uint64_t priced_collectives = 0;  // data-parallel collectives run as one priced task
  int lowered_replicas = 1;          // data-parallel replicas in the graph (dp, or 1 when folded)
  // Bytes per link (by LinkId) of the traffic that is not replayed as transfers (priced
  // collectives, tensor-parallel all-reduces, folded replicas); add the network model's
  // link_bytes() for the whole step's.
  std::vector<double> priced_link_bytes;
  double dp_bytes_per_device = 0;    // bytes one device sends in the data-parallel collectives
};

/// Why replaying `p` would need more than `max_compute_tasks` compute tasks (an estimate
/// made before building anything: `replicas` data-parallel replicas (0: all, dp x cp),
/// every stage and micro-batch, forward and backward of every layer's ops), or "" when
/// it would not.
std::string plan_size_problem(const ParallelPlan& p, const TransformerConfig& m, double max_compute_tasks, int replicas = 0);

/// Throws InputError for a plan that cannot run (plan_problem), TooLargeError for one
/// whose graph would outgrow the limits above.
LoweredTrainingStep lower_transformer_step(const TrainingStepInputs& in);

}  // namespace ddlsim
