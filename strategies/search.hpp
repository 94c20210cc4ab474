// Searching Megatron-style plans: the grid of (dp, tp, pp, micro-batch, schedule, ZeRO
// stage, recomputation) for a model on a cluster, pruned by the memory model and ranked
// by a closed-form step-time estimate, so that only the most promising few need a replay.
//
// The estimate (estimate_step) is the analytical cost model of the search, in the
// spirit of Calculon and AutoDDL's: per micro-batch, each pipeline stage's forward F_i
// and backward B_i (its layers' operator times from the compute model, the tensor-
// parallel all-reduces at their analytical collective time, a pipeline send each way,
// and the embedding on the first stage and the output layer and loss on the last); the
// pipeline takes m slots of the busiest stage and every other stage's time once to fill
// and drain, over v with interleaving: m max(F_i + B_i) + (sum (F_i + B_i) - max) / v,
// which is (m + (pp - 1)/v)(F + B) when the stages are alike (GPipe: sum (F_i + B_i) +
// (m - 1)(max F_i + max B_i)); the data-parallel reduction adds what of it does not hide
// behind the last micro-batch's backward (all of it without overlap); under ZeRO-3 each
// pass walks its units (embedding, layers, output layer) as the replay orders their
// gathers and scatters on one queue, the first gather and the last scatter exposed,
// hybrid sharding's all-reduces on a lane of their own; the optimizer step adds its
// memory-bound time. It ignores contention.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/compute_model.hpp"
#include "sim/network_fabric.hpp"
#include "strategies/plan.hpp"

namespace ddlsim {

/// Which values the grid tries.
struct SearchSpace {
  std::int64_t global_batch = 0;
  std::vector<std::int64_t> micro_batches{1, 2, 4, 8, 16};
  std::vector<PipelineSchedule> schedules{PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B};
  /// Model chunks per device the interleaved schedule tries (each at least 2), in order.
  std::vector<int> virtual_stages{2};
  std::vector<DataParallelMode> dp_modes{DataParallelMode::kAllReduce, DataParallelMode::kZero1, DataParallelMode::kZero2,
                                         DataParallelMode::kZero3};
  std::vector<Recompute> recomputes{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  bool all_devices = true;  // dp x tp x pp = the cluster's accelerators (else any count up to it)
  /// Rank orders (ParallelPlan::order) the grid tries, in order; empty: the framework's
  /// only. Per shape, an order that places the ranks as an earlier one does (the same
  /// axes of more than one rank in the same order) is left out, and one that places them
  /// as the framework's order does is replaced by it.
  std::vector<std::vector<MeshAxis>> orders;
  /// Context-parallel degrees (ParallelPlan::cp) the grid tries, ascending; dp fills
  /// what tp x pp x cp leave. {1}: none.
  std::vector<int> context_parallel{1};
  /// What every plan of the grid takes as it is, the framework's settings the grid does
  /// not vary: bucket_bytes, overlap_grad_reduce, align_grad_reduce, overlap_param_gather (ZeRO-1 plans), align_param_gather (interleaved plans among them), overlap_p2p, overlap_tp_backward, tp_comm_overlap (plans with sequence parallelism
  /// that can run it), overlap_ep_comm, dispatcher (plans with ep > 1),
  /// fp8_dispatch, capacity_factor, pad_to_capacity, grouped_gemm, grad_accumulation, grad_reduce_fp32, master_remainders, fp8_params, tp_only_amax and, unless
  /// `orders` lists some, the rank order (the CLI copies them from the scenario's first Megatron-style strategy).
  ParallelPlan framework;
};

/// Every plan of the grid that plan_problem accepts, in a fixed order: tp, pp, cp (the
/// space's context_parallel), dp,
/// expert parallelism (for a mixture of experts every ep dividing dp x cp and the
/// experts, else 1), micro-batch, schedule (in the space's order, interleaved once per virtual_stages
/// entry, in its order, its micro-batches in groups of pp or, where pp does not divide
/// them, of fitting_microbatch_group; plans with pp 1 once, as 1F1B), ZeRO stage,
/// recomputation, all ascending; sequence parallelism whenever tp > 1 (it only saves memory).
/// Layers are balanced over the model chunks; for a model with multi-token prediction
/// each plan with a pipeline is followed by its twin whose last chunk holds no layers
/// (Megatron-Core's "...|mL"; the others balanced, the first ones a layer more, and
/// where that is uneven a second twin with the later ones a layer more). With a compute
/// model, each plan with a pipeline is also followed by a twin whose layers are
/// balanced by compute time (balanced_layout of the layers' forward, backward and
/// recomputation per micro-batch, the embedding on the first chunk, the output layer,
/// loss and prediction depths on the last), where that makes the busiest stage at least
/// 1% lighter by the same weights: a large vocabulary's output layer weighs several
/// layers.
std::vector<ParallelPlan> grid_plans(const TransformerConfig& model, std::size_t devices, const SearchSpace& space,
                                     const ComputeModel* compute = nullptr);

/// Layers per chunk for `chunks` pipeline chunks of layers of the given costs in order,
/// the first chunk also costing `first_extra` and the last `last_extra`: the smallest
/// busiest chunk (to a relative 1e-12), every chunk but the first and the last holding
/// a layer. Of the layouts that reach it, the one whose later chunks hold the most
/// (filled from the last; the first stage keeps the most micro-batches in flight, so
/// it is the one to spare). Empty for fewer than 2 chunks or fewer layers than middle chunks.
std::vector<int> balanced_layout(const std::vector<double>& layer_cost, double first_extra, double last_extra, int chunks);

/// Why grid_plans has no plan (call it when it has none): how many (tp, pp, dp) shapes
/// it tried (tp 1 x pp 1 is always one), the first one's plan and what plan_problem says of it.
std::string empty_grid_reason(const TransformerConfig& model, std::size_t devices, const SearchSpace& space);

/// The largest per-device memory of the plan under the memory model (bytes).
double plan_peak_memory(const ParallelPlan& plan, const TransformerConfig& model);

/// The closed-form step time (s) described above, on the fabric's first dp x pp x tp
/// accelerators in the plan's order.
double estimate_step(const TransformerConfig& model, const ParallelPlan& plan, NetworkFabric& fabric,
                     const ComputeModel& compute);

/// Whether two plans are the same but for their names.
bool same_plan(const ParallelPlan& a, const ParallelPlan& b);

/// A short readable form: "dp 16 x tp 8 x pp 8, mb 1, interleaved v2, zero 1, sp, selective".
std::string describe_plan(const ParallelPlan& plan);

}  // namespace ddlsim
