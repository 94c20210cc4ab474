#include "strategies/search.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "sim/collectives.hpp"
#include "strategies/memory.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/stage_costs.hpp"
#include "support/strings.hpp"

namespace ddlsim {
namespace {

std::vector<int> divisors(std::int64_t n) {
  std::vector<int> out;
  for (int d = 1; d <= n && d <= 1'000'000; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The collective group of the given accelerator ranks.
CollectiveGroup group_of(NetworkFabric& f, const std::vector<std::uint32_t>& ranks) {
  std::vector<NodeId> nodes;
  for (std::uint32_t r : ranks) nodes.push_back(f.cluster().accelerators()[r]);
  return CollectiveGroup::of(f, nodes);
}

// The analytical time of `op` on `bytes` over the given ranks (0 for fewer than two).
double collective(NetworkFabric& f, const std::vector<std::uint32_t>& ranks, CollectiveOp op, double bytes) {
  if (ranks.size() < 2 || bytes <= 0) return 0.0;
  const CollectiveGroup g = group_of(f, ranks);
  return analytical_collective_time(f, g, chosen_spec(f, g, op, bytes));
}

// The order's axes of more than one rank, in order: two orders place a plan's ranks
// alike when these are equal.
std::vector<MeshAxis> placed_axes(const std::vector<MeshAxis>& order, int tp, int pp, int dp, int cp = 1) {
  std::vector<MeshAxis> used, full = order;
  if (std::find(full.begin(), full.end(), MeshAxis::kCp) == full.end()) {  // cp just inside dp
    full.insert(std::find(full.begin(), full.end(), MeshAxis::kDp), MeshAxis::kCp);
  }
  for (MeshAxis a : full) {
    if ((a == MeshAxis::kTp ? tp : a == MeshAxis::kPp ? pp : a == MeshAxis::kDp ? dp : cp) > 1) used.push_back(a);
  }
  return used;
}

}  // namespace

namespace {

// A plan of the grid: the framework's settings, the shape and the varied choices.
ParallelPlan grid_plan(const TransformerConfig& model, const SearchSpace& space, int tp, int pp, int dp, std::int64_t mb,
                       PipelineSchedule sched, DataParallelMode mode, Recompute rc, int v = 1, int ep = 1,
                       const std::vector<MeshAxis>* order = nullptr, int cp = 1) {
  ParallelPlan p;
  p.bucket_bytes = space.framework.bucket_bytes;
  p.overlap_grad_reduce = space.framework.overlap_grad_reduce;
  p.overlap_p2p = space.framework.overlap_p2p;
  p.overlap_tp_backward = space.framework.overlap_tp_backward;
  // (Settings that cannot apply to the plan are left out: gpipe has no pairs; a dense
  // model nothing to dispatch; FP8 dispatch needs DeepEP and FP8 GEMMs. A kept unfit
  // scenario strategy may carry them.)
  p.overlap_ep_comm = space.framework.overlap_ep_comm && sched != PipelineSchedule::kGPipe && model.experts > 0;
  p.dispatcher = ep > 1 ? space.framework.dispatcher : TokenDispatcher::kAllToAll;
  p.fp8_dispatch = ep > 1 && space.framework.fp8_dispatch && p.dispatcher == TokenDispatcher::kDeepEp && model.fp8_gemms;
  p.capacity_factor = model.experts > 0 ? space.framework.capacity_factor : 0.0;
  p.pad_to_capacity = p.capacity_factor > 0.0 && space.framework.pad_to_capacity;
  p.grouped_gemm = model.experts == 0 || space.framework.grouped_gemm;
  p.grad_accumulation = space.framework.grad_accumulation;
  p.grad_reduce_fp32 = space.framework.grad_reduce_fp32;
  p.master_remainders = space.framework.master_remainders;
  p.fp8_params = space.framework.fp8_params && model.fp8_gemms;  // (FP8 GEMMs take no ZeRO-3)
  p.tp_only_amax = space.framework.tp_only_amax && model.fp8_gemms;
  p.order = order != nullptr ? *order : space.framework.order;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.ep = ep;
  p.cp = cp;
  p.global_batch = space.global_batch;
  p.micro_batch = mb;
  p.schedule = sched;
  p.virtual_stages = sched == PipelineSchedule::kInterleaved1F1B ? v : 1;
  // Interleaved: micro-batches in groups of pp, or when groups of pp would leave a last
  // one shorter than pp, the smallest group that does not (Megatron-Core's rule).
  if (sched == PipelineSchedule::kInterleaved1F1B && p.micro_batches() >= pp && p.micro_batches() % pp != 0) {
    p.microbatch_group = static_cast<int>(fitting_microbatch_group(pp, p.micro_batches()));
  }
  p.dp_mode = mode;
  p.overlap_param_gather = space.framework.overlap_param_gather && mode == DataParallelMode::kZero1 && p.overlap_grad_reduce;
  p.align_grad_reduce = space.framework.align_grad_reduce;
  p.align_grad_reduce = p.grad_reduce_aligned();  // (only where it applies)
  p.align_param_gather = space.framework.align_param_gather && p.overlap_param_gather && p.virtual_stages > 1;
  p.recompute = rc;
  p.sequence_parallel = tp > 1 && model.seq % tp == 0;
  // (TE's userbuffers overlap where the plan can run it: sequence parallelism, no
  // zero-bubble schedule, a model it is modelled for.)
  if (space.framework.tp_comm_overlap.on && p.sequence_parallel && sched != PipelineSchedule::kZeroBubbleH1 &&
      !model.parallel_layers && model.kv_lora_rank == 0) {
    p.tp_comm_overlap = space.framework.tp_comm_overlap;
    p.overlap_tp_backward = false;  // (it takes the backward's collectives; a kept unfit framework may carry both)
  }
  return p;
}

// Multi-token prediction's layouts for `chunks` model chunks (Megatron-Core's "...|mL"):
// the layers balanced over all chunks but the last, which holds only the output layer,
// the losses and the prediction depths. Where the layers do not divide evenly, two: the
// first chunks a layer more, and the later ones (which is lighter depends on the model:
// the first stage holds the embedding and the most micro-batches in flight, but
// DeepSeek-V3's first layers are dense). None when the other chunks cannot each take a
// layer.
std::vector<std::vector<int>> mtp_layouts(std::int64_t layers, int chunks) {
  if (chunks < 2 || layers < chunks - 1) return {};
  const int rest = chunks - 1, extra = static_cast<int>(layers % rest);
  std::vector<std::vector<int>> out;
  for (const bool front : {true, false}) {
    if (!front && extra == 0) break;
    std::vector<int> counts(static_cast<std::size_t>(chunks), 0);
    for (int c = 0; c < rest; ++c) {
      counts[static_cast<std::size_t>(c)] = static_cast<int>(layers / rest) + ((front ? c < extra : c >= rest - extra) ? 1 : 0);
    }
    out.push_back(std::move(counts));
  }
  return out;
}

// The chunk costs (per micro-batch: forward, backward and recomputation, from the
// compute model) that balanced_layout weighs: each layer's, and what the first chunk
// (the embedding) and the last (final norm, output layer, loss, multi-token prediction
// depths) add.
struct ChunkWeights {
  std::vector<double> layers;
  double first = 0.0, last = 0.0;
};

ChunkWeights chunk_weights(const TransformerConfig& model, const ParallelPlan& p, const ComputeModel& compute) {
  const StageCosts c = stage_costs(context_share(model, p), context_folded(p), compute);  // (a cp rank's share)
  const auto whole = [](const HalfLayer& h) { return (h.forward + h.backward + h.recompute).value(); };
  const auto layer = [&](bool moe) { return whole(c.attention) + whole(c.mlp_of(moe)); };
  ChunkWeights w;
  for (std::int64_t l = 0; l < model.layers; ++l) w.layers.push_back(layer(!model.dense_layer(l)));
  w.first = (c.first_forward + c.first_backward).value();
  const double head = (c.last_forward + c.last_backward).value();
  w.last = head + static_cast<double>(model.mtp_layers) *
                      ((c.mtp_forward + c.mtp_backward).value() + layer(!model.mtp_dense()) + head);
  return w;
}

// The busiest pipeline stage's cost under `w` of a layout's chunks (chunk k on stage
// k mod pp).
double busiest_stage(const ChunkWeights& w, const std::vector<int>& counts, int pp) {
  std::vector<double> stage(static_cast<std::size_t>(pp), 0.0);
  std::size_t l = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    double& s = stage[k % static_cast<std::size_t>(pp)];
    if (k == 0) s += w.first;
    if (k + 1 == counts.size()) s += w.last;
    for (int i = 0; i < counts[k]; ++i) s += w.layers[l++];
  }
  return *std::max_element(stage.begin(), stage.end());
}

// Calls f(tp, pp, dp) for every shape of the grid, in its order.
template <class F>
void grid_shapes(const TransformerConfig& model, std::size_t devices, const SearchSpace& space, F&& f) {
  const auto n = static_cast<std::int64_t>(devices);
  // Pipeline depths: those dividing the layers, and those dividing the devices up to
  // the layers (the first stages then take a layer more: DeepSeek-V3's 61 layers on 16
  // stages, BLOOM's 70 on 12).
  std::vector<int> depths = divisors(model.layers);
  for (int d : divisors(n)) {
    if (d <= model.layers) depths.push_back(d);
  }
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  for (int tp : divisors(model.heads)) {
    if (tp > n) break;
    for (int pp : depths) {
      if (static_cast<std::int64_t>(tp) * pp > n) break;
      for (int cp : space.context_parallel) {
        const std::int64_t used = static_cast<std::int64_t>(tp) * pp * cp;
        if (used > n) break;
        const std::int64_t rest = n / used;
        if (space.all_devices) {
          if (rest * used == n) f(tp, pp, static_cast<int>(rest), cp);
        } else {
          for (int d = 1; d <= rest; ++d) f(tp, pp, d, cp);
        }
      }
    }
  }
}

}  // namespace

std::vector<int> balanced_layout(const std::vector<double>& layer_cost, double first_extra, double last_extra, int chunks) {
  const auto layers = static_cast<std::int64_t>(layer_cost.size());
  if (chunks < 2 || layers < chunks - 2) return {};
  // Chunks from the last to the first, each taking as many of the remaining layers (from
  // the end) as fit within `limit`, but leaving one for each middle chunk before it; the
  // first takes the rest. Empty when a chunk would exceed the limit.
  const auto fill = [&](double limit) {
    std::vector<int> counts(static_cast<std::size_t>(chunks), 0);
    std::int64_t left = layers;
    for (int k = chunks - 1; k >= 0; --k) {
      double cost = (k == chunks - 1 ? last_extra : 0.0) + (k == 0 ? first_extra : 0.0);
      const std::int64_t reserved = std::max(0, k - 1);
      int taken = 0;
      if (k == 0) {
        for (; left > 0; --left, ++taken) cost += layer_cost[static_cast<std::size_t>(left - 1)];
      } else {
        while (left > reserved && cost + layer_cost[static_cast<std::size_t>(left - 1)] <= limit) {
          cost += layer_cost[static_cast<std::size_t>(--left)];
          ++taken;
        }
      }
      if (cost > limit || (taken == 0 && k > 0 && k < chunks - 1)) return std::vector<int>{};
      counts[static_cast<std::size_t>(k)] = taken;
    }
    return counts;
  };
  // Bisection between no cost and everything on one chunk (which always fits); then the
  // layout at the smallest feasible limit found.
  double lo = 0.0, hi = first_extra + last_extra;
  for (double c : layer_cost) hi += c;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (fill(mid).empty() ? lo : hi) = mid;
  }
  return fill(hi);
}

std::vector<ParallelPlan> grid_plans(const TransformerConfig& model, std::size_t devices, const SearchSpace& space,
                                     const ComputeModel* compute) {
  std::vector<ParallelPlan> out;
  // Layouts balanced by compute time, with their weights, per (tp, micro-batch,
  // recomputation, ep, chunks); each plan then keeps its own only where its busiest stage
  // (which depends on pp) is at least 1% lighter than with the plan's own layout.
  std::map<std::tuple<int, std::int64_t, Recompute, int, int, int>, std::pair<ChunkWeights, std::vector<int>>> balanced;
  const auto balanced_for = [&](const ParallelPlan& p) {
    const int chunks = p.pp * p.virtual_stages;
    const auto key = std::tuple{p.tp, p.micro_batch, p.recompute, p.ep, chunks, p.cp};
    auto it = balanced.find(key);
    if (it == balanced.end()) {
      ChunkWeights w = chunk_weights(model, p, *compute);
      std::vector<int> layout = balanced_layout(w.layers, w.first, w.last, chunks);
      it = balanced.emplace(key, std::pair{std::move(w), std::move(layout)}).first;
    }
    const auto& [w, layout] = it->second;
    std::vector<int> plain;
    for (const LayerRange& r : chunk_layer_ranges(p, model)) plain.push_back(r.count);
    return !layout.empty() && busiest_stage(w, layout, p.pp) <= 0.99 * busiest_stage(w, plain, p.pp) ? layout : std::vector<int>{};
  };
  // The plans of one shape and expert-parallel degree, in the grid's order.
  const auto add_plans = [&](int tp, int pp, int dp, int ep, const std::vector<MeshAxis>& order, int cp) {
    for (std::int64_t mb : space.micro_batches) {
      for (PipelineSchedule sched : space.schedules) {
        // No pipeline: one plan, named 1F1B whichever schedules the space lists.
        if (pp == 1 && sched != space.schedules.front()) continue;
        const PipelineSchedule used = pp == 1 ? PipelineSchedule::k1F1B : sched;
        const std::vector<int> one{1};
        for (int v : used == PipelineSchedule::kInterleaved1F1B ? space.virtual_stages : one) {
          for (DataParallelMode mode : space.dp_modes) {
            if (mode != DataParallelMode::kAllReduce && dp * cp == 1) continue;  // nothing to shard
            for (Recompute rc : space.recomputes) {
              ParallelPlan p = grid_plan(model, space, tp, pp, dp, mb, used, mode, rc, v, ep, &order, cp);
              if (!plan_problem(p, model, devices).empty()) continue;
              // With multi-token prediction, also the layout that gives the last chunk
              // no layers (its output layer, losses and depths weigh more than a layer).
              std::vector<std::vector<int>> layouts =
                  model.mtp_layers > 0 ? mtp_layouts(model.layers, pp * p.virtual_stages) : std::vector<std::vector<int>>{};
              // And the layout balanced by compute time, where it is lighter.
              if (compute != nullptr && pp > 1 && p.stage_layers.empty()) {
                const std::vector<int> layout = balanced_for(p);
                if (!layout.empty() && std::find(layouts.begin(), layouts.end(), layout) == layouts.end()) layouts.push_back(layout);
              }
              if (layouts.empty()) {
                out.push_back(std::move(p));
                continue;
              }
              out.push_back(p);
              for (std::vector<int>& layout : layouts) {
                ParallelPlan last_free = p;
                last_free.stage_layers = std::move(layout);
                if (plan_problem(last_free, model, devices).empty()) out.push_back(std::move(last_free));
              }
            }
          }
        }
      }
    }
  };
  const std::vector<std::vector<MeshAxis>> orders = space.orders.empty() ? std::vector<std::vector<MeshAxis>>{space.framework.order} : space.orders;
  grid_shapes(model, devices, space, [&](int tp, int pp, int dp, int cp) {
    // The orders that place this shape's ranks apart: the axes of more than one rank,
    // in order, differ from every earlier order's.
    std::vector<std::vector<MeshAxis>> placed;
    const std::vector<MeshAxis> framework = placed_axes(space.framework.order, tp, pp, dp, cp);
    for (const auto& order : orders) {
      const std::vector<MeshAxis> used = placed_axes(order, tp, pp, dp, cp);
      if (std::find(placed.begin(), placed.end(), used) != placed.end()) continue;
      placed.push_back(used);
      // Where the framework's order places the ranks alike, its plans take that order
      // (so that they match a baseline of the scenario's).
      const std::vector<MeshAxis>& taken = used == framework ? space.framework.order : order;
      // Expert parallelism, for a mixture of experts: every degree dividing both dp x cp
      // (Megatron-Core's expert groups take the cp ranks too) and the experts, ascending
      // (only 1 for a dense model).
      for (int ep : model.experts > 0 ? divisors(std::gcd<std::int64_t>(static_cast<std::int64_t>(dp) * cp, model.experts)) : std::vector<int>{1}) {
        add_plans(tp, pp, dp, ep, taken, cp);
      }
    }
  });
  return out;
}

std::string empty_grid_reason(const TransformerConfig& model, std::size_t devices, const SearchSpace& space) {
  std::size_t shapes = 0;
  std::string first;
  grid_shapes(model, devices, space, [&](int tp, int pp, int dp, int cp) {
    ++shapes;
    if (!first.empty() || space.micro_batches.empty()) return;
    const ParallelPlan p = grid_plan(model, space, tp, pp, dp, space.micro_batches.front(), PipelineSchedule::k1F1B,
                                     DataParallelMode::kAllReduce, Recompute::kNone, 1, 1, nullptr, cp);
    first = mesh_text(p) + ", mb " + std::to_string(p.micro_batch) + ": " + plan_problem(p, model, devices);
  });
  const bool cp = space.context_parallel != std::vector<int>{1};
  const std::string axes = "tp dividing the " + std::to_string(model.heads) + " heads, pp the " +
                           std::to_string(model.layers) + " layers or the devices" + (cp ? ", cp as listed" : "");
  const std::string fill = space.all_devices ? (cp ? ", tp x pp x cp x dp = " : ", tp x pp x dp = ") + std::to_string(devices) : "";
  if (shapes == 0) return "it has no shape (" + axes + fill + ")";
  return "none of its " + std::to_string(shapes) + (shapes == 1 ? " shape" : " shapes") + " (" + axes + fill +
         ") makes a valid plan; the first, " + first;
}

double plan_peak_memory(const ParallelPlan& plan, const TransformerConfig& model) {
  double peak = 0;
  for (const DeviceMemory& d : stage_memory(plan, model)) peak = std::max(peak, d.total());
  return peak;
}

double estimate_step(const TransformerConfig& model, const ParallelPlan& p, NetworkFabric& fabric,
                     const ComputeModel& compute) {
  // Context parallelism: each cp rank a replica of its own on its share of each sequence.
  if (p.cp > 1) return estimate_step(context_share(model, p), context_folded(p), fabric, compute);
  StageCosts c = stage_costs(model, p, compute);
  add_context_ring(c, model, p, fabric);
  const std::vector<int> layers = stage_layer_counts(p, model);
  std::vector<std::uint32_t> tp_ranks;
  for (int k = 0; k < p.tp; ++k) tp_ranks.push_back(mesh_rank(p, 0, 0, k));
  // Data-parallel collectives: over dp ranks of the first stage's tp rank 0, the other
  // tp ranks running the same at the same time (their share of the links next to
  // servers: CollectiveGroup::siblings), as the replay prices them. `ds`: dp ranks.
  std::vector<int> all_dp(static_cast<std::size_t>(p.dp));
  std::iota(all_dp.begin(), all_dp.end(), 0);
  const auto dp_group = [&](const std::vector<int>& ds) {
    std::vector<std::uint32_t> ranks;
    for (int d : ds) ranks.push_back(mesh_rank(p, d, 0, 0));
    return group_of(fabric, ranks);
  };
  const auto with_siblings = [&](CollectiveGroup& g, const std::vector<int>& ds) {
    for (int k = 1; k < p.tp; ++k) {
      std::vector<NodeId>& sibling = g.siblings.emplace_back();
      for (int d : ds) sibling.push_back(fabric.cluster().accelerators()[mesh_rank(p, d, 0, k)]);
    }
  };
  // Times that depend on the mesh (its shape and rank order) and a few more words alone
  // (`what` tells the kinds apart: 2 sends, 3 data-parallel collectives, 4 all-to-alls,
  // 5 amax reductions):
  // the fabric keeps them, so that the many plans of one shape do not price them again.
  const auto kept = [&](std::uint64_t what, std::initializer_list<std::uint64_t> words, const auto& derive) {
    std::vector<std::uint64_t> key{~what, static_cast<std::uint64_t>(p.tp), static_cast<std::uint64_t>(p.pp),
                                   static_cast<std::uint64_t>(p.dp)};
    for (MeshAxis a : p.order) key.push_back(static_cast<std::uint64_t>(a));
    key.push_back(static_cast<std::uint64_t>(p.cp_folded));  // (the mesh's cp groups)
    key.insert(key.end(), words);
    if (const std::vector<double>* known = fabric.cached_values(key)) return *known;
    std::vector<double> found = derive();
    fabric.cache_values(std::move(key), found);
    return found;
  };
  // (Its ranks are always a progression: first, step, count.)
  const auto dp_collective = [&](const std::vector<int>& ds, CollectiveOp op, double bytes) {
    if (ds.size() < 2 || bytes <= 0) return 0.0;
    const std::initializer_list<std::uint64_t> words{static_cast<std::uint64_t>(op), std::bit_cast<std::uint64_t>(bytes),
                                                     static_cast<std::uint64_t>(ds.front()),
                                                     static_cast<std::uint64_t>(ds[1] - ds[0]), ds.size()};
    return kept(3, words, [&] {
             CollectiveGroup g = dp_group(ds);
             const CollectiveSpec spec = chosen_spec(fabric, g, op, bytes);
             with_siblings(g, ds);
             return std::vector<double>{analytical_collective_time(fabric, g, spec)};
           }).front();
  };
  const double ar = collective(fabric, tp_ranks, CollectiveOp::kAllReduce, c.tp_bytes);
  // Interference: compute beside communication runs 1 + slow times as long (the
  // device's overlap_slowdown), so `compute` seconds of work beside `comm` seconds of a
  // collective take comm when that outlasts the slowed work, else compute + comm x
  // slow / (1 + slow) (the work the overlap costs): max(compute, comm) without it.
  const double slow = compute.efficiency().overlap_slowdown;
  const auto beside = [slow](double work, double comm) {
    return comm >= work * (1.0 + slow) ? comm : work + comm * (slow / (1.0 + slow));
  };
  // What `comm` seconds of communication running ahead of the compute (nothing waits for
  // it) cost `work` seconds of compute beside it.
  const auto slowed = [slow](double work, double comm) { return std::min(comm, work * (1.0 + slow)) * (slow / (1.0 + slow)); };
  const double ends_ar = p.sequence_parallel ? 0.5 * ar : ar;  // the embedding's, the output layer's
  // All-reduces per layer and pass: two (after attention, after the MLP), one with
  // parallel layers; recomputed forwards all-reduce again.
  const double ars = model.parallel_layers ? 1 : 2;
  // Each pass waits for its send (none counted when sends overlap: optimistic where
  // receivers wait): stage i's forwards send to stage i + 1, its backwards to stage i - 1
  // (mod pp: with interleaving the next chunk is on the next stage), each the slowest
  // send of its tp ranks and replicas, which all send at once, each with its share of the
  // links as the replay prices it.
  std::vector<double> send_on(static_cast<std::size_t>(p.pp), 0.0), send_back(static_cast<std::size_t>(p.pp), 0.0);
  // (A boundary's sends depend on the mesh alone: kept are each distinct latency and
  // seconds per byte among them.)
  const auto sends_between = [&](int i, int j) {
    const std::vector<double> profile = kept(2, {static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(j)}, [&] {
      const auto& acc = fabric.cluster().accelerators();
      std::vector<std::pair<NodeId, NodeId>> sends;
      for (int d = 0; d < p.dp; ++d) {
        for (int k = 0; k < p.tp; ++k) sends.emplace_back(acc[mesh_rank(p, d, i, k)], acc[mesh_rank(p, d, j, k)]);
      }
      const std::vector<double> shares = concurrent_transfer_shares(fabric, sends);
      std::set<std::pair<double, double>> distinct;
      for (std::size_t t = 0; t < sends.size(); ++t) {
        const auto& route = fabric.first_route(sends[t].first, sends[t].second);
        if (!route.empty()) distinct.emplace(fabric.route_latency(route), shares[t] / fabric.route_capacity(route));
      }
      std::vector<double> found;
      for (const auto& [latency, per_byte] : distinct) found.insert(found.end(), {latency, per_byte});
      return found;
    });
    double slowest = 0.0;
    for (std::size_t t = 0; t + 1 < profile.size(); t += 2) slowest = std::max(slowest, profile[t] + c.p2p_bytes * profile[t + 1]);
    return slowest;
  };
  for (int i = 0; p.pp > 1 && !p.overlap_p2p && i < p.pp; ++i) {
    send_on[static_cast<std::size_t>(i)] = sends_between(i, (i + 1) % p.pp);
    send_back[static_cast<std::size_t>(i)] = sends_between(i, (i + p.pp - 1) % p.pp);
  }
  // FP8 GEMMs: each pass of a chunk ends with the amax reduction of all the stage's
  // layers (stage_costs.hpp, amax_reduction_bytes) among its ranks, in line: its
  // all-reduce kept by stage, bytes and group, then the update's kernels.
  const auto amax = [&](int i, double layers, bool forward) {
    const double bytes = amax_reduction_bytes(c, layers, forward);
    if (bytes <= 0.0) return 0.0;
    const std::initializer_list<std::uint64_t> words{static_cast<std::uint64_t>(i), std::bit_cast<std::uint64_t>(bytes),
                                                     static_cast<std::uint64_t>(p.tp_only_amax)};
    const double all_reduce =
        kept(5, words, [&] { return std::vector<double>{amax_all_reduce_time(p, fabric, i, bytes)}; }).front();
    return all_reduce > 0.0 ? all_reduce + amax_update_time(compute) : 0.0;
  };
  // Expert parallelism: per layer and pass (and recomputed forward) two all-to-alls of
  // the dispatched tokens within the ep group, in line with the compute: one towards the
  // experts and one back (the same bytes, unless the first is an FP8 dispatch).
  double a2a = 0;
  if (p.ep > 1) {
    const std::vector<int> ds(all_dp.begin(), all_dp.begin() + p.ep);
    const CollectiveGroup g = dp_group(ds);
    for (int which : {0, 1}) {
      const CollectiveSpec spec = dispatch_spec(fabric, g, model, p, c.a2a_bytes_of(which));
      // (Its time depends on the mesh and the spec alone: every field of the spec in the key
      // but its protocol, which the others decide.)
      const std::initializer_list<std::uint64_t> words{
          static_cast<std::uint64_t>(p.ep),       static_cast<std::uint64_t>(spec.op),
          static_cast<std::uint64_t>(spec.algorithm), std::bit_cast<std::uint64_t>(spec.bytes),
          static_cast<std::uint64_t>(spec.chunks), static_cast<std::uint64_t>(spec.channels),
          spec.root,                              spec.peer,
          static_cast<std::uint64_t>(spec.streamed), std::bit_cast<std::uint64_t>(spec.across),
          std::bit_cast<std::uint64_t>(spec.within)};
      a2a += kept(4, words, [&] {
               CollectiveGroup beside = g;
               with_siblings(beside, ds);
               return std::vector<double>{analytical_collective_time(fabric, beside, spec)};
             }).front();
    }
  }
  // One layer's forward and backward (with recomputation and all-reduces), per micro-batch:
  // b for a layer that recomputes (fully, with its all-reduces again, or selectively),
  // kept for one past a full-recompute plan's recompute_layers.
  const bool full = p.recompute == Recompute::kFull;
  // Each half layer's backward and its collective: after it, or with
  // overlap_tp_backward beside its last weight-gradient GEMM (sequence parallelism: the
  // all-gather in line, the reduce-scatter beside it, half the all-reduce each).
  auto backward_half = [&](double total, double weight) {
    const double share = p.sequence_parallel ? 0.5 : 1.0;
    return (1.0 - share) * ar + (total - weight) + beside(weight, share * ar);
  };
  // A layer with MLP half `mlp` and all-to-alls `a2a` per pass: f its forward, b its
  // backward, kept that of a layer past recompute_layers; ag, rs, ar its ZeRO
  // collectives (set below).
  struct LayerTimes {
    double f, b, kept, ag = 0, rs = 0, ar = 0;
  };
  // Combined 1F1B: a forward's all-to-alls run beside the backward paired with it and
  // the backward's beside the forward, so a paired pass shows only what outlasts the
  // other's compute; `paired`, the share of passes past the first stage's warm-up
  // (optimistic for the other stages, whose warm-ups are shorter). Under 1F1B with a
  // pipeline the backward's input comes from the next stage's pair, after the forward
  // has run alone: counted as no overlap.
  double paired = 0.0;
  if (p.combined_1f1b() && (p.pp == 1 || p.schedule == PipelineSchedule::kInterleaved1F1B)) {
    const int m = static_cast<int>(p.micro_batches()), chunks = m * p.virtual_stages;
    paired = static_cast<double>(chunks - interleaved_warmup(p.pp, p.virtual_stages, m, 0, true, p.group_size())) / chunks;
  }
  // (Selective recomputation of a dense MLP runs its tensor-parallel collective again.)
  const bool mlp_again = (selective_modules(p) & kRecomputeMlp) != 0 && p.tp > 1;
  const auto layer_times = [&](const HalfLayer& mlp, double a2a, bool experts, bool dense) {
    // (Under the alltoall dispatcher with tp the MLP half's tensor-parallel collectives
    // are the dispatched buffer's all-gather and reduce-scatter, moe_tp_share of an
    // all-reduce, in line with the experts.)
    const bool split = experts && c.moe_tp_share > 0.0;
    const double mlp_ar = split ? c.moe_tp_share * ar : ar;
    const double layer_ars = model.parallel_layers ? ars * ar : ar + mlp_ar;
    double fc = (c.attention.forward + mlp.forward).value() + layer_ars;
    double bc = (c.attention.backward + mlp.backward).value() + layer_ars;
    if (p.tp_comm_overlap.on && p.tp > 1) {  // the attention half's and a dense MLP's collectives beside their GEMMs
      const UbHalf a = ub_half(c.attention, false, p, model.fp8_gemms, ar, compute);
      fc = a.forward() + mlp.forward.value() + mlp_ar;
      bc = a.backward() + mlp.backward.value() + mlp_ar;
      if (dense) {
        const UbHalf m = ub_half(mlp, true, p, model.fp8_gemms, ar, compute);
        fc = a.forward() + m.forward();
        bc = a.backward() + m.backward();
      }
    }
    const double recomputed = (c.attention.recompute + mlp.recompute).value();
    const double hides = experts ? paired : 0.0;
    // (What the paired pass's all-to-alls cost it beside them: interference; and its
    // tensor-parallel collectives, but Transformer Engine's, whose forms price it.)
    const double paired_tp = hides > 0.0 && !(p.tp_comm_overlap.on && p.tp > 1) ? layer_ars : 0.0;
    const double backward_a2a = a2a - hides * std::min(a2a, fc) + hides * (beside(bc + recomputed, a2a) - std::max(bc + recomputed, a2a)) +
                                hides * slowed(fc - paired_tp, paired_tp);
    const double f = fc + a2a - hides * std::min(a2a, bc + recomputed) + hides * (beside(fc, a2a) - std::max(fc, a2a)) +
                     hides * slowed(bc + recomputed - paired_tp, paired_tp);
    double plain = bc + backward_a2a;
    // (Under expert parallelism the MLP's weight gradients come before its all-to-alls:
    // none runs beside its collective.)
    const double mlp_weight = experts ? 0.0 : mlp.weight_gradient.value();
    if (p.overlap_tp_backward && p.tp > 1) {
      plain = model.parallel_layers ? backward_half((c.attention.backward + mlp.backward).value(),
                                                    (c.attention.weight_gradient + mlp.weight_gradient).value())
                                    : backward_half(c.attention.backward.value(), c.attention.weight_gradient.value()) +
                                          (split ? mlp.backward.value() + mlp_ar : backward_half(mlp.backward.value(), mlp_weight)) +
                                          backward_a2a;
    }
    const double b = plain + recomputed + (full ? layer_ars + a2a : 0.0) + (mlp_again && dense ? ar : 0.0);
    return LayerTimes{f, b, full ? plain : b};
  };
  // The model's own layers (a mixture of experts' expert layers) and its dense ones.
  LayerTimes primary_layer = layer_times(c.mlp, a2a, p.ep > 1, model.experts == 0),
             dense_layer = layer_times(c.dense_mlp, 0.0, false, true);
  const std::vector<DeviceMemory> mem = stage_memory(p, model);
  const auto fullest = std::max_element(mem.begin(), mem.end(),
                                         [](const DeviceMemory& a, const DeviceMemory& b) { return a.parameters < b.parameters; });
  const double stage_params = fullest->parameters;
  // Of them, the routed experts' under expert parallelism (that stage's layers), reduced
  // over the dp / ep ranks holding each expert (dp ranks 0, ep, 2 ep, ...).
  const int fullest_stage = static_cast<int>(fullest - mem.begin());
  const double stage_experts =
      p.ep > 1 ? c.expert_params * static_cast<double>(layer_kinds(p, model, stage_chunks(p, model, fullest_stage)).primary +
                                                       (fullest_stage == p.pp - 1 && !model.mtp_dense() ? model.mtp_layers : 0))
               : 0.0;
  std::vector<int> expert_dp;
  for (int d = 0; p.ep > 1 && d < p.dp; d += p.ep) expert_dp.push_back(d);
  const auto expert_collective = [&](CollectiveOp op, double bytes) { return dp_collective(expert_dp, op, bytes); };
  // ZeRO-3: each unit's weights (the embedding, a layer, the output layer) gathered for
  // its forward and its backward, its gradients scattered after its backward, within a
  // shard group; with hybrid sharding each gradient shard is then all-reduced across the
  // replicas, on a communicator of its own. Gathers and scatters share one queue in the
  // order they are issued: a unit's gather runs while the unit before it computes, its
  // scatter after its own backward, beside the next unit's compute. So a pass takes the
  // first gather, then per unit the longer of its compute and the previous unit's
  // scatter plus the next unit's gather, then the last unit's scatter; the replicas'
  // all-reduces run beside the whole pass.
  const bool zero3 = p.dp_mode == DataParallelMode::kZero3 && p.dp > 1;
  // ZeRO-2 scatters each unit's gradients after its backward too, in every micro-batch
  // (DeepSpeed's partitioned gradients), and gathers nothing before a pass.
  const bool zero2 = p.dp_mode == DataParallelMode::kZero2 && p.dp > 1;
  const int s = shard_size(p);
  const std::vector<int> group(all_dp.begin(), all_dp.begin() + s);
  std::vector<int> replicas;
  for (int d = 0; zero3 && s < p.dp && d < p.dp; d += s) replicas.push_back(d);
  auto gather = [&](double params) {
    return zero3 && s > 1 ? dp_collective(group, CollectiveOp::kAllGather, params * weight_bytes(model.dtype)) : 0.0;
  };
  auto scatter = [&](double params) {
    return (zero2 || zero3) && s > 1 ? dp_collective(group, CollectiveOp::kReduceScatter, params * reduced_gradient_bytes(p, model.dtype)) : 0.0;
  };
  auto across = [&](double params) {
    return zero3 && !replicas.empty() ? dp_collective(replicas, CollectiveOp::kAllReduce, params * reduced_gradient_bytes(p, model.dtype) / s)
                                      : 0.0;
  };
  for (auto [t, params] : {std::pair{&primary_layer, c.layer_params}, std::pair{&dense_layer, c.dense_layer_params}}) {
    t->ag = gather(params), t->rs = scatter(params), t->ar = across(params);
  }
  const double ag_first = gather(c.first_params), rs_first = scatter(c.first_params), ar_first = across(c.first_params);
  const double ag_last = gather(c.last_params), rs_last = scatter(c.last_params), ar_last = across(c.last_params);
  // Multi-token prediction depths (after the output layer, on the last stage): the
  // input (with its tensor-parallel collectives, as transformer_step runs them: 1.5
  // all-reduces forward and 2 backward, 2 and 1.5 with sequence parallelism), a layer of
  // the last layer's kind (recomputed under full recomputation), the output layer and
  // loss again (its weights the model's).
  const double mtp_params0 = c.mtp_params + mtp_embedding_copy(model, p);
  const double mtp_f = c.mtp_forward.value() + (p.sequence_parallel ? 2.0 : 1.5) * ar;
  const double mtp_b = c.mtp_backward.value() + (p.sequence_parallel ? 1.5 : 2.0) * ar;
  const double mtp_norm = final_norm_parameters(model);  // a depth's output unit's (the output layer is the model's)
  struct Unit {
    double compute, gather, scatter, across;
  };
  auto pass = [zero3, &beside](const std::vector<Unit>& us) {
    if (us.empty()) return 0.0;
    if (!zero3) {
      // No gathers: ZeRO-2's scatters queue beside the compute (counted per stage below).
      double compute = 0.0;
      for (const Unit& u : us) compute += u.compute;
      return compute;
    }
    double t = us.front().gather, lane = 0.0;
    for (std::size_t j = 0; j < us.size(); ++j) {
      const double before = j > 0 ? us[j - 1].scatter : 0.0;
      const double next = j + 1 < us.size() ? us[j + 1].gather : 0.0;
      t += beside(us[j].compute, before + next);
      lane += us[j].across;
    }
    return beside(t + us.back().scatter, lane);
  };
  // Each device's forward and backward per micro-batch: its layers, and the embedding on
  // the first and the output layer and loss on the last (one device holds both without a
  // pipeline). The busiest sets the pace once the pipeline is full; filling and draining
  // it takes every other device's time once (the stages need not be alike: a balanced
  // partition gives the first ones the extra layers, and the output layer can weigh more
  // than a layer).
  // A chunk's gradient accumulation is spread over the micro-batches' backwards: m passes
  // per step, or m - 1 where the first micro-batch's gradient is kept as is.
  const double m = static_cast<double>(p.micro_batches());
  const double accumulation_share = (accumulates(p, 0) ? m : m - 1) / m;
  double F = 0, B = 0, all = 0, Fmax = 0, Bmax = 0;
  // Zero-bubble: the weight gradients in the backwards (W), the busiest stage's and all.
  const bool split = p.schedule == PipelineSchedule::kZeroBubbleH1;
  double W = 0, all_w = 0, tail = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const bool first = i == 0, last = i + 1 == layers.size();
    // With interleaving the device runs v model chunks, each pass of each chunk with its
    // own first gather and its own send.
    const std::vector<LayerRange> stage = stage_chunks(p, model, static_cast<int>(i));
    const int chunks = static_cast<int>(stage.size());
    double Fi = 0, Bi = 0, Wi = 0, queued = 0;
    // (The amaxes every pass of the stage reduces: all its chunks' layers'.)
    const double stage_fp8_layers = layers[i] + (last ? static_cast<double>(model.mtp_layers) : 0.0);
    for (int k = 0; k < chunks; ++k) {
      const LayerRange& r = stage[static_cast<std::size_t>(k)];
      const int per_chunk = r.count, recomputing = recomputed_layers(p, per_chunk);
      const auto of = [&](int l) -> const LayerTimes& { return model.dense_layer(r.first + l) ? dense_layer : primary_layer; };
      const LayerKinds kinds = layer_kinds(p, model, {r});
      const bool embedding = first && k == 0, output = last && k == chunks - 1;
      std::vector<Unit> fwd, bwd;
      // The embedding's forward and the output layer's backward end with a
      // tensor-parallel all-reduce (with sequence parallelism a reduce-scatter, and the
      // output layer's forward starts with an all-gather).
      if (embedding) fwd.push_back({c.first_forward.value() + ends_ar, ag_first, 0.0, 0.0});
      for (int l = 0; l < per_chunk; ++l) fwd.push_back({of(l).f, of(l).ag, 0.0, 0.0});
      if (output) fwd.push_back({c.last_forward.value() + (ar - ends_ar), ag_last, 0.0, 0.0});
      const LayerTimes& mtp_layer = model.mtp_dense() ? dense_layer : primary_layer;
      for (std::int64_t d = 0; output && d < model.mtp_layers; ++d) {
        const double params = d == 0 ? mtp_params0 : c.mtp_params;
        fwd.push_back({mtp_f, gather(params), 0.0, 0.0});
        fwd.push_back({mtp_layer.f, mtp_layer.ag, 0.0, 0.0});
        fwd.push_back({c.last_forward.value() + (ar - ends_ar), gather(mtp_norm), 0.0, 0.0});
      }
      for (std::int64_t d = model.mtp_layers - 1; output && d >= 0; --d) {
        const double params = d == 0 ? mtp_params0 : c.mtp_params;
        bwd.push_back({c.last_backward.value() + ends_ar, gather(mtp_norm), scatter(mtp_norm), across(mtp_norm)});
        bwd.push_back({mtp_layer.b, mtp_layer.ag, mtp_layer.rs, mtp_layer.ar});
        bwd.push_back({mtp_b, gather(params), scatter(params), across(params)});
      }
      if (output) bwd.push_back({c.last_backward.value() + ends_ar, ag_last, rs_last, ar_last});
      for (int l = per_chunk - 1; l >= 0; --l) bwd.push_back({l < recomputing ? of(l).b : of(l).kept, of(l).ag, of(l).rs, of(l).ar});
      // (With sequence parallelism the embedding's backward starts with the all-gather
      // that pairs its forward's reduce-scatter.)
      if (embedding) bwd.push_back({c.first_backward.value() + (ar - ends_ar), ag_first, rs_first, ar_first});
      // The model's last chunk sends no activations on, its first no gradients back.
      const double mtp_params = output ? static_cast<double>(model.mtp_layers) *
                                             (c.mtp_params + mtp_norm + c.params_of(!model.mtp_dense())) +
                                             mtp_embedding_copy(model, p)
                                       : 0.0;
      const double chunk_params = kinds.primary * c.layer_params + kinds.dense * c.dense_layer_params +
                                  (embedding ? c.first_params : 0.0) + (output ? c.last_params : 0.0) + mtp_params;
      if (zero2) {
        for (const Unit& u : bwd) queued += u.scatter;
      }
      if (split) {
        Wi += kinds.primary * (c.attention.weight_gradients + c.mlp.weight_gradients).value() +
              kinds.dense * (c.attention.weight_gradients + c.dense_mlp.weight_gradients).value() +
              (output ? c.last_weight_gradient.value() : 0.0) + (embedding ? c.first_backward.value() : 0.0);
        if (output) {
          const HalfLayer& mtp_mlp = c.mlp_of(!model.mtp_dense());
          Wi += static_cast<double>(model.mtp_layers) *
                (c.attention.weight_gradients + mtp_mlp.weight_gradients + c.mtp_weight_gradient + c.last_weight_gradient).value();
        }
      }
      // (overlap_p2p: a pass's receive and send run beside the device's compute, which
      // they slow: interference.)
      const double fwd_s = pass(fwd), bwd_s = pass(bwd);
      double fwd_p2p = 0.0, bwd_p2p = 0.0;
      if (p.overlap_p2p && p.pp > 1 && slow > 0.0) {
        const int n = static_cast<int>(p.pp), at = static_cast<int>(i);
        fwd_p2p = slowed(fwd_s, (embedding ? 0.0 : sends_between((at + n - 1) % n, at)) + (output ? 0.0 : sends_between(at, (at + 1) % n)));
        bwd_p2p = slowed(bwd_s, (output ? 0.0 : sends_between((at + 1) % n, at)) + (embedding ? 0.0 : sends_between(at, (at + n - 1) % n)));
      }
      Fi += fwd_s + fwd_p2p + (output ? 0.0 : send_on[i]) + amax(static_cast<int>(i), stage_fp8_layers, true);
      Bi += bwd_s + bwd_p2p + (embedding ? 0.0 : send_back[i]) + amax(static_cast<int>(i), stage_fp8_layers, false) +
            accumulation_share * grad_accumulation_time(accumulated_params(p, chunk_params), p, model.dtype, compute).value();
    }
    // ZeRO-2: a micro-batch's scatters drain while the stage runs its next forward and
    // backward; they slow it only when they take longer.
    // Then the scatters set the stage's pace, and deferring its weight gradients into the
    // fill and drain saves nothing. Zero-bubble: stage i's last min(i, m) W passes run
    // after its last input gradient, about i input gradients before the first stage's
    // (the chain back), and their scatters queue behind them: past the first stage's end
    // by (min(i, m) - 1) scatters less that head start.
    if (split && zero2) tail = std::max(tail, (std::min<double>(static_cast<double>(i), m) - 1) * queued - i * (Bi - Wi));
    if (queued - Fi > Bi) Wi = 0;
    if (queued > 0.0) Bi = beside(Fi + Bi, queued) - Fi;
    all += Fi + Bi;
    all_w += Wi;
    Fmax = std::max(Fmax, Fi);
    Bmax = std::max(Bmax, Bi);
    if (Fi + Bi > F + B) {
      F = Fi;
      B = Bi;
      W = Wi;
    }
  }
  const double v = p.schedule == PipelineSchedule::kInterleaved1F1B ? p.virtual_stages : 1;
  // m slots of the busiest, and the others' fill and drain (over v with interleaving):
  // (m + (pp - 1) / v) (F + B) when the stages are alike. GPipe fills and drains its
  // forwards and its backwards apart, each at its own busiest stage.
  // Zero-bubble saves the others' W (pp - 2 + min(m, pp)) / (pp - 1) times: 2 W each
  // with m >= pp, m (F + B) + (pp - 1)(F + B - 2 W) when alike (pipeline_schedule).
  const double saved = p.pp > 1 ? (p.pp - 2 + std::min(m, static_cast<double>(p.pp))) / (p.pp - 1) : 0.0;
  double step = p.schedule == PipelineSchedule::kGPipe ? all + (m - 1) * (Fmax + Bmax)
                                                       : m * (F + B) + (all - (F + B) - saved * (all_w - W)) / v;
  // overlap_p2p hides a send behind the passes after it, but not where nothing else is
  // ready to run: in the fill the first micro-batch's forward crosses the v x pp model
  // chunks one after another, each waiting for the send before it, and in the drain the
  // last one's backward crosses them back. The replays show about one such crossing
  // (the two partly overlap other stages' passes): the estimate counts, per hop, the
  // mean of its send on and its send back. (Without overlap_p2p every pass's sends are
  // in F and B already.)
  if (p.overlap_p2p && p.pp > 1) {
    const int n = p.pp;
    for (int hop = 0; hop + 1 < static_cast<int>(v) * n; ++hop) {
      step += 0.5 * (sends_between(hop % n, (hop + 1) % n) + sends_between((hop + 1) % n, hop % n));
    }
  }
  if (p.dp > 1 && p.dp_mode != DataParallelMode::kZero3) {
    const double dense = stage_params - stage_experts;
    const double grads = dense * reduced_gradient_bytes(p, model.dtype),
                 weights = gathered_weight_bytes(dense, fullest->fp8_weights, p, model.dtype);
    const double expert_grads = stage_experts * reduced_gradient_bytes(p, model.dtype);
    // The gradients' reduction may run beside the backward; ZeRO-1/2's all-gather of the
    // updated weights follows the optimizer step, with nothing left to hide behind.
    // (ZeRO-2's reduce-scatters ran in the passes.)
    double reduce = 0, gather = 0;
    if (p.dp_mode == DataParallelMode::kAllReduce) {
      reduce = dp_collective(all_dp, CollectiveOp::kAllReduce, grads) +
               expert_collective(CollectiveOp::kAllReduce, expert_grads);
    } else {
      if (p.dp_mode == DataParallelMode::kZero1) {
        reduce = dp_collective(all_dp, CollectiveOp::kReduceScatter, grads) +
                 expert_collective(CollectiveOp::kReduceScatter, expert_grads);
      }
      gather = dp_collective(all_dp, CollectiveOp::kAllGather, weights) +
               expert_collective(CollectiveOp::kAllGather, gathered_weight_bytes(stage_experts, fullest->fp8_expert_weights, p, model.dtype));
    }
    // The first stage's backward ends the step (the drain ends there), with its first
    // units' gradients: the embedding's and before it the first layer's bucket (at least
    // bucket_mib, within the first model chunk), whose reductions so follow the
    // backward. The next step's forwards start with the same units, whose weights they
    // wait for. (On the first stage; a mixture of experts' experts in those layers go
    // over their own communicator at the same time.)
    const bool first_dense = model.dense_layer(0);
    const double expert0 = p.ep > 1 && !first_dense ? c.expert_params : 0.0;
    const double layer0 = c.params_of(!first_dense) - expert0;
    const double rb = reduced_gradient_bytes(p, model.dtype);
    const double chunk0_layers = std::max(1, stage_chunks(p, model, 0).front().count);
    // (The layers of the first bucket, which fills by all of their parameters, and its
    // dense parameters.)
    const double k0 = std::min(std::max(1.0, p.bucket_bytes / rb / std::max(1.0, layer0 + expert0)), chunk0_layers);
    const double bucket0 = k0 * layer0;
    // overlap_param_gather: the gathers run bucket by bucket beside the next step's
    // forwards; those of the first units show (the embedding's 16-bit weights, the first
    // layer's bucket with its FP8 ones under fp8_params), or with align_param_gather the
    // first model chunk's (the stage's first forward waits for all of them).
    const double gather_full = gather;
    double stall = 0.0;
    if (p.overlap_param_gather) {
      const double stage_layers = layers[static_cast<std::size_t>(fullest_stage)];
      const double layer_fp8 = stage_layers > 0 ? fullest->fp8_weights / stage_layers : 0.0;
      const double expert_fp8 = stage_experts > 0.0 ? fullest->fp8_expert_weights / stage_experts : 0.0;
      const auto gathered = [&](double n_layers) {  // the weights of n layers
        const double dense = n_layers * layer0, experts = n_layers * expert0;
        return std::max(dp_collective(all_dp, CollectiveOp::kAllGather, gathered_weight_bytes(dense, layer_fp8 * n_layers, p, model.dtype)),
                        expert_collective(CollectiveOp::kAllGather, gathered_weight_bytes(experts, expert_fp8 * experts, p, model.dtype)));
      };
      const double embedding = dp_collective(all_dp, CollectiveOp::kAllGather, gathered_weight_bytes(c.first_params, 0.0, p, model.dtype));
      const double bucket_gather = gathered(k0);
      // (Aligned: the embedding's and the first chunk's layers'.)
      gather = std::min(gather, embedding + (p.align_param_gather ? gathered(chunk0_layers) : bucket_gather));
      // One bucket ahead, a bucket's gather starts when the forwards reach the bucket
      // before it: where it outlasts that bucket's forward (slowed beside it), the next
      // forward stalls, in each chunk's first micro-batch on every stage, the fill's
      // chain (buckets of k0 layers, n of them per chunk).
      if (!p.align_param_gather && layer0 > 0.0) {
        const double n = stage_layers / v / k0;
        stall = p.pp * v * std::max(0.0, n - 1.0) * std::max(0.0, bucket_gather / (1.0 + slow) - k0 * primary_layer.f);
      }
    }
    // (The next step's forwards beside the gathers, and the backward beside the
    // reduction's buckets but the last, are slowed by them: interference.) One bucket
    // ahead (without align_param_gather) each bucket's gather runs beside the first
    // forward of the bucket before it, the first micro-batch's, which crosses every stage
    // in the pipeline's fill one after another: every stage's slowed forwards lie on that
    // chain, pp times the one stage's.
    const double chain = p.overlap_param_gather && !p.align_param_gather ? static_cast<double>(p.pp) : 1.0;
    if (p.overlap_param_gather) step += chain * (gather_full - gather) * (slow / (1.0 + slow)) + stall;
    if (p.overlap_grad_reduce) {
      // The other buckets run beside the last backward, which they slow (and which is
      // longer by what it lost); the first units' after it, with whatever of the others
      // the backward did not hide. Where the last micro-batch's gradients join the
      // step's by a pass of their own (grad_accumulation "add" or "fp32"), a model
      // chunk's are final only at its pass's end: the first chunk's reduction (all of
      // it without interleaving) follows the backward, the others' run beside the later
      // chunks' backwards.
      const CollectiveOp reduce_op = p.dp_mode == DataParallelMode::kAllReduce ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
      const double last = std::min(reduce, dp_collective(all_dp, reduce_op, c.first_params * rb) +
                                               std::max(dp_collective(all_dp, reduce_op, bucket0 * rb),
                                                        expert_collective(reduce_op, k0 * expert0 * rb)));
      const bool joined = accumulates(p, static_cast<std::int64_t>(m) - 1);
      // align_grad_reduce: the schedule starts them, interleaved a model chunk's all at
      // once, the first chunk's after the backward, as where the gradients join; under
      // 1f1b the first stage's bucket by bucket and the others' after their backward.
      const bool aligned = p.grad_reduce_aligned();
      const bool whole = joined || (aligned && v > 1.0);
      const double behind = whole ? B * (v - 1.0) / v : B;
      const double after = whole ? std::max(last, reduce / v) : last;
      // Each stage's reductions slow its last backwards, which the last micro-batch's
      // backward, crossing the stages one after another in the pipeline's drain, waits
      // for: without interleaving every stage's slowed backward lies on that chain (pp
      // times the one stage's); with interleaving the reductions spread over the stage's
      // drain, of whose backwards the chain waits for about half, as the replays show
      // (pp / 2: the 88 NeMo cases' estimates 0.17% from their replays on average,
      // against 0.36% counting one stage's and 0.19% with pp (1 + 1/v) / 2).
      const double lost = slowed(behind, reduce - after);
      // Aligned, about one stage's: under 1f1b only the first stage's last backward runs
      // beside reductions; interleaved, the first chunk's start after the drain and the
      // others' at moments every stage shares, which the replays show slow the drain's
      // chain about as much as one stage's (the 52 interleaved NeMo cases: 0.52% mean,
      // 1.98% worst from their replays, against 0.97% and 3.38% counting pp / 2).
      const double drain = aligned ? 1.0 : v > 1.0 ? std::max(1.0, p.pp / 2.0) : p.pp;
      step += drain * lost + std::max(after, reduce - behind - lost) + gather;
    } else {
      step += reduce + gather;
    }
  }
  if (p.pp > 1 && (model.tied_embedding || model.mtp_layers > 0)) {
    // The tied embedding's two copies (first and last stage), or the embedding and multi-
    // token prediction's copy of it: their gradients summed.
    double bytes = static_cast<double>(model.vocab) * static_cast<double>(model.hidden) / p.tp * reduced_gradient_bytes(p, model.dtype);
    if (p.dp_mode == DataParallelMode::kZero3 && p.dp > 1) bytes /= shard_size(p);
    step += collective(fabric, {mesh_rank(p, 0, 0, 0), mesh_rank(p, 0, p.pp - 1, 0)}, CollectiveOp::kAllReduce, bytes);
  }
  if (const double kv = model.replicated_kv_params(p.tp); kv > 0.0) {
    // More tp ranks than key-value groups: each group's copies' gradients summed among
    // the ranks sharing it, the busiest stage's layers at once.
    // (Multi-token prediction's layers on the last stage.)
    const double busiest = std::max(*std::max_element(layers.begin(), layers.end()), layers.back() + static_cast<int>(model.mtp_layers));
    double bytes = kv * busiest * reduced_gradient_bytes(p, model.dtype);
    if (zero3) bytes /= shard_size(p);
    std::vector<std::uint32_t> sharing;
    for (int k = 0; k < model.kv_copies(p.tp); ++k) sharing.push_back(mesh_rank(p, 0, 0, k));
    step += collective(fabric, sharing, CollectiveOp::kAllReduce, bytes);
  }
  if (zero2) step += rs_first + tail;  // ZeRO-2: the last backward's last scatter (the embedding's)
  const double updated = p.dp_mode == DataParallelMode::kAllReduce
                             ? stage_params
                             : (stage_params - stage_experts) / shard_size(p) + stage_experts / (shard_size(p) / p.ep);
  step += plan_optimizer_step_time(updated, p, model.dtype, compute).value();
  return step;
}

bool same_plan(const ParallelPlan& a, const ParallelPlan& b) {
  auto key = [](const ParallelPlan& p) {
    return std::tie(p.dp, p.tp, p.pp, p.ep, p.cp, p.virtual_stages, p.global_batch, p.micro_batch, p.schedule, p.dp_mode,
                    p.shard, p.sequence_parallel, p.recompute, p.recompute_layers, p.stage_layers, p.bucket_bytes, p.overlap_grad_reduce, p.align_grad_reduce, p.overlap_param_gather, p.align_param_gather, p.overlap_p2p, p.overlap_tp_backward, p.tp_comm_overlap, p.overlap_ep_comm, p.dispatcher, p.fp8_dispatch, p.capacity_factor, p.pad_to_capacity, p.grouped_gemm, p.grad_accumulation, p.grad_reduce_fp32, p.master_remainders, p.fp8_params, p.tp_only_amax, p.order);
  };
  // The interleaved schedule's micro-batch group as it runs (0 is pp).
  auto group = [](const ParallelPlan& p) { return p.schedule == PipelineSchedule::kInterleaved1F1B ? p.group_size() : 0; };
  return key(a) == key(b) && group(a) == group(b) && selective_modules(a) == selective_modules(b);
}

std::string describe_plan(const ParallelPlan& p) {
  std::string s = mesh_text(p) + (p.ep > 1 ? ", ep " + std::to_string(p.ep) : "") + ", mb " + std::to_string(p.micro_batch);
  if (p.pp > 1) {
    s += std::string(", ") + schedule_name(p.schedule);
    if (p.schedule == PipelineSchedule::kInterleaved1F1B) s += " v" + std::to_string(p.virtual_stages);
    if (p.schedule == PipelineSchedule::kInterleaved1F1B && p.microbatch_group > 0) {
      s += " in groups of " + std::to_string(p.microbatch_group);
    }
  }
  if (p.dp_mode != DataParallelMode::kAllReduce) {
    s += ", zero " + std::to_string(p.dp_mode == DataParallelMode::kZero1 ? 1 : p.dp_mode == DataParallelMode::kZero2 ? 2 : 3);
  }
  if (p.shard > 0 && p.shard < p.dp) s += " sharded over " + std::to_string(p.shard);
  if (p.sequence_parallel) s += ", sp";
  if (p.recompute != Recompute::kNone) s += p.recompute == Recompute::kFull ? ", full recompute" : ", selective recompute";
  if (p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules) {
    s += " of " + recompute_module_names(p.recompute_modules);
  }
  if (p.recompute == Recompute::kFull && p.recompute_layers > 0) {
    s += " of " + std::to_string(p.recompute_layers) + " layers per chunk";
  }
  if (p.grad_accumulation != GradAccumulation::kFused) {
    s += std::string(", grad accumulation ") + grad_accumulation_name(p.grad_accumulation);
  }
  if (p.grad_reduce_fp32) s += ", fp32 grad reduction";
  if (p.master_remainders) s += ", master weights as remainders";
  if (p.fp8_params) s += ", FP8 weights";
  if (p.tp_only_amax) s += ", tp-only amax reduction";
  if (!p.stage_layers.empty()) {  // runs of equal counts shortened: "layers 1, 30 x 2, 0"
    s += ", layers ";
    for (std::size_t c = 0; c < p.stage_layers.size();) {
      std::size_t n = 1;
      while (c + n < p.stage_layers.size() && p.stage_layers[c + n] == p.stage_layers[c]) ++n;
      s += (c > 0 ? ", " : "") + (n > 1 ? std::to_string(n) + " x " : std::string()) + std::to_string(p.stage_layers[c]);
      c += n;
    }
  }
  if (p.dispatcher != TokenDispatcher::kAllToAll) {
    s += std::string(", ") + dispatcher_name(p.dispatcher) + (p.fp8_dispatch ? " fp8" : "") + " dispatch";
  }
  if (p.capacity_factor > 0.0) {
    s += printf_string(", capacity %g", p.capacity_factor) + (p.pad_to_capacity ? " padded" : "");
  }
  if (!p.grouped_gemm) s += ", experts one by one";
  // The order where it places the ranks otherwise than the default.
  if (placed_axes(p.order, p.tp, p.pp, p.dp, p.cp) != placed_axes(ParallelPlan{}.order, p.tp, p.pp, p.dp, p.cp)) {
    s += ", order ";
    for (MeshAxis a : p.order) s += std::string(a == p.order.front() ? "" : "-") + axis_name(a);
  }
  return s;
}

}  // namespace ddlsim
