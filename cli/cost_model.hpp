// `ddlsim validate --cost-model`: analytical estimates against the replay.
//
// For every strategy of a training scenario: the estimate the searches rank plans by
// (strategies/search.hpp estimate_step for Megatron-style plans, strategies/sbp_search.hpp
// sbp_cost for SBP plans), or the user's own from a CSV, against the replay of the same
// plan on the scenario's network model; the error per strategy, the mean and worst
// absolute error and Kendall's tau between estimated and replayed times.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "cli/training.hpp"

namespace ddlsim {

struct CostModelRow {
  std::string strategy;
  std::string source;  // "estimate_step", "sbp_cost" or the CSV's file name
  double estimate_s = 0;
  double replay_s = 0;
  [[nodiscard]] double error() const { return (estimate_s - replay_s) / replay_s; }
};

struct CostModelCheck {
  std::vector<CostModelRow> rows;  // in the scenario's order (CSV rows in the file's)
  double mean_abs_error = 0, worst_abs_error = 0;
  double kendall_tau = 0;  // over pairs of rows (1: the estimate orders them as the replay does)
  std::size_t pairs = 0;
  std::vector<std::string> not_estimated;  // the scenario's strategies the CSV has no row for
};

/// The estimate the searches rank `t` by (estimate_step, or sbp_cost for an SBP plan)
/// on `fabric` (the scenario's cluster, analytical), in seconds per step; `source` names
/// it ("estimate_step", "sbp_cost").
double search_estimate(const TrainingScenario& s, const TrainingStrategy& t, NetworkFabric& fabric, std::string& source);

/// Estimates (the built-in ones, or with `csv_text` the user's: a header line
/// "scenario,strategy,predicted_step_s" and rows for strategies of this scenario, at
/// most one each, named by `csv_name` in errors) against replays. Throws InputError
/// naming the CSV's line.
CostModelCheck check_cost_model(const TrainingScenario& s, const std::optional<std::string>& csv_text,
                                const std::string& csv_name);

void print_cost_model(std::ostream& out, const TrainingScenario& s, const CostModelCheck& c, bool json);

}  // namespace ddlsim
