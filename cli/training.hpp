// `ddlsim run` for a scenario that trains a real transformer on a real cluster:
//
//   {"name": ..., "description": ...,
//    "cluster": {"preset": "dgx-a100", "nodes": 4, ...},
//    "workload": {"model": "megatron-1.7b" | "hf_config": FILE, "seq": N, "dtype": ..., "attention": ...},
//    "strategies": [{"name": "ptd-p", "tp": 8, "pp": 2, "dp": 2, "global_batch": 512,
//                    "micro_batch": 4, "schedule": "1f1b", "virtual_stages": 1, "zero": 1,
//                    "sequence_parallel": true, "recompute": "selective",
//                    "stage_layers": [12, 12], "bucket_mib": 25}],
//    "simulation": {"network": "flow", "rings": "streamed"}}
//
// Every field, unit and default is in README.md ("Training scenarios").
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/network.hpp"
#include "strategies/plan.hpp"
#include "topology/catalog.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

struct TrainingStrategy {
  ParallelPlan plan;
};

struct TrainingScenario {
  std::string name;
  std::string description;
  Catalog catalog = Catalog::builtin();
  Cluster cluster;
  std::string cluster_title;
  TransformerConfig model;
  std::vector<TrainingStrategy> strategies;
  NetworkModelKind network = NetworkModelKind::kFlow;
  bool stream_rings = true;  // simulation.rings: "streamed" (default) or "steps"
};

/// Whether the document is a training scenario (its cluster names a preset), as opposed
/// to the synthetic uniform-cluster format.
bool is_training_scenario(const nlohmann::json& doc);

/// Validates a training scenario; `base_dir` resolves a HuggingFace file. Throws
/// InputError naming the JSON path of the first problem.
TrainingScenario read_training_scenario(const nlohmann::json& doc, const std::string& base_dir);

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
  double exposed_comm_s = 0;   // tp + pp + dp below
  double exposed_tp_s = 0;     // tensor-parallel all-reduces (blocking)
  double exposed_pp_s = 0;     // pipeline time waiting beyond the schedule's bubble (sends, imbalance)
  double exposed_dp_s = 0;     // waiting for the gradient reduction before, and the weight all-gather after, the optimizer
  double bubble_s = 0;         // the schedule's bubble: (pp - 1) / v x its per-micro-batch work
  double idle_s = 0;           // step_time_s - compute_busy_s - exposed_tp_s
  double peak_memory_bytes = 0;  // the fullest device: the replay's high-water mark of its memory
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0;  // of that device
  double device_memory_bytes = 0;
  bool fits_in_memory = true;
  std::uint64_t tasks = 0;
  std::uint64_t transfers = 0;
  std::vector<LinkUse> busiest_links;  // the most utilized links, most first (at most kBusiestLinks)
};

inline constexpr std::size_t kBusiestLinks = 5;

/// Files a replay may write besides the report (written whole or not at all).
struct TrainingOutputs {
  std::optional<std::string> trace;  // Perfetto / Chrome trace of the replay
  std::optional<std::string> dot;    // the task graph in GraphViz syntax
};

/// Lowers and replays one strategy.
TrainingReport run_training_strategy(const TrainingScenario& s, const TrainingStrategy& strategy,
                                     const TrainingOutputs& outputs = {});

void print_training_table(std::ostream& out, const TrainingScenario& s, const std::vector<TrainingReport>& reports);
void print_training_json(std::ostream& out, const TrainingScenario& s, const std::vector<TrainingReport>& reports);
/// One header line, then one row per strategy; the columns are the JSON fields
/// (breakdowns flattened as breakdown.compute_s, memory_breakdown_bytes.weights, ...).
void print_training_csv(std::ostream& out, const std::vector<TrainingReport>& reports);

}  // namespace ddlsim
