// `ddlsim run` for a scenario that trains a real transformer on a real cluster:
//
//   {"name": ..., "description": ...,
//    "cluster": {"preset": "dgx-a100", "nodes": 4, ...},
//    "workload": {"model": "megatron-1.7b" | "hf_config": FILE or {...}, "seq": N, "dtype": ..., "attention": ...},
//    "strategies": [{"name": "ptd-p", "tp": 8, "pp": 2, "dp": 2, "global_batch": 512,
//                    "micro_batch": 4, "schedule": "1f1b", "virtual_stages": 1, "zero": 1,
//                    "sequence_parallel": true, "recompute": "selective",
//                    "stage_layers": [12, 12], "bucket_mib": 25}],
//    "simulation": {"network": "flow", "rings": "streamed"}}
//
// Every field, unit and default is in README.md ("Training scenarios").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "sim/collective_kinds.hpp"
#include "sim/compute_model.hpp"
#include "sim/core/engine.hpp"
#include "sim/network.hpp"
#include "strategies/plan.hpp"
#include "strategies/sbp_search.hpp"
#include "workloads/model_workload.hpp"
#include "topology/catalog.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

/// An SBP strategy: one matmul signature per layer role on a device mesh over every
/// accelerator, e.g. {"name": "autoddl", "global_batch": 256, "sbp": {"mesh": [4, 8],
/// "signatures": {"layer*.qkv": "[S(0), B] x [B, S(1)] -> [S(0), S(1)]", ...}}}.
struct SbpStrategy {
  std::vector<int> mesh;
  int micro_batches = 1;  // the global batch in this many passes (gradient accumulation)
  std::vector<std::pair<std::string, MatmulSignature>> signatures;  // by role, in the scenario's order
};

struct TrainingStrategy {
  ParallelPlan plan;                // for an SBP strategy: its name and global_batch only
  std::optional<SbpStrategy> sbp{};
  std::string unfit{};  // why it cannot run on the cluster (read with keep_unfit only); empty: it can
};

struct TrainingScenario {
  std::string name;
  std::string description;
  Catalog catalog = Catalog::builtin();
  Cluster cluster;
  std::string cluster_title;
  TransformerConfig model;  // a CNN or MLP scenario: its name and dtype only
  ModelWorkload workload;   // what the scenario names (the preset or HuggingFace file)
  bool transformer = true;  // false: a CNN or MLP, which only SBP strategies run
  std::vector<TrainingStrategy> strategies;
  NetworkModelKind network = NetworkModelKind::kFlow;
  bool stream_rings = true;  // simulation.rings: "streamed" (default) or "steps"
  bool interference = true;  // simulation.interference: communication beside compute slows it
  /// simulation.compute_speed_cv: how the accelerators' compute speeds vary (0: alike);
  /// `compute` then prices every kernel as the slowest of the cluster's accelerators.
  double compute_speed_cv = 0.0;
  /// simulation.collective_algorithm and simulation.channels: what every fabric the
  /// scenario's strategies run on (replays, estimates, searches) asks of its collectives.
  CollectivePolicy collectives;
  /// The software stack's memory per device: the accelerator's catalog figures, or
  /// simulation.context_mib / communicator_mib.
  RuntimeMemory runtime;
  /// What prices every operator: the accelerator's built-in figures, or those of the
  /// scenario's "calibration" (measured GEMMs, copy, launch and dispatch times).
  std::optional<ComputeModel> compute;
};

/// Whether the document is a training scenario (its cluster names a preset), as opposed
/// to the synthetic uniform-cluster format.
bool is_training_scenario(const nlohmann::json& doc);

/// Reads, overrides (`sets`, as --set) and validates the training scenario in `file`, or
/// the embedded default without one; InputError `not_training` when it is not one.
/// `document`, when given, receives the scenario as JSON (overrides applied).
/// `keep_unfit`: a strategy whose shape or batch does not fit the cluster is kept with
/// the reason in its `unfit` (for search, which may skip it) rather than refused.
TrainingScenario load_training_scenario(const std::optional<std::string>& file, const std::vector<std::string>& sets,
                                        const std::string& not_training, nlohmann::json* document = nullptr,
                                        bool keep_unfit = false);

/// Validates a training scenario; `base_dir` resolves a HuggingFace file. Throws
/// InputError naming the JSON path of the first problem (see keep_unfit above).
TrainingScenario read_training_scenario(const nlohmann::json& doc, const std::string& base_dir, bool keep_unfit = false);

/// A link's traffic over one step.
struct LinkUse {
  std::string link;  // "from -> to" by node name
  std::string kind;  // catalog link id
  double bytes = 0;
  double utilization = 0;  // bytes / (line bandwidth x step time)
};

struct TrainingReport {
  std::string name;
  std::string plan;  // "dp 4 x tp 8 x pp 2"
  int devices = 0;
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_device = 0;     // (6N + 12 l h s) per token, no recomputation
  double mfu = 0;                         // model_tflops_per_device / peak
  double hardware_tflops_per_device = 0;  // with recomputation
  double hfu = 0;
  // The critical device (the stage replica with the most compute): where its step goes.
  double compute_busy_s = 0;   // its compute stream's busy time (forward, backward, recomputation, optimizer)
  ComputeParts compute_parts;  // compute_busy_s by purpose (they sum to it)
  std::vector<CollectiveUse> collectives;  // what ran (Megatron-style plans)
  bool sbp = false;                        // an SBP plan's report
  double exposed_comm_s = 0;   // tp + pp + dp below
  double exposed_tp_s = 0;     // tensor-parallel all-reduces (blocking)
  double exposed_pp_s = 0;     // pipeline time waiting beyond the schedule's bubble (sends, imbalance, the drain)
  double exposed_dp_s = 0;     // waiting for gradient reductions before, and ZeRO-1/2 weight all-gathers after, the optimizer
  double bubble_s = 0;         // the schedule's bubble: (pp - 1) / v x its per-micro-batch work
  double idle_s = 0;           // step_time_s - compute_busy_s - exposed_tp_s
  // Waiting not split into tp, pp, dp and ep (other_comm_s): an SBP plan's boxing and
  // gradient collectives; FP8 GEMMs' amax reductions.
  double exposed_ep_s = 0;     // expert parallelism's all-to-alls (in line with the compute)
  [[nodiscard]] double other_comm_s() const {
    return std::max(0.0, exposed_comm_s - exposed_tp_s - exposed_pp_s - exposed_dp_s - exposed_ep_s);
  }
  double peak_memory_bytes = 0;  // the fullest device: the replay's high-water mark of its memory
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0;  // of that device
  double runtime_bytes = 0;  // the software stack's: context and communicator buffers
  /// A byte count as reports write it: an integer.
  [[nodiscard]] static std::int64_t whole(double bytes) { return std::llround(bytes); }
  /// Sets the fullest device's memory in whole bytes (the models' sums carry fractions
  /// of a byte): each part rounded, activations the peak's rest, so the parts add up.
  /// `peak` includes `runtime`.
  void set_memory(double peak, double weights, double gradients, double optimizer, double runtime) {
    peak_memory_bytes = std::round(peak);
    weights_bytes = std::round(weights);
    gradients_bytes = std::round(gradients);
    optimizer_bytes = std::round(optimizer);
    runtime_bytes = std::round(runtime);
    activations_bytes = peak_memory_bytes - (weights_bytes + gradients_bytes + optimizer_bytes + runtime_bytes);
  }
  double device_memory_bytes = 0;
  bool fits_in_memory = true;
  std::uint64_t tasks = 0;
  std::uint64_t transfers = 0;
  std::vector<LinkUse> busiest_links;  // the most utilized links, most first (at most kBusiestLinks)
  std::vector<LinkUse> all_links;      // every link that carried bytes, most utilized first (TrainingOutputs::all_links)
};

inline constexpr std::size_t kBusiestLinks = 5;

/// Files a replay may write besides the report (written whole or not at all).
struct TrainingOutputs {
  std::optional<std::string> trace;  // Perfetto / Chrome trace of the replay
  std::optional<std::string> dot;    // the task graph in GraphViz syntax
  bool all_links = false;            // fill TrainingReport::all_links
};

/// The accelerator of the scenario's cluster (its first; presets have one kind).
const AcceleratorSpec& accelerator_of(const TrainingScenario& s);

/// Parameters that take part in a token's matmuls (the input embedding only when tied to
/// the output layer; no position table; of a mixture of experts' layers, the router and
/// experts_per_token experts), and the model FLOPs per token 6N + 12 l h s (h: the
/// attention's width, heads x head size, which is the hidden size unless the model's heads
/// are sized otherwise; TransformerConfig::attention_flop_width). Multi-token prediction
/// adds its layers (l counts them), projections and output layers' uses (Megatron-LM's
/// FLOPs count has the last two alike).
double model_matmul_params(const TransformerConfig& m);
double model_flops_per_token(const TransformerConfig& m);

/// The links with the highest utilization over a step of `step_s` (ties: lower link id
/// first), at most kBusiestLinks, none that carried nothing. `bytes` per link id. Without
/// `between_switches`, links whose both ends are switches are left out: the analytical
/// network model counts a transfer's bytes on its first route but times links between
/// switches as balanced (adaptive routing), so its bytes there are no utilization.
std::vector<LinkUse> busiest_links(const Cluster& c, const std::vector<double>& bytes, double step_s,
                                   std::size_t most = kBusiestLinks, bool between_switches = true);
/// What the busiest links leave out on a network model: "" or a clause for their heading.
const char* busiest_links_note(NetworkModelKind network);

/// The scenario's model as an SBP chain at `global_batch` samples. `cut`: a transformer
/// cut to two layers, the second standing for the other layers - 1 (LinearLayer::repeat:
/// for the analytical cost, which is the same for every layer after the first).
SbpChain scenario_chain(const TrainingScenario& s, std::int64_t global_batch, bool cut);

/// The strategy's plan on the chain (built at global_batch / micro_batches); InputError naming `path` for a role the model lacks
/// or one left out.
SbpPlan sbp_plan_of(const SbpChain& chain, const SbpStrategy& strategy, const std::string& path);

/// The strategy as a scenario writes it (inverse of the reader).
nlohmann::ordered_json sbp_strategy_json(const std::string& name, std::int64_t global_batch, const SbpChain& chain,
                                         const SbpPlan& plan);
/// The plan as a strategy (its roles' signatures).
SbpStrategy sbp_strategy_of(const SbpChain& chain, const SbpPlan& plan);

/// Replays the graph with the observers, writing the outputs' trace (pools named by
/// `pool_names`, transfers' endpoints by the cluster's node names) and dot files whole
/// or not at all.
ReplayResult replay_with_outputs(const TaskGraph& graph, const std::vector<ResourceModel*>& models,
                                 std::vector<Observer*> observers, const TrainingOutputs& outputs, const Cluster& cluster,
                                 std::vector<std::string> pool_names = {});

/// The cluster's node names by id (what a trace names transfers' endpoints by).
std::vector<std::string> node_names(const Cluster& cluster);

/// Lowers and replays one strategy (Megatron-style or SBP).
TrainingReport run_training_strategy(const TrainingScenario& s, const TrainingStrategy& strategy,
                                     const TrainingOutputs& outputs = {});

/// Replays an SBP strategy (strategy.sbp set): the report's breakdown puts every wait in
/// exposed_comm_s (no pipeline); memory is the SBP memory model's (strategies/sbp_search).
TrainingReport run_sbp_strategy(const TrainingScenario& s, const TrainingStrategy& strategy,
                                const TrainingOutputs& outputs = {});

/// The scenario's collective policy in words ("all-reduce tree; 8 channels for rings and
/// trees (the rest as the selector picks)"), empty when automatic.
std::string collective_policy_text(const CollectivePolicy& policy);
/// The text reports' "collectives: ..." line of that, nothing when automatic.
void print_collective_policy(std::ostream& out, const CollectivePolicy& policy);
/// The `speeds:` line of a scenario with simulation.compute_speed_cv (nothing without),
/// and its JSON fields compute_speed_cv and straggler_factor.
void print_speed_policy(std::ostream& out, const TrainingScenario& s);
void add_speed_policy(nlohmann::ordered_json& j, const TrainingScenario& s);
void print_training_table(std::ostream& out, const TrainingScenario& s, const std::vector<TrainingReport>& reports);
void print_training_json(std::ostream& out, const TrainingScenario& s, const std::vector<TrainingReport>& reports);
/// One header line, then one row per strategy; the columns are the JSON fields
/// (breakdowns flattened as breakdown.compute_s, memory_breakdown_bytes.weights, ...).
void print_training_csv(std::ostream& out, const std::vector<TrainingReport>& reports);
/// A report as one flat row, keyed by the columns of print_training_csv after `name`
/// (the nested fields' paths joined by dots), in that order.
nlohmann::ordered_json training_report_row(const TrainingReport& r);
/// A value of such a row as a CSV cell: numbers with 17 significant digits (integers as
/// they are), true/false, text quoted (csv_quoted), null empty, arrays and objects as
/// their quoted JSON.
std::string csv_cell(const nlohmann::ordered_json& value);

}  // namespace ddlsim
