#include "cli/search.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "sim/compute_model.hpp"
#include "support/input_error.hpp"

namespace ddlsim {

nlohmann::ordered_json plan_json(const ParallelPlan& p, const std::string& name) {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["tp"] = p.tp;
  j["pp"] = p.pp;
  j["dp"] = p.dp;
  if (p.ep > 1) j["ep"] = p.ep;
  if (p.cp > 1) j["cp"] = p.cp;
  j["global_batch"] = p.global_batch;
  j["micro_batch"] = p.micro_batch;
  j["schedule"] = schedule_name(p.schedule);
  if (p.virtual_stages > 1) j["virtual_stages"] = p.virtual_stages;
  if (p.microbatch_group > 0) j["microbatch_group"] = p.microbatch_group;
  j["zero"] = p.dp_mode == DataParallelMode::kAllReduce ? 0 : p.dp_mode == DataParallelMode::kZero1 ? 1
              : p.dp_mode == DataParallelMode::kZero2 ? 2 : 3;
  j["sequence_parallel"] = p.sequence_parallel;
  j["recompute"] = p.recompute == Recompute::kNone ? "none" : p.recompute == Recompute::kSelective ? "selective" : "full";
  // The rest only where it differs from the scenario format's default, so that a plan
  // written by --out replays as the plan that was ranked.
  const ParallelPlan defaults;
  if (p.shard > 0) j["shard"] = p.shard;
  if (p.recompute_layers > 0) j["recompute_layers"] = p.recompute_layers;
  if (p.recompute == Recompute::kSelective && p.recompute_modules != defaults.recompute_modules) {
    nlohmann::ordered_json modules = nlohmann::ordered_json::array();
    for (const auto& [name, bit] : kRecomputeModuleNames) {
      if (p.recompute_modules & bit) modules.push_back(name);
    }
    j["recompute_modules"] = modules;
  }
  if (!p.stage_layers.empty()) j["stage_layers"] = p.stage_layers;
  // (Buckets apply to zero 0 and 1 only: a scenario refuses them with ZeRO-2/3.)
  const bool buckets = p.dp_mode == DataParallelMode::kAllReduce || p.dp_mode == DataParallelMode::kZero1;
  if (buckets && p.bucket_bytes != defaults.bucket_bytes) j["bucket_mib"] = p.bucket_bytes / kMiB;
  if (buckets && p.overlap_grad_reduce != defaults.overlap_grad_reduce) j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  if (p.align_grad_reduce) j["align_grad_reduce"] = true;
  if (p.overlap_param_gather) j["overlap_param_gather"] = true;
  if (p.align_param_gather) j["align_param_gather"] = true;
  if (p.overlap_p2p != defaults.overlap_p2p) j["overlap_p2p"] = p.overlap_p2p;
  if (p.overlap_tp_backward != defaults.overlap_tp_backward) j["overlap_tp_backward"] = p.overlap_tp_backward;
  if (p.tp_comm_overlap.on) {
    // true for Transformer Engine's defaults, else the places set otherwise.
    nlohmann::ordered_json ub = nlohmann::ordered_json::object();
    for (int i = 0; i < kUbSites; ++i) {
      const UbOverlap& u = p.tp_comm_overlap.site[i];
      if (u == defaults.tp_comm_overlap.site[i]) continue;
      nlohmann::ordered_json e;
      e["method"] = kUbMethodNames[static_cast<std::size_t>(u.method)];
      e["num_sm"] = u.num_sm;
      if (u.method == UbMethod::kPipeline) e["num_splits"] = u.num_splits;
      e["set_sm_margin"] = u.sm_margin;
      if (u.method == UbMethod::kPipeline) e["fp8_buf"] = u.fp8_buf;
      ub[kUbSiteNames[i]] = e;
    }
    if (ub.empty()) {
      j["tp_comm_overlap"] = true;
    } else {
      j["tp_comm_overlap"] = ub;
    }
  }
  if (p.overlap_ep_comm != defaults.overlap_ep_comm) j["overlap_ep_comm"] = p.overlap_ep_comm;
  if (p.dispatcher != defaults.dispatcher) j["moe_dispatcher"] = dispatcher_name(p.dispatcher);
  if (p.fp8_dispatch != defaults.fp8_dispatch) j["fp8_dispatch"] = p.fp8_dispatch;
  if (p.capacity_factor != defaults.capacity_factor) j["moe_capacity_factor"] = p.capacity_factor;
  if (p.pad_to_capacity != defaults.pad_to_capacity) j["moe_pad_to_capacity"] = p.pad_to_capacity;
  if (p.grouped_gemm != defaults.grouped_gemm) j["moe_grouped_gemm"] = p.grouped_gemm;
  if (p.grad_accumulation != defaults.grad_accumulation) j["grad_accumulation"] = grad_accumulation_name(p.grad_accumulation);
  if (p.grad_reduce_fp32 != defaults.grad_reduce_fp32) j["grad_reduce_fp32"] = p.grad_reduce_fp32;
  if (p.master_remainders) j["master_weights"] = "remainders";
  if (p.fp8_params) j["fp8_params"] = true;
  if (p.tp_only_amax) j["tp_only_amax_red"] = true;
  if (p.order != defaults.order) {
    nlohmann::ordered_json order = nlohmann::ordered_json::array();
    for (MeshAxis a : p.order) order.push_back(axis_name(a));
    j["order"] = order;
  }
  return j;
}

void print_unfit_strategies(const TrainingScenario& s, std::ostream& out) {
  for (const TrainingStrategy& t : s.strategies) {
    if (!t.unfit.empty()) out << "      strategy " << t.plan.name << " is no baseline: " << t.unfit << "\n";
  }
}

nlohmann::ordered_json unfit_strategies_json(const TrainingScenario& s) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const TrainingStrategy& t : s.strategies) {
    if (!t.unfit.empty()) list.push_back({{"name", t.plan.name}, {"reason", t.unfit}});
  }
  return list;
}

SearchResult grid_search(const TrainingScenario& s, const SearchOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult out;
  const std::size_t devices = s.cluster.accelerators().size();
  const std::vector<ParallelPlan> grid = grid_plans(s.model, devices, o.space, &*s.compute);  // balanced layouts too
  out.enumerated = grid.size();
  if (grid.empty()) out.empty_reason = empty_grid_reason(s.model, devices, o.space);
  const AcceleratorSpec& acc = s.catalog.accelerator(s.cluster.node(s.cluster.accelerators()[0]).model);
  const ComputeModel& compute = *s.compute;
  NetworkFabric fabric(s.cluster, s.catalog, s.collectives);
  const auto spent = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::vector<const ParallelPlan*> fitting;
  for (const ParallelPlan& p : grid) {
    if (plan_peak_memory(p, s.model) + s.runtime.bytes(plan_communicators(p)) > acc.memory.value()) {
      ++out.pruned;
      continue;
    }
    fitting.push_back(&p);
  }
  std::vector<SearchCandidate> estimated;
  for (const ParallelPlan* plan : fitting) {
    // Estimates on thousands of accelerators take a while each: the budget covers them.
    if (spent() > o.budget_s) {
      out.out_of_budget = true;
      break;
    }
    if (o.progress) o.progress(true, estimated.size(), fitting.size());
    const ParallelPlan& p = *plan;
    estimated.push_back(SearchCandidate{p, false, estimate_step(s.model, p, fabric, compute), {}});
    if (out.convergence.empty() || estimated.back().estimate_s < out.convergence.back().second) {
      out.convergence.emplace_back(estimated.size(), estimated.back().estimate_s);
    }
  }
  out.estimated = estimated.size();
  std::stable_sort(estimated.begin(), estimated.end(),
                   [](const SearchCandidate& a, const SearchCandidate& b) { return a.estimate_s < b.estimate_s; });

  // The baselines, then the best estimates that are not a baseline's plan, down the list
  // until --replay of them have replayed: a plan too large to replay (TooLargeError) is
  // counted, its reason kept, and the next estimate taken in its place.
  std::vector<SearchCandidate> baselines;
  for (const TrainingStrategy& t : s.strategies) {
    if (t.plan.global_batch != o.space.global_batch || !t.unfit.empty()) continue;  // not comparable, or cannot run here
    baselines.push_back(SearchCandidate{t.plan, true, estimate_step(s.model, t.plan, fabric, compute), {}});
  }
  out.baselines = baselines.size();
  const std::size_t wanted = std::min(estimated.size(), static_cast<std::size_t>(o.replays));
  const auto replay = [&](SearchCandidate c) {
    if (o.progress) o.progress(false, out.ranked.size(), out.baselines + wanted);
    try {
      c.report = run_training_strategy(s, TrainingStrategy{c.plan});
    } catch (const TooLargeError& e) {
      if (out.too_large == 0) out.too_large_reason = c.plan.name + ": " + e.what();
      ++out.too_large;
      return false;
    }
    out.ranked.push_back(std::move(c));
    return true;
  };
  for (SearchCandidate& c : baselines) replay(std::move(c));
  std::size_t taken = 0, tried = 0;
  for (std::size_t i = 0; i < estimated.size() && taken < wanted; ++i) {
    if (spent() > o.budget_s) {
      out.out_of_budget = true;
      break;
    }
    bool known = false;
    for (const SearchCandidate& b : baselines) known = known || same_plan(b.plan, estimated[i].plan);
    if (known) continue;
    SearchCandidate c = estimated[i];
    c.plan.name = "grid-" + std::to_string(++tried);  // its rank among the estimates tried
    if (replay(std::move(c))) ++taken;
  }
  // Plans that fit in memory first (a baseline the memory model says does not fit is
  // replayed, and shown, but is never the best while one that fits was found).
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
    if (a.report.fits_in_memory != b.report.fits_in_memory) return a.report.fits_in_memory;
    return a.report.step_time_s < b.report.step_time_s;
  });
  return out;
}

}  // namespace ddlsim
