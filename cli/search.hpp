// The grid search of `ddlsim search` as a function: enumerate, prune by memory, rank by
// the closed-form estimate, replay the scenario's strategies and the best estimates.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <iosfwd>
#include <string>
#include <vector>

#include "cli/training.hpp"
#include "strategies/sbp_search.hpp"
#include "strategies/search.hpp"

namespace ddlsim {

struct SearchOptions {
  SearchSpace space;              // its global_batch must be set
  int replays = 8;                // grid plans to replay, best estimates first
  double budget_s = 1e300;        // stop estimating, then replaying, grid plans after this long (s)
  // Optional: called before each estimate (estimating) and each replay (!estimating).
  std::function<void(bool estimating, std::size_t done, std::size_t total)> progress;
};

struct SearchCandidate {
  ParallelPlan plan;      // named after its baseline, or "grid-N"
  bool baseline = false;  // one of the scenario's strategies
  double estimate_s = 0;
  TrainingReport report;  // its replay
};

struct SearchResult {
  std::size_t enumerated = 0, pruned = 0, estimated = 0, baselines = 0;
  std::string empty_reason;       // why the grid has no plan (empty_grid_reason), when it has none
  // budget_s ran out before every plan the memory model kept (enumerated - pruned) was
  // estimated, or before the replays asked for were made.
  bool out_of_budget = false;
  std::size_t too_large = 0;      // plans skipped: their replay would outgrow memory
  std::string too_large_reason;   // the first such plan's name and why
  std::vector<SearchCandidate> ranked;  // replayed, fastest first (ties: baselines, then grid order)
  // (plans estimated so far, in grid order; the lowest estimate so far) at each new lowest.
  std::vector<std::pair<std::uint64_t, double>> convergence;
};

struct SbpSearchOptions {
  std::int64_t global_batch = 0;
  bool mcmc = false;  // else autoddl
  std::uint64_t seed = 1;
  int iterations = 500;
  int top = 10;             // the table prints the top ones (JSON: all)
  double budget_s = 1e300;  // mcmc: stop proposing after this long
  bool json = false;
  std::function<void(const std::string&)> progress;  // optional: what is being searched or replayed now
};

/// `ddlsim search --method autoddl|mcmc`: searches per-role SBP signatures for the whole
/// model over all its accelerators (autoddl on the model cut to three layers, mcmc
/// replaying it whole), with the fewest micro-batches (1, 2, 4, ...) whose plan fits in
/// memory; replays the result, data parallelism and Megatron in SBP terms and the
/// scenario's strategies of this global batch on the scenario's network; prints them
/// ranked (those that fit first, by replayed step time) and why the found plan is faster
/// or slower. Returns the winner as a scenario strategy named "search-best".
nlohmann::ordered_json sbp_search(const TrainingScenario& s, const SbpSearchOptions& options, std::ostream& out);

/// The scenario's strategies that cannot run on its cluster (read with keep_unfit, as
/// after a --set of the cluster), which no search replays: a line each, "      strategy
/// NAME is no baseline: REASON", or as JSON [{"name", "reason"}].
void print_unfit_strategies(const TrainingScenario& s, std::ostream& out);
nlohmann::ordered_json unfit_strategies_json(const TrainingScenario& s);

/// A Megatron-style plan as a scenario strategy.
nlohmann::ordered_json plan_json(const ParallelPlan& p, const std::string& name);

/// Runs the grid search on the scenario's model and cluster (its network model for the
/// replays). Baselines are the scenario's strategies with the space's global batch.
SearchResult grid_search(const TrainingScenario& s, const SearchOptions& options);

}  // namespace ddlsim
