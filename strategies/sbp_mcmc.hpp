// FlexFlow-style search over SBP plans for a chain of linear layers: Metropolis-Hastings
// with random per-layer proposals, the replay of the lowered plan (sbp_lowering) as the
// cost (Jia et al., "Beyond Data and Model Parallelism for Deep Neural Networks", 2019).
//
// From a start plan, each step proposes a new signature for one role (all its layers)
// chosen at random (or, with probability 1/10, another mesh shape: data parallelism
// there, or half the time the current plan carried over when its layouts are the same
// along every mesh dimension),
// replays it (unless it cannot run or does not fit: never accepted then), and
// accepts it with probability min(1, exp(-beta (t' - t) / t)), beta = 20: always when
// faster, rarely when much slower. The best plan seen is the result. A seeded generator
// (splitmix64) makes the walk the same for the same seed on every platform.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/network.hpp"
#include "strategies/sbp_search.hpp"

namespace ddlsim {

/// Replays the plan lowered on the given network model: its step time (s). Folded to
/// device 0 where the analytical network and a symmetric mesh allow (sbp_lowering).
double replay_sbp_plan(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                       NetworkFabric& fabric, const ComputeModel& compute, NetworkModelKind network);

struct McmcOptions {
  std::uint64_t seed = 1;
  int iterations = 500;
  double beta = 20.0;
  NetworkModelKind network = NetworkModelKind::kAnalytical;
  std::size_t max_dims = 2;   // mesh shapes of 1 to max_dims dimensions
  double memory_bytes = 0;    // plans over it (sbp_memory) are never accepted; 0: no limit
  RuntimeMemory runtime;      // counted against memory_bytes with the plan's memory
  double budget_s = 1e300;    // stop proposing after this long (wall clock)
};

struct McmcResult {
  SbpPlan plan;
  double step_s = 0;            // its replayed time
  std::uint64_t replayed = 0;   // distinct plans replayed
  std::uint64_t accepted = 0;   // proposals accepted
  // (plans replayed so far, the fastest replay so far) at each new fastest.
  std::vector<std::pair<std::uint64_t, double>> convergence;
};

/// The walk above from `start` (on `start.dims`), over mesh shapes of the devices'
/// count in 1 or 2 dimensions.
McmcResult mcmc_sbp_search(const SbpChain& chain, const SbpPlan& start, const std::vector<NodeId>& devices,
                           NetworkFabric& fabric, const ComputeModel& compute, const McmcOptions& options);

/// Every plan of every shape replayed (small cases only), the fastest.
McmcResult exhaustive_replay_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                    const ComputeModel& compute, NetworkModelKind network);

}  // namespace ddlsim
