#include "cli/training.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/scenario.hpp"
#include "scenarios/default_scenario.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/collectives.hpp"
#include "sim/compute_model.hpp"
#include "sim/core/engine.hpp"
#include "sim/usage.hpp"
#include "strategies/memory.hpp"
#include "strategies/stage_costs.hpp"
#include "strategies/transformer_step.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"
#include "support/json_reader.hpp"
#include "topology/presets.hpp"
#include "workloads/model_workload.hpp"
#include "workloads/presets.hpp"

namespace ddlsim {
namespace {

struct Times {
  double start = 0, end = 0;
};

// Start and end of every task, to break the critical device's step down.
class TaskTimes final : public Observer {
 public:
  void on_begin(const TaskGraph& g, std::span<ResourceModel* const>) override { times_.assign(g.size(), Times{}); }
  void on_task_start(TaskId t, ResourceId, Seconds at) override { times_[t.value].start = at.value(); }
  void on_task_end(TaskId t, ResourceId, Seconds at) override { times_[t.value].end = at.value(); }
  [[nodiscard]] const Times& of(TaskId t) const { return times_[t.value]; }

 private:
  std::vector<Times> times_;
};

// Time spans [start, end), sorted and merged.
using Spans = std::vector<std::pair<double, double>>;
Spans merged(Spans v) {
  std::sort(v.begin(), v.end());
  Spans out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}
// The spans of the tasks a stream ran.
Spans stream_spans(const TaskGraph& g, const TaskTimes& times, ResourceId stream) {
  Spans v;
  for (std::uint32_t t = 0; t < g.size(); ++t) {
    if (const auto* c = std::get_if<Compute>(&g.kind(TaskId(t))); c != nullptr && c->stream == stream) {
      v.emplace_back(times.of(TaskId(t)).start, times.of(TaskId(t)).end);
    }
  }
  return merged(std::move(v));
}
// How much of `xs` lies outside `covered` (both merged).
double outside(const Spans& xs, const Spans& covered) {
  double total = 0.0;
  std::size_t j = 0;
  for (const auto& [a, b] : xs) {
    while (j < covered.size() && covered[j].second <= a) ++j;
    double len = b - a;
    for (std::size_t k = j; k < covered.size() && covered[k].first < b; ++k) {
      len -= std::min(b, covered[k].second) - std::max(a, covered[k].first);
    }
    total += std::max(0.0, len);
  }
  return total;
}

// The workload: a transformer (Megatron-style and SBP strategies) or a CNN / MLP preset
// (SBP strategies only).
void read_model(JsonObject& w, const std::string& base_dir, const nlohmann::json& raw, TrainingScenario& s) {
  if (raw.contains("model") && raw["model"] == "synthetic") {
    throw InputError("workload.model: the synthetic model runs on a uniform cluster (cluster.devices, ...); on a preset "
                     "cluster, name a transformer (see 'ddlsim workload --list')");
  }
  if (w.has("batch")) {
    throw InputError(w.field_path("batch") + ": the strategies set the batch (global_batch, micro_batch)");
  }
  s.workload = read_model_workload(w, base_dir);
  if (const auto c = model_workload_transformer(s.workload)) {
    s.model = *c;
    return;
  }
  s.transformer = false;
  if (s.workload.options.seq) throw InputError("workload.seq: " + *s.workload.preset + " is not a transformer; it has no sequence");
  if (s.workload.options.flash_attention) {
    throw InputError("workload.attention: " + *s.workload.preset + " is not a transformer; it has no attention");
  }
  if (s.workload.options.parallel_layers) {
    throw InputError("workload.parallel_layers: " + *s.workload.preset + " is not a transformer; it has no layers to run side by side");
  }
  if (s.workload.options.dropout) {
    throw InputError("workload.dropout: " + *s.workload.preset + " is not a transformer (a CNN's dropouts are part of its preset)");
  }
  if (s.workload.options.gemm_dtype) {
    throw InputError("workload.gemm_dtype: " + *s.workload.preset + " is not a transformer (its dtype sets its GEMMs')");
  }
  s.model = TransformerConfig{};
  s.model.name = *s.workload.preset;
  s.model.dtype = s.workload.options.dtype.value_or(DataType::kFp32);
}

// A strategy's global_batch, by default the workload's.
std::int64_t strategy_global_batch(JsonObject& o, const TrainingScenario& s) {
  if (s.workload.global_batch) return o.positive_int_or("global_batch", *s.workload.global_batch);
  if (!o.has("global_batch")) {
    throw InputError(o.field_path("global_batch") + ": missing (sequences per step; or give workload.global_batch for every strategy)");
  }
  return o.positive_int("global_batch");
}

// {"name", "global_batch", "sbp": {"mesh": [...], "signatures": {ROLE: SIGNATURE, ...}}}
// With `keep_unfit`, a strategy that does not fit the cluster (its shape, its batch
// against its shape) comes back with the reason in `unfit` rather than thrown.
TrainingStrategy read_sbp_strategy(JsonObject& o, const nlohmann::json& raw, const TrainingScenario& s, std::size_t devices,
                                   bool keep_unfit) {
  TrainingStrategy t;
  t.plan.name = o.name("name");
  t.plan.global_batch = strategy_global_batch(o, s);
  if (t.plan.global_batch > 1'000'000) throw InputError(o.field_path("global_batch") + ": at most 1000000 for an SBP strategy");
  JsonObject sb = o.object("sbp");
  SbpStrategy st;
  JsonArray mesh = sb.array("mesh");
  st.mesh = mesh.ints(1, 1'000'000, "a mesh dimension's size (1 to 1000000)");
  if (st.mesh.empty() || st.mesh.size() > 3) {
    throw InputError(mesh.path() + ": expected 1 to 3 dimensions, got " + std::to_string(st.mesh.size()));
  }
  std::size_t product = 1;
  for (int d : st.mesh) product *= static_cast<std::size_t>(d);
  if (product != devices) {
    t.unfit = mesh.path() + ": the mesh has " + std::to_string(product) + " devices; the cluster has " +
              std::to_string(devices) + " accelerators";
    if (!keep_unfit) throw InputError(t.unfit);
  }
  const std::int64_t micro_batches = sb.positive_int_or("micro_batches", 1);
  if (micro_batches > 1'000'000) {
    throw InputError(sb.field_path("micro_batches") + ": expected at most 1000000, got " + std::to_string(micro_batches));
  }
  st.micro_batches = static_cast<int>(micro_batches);
  if (t.plan.global_batch % st.micro_batches != 0) {
    throw InputError(sb.field_path("micro_batches") + ": " + std::to_string(st.micro_batches) + " does not divide the global batch (" +
                     std::to_string(t.plan.global_batch) + ")");
  }
  JsonObject sigs = sb.object("signatures");
  const std::string sigs_path = sigs.path();
  for (const auto& [role, value] : raw.at("sbp").at("signatures").items()) {
    sigs.known(role);
    const std::string path = sigs.field_path(role);
    if (!value.is_string()) throw InputError(path + ": expected a signature like \"[S(0), B] x [B, S(1)] -> [S(0), S(1)]\", got " + value.dump());
    try {
      st.signatures.push_back({role, parse_matmul_signature(value.get<std::string>(), st.mesh.size())});
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
  }
  sigs.finish();
  sb.finish();
  o.finish();
  t.sbp = std::move(st);
  const SbpChain chain = scenario_chain(s, t.plan.global_batch / t.sbp->micro_batches, true);
  const SbpPlan plan = sbp_plan_of(chain, *t.sbp, sigs_path);
  if (const std::string why = sbp_plan_problem(chain, plan); !why.empty()) throw InputError(sigs_path + ": " + why);
  return t;
}

// strategy.tp_comm_overlap: true (Transformer Engine's default settings), false, or an
// object of settings per overlapped GEMM in TE's form (ub_tp_comm_overlap_cfg), those
// left out at TE's defaults. cga_size, aggregate and atomic_gemm are read and not priced.
void read_tp_comm_overlap(JsonObject& o, const AcceleratorSpec& acc, TpCommOverlap& out) {
  const nlohmann::json& v = o.value("tp_comm_overlap");
  if (v.is_boolean()) {
    out.on = v.get<bool>();
  } else if (!v.is_object()) {
    throw InputError(o.field_path("tp_comm_overlap") + ": expected true, false or an object of Transformer Engine's settings per "
                     "overlapped GEMM (qkv_fprop, proj_fprop, ...), got " + shown(v));
  }
  if (v.is_object() || out.on) {
    out.on = true;
    if (acc.sms == 0) {
      throw InputError(o.field_path("tp_comm_overlap") + ": the accelerator '" + acc.id +
                       "' has no SM count in the catalog (Transformer Engine's userbuffers run on NVIDIA GPUs)");
    }
  }
  // The SMs a place's kernels take (TE's default 16 too) must leave the GEMM some.
  const auto too_many_sms = [&](const std::string& path, std::int64_t n) {
    if (n >= acc.sms) {
      throw InputError(path + ": expected fewer than the " + acc.id + "'s " + std::to_string(acc.sms) + " SMs, got " +
                       std::to_string(n));
    }
  };
  const auto check_sms = [&] {
    for (int i = 0; out.on && i < kUbSites; ++i) {
      if (out.site[i].method != UbMethod::kRingExchange) {
        too_many_sms(o.field_path("tp_comm_overlap") + "." + kUbSiteNames[i] + ".num_sm", out.site[i].num_sm);
      }
    }
  };
  if (!v.is_object()) return check_sms();
  JsonObject c = o.object("tp_comm_overlap");
  // (TE's 0/1 or a boolean.)
  const auto flag = [](JsonObject& e, const char* key) {
    const nlohmann::json& f = e.value(key);
    if (f.is_boolean()) return f.get<bool>();
    if (f.is_number_integer() && (f.get<std::int64_t>() == 0 || f.get<std::int64_t>() == 1)) return f.get<std::int64_t>() == 1;
    throw InputError(e.field_path(key) + ": expected true, false, 0 or 1, got " + shown(f));
  };
  for (int i = 0; i < kUbSites; ++i) {
    c.known(kUbSiteNames[i]);
    if (!c.has(kUbSiteNames[i])) continue;
    JsonObject e = c.object(kUbSiteNames[i]);
    UbOverlap& u = out.site[i];
    const std::vector<std::string> methods = ub_bulk(i)             ? std::vector<std::string>{"bulk"}
                                             : ub_reduce_scatter(i) ? std::vector<std::string>{"pipeline", "ring_exchange"}
                                                                    : std::vector<std::string>{"ring_exchange"};
    const std::string method = e.choice_or("method", methods, methods.front());
    u.method = static_cast<UbMethod>(std::find(kUbMethodNames.begin(), kUbMethodNames.end(), method) - kUbMethodNames.begin());
    if (e.has("num_sm")) {
      const std::int64_t n = e.positive_int("num_sm");
      too_many_sms(e.field_path("num_sm"), n);  // (before narrowing)
      u.num_sm = static_cast<int>(n);
    }
    if (e.has("num_splits")) {
      if (u.method != UbMethod::kPipeline) throw InputError(e.field_path("num_splits") + ": applies to the pipeline method only");
      const std::int64_t n = e.positive_int("num_splits");
      if (n > 1024) throw InputError(e.field_path("num_splits") + ": at most 1024, got " + std::to_string(n));
      u.num_splits = static_cast<int>(n);
    }
    if (e.has("set_sm_margin")) u.sm_margin = flag(e, "set_sm_margin");
    // (TE keeps the all-gathers of GEMM inputs in FP8 under FP8 GEMMs whatever the
    // setting says, and reads it for a pipelined reduce-scatter only.)
    if (e.has("fp8_buf")) {
      if (u.method != UbMethod::kPipeline) {
        throw InputError(e.field_path("fp8_buf") + ": applies to the pipeline method's reduce-scatters only (Transformer "
                         "Engine's all-gathers move FP8 under FP8 GEMMs whatever it says)");
      }
      u.fp8_buf = flag(e, "fp8_buf");
    }
    if (e.has("cga_size")) (void)e.positive_int("cga_size");
    if (e.has("aggregate")) (void)flag(e, "aggregate");
    if (e.has("atomic_gemm")) (void)flag(e, "atomic_gemm");
    e.finish();
  }
  c.finish();
  check_sms();
}

TrainingStrategy read_strategy(JsonObject& o, const nlohmann::json& raw, const TrainingScenario& s, std::size_t devices,
                               bool keep_unfit) {
  if (o.has("sbp")) return read_sbp_strategy(o, raw, s, devices, keep_unfit);
  if (!s.transformer) {
    throw InputError(o.path() + ": " + s.model.name + " is not a transformer; give an SBP strategy (\"sbp\": {\"mesh\": [...], "
                     "\"signatures\": {...}}; 'ddlsim search --method autoddl' writes one)");
  }
  const TransformerConfig& m = s.model;
  TrainingStrategy t;
  ParallelPlan& p = t.plan;
  p.name = o.name("name");
  auto small = [&](const char* key, std::int64_t fallback) {
    const std::int64_t v = o.positive_int_or(key, fallback);
    if (v > 1'000'000) throw InputError(o.field_path(key) + ": at most 1000000, got " + std::to_string(v));
    return static_cast<int>(v);
  };
  p.tp = small("tp", 1);
  p.pp = small("pp", 1);
  p.cp = small("cp", 1);
  const std::int64_t model_parallel = static_cast<std::int64_t>(p.tp) * p.pp * p.cp;
  const std::int64_t fill = static_cast<std::int64_t>(devices) / model_parallel;
  const bool dp_fills = !o.has("dp");
  p.dp = small("dp", std::max<std::int64_t>(fill, 1));
  p.ep = small("ep", 1);
  p.global_batch = strategy_global_batch(o, s);
  if (p.global_batch > 100'000'000) throw InputError(o.field_path("global_batch") + ": at most 100000000");
  p.micro_batch = o.positive_int_or("micro_batch", 1);
  if (p.micro_batch > p.global_batch) {
    throw InputError(o.field_path("micro_batch") + ": " + std::to_string(p.micro_batch) + " is more than the global batch (" +
                     std::to_string(p.global_batch) + ")");
  }
  // A micro-batch's tensors within what the workload command models (its --batch).
  if (std::string why = transformer_batch_problem(m, p.micro_batch); !why.empty()) {
    throw InputError(o.field_path("micro_batch") + why.substr(std::string("batch").size()));
  }
  const std::string sched = o.choice_or("schedule", {"1f1b", "gpipe", "interleaved", "zero-bubble"}, "1f1b");
  for (const auto& [name, kind] : kScheduleNames) {
    if (sched == name) p.schedule = kind;
  }
  p.virtual_stages = small("virtual_stages", 1);
  if (o.has("microbatch_group")) p.microbatch_group = small("microbatch_group", 0);
  const double zero = o.number_or("zero", 0, 3, 0);
  if (zero != static_cast<int>(zero)) throw InputError(o.field_path("zero") + ": expected 0, 1, 2 or 3");
  p.dp_mode = zero == 1 ? DataParallelMode::kZero1 : zero == 2 ? DataParallelMode::kZero2
              : zero == 3 ? DataParallelMode::kZero3 : DataParallelMode::kAllReduce;
  if (o.has("shard")) {
    p.shard = small("shard", 0);
    if (p.dp_mode != DataParallelMode::kZero3) {
      throw InputError(o.field_path("shard") + ": applies to ZeRO-3 only (set \"zero\": 3)");
    }
  }
  p.sequence_parallel = o.boolean_or("sequence_parallel", false);
  const std::string rc = o.choice_or("recompute", {"none", "selective", "full"}, "none");
  p.recompute = rc == "full" ? Recompute::kFull : rc == "selective" ? Recompute::kSelective : Recompute::kNone;
  if (o.has("recompute_layers")) {
    p.recompute_layers = small("recompute_layers", 0);
    if (p.recompute != Recompute::kFull) {
      throw InputError(o.field_path("recompute_layers") + ": applies to full recomputation only (set \"recompute\": \"full\")");
    }
  }
  if (o.has("recompute_modules")) {
    JsonArray a = o.array("recompute_modules");
    if (p.recompute != Recompute::kSelective) {
      throw InputError(a.path() + ": applies to selective recomputation only (set \"recompute\": \"selective\", or leave "
                       "recompute_modules out)");
    }
    if (a.size() == 0) throw InputError(a.path() + ": expected at least one module, got []");
    std::vector<std::string> names;
    for (const auto& [name, bit] : kRecomputeModuleNames) names.emplace_back(name);
    p.recompute_modules = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
      const std::string name = a.choice(j, names);
      const auto at = static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
      const unsigned bit = kRecomputeModuleNames[at].second;
      if (p.recompute_modules & bit) throw InputError(a.path() + "." + std::to_string(j) + ": '" + name + "' given twice");
      p.recompute_modules |= bit;
    }
  }
  if (o.has("stage_layers")) {
    JsonArray a = o.array("stage_layers");
    if (a.size() == 0) {
      throw InputError(a.path() + ": expected the layers of each of the " +
                       (p.schedule == PipelineSchedule::kInterleaved1F1B
                            ? std::to_string(static_cast<std::int64_t>(p.pp) * p.virtual_stages) + " model chunks (pp x virtual_stages)"
                            : std::to_string(p.pp) + " stages") +
                       ", got []");
    }
    p.stage_layers = a.ints(0, 1'000'000, "a count of layers (0 or more)");
  }
  if (o.has("order")) {
    JsonArray a = o.array("order");
    p.order.clear();
    for (std::size_t j = 0; j < a.size(); ++j) {
      const std::string axis = a.choice(j, {"tp", "pp", "dp", "cp"});
      for (MeshAxis m : {MeshAxis::kTp, MeshAxis::kPp, MeshAxis::kDp, MeshAxis::kCp}) {
        if (axis == axis_name(m)) p.order.push_back(m);
      }
    }
    const auto count = [&](MeshAxis m) { return std::count(p.order.begin(), p.order.end(), m); };
    if (count(MeshAxis::kTp) != 1 || count(MeshAxis::kPp) != 1 || count(MeshAxis::kDp) != 1 || count(MeshAxis::kCp) > 1) {
      throw InputError(a.path() + ": expected tp, pp and dp once each (and cp at most once; left out, it sits just inside dp), "
                       "innermost first, e.g. [\"tp\", \"pp\", \"dp\"] or [\"tp\", \"cp\", \"dp\", \"pp\"]");
    }
  }
  // ZeRO-2 and 3 reduce-scatter each unit's gradients in every micro-batch's backward,
  // as it is produced (DeepSpeed's stages 2 and 3, FSDP): no buckets to size or to hold
  // back, so a setting that would be ignored is refused.
  if (p.dp_mode == DataParallelMode::kZero2 || p.dp_mode == DataParallelMode::kZero3) {
    for (const char* key : {"bucket_mib", "overlap_grad_reduce"}) {
      if (o.has(key)) {
        throw InputError(o.field_path(key) + ": applies to zero 0 and 1; ZeRO-2 and 3 reduce-scatter each layer's gradients "
                                             "as every micro-batch's backward produces them");
      }
    }
  }
  p.bucket_bytes = o.number_or("bucket_mib", 1e-3, 1e6, 25.0) * kMiB;
  p.overlap_grad_reduce = o.boolean_or("overlap_grad_reduce", true);
  p.align_grad_reduce = o.boolean_or("align_grad_reduce", false);
  p.overlap_param_gather = o.boolean_or("overlap_param_gather", false);
  p.align_param_gather = o.boolean_or("align_param_gather", false);
  p.overlap_p2p = o.boolean_or("overlap_p2p", false);
  p.overlap_tp_backward = o.boolean_or("overlap_tp_backward", false);
  if (o.has("tp_comm_overlap")) read_tp_comm_overlap(o, accelerator_of(s), p.tp_comm_overlap);
  p.overlap_ep_comm = o.boolean_or("overlap_ep_comm", false);
  const std::string dispatcher = o.choice_or("moe_dispatcher", {"alltoall", "deepep"}, "alltoall");
  for (TokenDispatcher d : {TokenDispatcher::kAllToAll, TokenDispatcher::kDeepEp}) {
    if (dispatcher == dispatcher_name(d)) p.dispatcher = d;
  }
  p.fp8_dispatch = o.boolean_or("fp8_dispatch", false);
  if (o.has("moe_capacity_factor")) {
    const nlohmann::json& v = o.value("moe_capacity_factor");
    p.capacity_factor = v.is_number() ? v.get<double>() : 0.0;
    if (!(p.capacity_factor > 0.0 && std::isfinite(p.capacity_factor))) {
      throw InputError(o.field_path("moe_capacity_factor") + ": expected a number above 0 (leave it out for no capacity), got " +
                       shown(v));
    }
  }
  p.pad_to_capacity = o.boolean_or("moe_pad_to_capacity", false);
  p.grouped_gemm = o.boolean_or("moe_grouped_gemm", true);
  const std::string acc = o.choice_or("grad_accumulation", {"fused", "add", "fp32"}, "fused");
  for (GradAccumulation g : {GradAccumulation::kFused, GradAccumulation::kAdd, GradAccumulation::kFp32}) {
    if (acc == grad_accumulation_name(g)) p.grad_accumulation = g;
  }
  p.grad_reduce_fp32 = o.boolean_or("grad_reduce_fp32", false);
  p.master_remainders = o.choice_or("master_weights", {"fp32", "remainders"}, "fp32") == "remainders";
  p.fp8_params = o.boolean_or("fp8_params", false);
  p.tp_only_amax = o.boolean_or("tp_only_amax_red", false);
  o.finish();
  // A dp that fills the cluster needs tp x pp to divide it. Said before the checks that
  // depend on dp (the global batch against dp x micro_batch would name the wrong fault),
  // after those that fail whatever dp is (tp against the heads, a plan larger than the
  // cluster): those are the plan checked with dp 1.
  const auto unfit = [&](std::string why) {
    if (!keep_unfit) throw InputError(why);
    t.unfit = std::move(why);
    return t;
  };
  if (dp_fills && static_cast<std::int64_t>(devices) % model_parallel != 0) {
    ParallelPlan one = p;
    one.dp = 1;
    if (std::string why = plan_problem(one, m, devices); !why.empty()) return unfit(o.path() + ": " + why);
    return unfit(o.field_path("dp") + ": left out, it fills the cluster, but its " + std::to_string(devices) +
                 " accelerators are not a multiple of " + (p.cp > 1 ? "tp x pp x cp = " : "tp x pp = ") +
                 std::to_string(model_parallel) + "; give dp");
  }
  if (std::string why = plan_problem(p, m, devices); !why.empty()) return unfit(o.path() + ": " + why);
  // The experts' rows as the plan routes them, within what ddlsim models.
  if (routed_load(m, p) > 1.0) {
    if (std::string why = transformer_batch_problem(routed_model(m, p), p.micro_batch); !why.empty()) {
      throw InputError(o.field_path("micro_batch") + why.substr(std::string("batch").size()));
    }
  }
  // Refuse plans whose graph would exhaust memory before building them: here those of
  // which even one replica would (the lowering checks the replicas it lowers: all on the
  // flow network, one where the analytical network folds identical ones).
  if (std::string why = plan_size_problem(p, m, TrainingStepInputs{}.max_compute_tasks, 1); !why.empty()) {
    throw TooLargeError(o.path() + ": " + why);
  }
  return t;
}

// simulation.collective_algorithm: "auto", an algorithm for every operation it
// implements, or an object of an algorithm (or "auto") per operation; and
// simulation.channels, 1 to kMaxChannels rings or trees.
CollectivePolicy read_collective_policy(JsonObject& sim) {
  CollectivePolicy policy;
  const std::vector<std::string> names = algorithm_choices();
  if (sim.has("collective_algorithm")) {
    if (sim.value("collective_algorithm").is_object()) {
      JsonObject by_op = sim.object("collective_algorithm");
      for (CollectiveOp op : kCollectiveOps) by_op.known(std::string(op_name(op)));
      for (CollectiveOp op : kCollectiveOps) {
        const std::string key(op_name(op));
        if (!by_op.has(key)) continue;
        const std::string name = by_op.choice(key, names);
        if (name == "auto") continue;
        const CollectiveAlgorithm a = *parse_algorithm(name);
        if (std::string why = op_unsupported_reason(op, a); !why.empty()) throw InputError(by_op.field_path(key) + ": " + why);
        if (op == CollectiveOp::kAllToAll && a == CollectiveAlgorithm::kHierarchical) {
          throw InputError(by_op.field_path(key) +
                           ": hierarchical all-to-alls are what a strategy's moe_dispatcher \"deepep\" runs; the policy's "
                           "all-to-alls take direct (or auto)");
        }
        policy.algorithm[static_cast<std::size_t>(op)] = a;
      }
      by_op.finish();
    } else if (const std::string name = sim.choice("collective_algorithm", names); name != "auto") {
      const CollectiveAlgorithm a = *parse_algorithm(name);
      // (Hierarchical: all-reduce only; its all-to-all is moe_dispatcher deepep's.)
      for (CollectiveOp op : kCollectiveOps) {
        if (op == CollectiveOp::kAllToAll && a == CollectiveAlgorithm::kHierarchical) continue;
        if (op_unsupported_reason(op, a).empty()) policy.algorithm[static_cast<std::size_t>(op)] = a;
      }
    }
  }
  if (sim.has("channels")) {
    const std::int64_t c = sim.positive_int("channels");
    if (c > kMaxChannels) {
      throw InputError(sim.field_path("channels") + ": expected 1 to " + std::to_string(kMaxChannels) +
                       " rings or trees (NCCL's most), got " + std::to_string(c));
    }
    policy.channels = static_cast<int>(c);
  }
  return policy;
}

}  // namespace

double model_matmul_params(const TransformerConfig& m) {
  const OperatorGraph one = build_transformer(m, 1);
  const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
  // A token's matmuls use experts_per_token of each layer's experts.
  double experts = 0;
  for (const Operator& op : one.ops()) {
    if (op.name.find(".experts.") != std::string::npos) experts += op.cost.params;
  }
  const double idle =
      m.experts > 0 ? experts * static_cast<double>(m.experts - m.experts_per_token) / static_cast<double>(m.experts) : 0.0;
  // (Each multi-token prediction depth multiplies by the output layer's weights again.)
  const double mtp_outputs = static_cast<double>(m.mtp_layers) * V * h;
  return one.totals().params - idle - static_cast<double>(m.position_rows()) * h - (m.tied_embedding ? 0.0 : V * h) +
         mtp_outputs;
}

double model_flops_per_token(const TransformerConfig& m) {
  return 6 * model_matmul_params(m) +
         12 * static_cast<double>(m.layers + m.mtp_layers) * m.attention_flop_width() * static_cast<double>(m.seq);
}

const AcceleratorSpec& accelerator_of(const TrainingScenario& s) {
  return s.catalog.accelerator(s.cluster.node(s.cluster.accelerators()[0]).model);
}

// The links with the highest utilization (ties: lower link id first), at most
// kBusiestLinks of them, none that carried nothing.
std::vector<LinkUse> busiest_links(const Cluster& c, const std::vector<double>& bytes, double step_s, std::size_t most,
                                   bool between_switches) {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t l = 0; l < bytes.size(); ++l) {
    if (!(bytes[l] > 0)) continue;
    const Link& k = c.link(LinkId(l));
    if (!between_switches && c.node(k.from).kind == NodeKind::kSwitch && c.node(k.to).kind == NodeKind::kSwitch) continue;
    ids.push_back(l);
  }
  auto util = [&](std::uint32_t l) { return bytes[l] / (c.link(LinkId(l)).bandwidth.value() * step_s); };
  const std::size_t n = std::min(most, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return util(a) > util(b) || (util(a) == util(b) && a < b); });
  std::vector<LinkUse> out;
  for (std::size_t i = 0; i < n; ++i) {
    const Link& k = c.link(LinkId(ids[i]));
    out.push_back({c.node(k.from).name + " -> " + c.node(k.to).name, k.kind, bytes[ids[i]], util(ids[i])});
  }
  return out;
}

const char* busiest_links_note(NetworkModelKind network) {
  return network == NetworkModelKind::kAnalytical
             ? "; links between switches left out: the analytical model times them as balanced, --links lists them"
             : "";
}

std::vector<std::string> node_names(const Cluster& cluster) {
  std::vector<std::string> names;
  names.reserve(cluster.node_count());
  for (std::size_t n = 0; n < cluster.node_count(); ++n) names.push_back(cluster.node(NodeId(static_cast<std::uint32_t>(n))).name);
  return names;
}

ReplayResult replay_with_outputs(const TaskGraph& graph, const std::vector<ResourceModel*>& models,
                                 std::vector<Observer*> observers, const TrainingOutputs& outputs, const Cluster& cluster,
                                 std::vector<std::string> pool_names) {
  std::optional<AtomicFile> trace_file;
  std::optional<ChromeTrace> trace;
  if (outputs.trace) {
    trace_file.emplace(*outputs.trace);
    trace.emplace(trace_file->stream(), std::move(pool_names));
    trace->name_endpoints(node_names(cluster));
    observers.push_back(&*trace);
  }
  if (outputs.dot) {
    AtomicFile dot(*outputs.dot);
    graph.write_dot(dot.stream());
    dot.commit();
  }
  const ReplayResult result = replay(graph, models, observers);
  if (trace_file) trace_file->commit();
  return result;
}

TrainingScenario load_training_scenario(const std::optional<std::string>& file, const std::vector<std::string>& sets,
                                        const std::string& not_training, nlohmann::json* document, bool keep_unfit) {
  const std::string source = file ? *file : std::string(kDefaultScenarioName);
  const std::string text = file ? read_input_file(source, "scenario") : std::string(kDefaultScenario);
  nlohmann::json doc = scenario_document(text, source, sets);
  if (doc.is_object() && doc.contains("tasks")) {
    throw InputError(source + ": a task graph (it lists \"tasks\"), which only 'ddlsim run' replays; " + not_training);
  }
  if (!is_training_scenario(doc)) throw InputError(source + ": " + not_training);
  TrainingScenario s =
      read_training_scenario(doc, file ? std::filesystem::path(source).parent_path().string() : "", keep_unfit);
  if (document) *document = std::move(doc);
  return s;
}

bool is_training_scenario(const nlohmann::json& doc) { return names_cluster_graph(doc); }

TrainingScenario read_training_scenario(const nlohmann::json& doc, const std::string& base_dir, bool keep_unfit) {
  JsonObject root(doc, "");
  TrainingScenario s;
  s.name = root.name("name");
  s.description = root.string_or("description", "");
  root.known("catalog");
  merge_scenario_catalog(doc, base_dir, s.catalog);
  JsonObject cluster = root.object("cluster");
  s.cluster = read_scenario_cluster(cluster, s.catalog, base_dir, s.cluster_title);
  if (s.cluster.accelerators().empty()) throw InputError(cluster.path() + ": no accelerators to train on");
  const std::string& model = s.cluster.node(s.cluster.accelerators()[0]).model;
  for (NodeId a : s.cluster.accelerators()) {
    if (s.cluster.node(a).model != model) {
      throw InputError(cluster.path() + ": the strategies need one accelerator model throughout, got " + model + " and " +
                       s.cluster.node(a).model + " (" + s.cluster.node(a).name + ")");
    }
  }
  JsonObject w = root.object("workload");
  read_model(w, base_dir, doc.at("workload"), s);
  if (s.model.fp8_gemms) {  // before the strategies: an accelerator without fp8 runs no plan of it
    try {
      (void)ComputeModel(accelerator_of(s)).peak(DataType::kFp8);
    } catch (const InputError& e) {
      throw InputError(std::string("workload.gemm_dtype: ") + e.what());
    }
  }
  JsonArray list = root.array("strategies");
  if (list.size() == 0) throw InputError("strategies: expected at least one strategy, got []");
  std::map<std::string, std::size_t> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObject o = list.object(i);
    TrainingStrategy t = read_strategy(o, list.at(i), s, s.cluster.accelerators().size(), keep_unfit);
    if (const auto [it, fresh] = names.emplace(t.plan.name, i); !fresh) {
      throw InputError(o.field_path("name") + ": \"" + t.plan.name + "\" is already the name of strategies." +
                       std::to_string(it->second));
    }
    s.strategies.push_back(std::move(t));
  }
  const AcceleratorSpec& acc = accelerator_of(s);
  s.runtime = {acc.context_memory.value(), acc.communicator_memory.value()};
  root.known("calibration");
  s.compute.emplace(acc);
  calibrate_scenario_compute(doc, base_dir, *s.compute);
  root.known("simulation");
  if (root.has("simulation")) {
    JsonObject sim = root.object("simulation");
    if (sim.has("network")) s.network = *parse_network_model(sim.choice("network", {"flow", "analytical"}));
    s.stream_rings = sim.choice_or("rings", {"streamed", "steps"}, "streamed") == "streamed";
    s.interference = sim.boolean_or("interference", true);
    s.compute_speed_cv = sim.number_or("compute_speed_cv", 0.0, 0.5, 0.0);
    s.collectives = read_collective_policy(sim);
    s.runtime.context_bytes = std::round(sim.number_or("context_mib", 0.0, 1e6, s.runtime.context_bytes / kMiB) * kMiB);
    s.runtime.communicator_bytes =
        std::round(sim.number_or("communicator_mib", 0.0, 1e6, s.runtime.communicator_bytes / kMiB) * kMiB);
    sim.finish();
  }
  if (!s.interference) s.compute = s.compute->without_interference();
  if (s.compute_speed_cv > 0.0) {
    s.compute = s.compute->slowest_of(static_cast<std::int64_t>(s.cluster.accelerators().size()), s.compute_speed_cv);
  }
  root.finish();
  try {
    (void)s.compute->peak(s.model.dtype);
  } catch (const InputError& e) {
    throw InputError(std::string("workload.dtype: ") + e.what());
  }
  return s;
}

TrainingReport run_training_strategy(const TrainingScenario& s, const TrainingStrategy& strategy,
                                     const TrainingOutputs& outputs) {
  if (strategy.sbp) return run_sbp_strategy(s, strategy, outputs);
  const ParallelPlan& p = strategy.plan;
  NetworkFabric fabric(s.cluster, s.catalog, s.collectives);
  const AcceleratorSpec& acc = accelerator_of(s);
  const ComputeModel& compute = *s.compute;
  TrainingStepInputs in;
  in.model = &s.model;
  in.plan = &p;
  in.fabric = &fabric;
  in.compute = &compute;
  in.network = s.network;
  in.stream_rings = s.stream_rings;
  LoweredTrainingStep step = lower_transformer_step(in);
  std::vector<ResourceModel*> models;
  for (auto& r : step.resources) models.push_back(r.get());
  ResourceUsage usage;
  TaskTimes times;
  MemoryTracker memory;
  const ReplayResult result = replay_with_outputs(step.graph, models, {&usage, &times, &memory}, outputs, s.cluster, step.pool_names);

  TrainingReport r;
  r.name = p.name;
  r.plan = mesh_text(p) + (p.ep > 1 ? " x ep " + std::to_string(p.ep) : "");
  // Expert rows other than balanced (routing imbalance, capacity): the plan's load.
  if (const double load = routed_load(s.model, p); load != 1.0) r.plan += printf_string(", expert rows x%g", load);
  r.devices = p.devices();
  r.step_time_s = result.makespan.value();
  r.samples_per_s = static_cast<double>(p.global_batch) / r.step_time_s;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(s.model.seq);
  // Model FLOPs per token: 6N + 12 l h s (h: the attention's width, heads x head size;
  // with multi-head latent attention heads x the mean of the query and value head sizes),
  // N the parameters that take part in matmuls (the
  // input embedding table only when it is tied to the output layer; no position table).
  const double h = static_cast<double>(s.model.hidden), l = static_cast<double>(s.model.layers);
  const double seq = static_cast<double>(s.model.seq), V = static_cast<double>(s.model.vocab);
  const double N = model_matmul_params(s.model);
  const double per_token = model_flops_per_token(s.model);
  double extra = 0;  // recomputed FLOPs per token
  // (An average layer's, multi-token prediction's layers among them: without the output
  // layers and its projections.)
  const double mtp = static_cast<double>(s.model.mtp_layers);
  const double layer_matmul = (N - (1 + mtp) * V * h - mtp * 2 * h * h) / (l + mtp);
  const double w = s.model.attention_flop_width();  // = h unless heads are sized otherwise
  if (p.recompute == Recompute::kFull) {
    const double recomputed = plan_recomputed_layers(p, s.model);  // all, or recompute_layers per chunk
    extra = (recomputed + mtp) * (2 * layer_matmul + 4 * w * seq);
  }
  if (selective_modules(p) & kRecomputeCoreAttn) extra = (l + mtp) * 4 * w * seq;
  extra += recomputed_linear_flops_per_token(s.model, p);  // (0 without selective recomputation)
  const double tokens = static_cast<double>(p.global_batch) * seq;
  const double peak = compute.peak(s.model.dtype);
  r.model_tflops_per_device = per_token * tokens / r.step_time_s / r.devices / 1e12;
  r.hardware_tflops_per_device = (per_token + extra) * tokens / r.step_time_s / r.devices / 1e12;
  r.mfu = r.model_tflops_per_device * 1e12 / peak;
  r.hfu = r.hardware_tflops_per_device * 1e12 / peak;
  // The critical device: the stage replica whose compute stream is busiest.
  std::size_t g = 0;
  for (std::size_t i = 0; i < step.compute.size(); ++i) {
    const double busy = usage.entries()[step.compute[i].value].busy.value();
    if (busy > r.compute_busy_s) {
      r.compute_busy_s = busy;
      g = i;
    }
  }
  r.compute_parts = step.compute_parts[g];
  // What communication beside its stream added to its tasks: each one's time on the
  // stream past its own duration.
  if (!step.graph.interference().empty()) {
    for (std::uint32_t t = 0; t < step.graph.size(); ++t) {
      const auto* c = std::get_if<Compute>(&step.graph.kind(TaskId(t)));
      if (c == nullptr || c->stream != step.compute[g]) continue;
      r.compute_parts.interference += times.of(TaskId(t)).end - times.of(TaskId(t)).start - c->duration.value();
    }
  }
  r.collectives = step.collective_uses;
  if (!step.tp_comm.empty()) r.exposed_tp_s = usage.entries()[step.tp_comm[g].value].busy.value();
  if (g < step.tp_overlaps.size()) {  // collectives beside weight gradients: only what outlasts them is exposed
    for (const auto& [comm, grad] : step.tp_overlaps[g]) {
      const Times &a = times.of(comm), &b = times.of(grad);
      r.exposed_tp_s -= std::max(0.0, std::min(a.end, b.end) - std::max(a.start, b.start));
    }
  }
  // Combined 1F1B: one pass's collectives and waits may fall while the paired pass
  // computes; only what the compute stream spends idle is exposed.
  Spans computing, explained;
  if (p.combined_1f1b()) {
    computing = stream_spans(step.graph, times, step.compute[g]);
    explained = computing;
    if (!step.tp_comm.empty()) {
      const Spans tp = stream_spans(step.graph, times, step.tp_comm[g]);
      r.exposed_tp_s = outside(tp, computing);
      explained.insert(explained.end(), tp.begin(), tp.end());
      explained = merged(std::move(explained));
    }
  }
  const Times& last = times.of(step.last_backward[g]);
  const Times& opt = times.of(step.optimizer[g]);
  // Data-parallel waits. Its optimizer step starts once every stage's gradients are
  // reduced (the barrier); before it the device waits for (1) its own stage's reduction,
  // from the end of its backward (data-parallel), then (2) the rest of the pipeline to
  // finish its backwards (the drain: pipeline time), then (3) the other stages'
  // reductions (and the sums of copies: a split tied embedding's) still running after both (data-parallel). After its step, under ZeRO-1/2,
  // the updated weights' all-gathers and the end of the step are data-parallel too.
  const std::size_t stage = g % static_cast<std::size_t>(p.pp);
  double drained = 0.0, barrier = 0.0;
  for (TaskId t : step.last_backward) drained = std::max(drained, times.of(t).end);
  for (TaskId t : step.gradients_reduced) barrier = std::max(barrier, times.of(t).end);
  if (step.copies_summed.valid()) barrier = std::max(barrier, times.of(step.copies_summed).end);
  const double own = times.of(step.gradients_reduced[stage]).end;
  r.exposed_dp_s = std::max(0.0, own - last.end) + std::max(0.0, barrier - std::max(own, drained));
  if (!step.weights_gathered.empty()) r.exposed_dp_s += std::max(0.0, r.step_time_s - opt.end);
  // overlap_param_gather: what the first forwards waited for their weights' buckets.
  if (g < step.param_waits.size()) {
    for (const auto& [before, gathered] : step.param_waits[g]) {
      r.exposed_dp_s += std::max(0.0, times.of(gathered).end - times.of(before).end);
    }
  }
  // FP8: the passes' amax reductions, in line (exposed: the breakdown's "other"; under
  // combined 1F1B only what falls outside the paired pass's compute).
  double amax = g < step.amax_s.size() ? step.amax_s[g] : 0.0;
  if (g < step.amax_tasks.size()) {
    Spans a;
    for (TaskId t : step.amax_tasks[g]) a.emplace_back(times.of(t).start, times.of(t).end);
    amax = outside(merged(std::move(a)), explained);
  }
  amax = std::min(amax, std::max(0.0, r.step_time_s - r.compute_busy_s - r.exposed_tp_s - r.exposed_dp_s));
  // (A micro-batch's work includes its passes' amax reductions.)
  const double opt_s = opt.end - opt.start;
  const double per_micro_batch = (r.compute_busy_s - opt_s + r.exposed_tp_s + amax) / static_cast<double>(p.micro_batches());
  const double v = p.schedule == PipelineSchedule::kInterleaved1F1B ? p.virtual_stages : 1;
  const double pipeline_idle = std::max(0.0, r.step_time_s - r.compute_busy_s - r.exposed_tp_s - r.exposed_dp_s - amax);
  // Zero-bubble (ZB-H1): (pp - 1)(F + B + W) less (pp - 2 + min(m, pp)) W, with F + B + W
  // the stage's work of one micro-batch and W its weight gradients: (pp - 1)(F + B - W)
  // when m >= pp (pipeline_schedule).
  const double m = static_cast<double>(p.micro_batches());
  const double deferred = g < step.weight_pass_s.size() ? step.weight_pass_s[g] / m : 0.0;
  const double saved = (p.pp - 2 + std::min(m, static_cast<double>(p.pp))) * deferred;
  r.bubble_s = std::min(pipeline_idle, std::max(0.0, (p.pp - 1) / v * per_micro_batch - saved));
  r.exposed_pp_s = pipeline_idle - r.bubble_s;
  if (g < step.a2a_waits.size()) {
    // Expert parallelism: of those waits, the time each all-to-all held up what follows
    // it past the end of the task before it.
    double waits = 0.0;
    if (p.combined_1f1b()) {  // the waits' union, where neither compute nor tensor-parallel collectives ran
      Spans w;
      for (const auto& [before, done] : step.a2a_waits[g]) w.emplace_back(times.of(before).end, times.of(done).end);
      waits = outside(merged(std::move(w)), explained);
    } else {
      for (const auto& [before, done] : step.a2a_waits[g]) waits += std::max(0.0, times.of(done).end - times.of(before).end);
    }
    r.exposed_ep_s = std::min(waits, r.exposed_pp_s);
    r.exposed_pp_s -= r.exposed_ep_s;
  }
  if (p.pp == 1) {
    // No pipeline: the waits inside the step are for ZeRO-3's per-layer weight gathers.
    r.exposed_dp_s += r.exposed_pp_s;
    r.exposed_pp_s = 0;
  } else if (g < step.zero3_waits.size()) {
    // With a pipeline, the part of those waits that is ZeRO-3's: each unit's start held
    // back by its gather past the end of the task before it.
    double gathers = 0.0;
    for (const auto& [before, gathered] : step.zero3_waits[g]) {
      gathers += std::max(0.0, times.of(gathered).end - times.of(before).end);
    }
    const double moved = std::min(gathers, r.exposed_pp_s);
    r.exposed_dp_s += moved;
    r.exposed_pp_s -= moved;
  }
  r.exposed_comm_s = r.exposed_tp_s + r.exposed_pp_s + r.exposed_dp_s + r.exposed_ep_s + amax;
  r.idle_s = r.step_time_s - r.compute_busy_s - r.exposed_tp_s;
  // The fullest device: the highest high-water mark of the replay's memory pools (one
  // per stage replica), its model states from the memory model, the software stack's
  // memory beside them (every device alike), the rest activations.
  const std::vector<DeviceMemory> stages = stage_memory(p, s.model);
  const double runtime = s.runtime.bytes(plan_communicators(p));
  double fullest = 0;
  for (std::size_t g = 0; g < memory.pools().size(); ++g) {
    const double peak = memory.pools()[g].peak.value();
    if (peak <= fullest) continue;
    fullest = peak;
    const DeviceMemory& d = stages[g % static_cast<std::size_t>(p.pp)];
    r.set_memory(peak + runtime, d.weights, d.gradients, d.optimizer, runtime);
  }
  r.device_memory_bytes = acc.memory.value();
  r.fits_in_memory = r.peak_memory_bytes <= r.device_memory_bytes;
  r.tasks = result.tasks;
  r.transfers = step.transfers;
  std::vector<double> link_bytes = step.priced_link_bytes;
  const std::vector<double>& carried = step.network_model->link_bytes();
  for (std::size_t l = 0; l < link_bytes.size(); ++l) link_bytes[l] += carried[l];
  r.busiest_links = busiest_links(s.cluster, link_bytes, r.step_time_s, kBusiestLinks, s.network != NetworkModelKind::kAnalytical);
  if (outputs.all_links) r.all_links = busiest_links(s.cluster, link_bytes, r.step_time_s, link_bytes.size());
  return r;
}

std::string collective_policy_text(const CollectivePolicy& policy) {
  std::string text;
  for (CollectiveOp op : kCollectiveOps) {
    if (const auto a = policy.of(op)) text += (text.empty() ? "" : ", ") + std::string(op_name(op)) + " " + std::string(algorithm_name(*a));
  }
  if (policy.channels > 0) text += (text.empty() ? "" : "; ") + std::to_string(policy.channels) + " channels for rings and trees";
  if (!text.empty()) text += " (the rest as the selector picks)";
  return text;
}

void print_collective_policy(std::ostream& out, const CollectivePolicy& policy) {
  if (!policy.automatic()) out << "collectives: " << collective_policy_text(policy) << "\n";
}

void print_speed_policy(std::ostream& out, const TrainingScenario& s) {
  if (s.compute_speed_cv <= 0.0) return;
  out << "speeds:   compute x" << printf_string("%.4f", s.compute->straggler_factor()) << ", the slowest of "
      << s.cluster.accelerators().size() << " accelerators at speed cv " << printf_string("%g", s.compute_speed_cv) << "\n";
}

void add_speed_policy(nlohmann::ordered_json& j, const TrainingScenario& s) {
  if (s.compute_speed_cv <= 0.0) return;
  j["compute_speed_cv"] = s.compute_speed_cv;
  j["straggler_factor"] = s.compute->straggler_factor();
}

void print_training_table(std::ostream& out, const TrainingScenario& s, const std::vector<TrainingReport>& reports) {
  out << "scenario: " << s.name << "\n";
  out << "cluster:  " << s.cluster_title << " (" << s.cluster.accelerators().size() << " accelerators), network "
      << network_model_name(s.network) << "\n";
  print_collective_policy(out, s.collectives);
  print_speed_policy(out, s);
  if (s.transformer) {
    out << "workload: " << s.model.name << ", " << s.model.layers << " layers";
    if (s.model.mtp_layers > 0) {
      out << " and " << s.model.mtp_layers << " multi-token prediction " << (s.model.mtp_layers == 1 ? "depth" : "depths");
    }
    out << ", hidden " << s.model.hidden << ", seq " << s.model.seq;
    if (s.model.experts > 0) out << ", " << s.model.experts << " experts (" << s.model.experts_per_token << " per token)";
    if (s.model.moe_imbalance != 1.0) out << ", routing imbalance " << s.model.moe_imbalance;
    out << "\n\n";
  } else {
    out << "workload: " << s.model.name << " (" << data_type_name(s.model.dtype) << "; SBP strategies only)\n\n";
  }
  // Names and plans padded by display width (a name may hold accents or CJK).
  std::size_t w = 8, pw = 22;
  for (const auto& r : reports) w = std::max(w, display_width(r.name));
  for (const auto& r : reports) pw = std::max(pw, display_width(r.plan));
  out << padded("strategy", w) << "  " << padded("plan", pw)
      << printf_string(" %10s %12s %14s %10s %7s %7s %11s  %s\n", "step (s)", "samples/s", "tokens/s", "TFLOP/s", "MFU %",
                       "HFU %", "peak (GiB)", "memory");
  for (const auto& r : reports) {
    out << padded(r.name, w) << "  " << padded(r.plan, pw)
        << printf_string(" %10.3f %12.2f %14.0f %10.1f %7.1f %7.1f %11.2f  %s\n", r.step_time_s, r.samples_per_s,
                         r.tokens_per_s, r.model_tflops_per_device, r.mfu * 100, r.hfu * 100,
                         r.peak_memory_bytes / kGiB, r.fits_in_memory ? "fits" : "OUT OF MEMORY");
  }
  out << "\nbusiest links (bytes over line bandwidth x step time" << busiest_links_note(s.network) << "):\n";
  for (const auto& r : reports) {
    out << "  " << padded(r.name, w);
    if (r.busiest_links.empty()) out << "  none (no traffic on the network)";
    for (std::size_t i = 0; i < r.busiest_links.size() && i < 2; ++i) {
      const LinkUse& l = r.busiest_links[i];
      out << printf_string("  %s (%s) %.0f%%", l.link.c_str(), l.kind.c_str(), l.utilization * 100);
    }
    out << "\n";
  }
  if (s.transformer) {
    out << "\nstep: simulated time of one training step; TFLOP/s: model FLOPs (6N + 12 l h s per token) per device\n"
           "per second; MFU/HFU: model/hardware (with recomputation) FLOP/s over the accelerator's peak; peak: the\n";
  } else {
    out << "\nstep: simulated time of one training step; TFLOP/s: model FLOPs (the model's forward and backward\n"
           "per sample) per device per second; MFU/HFU: model/hardware FLOP/s over the accelerator's peak; peak: the\n";
  }
  out << "fullest device's weights, gradients, optimizer states and activations at the replay's high-water mark,\n"
         "with the software stack's memory (CUDA context, NCCL buffers per communicator).\n";
}

nlohmann::ordered_json training_report_row(const TrainingReport& r) {
  nlohmann::ordered_json j;
  j["plan"] = r.plan;
  j["devices"] = r.devices;
  j["step_time_s"] = r.step_time_s;
  j["samples_per_s"] = r.samples_per_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["model_tflops_per_device"] = r.model_tflops_per_device;
  j["mfu"] = r.mfu;
  j["hardware_tflops_per_device"] = r.hardware_tflops_per_device;
  j["hfu"] = r.hfu;
  j["breakdown.compute_s"] = r.compute_busy_s;
  j["breakdown.compute_parts_s.forward"] = r.compute_parts.forward;
  j["breakdown.compute_parts_s.backward"] = r.compute_parts.backward;
  j["breakdown.compute_parts_s.recompute"] = r.compute_parts.recompute;
  j["breakdown.compute_parts_s.optimizer"] = r.compute_parts.optimizer;
  j["breakdown.compute_parts_s.interference"] = r.compute_parts.interference;
  j["breakdown.exposed_comm_s.tp"] = r.exposed_tp_s;
  j["breakdown.exposed_comm_s.pp"] = r.exposed_pp_s;
  j["breakdown.exposed_comm_s.dp"] = r.exposed_dp_s;
  j["breakdown.exposed_comm_s.ep"] = r.exposed_ep_s;
  j["breakdown.exposed_comm_s.other"] = r.other_comm_s();
  j["breakdown.bubble_s"] = r.bubble_s;
  j["breakdown.idle_s"] = r.idle_s;
  j["peak_memory_bytes"] = TrainingReport::whole(r.peak_memory_bytes);
  j["memory_breakdown_bytes.weights"] = TrainingReport::whole(r.weights_bytes);
  j["memory_breakdown_bytes.gradients"] = TrainingReport::whole(r.gradients_bytes);
  j["memory_breakdown_bytes.optimizer"] = TrainingReport::whole(r.optimizer_bytes);
  j["memory_breakdown_bytes.activations"] = TrainingReport::whole(r.activations_bytes);
  j["memory_breakdown_bytes.runtime"] = TrainingReport::whole(r.runtime_bytes);
  j["device_memory_bytes"] = TrainingReport::whole(r.device_memory_bytes);
  j["fits_in_memory"] = r.fits_in_memory;
  j["tasks"] = r.tasks;
  j["transfers"] = r.transfers;
  return j;
}

std::string csv_cell(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_quoted(v.get<std::string>());
  if (v.is_number_float()) return shortest_text(v.get<double>());
  if (v.is_boolean() || v.is_number()) return v.dump();
  return csv_quoted(v.dump());  // an array or object: its JSON, quoted
}

void print_training_csv(std::ostream& out, const std::vector<TrainingReport>& reports) {
  out << "name";
  const nlohmann::ordered_json columns = training_report_row(TrainingReport{});
  for (const auto& [key, value] : columns.items()) out << "," << key;
  out << "\n";
  for (const auto& r : reports) {
    out << csv_quoted(r.name);
    const nlohmann::ordered_json row = training_report_row(r);
    for (const auto& [key, value] : row.items()) out << "," << csv_cell(value);
    out << "\n";
  }
}

namespace {
nlohmann::ordered_json links_json(const std::vector<LinkUse>& links) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const LinkUse& l : links) {
    a.push_back({{"link", l.link}, {"kind", l.kind}, {"bytes", l.bytes}, {"utilization", l.utilization}});
  }
  return a;
}
}  // namespace

void print_training_json(std::ostream& out, const TrainingScenario& s, const std::vector<TrainingReport>& reports) {
  nlohmann::ordered_json j;
  j["scenario"] = s.name;
  j["cluster"] = s.cluster_title;
  j["accelerators"] = s.cluster.accelerators().size();
  j["network"] = network_model_name(s.network);
  if (!s.collectives.automatic()) j["collectives"] = collective_policy_text(s.collectives);
  add_speed_policy(j, s);
  j["workload"] = s.model.name;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& r : reports) {
    list.push_back({{"name", r.name},
                    {"plan", r.plan},
                    {"devices", r.devices},
                    {"step_time_s", r.step_time_s},
                    {"samples_per_s", r.samples_per_s},
                    {"tokens_per_s", r.tokens_per_s},
                    {"model_tflops_per_device", r.model_tflops_per_device},
                    {"mfu", r.mfu},
                    {"hardware_tflops_per_device", r.hardware_tflops_per_device},
                    {"hfu", r.hfu},
                    {"breakdown",
                     {{"compute_s", r.compute_busy_s},
                      {"compute_parts_s",
                       {{"forward", r.compute_parts.forward},
                        {"backward", r.compute_parts.backward},
                        {"recompute", r.compute_parts.recompute},
                        {"optimizer", r.compute_parts.optimizer},
                        {"interference", r.compute_parts.interference}}},
                      {"exposed_comm_s", {{"tp", r.exposed_tp_s}, {"pp", r.exposed_pp_s}, {"dp", r.exposed_dp_s}, {"ep", r.exposed_ep_s}, {"other", r.other_comm_s()}}},
                      {"bubble_s", r.bubble_s},
                      {"idle_s", r.idle_s}}},
                    {"peak_memory_bytes", TrainingReport::whole(r.peak_memory_bytes)},
                    {"memory_breakdown_bytes",
                     {{"weights", TrainingReport::whole(r.weights_bytes)},
                      {"gradients", TrainingReport::whole(r.gradients_bytes)},
                      {"optimizer", TrainingReport::whole(r.optimizer_bytes)},
                      {"activations", TrainingReport::whole(r.activations_bytes)},
                      {"runtime", TrainingReport::whole(r.runtime_bytes)}}},
                    {"device_memory_bytes", TrainingReport::whole(r.device_memory_bytes)},
                    {"fits_in_memory", r.fits_in_memory},
                    {"tasks", r.tasks},
                    {"transfers", r.transfers},
                    {"most_utilized_links", links_json(r.busiest_links)}});
    if (r.sbp) continue;
    nlohmann::ordered_json uses = nlohmann::ordered_json::array();
    for (const CollectiveUse& u : r.collectives) {
      uses.push_back({{"dim", u.dim},
                      {"op", op_name(u.op)},
                      {"algorithm", algorithm_name(u.algorithm)},
                      {"channels", u.channels},
                      {"ranks", u.ranks},
                      {"count", u.count},
                      {"bytes", u.bytes}});
    }
    list.back()["collectives"] = uses;
  }
  j["strategies"] = list;
  out << j.dump(2) << "\n";
}

}  // namespace ddlsim
