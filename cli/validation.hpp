// Measurements replayed by ddlsim: the cases of `ddlsim validate`, and the statistics
// that say how close the predictions are.
//
// Suites (data in validation/, embedded in the binary):
//   vtrain-single  1,440 iteration times of Megatron-DeepSpeed GPT models (hidden 1024 or
//                  2048, 12 to 24 layers, sequence 1024) on one node of 2 to 8 A100s, over
//                  every tp x dp x pp and micro-batch the vTrain authors ran;
//   vtrain-multi   109 iteration times of GPT 3.6B to 175B on 64, 256 and 512 A100s.
//                  (Bang et al., MICRO 2024; validation/vtrain/README.md.)
//   nccl           NCCL bus bandwidth and small-message times (nccl-tests figures from
//                  GitHub issues; validation/nccl/README.md), each collective timed alone
//                  on the preset that stands for the measured machine;
//   public-runs    published end-to-end runs (Megatron-LM's weak scaling, its ZeRO-3
//                  against PTD-P and its sequence parallelism with selective
//                  recomputation, MT-NLG, BLOOM, PaLM), each a scenario in
//                  validation/public_runs/cases.json
//                  with its published step time, tokens/s or TFLOP/s per GPU;
//   measured       your own (validate --measured FILE.csv): steps you measured, each a
//                  strategy of a training scenario of yours (measured_cases).
//
// How a vTrain case becomes a scenario (`ddlsim validate --suite vtrain-multi --case N`
// prints it), from what vTrain states of the setup and nothing
// fitted per case (the compute model's host dispatch figure was fitted to vtrain-single
// as a whole, see sim/data/compute_efficiency.json): GPT as Megatron builds it (learned positions, tied embedding, vocabulary 50,257,
// 16-bit), 1F1B, full recomputation, no gradient bucketing (the data-parallel all-reduce
// after the whole backward); DGX A100 servers (8 A100 on NVSwitch) as many as the case
// needs, with 800 Gb/s per server as one 100 Gb/s InfiniBand EDR NIC per GPU, ranks
// placed as Megatron-DeepSpeed places them (tp innermost, then dp, then pp). vTrain's
// 150 GB/s intra-node figure is its model's parameter, not the hardware's: the NVSwitch
// links are the catalog's NVLink 3.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/network.hpp"

namespace ddlsim {

struct ValidationCase {
  std::string suite;  // "vtrain-single", "nccl", ...
  std::string model;  // the accuracy table's row: a model size ("0.2B (h 1024, 12 layers)"), a run, a kind of point
  std::string label;  // the case within it, one line ("tp 2 x dp 4 x pp 1, micro-batch 4")
  std::string unit = "s";  // of measured and predicted: "s" (step time), "GB/s" (bus bandwidth), "us"
  // Cases of one suite and group differ only in their strategy: Kendall's tau compares
  // their order. Empty: the case is not ranked.
  std::string group;
  // The training setup, where there is one (0 elsewhere; gpus is the ranks of a collective).
  int gpus = 0;
  std::int64_t global_batch = 0, micro_batch = 0;
  std::int64_t hidden = 0, heads = 0, layers = 0, seq = 0;
  int tp = 0, dp = 0, pp = 0, cp = 0;  // (cp: context parallelism, 1 without it)
  double measured = 0;
  int index = 0;  // 1-based, among the cases of its suite (validate --case, the CSV's index)
  // What reproduces the prediction outside `validate`: a training case's scenario as JSON
  // text, which `ddlsim run` replays to the predicted step time, or an NCCL case's
  // `ddlsim collective` command line. reproduce_case applies a network model to it.
  std::string reproduce;
  // Replays the case: returns the prediction in `unit`, or sets `refused` (why ddlsim
  // refused the plan) and returns 0. The network model overrides the case's own.
  std::function<double(ValidationCase&, std::optional<NetworkModelKind>)> predict;
  // Filled by run_validation:
  double predicted = 0;
  std::string refused;  // empty when it ran
  // Where the replayed step goes on its critical device (TrainingReport's breakdown, in
  // seconds) and the fullest device's memory high-water mark, for a case that replays a
  // training step (step = true); a collective has none.
  struct Step {
    bool step = false;
    double compute_s = 0, exposed_tp_s = 0, exposed_pp_s = 0, exposed_dp_s = 0, exposed_other_s = 0, bubble_s = 0;
    double peak_memory_bytes = 0;
    bool fits = true;  // the peak within the accelerators' memory
    // The estimate the searches rank the case's plan by (cost_model.hpp search_estimate,
    // as `validate --cost-model` gives it), in seconds per step; 0 where none was made.
    double estimate_s = 0;
  } breakdown;

  [[nodiscard]] double error() const { return (predicted - measured) / measured; }  // signed fraction
};

inline constexpr const char* kValidationSuites[] = {"vtrain-single", "vtrain-multi", "nccl", "public-runs"};

/// The cases of one suite. Throws InputError for an unknown suite name.
std::vector<ValidationCase> validation_cases(const std::string& suite);

/// Your own measurements as the cases of a suite "measured". `path`: a CSV with the
/// header scenario_file,strategy,measured_step_s and a row per measured step: a training
/// scenario's file (relative to the CSV's folder), the name of one of its strategies, and
/// the measured seconds per step. Each case replays that strategy of that scenario as
/// `ddlsim run` does (its `reproduce` is the scenario with that strategy alone and a
/// HuggingFace file written in place); Kendall's tau compares the strategies measured on
/// one scenario file. Throws InputError naming the CSV's line.
std::vector<ValidationCase> measured_cases(const std::string& path);

/// The case's `reproduce` with `network` (when given) in place of its own network model:
/// the scenario's simulation.network, or the command's --network.
std::string reproduce_case(const ValidationCase& c, std::optional<NetworkModelKind> network);

/// Replays every case (on `jobs` threads; results do not depend on it), on `network`
/// when given, else on each case's own network model (flow for vTrain and NCCL, the
/// scenario's for public runs).
void run_validation(std::vector<ValidationCase>& cases, std::optional<NetworkModelKind> network, int jobs);

/// Accuracy over a set of cases: mean and worst absolute percentage error, and Kendall's
/// tau between predicted and measured figures over the pairs of cases of one group (the
/// same model, GPU count and global batch, differing only in their strategy): tau =
/// (concordant - discordant) / pairs, pooled over the groups. Besides, how far the
/// searches' estimate of each replayed plan lies from its replay.
struct Accuracy {
  std::string suite, model;  // model "all" for a suite's total
  int cases = 0, refused = 0;
  // Cases that replayed a training step whose peak memory ddlsim finds over the
  // accelerators' although the run was measured, so ran: a memory-model error.
  int unfit = 0;
  // Cases that replayed within kAccuracyTarget of their measurement (|error| at most
  // 10%: the accuracy target of the suites' NCCL points and published runs).
  int within = 0;
  double mean_abs_error = 0;   // fraction
  double worst_abs_error = 0;  // fraction
  double kendall_tau = 0;  // tau-b (ties in either ranking out of its denominator)
  bool tau_defined = false;  // some pair is untied in both figures (else tau-b is 0/0)
  std::int64_t pairs = 0;
  // The searches' estimate against the replay (not the measurement), over the cases
  // that replayed a training step and have one: mean and worst |estimate - replay| /
  // replay, fractions.
  int estimated = 0;
  double estimate_mean_abs_error = 0, estimate_worst_abs_error = 0;
};

/// The error a case may have and count as met (Accuracy::within): 10%.
inline constexpr double kAccuracyTarget = 0.10;

/// Per suite and model size (in order of first appearance), then per suite "all".
std::vector<Accuracy> accuracy_table(const std::vector<ValidationCase>& cases);

/// The figures of `table` worse than those recorded in `recorded` (a JSON object of
/// suites of model sizes, as `ddlsim validate --record` writes; `path` names it in the
/// lines): a mean or worst error above, or a tau below, the recorded one by more than
/// its rounding (1e-4), the same for the estimate's errors against the replay where the
/// record has them, fewer cases within kAccuracyTarget than recorded (where recorded), a
/// count of cases, pairs or estimated cases other than the recorded
/// one (a row dropped or added), and refused cases; one line each. Throws InputError naming the
/// JSON path for a malformed record (checked whole first, whatever `table` holds: an
/// unknown suite, a model's figures missing, out of range or unknown).
std::vector<std::string> accuracy_regressions(const std::vector<Accuracy>& table, const nlohmann::json& recorded,
                                              const std::string& path);

}  // namespace ddlsim
