// `ddlsim search --method autoddl|mcmc`: SBP plans for the whole model, found, replayed and
// compared with the expert baselines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/search.hpp"
#include "sim/compute_model.hpp"
#include "strategies/sbp_mcmc.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"

namespace ddlsim {
namespace {

struct Candidate {
  TrainingStrategy strategy;
  std::string origin;  // "autoddl", "mcmc", "sbp baseline", "scenario"
  double estimate_s = 0;
  SbpCost cost;        // SBP plans (strategy.sbp set): the analytical breakdown
  TrainingReport report;
};

}  // namespace

nlohmann::ordered_json sbp_search(const TrainingScenario& s, const SbpSearchOptions& o, std::ostream& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t batch = o.global_batch;
  const std::vector<NodeId> devices(s.cluster.accelerators().begin(), s.cluster.accelerators().end());
  NetworkFabric fabric(s.cluster, s.catalog, s.collectives);
  const AcceleratorSpec& acc = accelerator_of(s);
  const ComputeModel& compute = *s.compute;
  const double memory = acc.memory.value();
  const char* method = o.mcmc ? "mcmc" : "autoddl";

  // Micro-batches 1, 2, 4, ... (dividing the batch): the best plan that fits, by its
  // estimate (autoddl) or replay (mcmc); more micro-batches are tried while that improves.
  SbpPlan found;
  SbpChain found_chain;
  double found_cost = std::numeric_limits<double>::infinity();
  bool found_fits = false;
  std::uint64_t evaluated = 0;
  // (plans evaluated, the lowest cost so far) at each new lowest, over every search.
  std::vector<std::pair<std::uint64_t, double>> convergence;
  auto converged = [&](const std::vector<std::pair<std::uint64_t, double>>& steps) {
    for (const auto& [n, cost] : steps) {
      if (convergence.empty() || cost < convergence.back().second) convergence.emplace_back(evaluated + n, cost);
    }
  };
  // One search at k micro-batches, remembered.
  struct AtK {
    SbpPlan plan;
    SbpChain chain;
    double cost = 0;
    SbpMemory memory;
    bool fits = false;
  };
  std::map<std::int64_t, AtK> tried;
  const std::shared_ptr<SbpPriceCache> prices = make_sbp_price_cache();  // one for every micro-batch count
  auto search_at = [&](std::int64_t k) -> const AtK& {
    if (const auto it = tried.find(k); it != tried.end()) return it->second;
    AtK r;
    if (o.progress) o.progress("searching " + std::to_string(k) + " micro-batch" + (k > 1 ? "es" : ""));
    r.chain = scenario_chain(s, batch / k, true);
    if (o.mcmc) {
      const SbpChain full = scenario_chain(s, batch / k, false);
      McmcOptions mo;
      mo.seed = o.seed;
      mo.iterations = o.iterations;
      mo.network = s.network;
      mo.memory_bytes = memory;
      mo.runtime = s.runtime;
      mo.budget_s = o.budget_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      SbpPlan start = data_parallel_plan(full, {static_cast<int>(devices.size())});
      start.micro_batches = static_cast<int>(k);
      const McmcResult m = mcmc_sbp_search(full, start, devices, fabric, compute, mo);
      converged(m.convergence);
      evaluated += m.replayed;
      r.plan = sbp_plan_of(r.chain, sbp_strategy_of(full, m.plan), "mcmc");  // the same roles' signatures
      r.cost = m.step_s;
    } else {
      AutoddlOptions ao;
      ao.memory_bytes = memory;
      ao.runtime = s.runtime;
      ao.micro_batches = static_cast<int>(k);
      ao.prices = prices;
      const SbpSearchResult a = autoddl_search(r.chain, devices, fabric, compute, ao);
      converged(a.convergence);
      evaluated += a.evaluated;
      r.plan = a.plan;
      r.cost = a.cost.total();
    }
    r.memory = sbp_memory(r.chain, r.plan, s.runtime);
    r.fits = sbp_plan_problem(r.chain, r.plan).empty() && r.memory.total() <= memory;
    return tried.emplace(k, std::move(r)).first->second;
  };
  auto valid = [&](std::int64_t k) { return k >= 1 && k <= batch && batch % k == 0; };
  // Up, by as many micro-batches as the last plan's activations need to fit (at least
  // twice as many), until one fits; then fewer while a search there finds a faster plan
  // that fits; then more while the plan found, priced with twice the micro-batches, is
  // faster, or twice the micro-batches let data parallelism fit where it did not (a
  // search there confirms it).
  std::int64_t k = 1, lowest_unfit = 0;
  while (!search_at(k).fits) {
    lowest_unfit = k;
    const AtK& r = search_at(k);
    std::int64_t next = 2 * k;
    const double room = memory - (r.memory.weights + r.memory.gradients + r.memory.optimizer + r.memory.runtime);
    if (room > 0) {
      while (valid(next * 2) && r.memory.activations * static_cast<double>(k) / static_cast<double>(next) > room) next *= 2;
    }
    if (!valid(next)) break;
    k = next;
  }
  auto fits_in_memory = [&](const SbpChain& chain, const SbpPlan& plan) {
    return sbp_plan_problem(chain, plan).empty() && sbp_memory(chain, plan, s.runtime).total() <= memory;
  };
  // The plan found at k with k' micro-batches instead: whether it fits, and its cost.
  auto repriced = [&](std::int64_t from, std::int64_t to) {
    const AtK& r = search_at(from);
    const SbpChain chain = scenario_chain(s, batch / to, true);
    SbpPlan plan = sbp_plan_of(chain, sbp_strategy_of(r.chain, r.plan), "search");
    plan.micro_batches = static_cast<int>(to);
    const bool fits = fits_in_memory(chain, plan);
    return std::make_pair(fits, fits ? sbp_cost(chain, plan, devices, fabric, compute).total() : 0.0);
  };
  // Whether data parallelism in SBP terms fits with k micro-batches: when it does not at
  // k but does at 2k, the search at k had to give up the plan that needs only gradient
  // all-reduces, and repricing k's plan at 2k says nothing about it.
  auto dp_fits = [&](std::int64_t kk) {
    const SbpChain chain = scenario_chain(s, batch / kk, true);
    SbpPlan plan = data_parallel_plan(chain, {static_cast<int>(devices.size())});
    plan.micro_batches = static_cast<int>(kk);
    return fits_in_memory(chain, plan);
  };
  for (const std::int64_t step : {std::int64_t{-1}, std::int64_t{1}}) {  // halve, then double
    while (search_at(k).fits) {
      const std::int64_t next = step < 0 ? k / 2 : k * 2;
      if (!valid(next) || (step < 0 && next <= lowest_unfit) || tried.count(next)) break;
      if (step > 0) {
        const auto [fits, cost] = repriced(k, next);
        const bool gains = fits && cost < search_at(k).cost;
        if (!gains && (dp_fits(k) || !dp_fits(next))) break;  // else data parallelism fits only at next
      }
      if (!search_at(next).fits || search_at(next).cost >= search_at(k).cost) break;
      k = next;
    }
  }
  // The best that fits (else the last tried).
  for (const auto& [kk, r] : tried) {
    if (r.fits && (!found_fits || r.cost < found_cost)) {
      found = r.plan;
      found_chain = r.chain;
      found_cost = r.cost;
      found_fits = true;
    }
  }
  if (!found_fits) {
    found = tried.rbegin()->second.plan;
    found_chain = tried.rbegin()->second.chain;
  }

  // The candidates: the found plan; data parallelism and Megatron in SBP terms, each with
  // the fewest micro-batches (1, 2, 4, ...) with which it fits (baseline_plan); and the
  // scenario's strategies of this global batch.
  std::vector<Candidate> all;
  std::vector<std::pair<std::string, std::string>> skipped;  // baselines that cannot run this model, and why
  auto add_sbp = [&](const std::string& name, const std::string& origin, const SbpChain& chain, const SbpPlan& plan) {
    if (std::string why = sbp_plan_problem(chain, plan); !why.empty()) {
      if (origin != method) skipped.emplace_back(name, std::move(why));  // the found plan's own note is below
      return;
    }
    Candidate c;
    c.strategy.plan.name = name;
    c.strategy.plan.global_batch = batch;
    c.strategy.sbp = sbp_strategy_of(chain, plan);
    c.origin = origin;
    c.cost = sbp_cost(chain, plan, devices, fabric, compute);
    c.estimate_s = c.cost.total();
    all.push_back(std::move(c));
  };
  add_sbp(method, method, found_chain, found);
  std::map<std::int64_t, SbpChain> chains;  // by micro-batch count
  auto chain_at = [&](std::int64_t kk) -> const SbpChain& {
    auto it = chains.find(kk);
    if (it == chains.end()) it = chains.emplace(kk, kk == found.micro_batches ? found_chain : scenario_chain(s, batch / kk, true)).first;
    return it->second;
  };
  // A baseline with the fewest micro-batches that can run it and fit; else the fewest
  // that can run it; else the found plan's count.
  auto baseline_plan = [&](const std::function<SbpPlan(const SbpChain&)>& make) {
    std::optional<SbpPlan> runs;
    for (std::int64_t kk = 1; valid(kk); kk *= 2) {
      SbpPlan p = make(chain_at(kk));
      p.micro_batches = static_cast<int>(kk);
      if (!sbp_plan_problem(chain_at(kk), p).empty()) continue;
      if (fits_in_memory(chain_at(kk), p)) return p;
      if (!runs) runs = std::move(p);
    }
    if (runs) return *runs;
    SbpPlan p = make(found_chain);
    p.micro_batches = found.micro_batches;
    return p;
  };
  {
    const SbpPlan dp = baseline_plan([&](const SbpChain& chain) { return data_parallel_plan(chain, {static_cast<int>(devices.size())}); });
    add_sbp("sbp-data-parallel", "sbp baseline", chain_at(dp.micro_batches), dp);
  }
  // Megatron: tensor parallelism over tp devices (the mesh's inner dimension, where a
  // server's are), data parallelism over the groups; of the tp that divide the devices
  // and split every layer, the one the analytical cost ranks first (fitting ones first).
  {
    const int n = static_cast<int>(devices.size());
    std::optional<SbpPlan> mt;
    bool mt_fits = false;
    double mt_cost = 0;
    std::string why_not;  // tp = the smallest divisor's problem, if none can run
    for (int tp = 2; tp <= n; ++tp) {
      if (n % tp != 0) continue;
      SbpPlan p = baseline_plan([&](const SbpChain& chain) { return megatron_plan(chain, tp, n / tp); });
      const SbpChain& chain = chain_at(p.micro_batches);
      if (std::string why = sbp_plan_problem(chain, p); !why.empty()) {
        if (why_not.empty()) why_not = "tp " + std::to_string(tp) + ", " + why;
        continue;
      }
      const bool fits = fits_in_memory(chain, p);
      const double cost = sbp_cost(chain, p, devices, fabric, compute).total();
      if (!mt || (fits && !mt_fits) || (fits == mt_fits && cost < mt_cost)) {
        mt = std::move(p);
        mt_fits = fits;
        mt_cost = cost;
      }
    }
    if (mt) add_sbp("sbp-megatron", "sbp baseline", chain_at(mt->micro_batches), *mt);
    else if (n > 1) skipped.emplace_back("sbp-megatron", "no tp dividing the " + std::to_string(n) + " devices splits every layer (" + why_not + ")");
  }
  for (const TrainingStrategy& t : s.strategies) {
    if (t.plan.global_batch != batch || !t.unfit.empty()) continue;  // not comparable, or cannot run here
    Candidate c;
    c.strategy = t;
    c.origin = "scenario";
    if (c.strategy.plan.name == method) c.strategy.plan.name += " (scenario)";  // not the plan just found
    if (c.strategy.sbp) {
      const SbpChain chain = scenario_chain(s, batch / t.sbp->micro_batches, true);
      c.cost = sbp_cost(chain, sbp_plan_of(chain, *t.sbp, t.plan.name), devices, fabric, compute);
      c.estimate_s = c.cost.total();
    } else {
      c.estimate_s = estimate_step(s.model, t.plan, fabric, compute);
    }
    all.push_back(std::move(c));
  }
  if (all.empty()) {
    throw InputError("--global-batch: no plan runs a global batch of " + std::to_string(batch) + " on " +
                     std::to_string(devices.size()) + " devices: " +
                     (o.mcmc ? "the MCMC search's " + std::to_string(o.iterations) + " iterations from data parallelism found none (try more --iterations), "
                             : std::string("the search found none, ")) +
                     "data parallelism and Megatron's split cannot divide it, and no strategy of the scenario has that batch");
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (o.progress) o.progress("replaying " + std::to_string(i + 1) + "/" + std::to_string(all.size()));
    all[i].report = run_training_strategy(s, all[i].strategy);
  }
  // Fastest first among those that fit; then those that do not (ties: in the order above).
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.report.fits_in_memory != b.report.fits_in_memory) return a.report.fits_in_memory;
    return a.report.step_time_s < b.report.step_time_s;
  });
  const Candidate& best = all.front();
  nlohmann::ordered_json best_json;
  if (best.strategy.sbp) {
    const SbpChain chain = scenario_chain(s, batch / best.strategy.sbp->micro_batches, true);
    best_json = sbp_strategy_json("search-best", batch, chain, sbp_plan_of(chain, *best.strategy.sbp, "search-best"));
  } else {
    best_json = plan_json(best.strategy.plan, "search-best");
  }

  // Why the found plan is faster or slower: its analytical breakdown against SBP data
  // parallelism's (the same model), and its replay against the best baseline's.
  const Candidate* self = nullptr;
  const Candidate* sdp = nullptr;
  const Candidate* rival = nullptr;
  for (const Candidate& c : all) {
    if (c.origin == method) self = &c;
    else if (c.strategy.plan.name == "sbp-data-parallel") sdp = &c;
    if (c.origin != method && c.report.fits_in_memory && !rival) rival = &c;
  }

  if (o.json) {
    nlohmann::ordered_json j;
    j["scenario"] = s.name;
    j["method"] = method;
    j["global_batch"] = batch;
    j["evaluated"] = evaluated;
    nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
    for (const Candidate& c : all) {
      nlohmann::ordered_json e;
      e["name"] = c.strategy.plan.name;
      e["origin"] = c.origin;
      e["plan"] = c.report.plan;
      e["estimate_s"] = c.estimate_s;
      if (c.strategy.sbp) {
        e["estimate_breakdown_s"] = {{"compute", c.cost.compute_s},
                                     {"boxing", c.cost.boxing_s},
                                     {"gradient_sync", c.cost.gradient_sync_s},
                                     {"gradient_sync_total", c.cost.gradient_sync_total_s}};
      }
      e["step_time_s"] = c.report.step_time_s;
      e["mfu"] = c.report.mfu;
      e["compute_s"] = c.report.compute_busy_s;
      e["exposed_comm_s"] = c.report.exposed_comm_s;
      e["peak_memory_bytes"] = TrainingReport::whole(c.report.peak_memory_bytes);
      e["fits_in_memory"] = c.report.fits_in_memory;
      ranked.push_back(e);
    }
    j["ranked"] = ranked;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& [n, cost] : convergence) steps.push_back({{"evaluations", n}, {"best_estimate_s", cost}});
    if (!convergence.empty() && convergence.back().first < evaluated) {  // the end of the search
      steps.push_back({{"evaluations", evaluated}, {"best_estimate_s", convergence.back().second}});
    }
    j["convergence"] = steps;
    j["found"] = sbp_strategy_json(method, batch, found_chain, found);
    j["best"] = best_json;
    j["unfit_strategies"] = unfit_strategies_json(s);
    nlohmann::ordered_json no_baseline = nlohmann::ordered_json::array();
    for (const auto& [name, why] : skipped) no_baseline.push_back({{"name", name}, {"reason", why}});
    j["skipped_baselines"] = no_baseline;
    out << j.dump(2) << "\n";
    return best_json;
  }

  out << "scenario: " << s.name << " (" << s.model.name << " on " << devices.size() << " accelerators, global batch "
      << batch << ", network " << network_model_name(s.network) << ")\n";
  print_collective_policy(out, s.collectives);
  print_speed_policy(out, s);
  out << "searched: per-role SBP signatures of every GEMM (" << sbp_roles(found_chain).size()
      << " roles) on meshes of " << (o.mcmc ? "1 or 2" : "1 to 3") << " dimensions, "
      << (o.mcmc ? "Metropolis-Hastings with the replay as cost" : "coordinate descent on the analytical cost")
      << ", as many micro-batches as fit in memory, then fewer or more while faster\n\n";
  char line[400];
  std::snprintf(line, sizeof line, "%4s  %-20s %-13s %-58s %13s %10s %6s %10s\n", "rank", "name", "origin", "plan",
                "estimate (s)", "step (s)", "MFU %", "peak (GiB)");
  out << line;
  for (std::size_t i = 0; i < all.size() && i < static_cast<std::size_t>(o.top); ++i) {
    const Candidate& c = all[i];
    std::snprintf(line, sizeof line, "%4zu  %-20s %-13s %-58s %13.3f %10.3f %6.1f %10.2f%s\n", i + 1,
                  c.strategy.plan.name.c_str(), c.origin.c_str(), c.report.plan.c_str(), c.estimate_s,
                  c.report.step_time_s, c.report.mfu * 100, c.report.peak_memory_bytes / kGiB,
                  c.report.fits_in_memory ? "" : "  OUT OF MEMORY");
    out << line;
  }
  out << "\nfound (" << method << "): " << describe_sbp_plan(found_chain, found);
  if (found.micro_batches > 1) out << "  in " << found.micro_batches << " micro-batches\n";
  if (!self) out << "  (it cannot run this model: " << sbp_plan_problem(found_chain, found) << ")\n";
  const bool same_as_dp = self && sdp && sbp_strategy_json("", 0, found_chain, found) ==
                                                sbp_strategy_json("", 0, found_chain, sbp_plan_of(found_chain, *sdp->strategy.sbp, ""));
  if (same_as_dp) out << "it is data parallelism: no other signature lowers the cost\n";
  if (self && sdp && !same_as_dp) {
    std::snprintf(line, sizeof line,
                  "why, against SBP data parallelism (the same cost model, s per step): compute %.3f -> %.3f, "
                  "activation re-layouts %.3f -> %.3f, gradient synchronization %.3f -> %.3f exposed "
                  "(%.3f -> %.3f in all, beside the last backward)\n",
                  sdp->cost.compute_s, self->cost.compute_s, sdp->cost.boxing_s, self->cost.boxing_s,
                  sdp->cost.gradient_sync_s, self->cost.gradient_sync_s, sdp->cost.gradient_sync_total_s,
                  self->cost.gradient_sync_total_s);
    out << line;
  }
  if (self && rival) {
    const double gain = 1 - self->report.step_time_s / rival->report.step_time_s;
    std::snprintf(line, sizeof line,
                  "against the best other plan that fits (%s, replayed): step %.3f -> %.3f s (%+.1f%%), compute %.3f -> %.3f s, "
                  "exposed communication %.3f -> %.3f s\n",
                  rival->strategy.plan.name.c_str(), rival->report.step_time_s, self->report.step_time_s, rounded_for_print(-gain * 100, 1),
                  rival->report.compute_busy_s, self->report.compute_busy_s, rival->report.exposed_comm_s,
                  self->report.exposed_comm_s);
    out << line;
  }
  out << "best: " << best.strategy.plan.name << " (" << best.report.plan << "), " << best.report.step_time_s
      << " s per step\n\n" << evaluated << (o.mcmc ? " plans replayed" : " plans estimated") << " in the search\n";
  print_unfit_strategies(s, out);
  for (const auto& [name, why] : skipped) out << "      " << name << " is no baseline: " << why << "\n";
  return best_json;
}

}  // namespace ddlsim
