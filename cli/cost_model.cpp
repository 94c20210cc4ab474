#include "cli/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/compute_model.hpp"
#include "strategies/search.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"

namespace ddlsim {

double search_estimate(const TrainingScenario& s, const TrainingStrategy& t, NetworkFabric& fabric, std::string& source) {
  if (t.sbp) {
    source = "sbp_cost";
    const std::vector<NodeId> devices(s.cluster.accelerators().begin(), s.cluster.accelerators().end());
    const SbpChain chain = scenario_chain(s, t.plan.global_batch / t.sbp->micro_batches, true);
    return sbp_cost(chain, sbp_plan_of(chain, *t.sbp, t.plan.name), devices, fabric, *s.compute).total();
  }
  source = "estimate_step";
  return estimate_step(s.model, t.plan, fabric, *s.compute);
}

CostModelCheck check_cost_model(const TrainingScenario& s, const std::optional<std::string>& csv_text,
                                const std::string& csv_name) {
  CostModelCheck out;
  std::map<std::string, const TrainingStrategy*> by_name;
  for (const TrainingStrategy& t : s.strategies) by_name[t.plan.name] = &t;
  std::vector<std::pair<const TrainingStrategy*, CostModelRow>> todo;
  if (csv_text) {
    std::map<std::string, std::size_t> line_of;  // each strategy's row, one per strategy
    std::vector<std::string> others;              // the other scenarios' names the rows give
    for (const CsvRow& row : csv_rows(*csv_text, csv_name, {"scenario", "strategy", "predicted_step_s"})) {
      const std::string where = csv_name + ":" + std::to_string(row.line);
      const std::vector<std::string>& f = row.fields;
      if (f[0] != s.name) {  // another scenario's estimates
        if (std::find(others.begin(), others.end(), f[0]) == others.end()) others.push_back(f[0]);
        continue;
      }
      const auto it = by_name.find(f[1]);
      if (it == by_name.end()) throw InputError(where + ": scenario '" + s.name + "' has no strategy '" + f[1] + "'");
      if (const auto seen = line_of.find(f[1]); seen != line_of.end()) {
        throw InputError(where + ": strategy '" + f[1] + "' has an estimate already, on line " + std::to_string(seen->second));
      }
      line_of[f[1]] = row.line;
      const std::optional<double> v = step_seconds(f[2]);  // (as --measured's)
      if (!v) {
        throw InputError(where + ": predicted_step_s: expected seconds from 1e-06 to 1e+07, got '" + f[2] + "'");
      }
      todo.push_back({it->second, CostModelRow{f[1], csv_name, *v, 0}});
    }
    if (todo.empty()) {
      std::string named;
      for (std::size_t i = 0; i < others.size() && i < 5; ++i) named += (i ? "', '" : "") + others[i];
      throw InputError(csv_name + ": no row for scenario '" + s.name + "' (the scenario column holds a scenario's " +
                       "\"name\"; " + (others.empty() ? std::string("the file has no rows") : "its rows name '" + named + "'" +
                       (others.size() > 5 ? " and others" : "")) + ")");
    }
    for (const TrainingStrategy& t : s.strategies) {
      if (!line_of.count(t.plan.name)) out.not_estimated.push_back(t.plan.name);
    }
  } else {
    NetworkFabric fabric(s.cluster, s.catalog, s.collectives);
    for (const TrainingStrategy& t : s.strategies) {
      CostModelRow r{t.plan.name, "", 0, 0};
      r.estimate_s = search_estimate(s, t, fabric, r.source);
      todo.push_back({&t, r});
    }
  }
  std::map<std::string, double> replayed;  // a strategy is replayed once
  for (auto& [t, r] : todo) {
    auto it = replayed.find(t->plan.name);
    if (it == replayed.end()) it = replayed.emplace(t->plan.name, run_training_strategy(s, *t).step_time_s).first;
    r.replay_s = it->second;
    out.rows.push_back(r);
  }
  long long net = 0;
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    const double e = std::abs(out.rows[i].error());
    out.mean_abs_error += e / static_cast<double>(out.rows.size());
    out.worst_abs_error = std::max(out.worst_abs_error, e);
    for (std::size_t j = i + 1; j < out.rows.size(); ++j) {
      const double a = out.rows[i].estimate_s - out.rows[j].estimate_s;
      const double b = out.rows[i].replay_s - out.rows[j].replay_s;
      if (a == 0 || b == 0) continue;  // ties count in neither direction
      ++out.pairs;
      net += (a > 0) == (b > 0) ? 1 : -1;
    }
  }
  if (out.pairs > 0) out.kendall_tau = static_cast<double>(net) / static_cast<double>(out.pairs);
  return out;
}

void print_cost_model(std::ostream& out, const TrainingScenario& s, const CostModelCheck& c, bool json) {
  if (json) {
    nlohmann::ordered_json j;
    j["scenario"] = s.name;
    j["network"] = network_model_name(s.network);
    if (!s.collectives.automatic()) j["collectives"] = collective_policy_text(s.collectives);
    add_speed_policy(j, s);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const CostModelRow& r : c.rows) {
      rows.push_back({{"strategy", r.strategy}, {"source", r.source}, {"estimate_s", r.estimate_s},
                      {"replay_s", r.replay_s}, {"error", r.error()}});
    }
    j["strategies"] = rows;
    j["mean_abs_error"] = c.mean_abs_error;
    j["worst_abs_error"] = c.worst_abs_error;
    j["kendall_tau"] = c.pairs > 0 ? nlohmann::ordered_json(c.kendall_tau) : nlohmann::ordered_json();
    j["pairs"] = c.pairs;
    j["not_estimated"] = c.not_estimated;
    out << j.dump(2) << "\n";
    return;
  }
  out << "cost model against the replay: " << s.name << " (network " << network_model_name(s.network) << ")\n";
  print_collective_policy(out, s.collectives);
  print_speed_policy(out, s);
  out << "\n";
  std::size_t ws = 24, wb = 16;  // the strategy and source columns: their longest entries
  for (const CostModelRow& r : c.rows) ws = std::max(ws, display_width(r.strategy)), wb = std::max(wb, display_width(r.source));
  char line[256];
  std::snprintf(line, sizeof line, "%13s %11s %9s\n", "estimate (s)", "replay (s)", "error %");
  out << padded("strategy", ws) << " " << padded("estimate by", wb) << " " << line;
  for (const CostModelRow& r : c.rows) {
    std::snprintf(line, sizeof line, "%13.4f %11.4f %+9.1f\n", r.estimate_s, r.replay_s, rounded_for_print(r.error() * 100, 1));
    out << padded(r.strategy, ws) << " " << padded(r.source, wb) << " " << line;
  }
  char tau[32] = "- (no two plans compare)";
  if (c.pairs > 0) std::snprintf(tau, sizeof tau, "%.3f", c.kendall_tau);
  std::snprintf(line, sizeof line, "\nmean |error| %.1f%%, worst %.1f%%, Kendall tau %s over %zu pair%s\n",
                c.mean_abs_error * 100, c.worst_abs_error * 100, tau, c.pairs, c.pairs == 1 ? "" : "s");
  out << line;
  if (!c.not_estimated.empty()) {
    out << "not estimated (no row for them, so in none of the figures above): ";
    for (std::size_t i = 0; i < c.not_estimated.size(); ++i) out << (i ? ", " : "") << c.not_estimated[i];
    out << "\n";
  }
}

}  // namespace ddlsim
