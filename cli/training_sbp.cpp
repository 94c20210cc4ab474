// SBP strategies in training scenarios: the model as an SBP chain, a strategy's
// signatures as a plan, and its replay as a TrainingReport like a Megatron plan's.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/training.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/compute_model.hpp"
#include "sim/core/engine.hpp"
#include "sim/usage.hpp"
#include "strategies/sbp_lowering.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"
#include "workloads/model_workload.hpp"
#include "workloads/presets.hpp"

namespace ddlsim {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

SbpChain scenario_chain(const TrainingScenario& s, std::int64_t global_batch, bool cut) {
  WorkloadOptions o = s.workload.options;
  o.batch = global_batch;
  if (!s.transformer) return chain_of(build_workload_preset(*s.workload.preset, o), global_batch);
  // Cut to three layers, the middle one standing for all but the first and the last
  // (which carries the final norm before the output layer).
  TransformerConfig m = s.model;
  if (m.parallel_layers) {
    throw InputError("sbp: " + m.name + " runs attention and MLP side by side (parallel layers), not as one chain of "
                     "GEMMs; plan it with tp/pp/dp strategies, or set workload.parallel_layers to false");
  }
  if (m.experts > 0) {
    throw InputError("sbp: " + m.name + " is a mixture of experts, whose experts' grouped GEMMs SBP does not shard; "
                     "plan it with tp/pp/dp strategies");
  }
  if (m.mla()) {
    throw InputError("sbp: " + m.name + " has multi-head latent attention, whose latents branch off one input, not one "
                     "chain of GEMMs; plan it with tp/pp/dp strategies");
  }
  if (m.fp8_gemms) {
    throw InputError("sbp: SBP plans price every GEMM in the model's dtype; plan fp8 GEMMs (workload.gemm_dtype) with "
                     "tp/pp/dp strategies");
  }
  if (m.mtp_layers > 0) {
    throw InputError("sbp: " + m.name + " has multi-token prediction, whose depths branch off the model's last hidden state, "
                     "not one chain of GEMMs; plan it with tp/pp/dp strategies, or set workload.mtp_layers to 0");
  }
  const std::int64_t layers = m.layers;
  if (cut) m.layers = std::min<std::int64_t>(layers, 3);
  SbpChain c = chain_of(build_transformer(m, global_batch), global_batch);
  for (LinearLayer& l : c.layers) {
    if (l.role == "layer*.qkv") l.column_groups = m.kv_heads;  // a column split must keep whole heads
  }
  if (cut && layers > 3) {
    for (LinearLayer& l : c.layers) {
      if (l.name.rfind("layer1.", 0) == 0) l.repeat = static_cast<double>(layers - 2);
    }
    c.replicated_params = chain_of(build_transformer(s.model, 1)).replicated_params;  // every layer's norms and biases
  }
  return c;
}

SbpPlan sbp_plan_of(const SbpChain& chain, const SbpStrategy& strategy, const std::string& path) {
  const auto roles = sbp_roles(chain);
  std::vector<std::string> names;
  for (const auto& r : roles) names.push_back(r.first);
  SbpPlan plan;
  plan.dims = strategy.mesh;
  plan.micro_batches = strategy.micro_batches;
  plan.layers.resize(chain.layers.size());
  const MatmulSignature* rest = nullptr;  // "*": every role not named
  for (const auto& [role, sig] : strategy.signatures) {
    if (role == "*") {
      rest = &sig;
      continue;
    }
    const auto it = std::find(names.begin(), names.end(), role);
    if (it == names.end()) {
      throw InputError(path + "." + role + ": the model has no layer role '" + role + "'" + did_you_mean(role, names) +
                       "; its roles: " + joined(names));
    }
    for (std::size_t i : roles[static_cast<std::size_t>(it - names.begin())].second) plan.layers[i] = sig;
  }
  for (const auto& entry : roles) {
    const std::string& role = entry.first;
    const std::vector<std::size_t>& layers = entry.second;
    const bool given = std::any_of(strategy.signatures.begin(), strategy.signatures.end(),
                                   [&](const auto& e) { return e.first == role; });
    if (!given && rest) {
      for (std::size_t i : layers) plan.layers[i] = *rest;
      continue;
    }
    if (!given) throw InputError(path + ": missing the signature of '" + role + "' (every role needs one, or give \"*\" for the roles not named: " + joined(names) + ")");
  }
  return plan;
}

nlohmann::ordered_json sbp_strategy_json(const std::string& name, std::int64_t global_batch, const SbpChain& chain,
                                         const SbpPlan& plan) {
  nlohmann::ordered_json sigs = nlohmann::ordered_json::object();
  for (const auto& [role, layers] : sbp_roles(chain)) sigs[role] = to_string(plan.layers[layers.front()]);
  nlohmann::ordered_json j;
  j["name"] = name;
  j["global_batch"] = global_batch;
  j["sbp"] = {{"mesh", plan.dims}, {"micro_batches", plan.micro_batches}, {"signatures", sigs}};
  return j;
}

SbpStrategy sbp_strategy_of(const SbpChain& chain, const SbpPlan& plan) {
  SbpStrategy st;
  st.mesh = plan.dims;
  st.micro_batches = plan.micro_batches;
  for (const auto& [role, layers] : sbp_roles(chain)) st.signatures.push_back({role, plan.layers[layers.front()]});
  return st;
}

TrainingReport run_sbp_strategy(const TrainingScenario& s, const TrainingStrategy& strategy, const TrainingOutputs& outputs) {
  const std::int64_t batch = strategy.plan.global_batch;
  const SbpChain chain = scenario_chain(s, batch / strategy.sbp->micro_batches, false);
  const SbpPlan plan = sbp_plan_of(chain, *strategy.sbp, "strategies." + strategy.plan.name + ".sbp.signatures");
  NetworkFabric fabric(s.cluster, s.catalog, s.collectives);
  const AcceleratorSpec& acc = accelerator_of(s);
  const ComputeModel& compute = *s.compute;
  const std::vector<NodeId> devices(s.cluster.accelerators().begin(), s.cluster.accelerators().end());
  // Refuse graphs that would exhaust memory before building them: a task per device and
  // stage, forward and backward.
  // Under the analytical network, graphs of more than 2 million tasks are folded to
  // device 0 (exact on symmetric meshes; strategies/sbp_lowering.hpp).
  const double per_device = 4.0 * 2.0 * static_cast<double>(chain.layers.size()) * strategy.sbp->micro_batches;
  const double tasks = static_cast<double>(devices.size()) * per_device;
  const bool fold = s.network == NetworkModelKind::kAnalytical && tasks > 2e6;
  if (!fold && tasks > 60e6) {
    throw TooLargeError("strategies." + strategy.plan.name + ": this plan would replay about " +
                     std::to_string(static_cast<long long>(tasks)) +
                     " tasks, more than the limit of 60000000; the analytical network (simulation.network) folds it");
  }
  LoweredSbpStep step = lower_sbp_chain(chain, plan, devices, fabric, compute, s.network, fold);
  std::vector<ResourceModel*> models;
  for (auto& r : step.resources) models.push_back(r.get());
  ResourceUsage usage;
  const ReplayResult result = replay_with_outputs(step.graph, models, {&usage}, outputs, s.cluster);

  TrainingReport r;
  r.name = strategy.plan.name;
  std::string mesh;
  for (int d : plan.dims) mesh += (mesh.empty() ? "" : "x") + std::to_string(d);
  r.plan = "sbp on mesh " + mesh + (plan.micro_batches > 1 ? ", " + std::to_string(plan.micro_batches) + " micro-batches" : "") +
           (step.folded ? (step.fold_exact ? " (folded)" : " (folded, slowest lines)") : "");
  r.devices = static_cast<int>(devices.size());
  r.step_time_s = result.makespan.value();
  r.samples_per_s = static_cast<double>(batch) / r.step_time_s;
  // Model FLOPs: a transformer's 6N + 12 l h s per token; a CNN's or MLP's forward and
  // backward FLOPs of its operator graph per sample.
  double flops = 0;
  if (s.transformer) {
    r.tokens_per_s = r.samples_per_s * static_cast<double>(s.model.seq);
    flops = model_flops_per_token(s.model) * static_cast<double>(batch) * static_cast<double>(s.model.seq);
  } else {
    WorkloadOptions o = s.workload.options;
    o.batch = 1;
    const OpCost one = build_workload_preset(*s.workload.preset, o).totals();
    flops = (one.fwd_flops + one.bwd_flops) * static_cast<double>(batch);
  }
  const double peak = compute.peak(s.model.dtype);
  r.model_tflops_per_device = flops / r.step_time_s / r.devices / 1e12;
  r.hardware_tflops_per_device = r.model_tflops_per_device;  // no recomputation
  r.mfu = r.model_tflops_per_device * 1e12 / peak;
  r.hfu = r.mfu;
  for (ResourceId c : step.compute) r.compute_busy_s = std::max(r.compute_busy_s, usage.entries()[c.value].busy.value());
  r.compute_parts = step.compute_parts;
  // (What the busiest stream was busy beyond its tasks' own times: interference.)
  if (!step.graph.interference().empty()) r.compute_parts.interference = std::max(0.0, r.compute_busy_s - r.compute_parts.total());
  r.sbp = true;
  // Every wait is communication (boxing, gradient all-reduces): there is no pipeline.
  r.exposed_comm_s = std::max(0.0, r.step_time_s - r.compute_busy_s);
  r.idle_s = r.exposed_comm_s;
  const SbpMemory mem = sbp_memory(chain, plan, s.runtime);
  r.set_memory(mem.total(), mem.weights, mem.gradients, mem.optimizer, mem.runtime);
  r.device_memory_bytes = acc.memory.value();
  r.fits_in_memory = r.peak_memory_bytes <= r.device_memory_bytes;
  r.tasks = result.tasks;
  r.transfers = step.collectives;
  const auto* net = dynamic_cast<const NetworkModel*>(step.resources[step.network.value].get());
  if (net) {
    r.busiest_links = busiest_links(s.cluster, net->link_bytes(), r.step_time_s, kBusiestLinks,
                                    s.network != NetworkModelKind::kAnalytical);
  }
  if (net && outputs.all_links) r.all_links = busiest_links(s.cluster, net->link_bytes(), r.step_time_s, net->link_bytes().size());
  return r;
}

}  // namespace ddlsim
