// The grid search of `ddlsim search` as a function: enumerate, prune by memory, rank by
// the closed-form estimate, replay the scenario's strategies and the best estimates.
#pragma once

#include <functional>
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
  double budget_s = 1e300;        // stop replaying grid plans after this long
  std::function<void(std::size_t done, std::size_t total)> progress;  // optional
};

struct SearchCandidate {
  ParallelPlan plan;      // named after its baseline, or "grid-N"
  bool baseline = false;  // one of the scenario's strategies
  double estimate_s = 0;
  TrainingReport report;  // its replay
};

struct SearchResult {
  std::size_t enumerated = 0, pruned = 0, estimated = 0, baselines = 0;
  std::vector<SearchCandidate> ranked;  // replayed, fastest first (ties: baselines, then grid order)
};

struct SbpSearchOptions {
  std::int64_t global_batch = 0;
  bool mcmc = false;  // else autoddl
  std::uint64_t seed = 1;
  int iterations = 500;
  bool json = false;
};

/// One transformer layer's linear layers as an SBP chain: QKV (with grouped key-value
/// heads), output projection, MLP (gate and up together for SwiGLU), on global_batch x
/// seq rows.
SbpChain transformer_layer_chain(const TransformerConfig& model, std::int64_t global_batch);

/// `ddlsim search --method autoddl|mcmc`: searches the scenario's layer chain over all
/// its accelerators, replays the result with data parallelism and Megatron in SBP terms
/// on the scenario's network, and prints them ranked by replayed time.
void sbp_search(const TrainingScenario& s, const SbpSearchOptions& options, std::ostream& out);

/// Runs the grid search on the scenario's model and cluster (its network model for the
/// replays). Baselines are the scenario's strategies with the space's global batch.
SearchResult grid_search(const TrainingScenario& s, const SearchOptions& options);

}  // namespace ddlsim
