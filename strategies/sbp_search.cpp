#include "strategies/sbp_search.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "strategies/stage_costs.hpp"
#include "workloads/transformer.hpp"

namespace ddlsim {
namespace {

bool splits(const Sbp& s, int axis) { return s.kind == SbpKind::kSplit && s.axis == axis; }

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Into how many distinct pieces the layout cuts a tensor: the mesh dimensions that
// split it (B and P keep it whole on each device).
double shards(const NdSbp& s, const std::vector<int>& dims) {
  double n = 1;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (s[d].kind == SbpKind::kSplit) n *= dims[d];
  }
  return n;
}

// The pieces the rows of a layout are cut into: the mesh dimensions that split axis 0.
double row_shards(const NdSbp& s, const std::vector<int>& dims) {
  double n = 1;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (splits(s[d], 0)) n *= dims[d];
  }
  return n;
}

// The pieces the columns of a layout are cut into: the mesh dimensions that split axis 1.
double column_shards(const NdSbp& s, const std::vector<int>& dims) {
  double n = 1;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (splits(s[d], 1)) n *= dims[d];
  }
  return n;
}

// The weight gradient X^T dY is a partial sum along every dimension where the weights
// are broadcast but the batch or k is split or partial (S(0) x B, P x B), and where the
// whole layer is replicated (B x B -> B) but its output's gradient arrives as a partial
// sum, the dual of B (gradient_sbp), as it does unless the loss follows the layer (each
// device then computes the whole loss and its whole gradient): all-reduced.
NdSbp weight_gradient(const MatmulSignature& sig, bool loss_follows) {
  NdSbp grad = sig.b;
  for (std::size_t d = 0; d < grad.size(); ++d) {
    if (sig.b[d].kind != SbpKind::kBroadcast) continue;
    const bool replicated = sig.a[d].kind == SbpKind::kBroadcast && sig.c[d].kind == SbpKind::kBroadcast;
    if (splits(sig.a[d], 0) || sig.a[d].kind == SbpKind::kPartialSum || (replicated && !loss_follows)) grad[d] = kP;
  }
  return grad;
}

// One device's share of an operator run by `pieces` devices: its costs divided, and a
// batched GEMM's batch (samples x heads) too.
Operator share_of(Operator op, double pieces) {
  op.cost.fwd_flops /= pieces;
  op.cost.bwd_flops /= pieces;
  op.cost.fwd_bytes /= pieces;
  op.cost.bwd_bytes /= pieces;
  if (op.gemm.batch > 0) {
    op.gemm.batch = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(static_cast<double>(op.gemm.batch) / pieces)));
  }
  return op;
}

// Collective prices shared by the pricers of one search: the lines along a dimension
// depend on its stride and size alone (the line through position i holds i's position
// less its coordinate times the stride, plus c stride for c < size), whatever the shape.
}  // namespace

struct SbpPriceCache {
  std::map<std::tuple<std::size_t, int, int, double>, double> time;  // (stride, size, op, bytes)
  std::map<std::pair<std::size_t, int>, std::vector<CollectiveGroup>> groups;  // (stride, size): distinct_lines
  // All-to-all's analytical time under one protocol is affine in the bytes (every pair's
  // direct transfer, in one piece: latency plus bytes over the busiest link, and under
  // the low-latency protocol its rate's time, also linear; tested), and so is the
  // selector's estimate, by which a line chooses its protocol (choose_protocol: the
  // cheaper estimate; where the line has no LL rate, LL up to kLowLatencyMaxBytes), so
  // two prices per protocol give every other size: (stride, size) -> per line, its
  // times and estimates at 1 MB and 2 MB. Routing every pair of a large group is what a
  // price costs.
  struct AllToAllLine {
    double simple[2], low[2];                    // s, analytical, bandwidth / low-latency protocol
    double simple_estimate[2], low_estimate[2];  // s, the selector's estimates of the same
  };
  std::map<std::pair<std::size_t, int>, std::vector<AllToAllLine>> all_to_all;
};

std::shared_ptr<SbpPriceCache> make_sbp_price_cache() { return std::make_shared<SbpPriceCache>(); }

namespace {

using CollectivePrices = SbpPriceCache;

// Everything a plan's cost needs, with boxing and GEMM prices memoized (the descent asks
// for the same ones many times).
class Pricer {
 public:
  Pricer(const SbpChain& chain, std::vector<int> dims, const std::vector<NodeId>& devices, NetworkFabric& fabric,
         const ComputeModel& compute, CollectivePrices* shared = nullptr, RuntimeMemory runtime = {})
      : chain_(chain), mesh_(DeviceMesh::over(std::move(dims), devices)), fabric_(fabric), compute_(compute),
        prices_(shared ? shared : &own_prices_), runtime_(runtime) {}

  // The plan's steps in forward order: the boxing of each layer's input, the layer, the
  // completion of a partial output before an elementwise step, the operators after it.
  std::vector<SbpStage> schedule(const SbpPlan& plan) {
    std::vector<SbpStage> out;
    out.reserve(3 * chain_.layers.size());
    const std::size_t D = mesh_.dims.size();
    NdSbp from(D, S(0));  // the batch as the data loader gives it
    for (std::size_t i = 0; i < chain_.layers.size(); ++i) {
      const LinearLayer& l = chain_.layers[i];
      const MatmulSignature& sig = plan.layers[i];
      const double in_bytes =
          (l.in_elements > 0 ? l.in_elements : static_cast<double>(rows(l)) * static_cast<double>(l.k)) * bytes_;
      if (!(from == sig.a)) out.push_back(boxing_stage(from, sig.a, in_bytes, i > 0, l.repeat));  // the input needs no gradient
      SbpStage layer;
      layer.kind = SbpStage::Kind::kLayer;
      layer.layer = i;
      layer.repeat = l.repeat;
      std::tie(layer.forward_s, layer.backward_s) = matmul_times(l, sig);
      layer.syncs.push_back({weight_gradient(sig, i + 1 == chain_.layers.size()), sig.b,
                             static_cast<double>(l.k) * static_cast<double>(l.n) * bytes_});
      const std::size_t layer_at = out.size();
      out.push_back(layer);
      // The output, made complete for an elementwise step if need be.
      const double out_bytes = static_cast<double>(rows(l)) * static_cast<double>(l.n) * bytes_;
      from = sig.c;
      if (l.elementwise_after && std::any_of(from.begin(), from.end(), [](const Sbp& x) { return x.kind == SbpKind::kPartialSum; })) {
        const std::size_t next = i + 1;
        const NdSbp* target = next < chain_.layers.size() ? &plan.layers[next].a : nullptr;
        const NdSbp layout = best_complete(from, target, out_bytes, l);
        out.push_back(boxing_stage(from, layout, out_bytes, true, l.repeat));
        from = layout;
      }
      {
        // Its bias and norms act on the completed output: summed where that is cut or partial.
        SbpSync own{NdSbp(D, kB), NdSbp(D, kB), l.own_params * bytes_};
        for (std::size_t d = 0; d < D; ++d) {
          if (from[d].kind != SbpKind::kBroadcast) own.from[d] = kP;
        }
        out[layer_at].syncs.push_back(std::move(own));
      }
      if (l.normalizes && std::any_of(from.begin(), from.end(), [](const Sbp& x) { return splits(x, 1); })) {
        // The norm's statistics: a rows x 2 fp32 partial sum along the column-split
        // dimensions, all-reduced (and again in backward: the dual of its re-layout).
        NdSbp partial = from, whole = from;
        for (std::size_t d = 0; d < D; ++d) {
          if (splits(from[d], 1)) {
            partial[d] = kP;
            whole[d] = kB;
          }
        }
        out.push_back(boxing_stage(partial, whole, static_cast<double>(rows(l)) * 2 * 4, true, l.repeat));
      }
      if (!l.after.empty()) {
        SbpStage e;
        e.kind = SbpStage::Kind::kElementwise;
        e.layer = i;
        e.repeat = l.repeat;
        e.from = e.to = from;
        std::tie(e.forward_s, e.backward_s) = after_times(i, shards(from, mesh_.dims));
        out.push_back(e);
      }
    }
    return out;
  }

  [[nodiscard]] const std::vector<int>& dims() const { return mesh_.dims; }
  // sbp_memory of the plan cost() last priced (when it could run).
  [[nodiscard]] const SbpMemory& last_memory() const { return last_memory_; }

  SbpCost cost(const SbpPlan& plan) {
    SbpCost c;
    if (!rows_fit(plan)) {
      c.compute_s = kInfinite;
      return c;
    }
    const auto [f, b] = operator_times(chain_.before, shards(NdSbp(mesh_.dims.size(), S(0)), mesh_.dims));
    c.compute_s += f + b;
    const std::vector<SbpStage> stages = schedule(plan);
    for (const SbpStage& st : stages) {
      if (st.kind == SbpStage::Kind::kBoxing) {
        c.boxing_s += st.repeat * box(st.from, st.to, st.bytes) * (st.backward ? 2 : 1);
      } else {
        c.compute_s += st.repeat * (st.forward_s + st.backward_s);
      }
    }
    // Gradients are synchronized in the last micro-batch's backward, each layer's as soon
    // as its backward has produced it, beside the backward of the layers before it (as the
    // lowering replays it): the part that outlasts that backward is what the step pays.
    // A two-stage flow shop, layers in backward order; r identical layers (backward b,
    // synchronization s) starting at t0 with the network free at c0 end their
    // synchronizations at max(c0 + r s, t0 + b + r s, t0 + r b + s). `scale` stretches
    // every backward (interference, below). Returns the backward's end, the last
    // synchronization's, and the backward's compute (its re-layouts left out).
    // Each stage's price once, in backward order: a re-layout's in the backward, a
    // layer's synchronizations; then the embedding's synchronizations (the step's last).
    std::vector<double> priced(stages.size(), 0.0);
    for (std::size_t i = stages.size(); i-- > 0;) {
      const SbpStage& st = stages[i];
      if (st.kind == SbpStage::Kind::kBoxing) {
        if (st.backward) priced[i] = box(st.from, st.to, st.bytes);
        continue;
      }
      for (const SbpSync& x : st.syncs) priced[i] += box(x.from, x.to, x.bytes);
      c.gradient_sync_total_s += st.repeat * priced[i];
    }
    std::vector<double> embedding;
    for (const SbpSync& e : sbp_embedding_syncs(chain_, plan)) {
      embedding.push_back(box(e.from, e.to, e.bytes));
      c.gradient_sync_total_s += embedding.back();
    }
    const double before_b = b;  // (clang 14 does not capture a structured binding)
    auto flow_shop = [&](double scale) {
      double t = 0.0, net = 0.0, computing = 0.0;
      for (std::size_t i = stages.size(); i-- > 0;) {
        const SbpStage& st = stages[i];
        if (st.kind == SbpStage::Kind::kBoxing) {
          t += st.repeat * priced[i];  // (0 for a forward re-layout)
          continue;
        }
        const double sync = priced[i];
        const double bw = st.backward_s * scale;
        if (sync > 0.0) net = std::max({net + st.repeat * sync, t + bw + st.repeat * sync, t + st.repeat * bw + sync});
        t += st.repeat * bw;
        computing += st.repeat * bw;
      }
      t += before_b * scale;
      computing += before_b * scale;
      for (const double sync : embedding) {
        if (sync > 0.0) net = std::max(net, t) + sync;
      }
      return std::tuple{t, net, computing};
    };
    const auto [t, net, backward] = flow_shop(1.0);
    c.gradient_sync_s = std::max(0.0, net - t);
    // Every micro-batch computes and re-lays its activations; gradients are synchronized
    // and the optimizer steps once.
    const double k = plan.micro_batches;
    last_memory_ = sbp_memory(chain_, plan, runtime_);
    c.compute_s = k * c.compute_s + optimizer_step_time(last_memory_.weights / bytes_, compute_, kGradientBytes, chain_.dtype).value();
    // Interference: the backward beside the synchronizations it hides runs 1 + slow
    // times as long while they run (the device's overlap_slowdown): it loses hidden x
    // slow / (1 + slow) of work, of at most its whole (slowed) backward compute. The
    // synchronizations wait for the slowed backward's gradients: the flow shop again with
    // every backward stretched by that loss (spread over the backward's compute, its
    // re-layouts as they were) gives what they still outlast it by. (Hidden time beside
    // the backward's re-layouts, when the compute waits, is charged as well: a little
    // high for plans that re-lay activations in the backward; untested there.)
    const double slow = compute_.efficiency().overlap_slowdown;
    const double hidden = c.gradient_sync_total_s - c.gradient_sync_s;
    const double lost = std::min(hidden, backward * (1.0 + slow)) * (slow / (1.0 + slow));
    if (lost > 0.0 && backward > 0.0) {
      const auto [t_slow, net_slow, backward_slow] = flow_shop(1.0 + lost / backward);
      c.compute_s += lost;
      c.gradient_sync_s = std::max(0.0, net_slow - t_slow);
    }
    c.boxing_s *= k;
    return c;
  }

  // The forward and backward times of `ops` when each device runs 1/pieces of each.
  std::pair<double, double> operator_times(const std::vector<Operator>& ops, double pieces) const {
    double f = 0, b = 0;
    for (const Operator& op : ops) {
      const Operator local = share_of(op, pieces);
      f += compute_.time(local, Pass::kForward).value();
      b += compute_.time(local, Pass::kBackward).value();
    }
    return {f, b};
  }

 private:
  // operator_times of layer i's `after`, memoized.
  std::pair<double, double> after_times(std::size_t i, double pieces) {
    const auto key = std::make_pair(i, pieces);
    if (const auto it = after_memo_.find(key); it != after_memo_.end()) return it->second;
    return after_memo_[key] = operator_times(chain_.layers[i].after, pieces);
  }

  // The search's plans are valid by construction; only the row splits before attention
  // need checking (sbp_plan_problem checks everything, for plans from outside).
  bool rows_fit(const SbpPlan& plan) const {
    for (std::size_t i = 0; i < chain_.layers.size(); ++i) {
      if (!runs_after(plan.layers[i].c, chain_.layers[i])) return false;
    }
    return true;
  }

  // Whether the operators after layer l can run on its output laid out as `layout`:
  // columns split by whole groups (heads), rows before attention by whole samples.
  bool runs_after(const NdSbp& layout, const LinearLayer& l) const {
    if (l.column_groups > 0) {
      const double per = static_cast<double>(l.column_groups) / column_shards(layout, mesh_.dims);
      if (per != std::floor(per)) return false;
    }
    if (!l.whole_samples || chain_.batch <= 0) return true;
    const double per = static_cast<double>(chain_.batch) / row_shards(layout, mesh_.dims);
    return per == std::floor(per);
  }

  // An n-D SBP as a number: 2 bits per mesh dimension (S(0), S(1), B, P).
  static std::uint32_t code(const NdSbp& s) {
    std::uint32_t c = 0;
    for (const Sbp& x : s) {
      c = c * 4 + (x.kind == SbpKind::kSplit ? static_cast<std::uint32_t>(x.axis == 0 ? 0 : 1)
                                             : x.kind == SbpKind::kBroadcast ? 2u : 3u);
    }
    return c;
  }

  double box(const NdSbp& a, const NdSbp& b, double bytes) {
    if (a == b || bytes <= 0.0) return 0.0;  // nothing to move (a layer without a bias or norm)
    const auto key = std::make_tuple(code(a), code(b), bytes);
    const auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    // boxing_time's sum, each collective's price memoized by (dimension, op, bytes).
    double t = 0;
    for (const BoxingStep& step : boxing_steps(a, b, bytes, mesh_)) {
      if (step.local) continue;
      std::size_t stride = 1;
      for (std::size_t d = step.mesh_dim + 1; d < mesh_.dims.size(); ++d) stride *= static_cast<std::size_t>(mesh_.dims[d]);
      const int size = mesh_.dims[step.mesh_dim];
      const auto ck = std::make_tuple(stride, size, static_cast<int>(step.op), step.bytes);
      auto it2 = prices_->time.find(ck);
      if (it2 == prices_->time.end()) {
        auto g = prices_->groups.find({stride, size});
        if (g == prices_->groups.end()) {
          g = prices_->groups.emplace(std::make_pair(stride, size), distinct_line_groups(mesh_, step.mesh_dim, fabric_)).first;
        }
        double value = 0;
        if (step.op == CollectiveOp::kAllToAll) {
          auto lines = prices_->all_to_all.find({stride, size});
          if (lines == prices_->all_to_all.end()) {
            lines = prices_->all_to_all.emplace(std::make_pair(stride, size), all_to_all_anchors(g->second)).first;
          }
          const auto at = [&](const double (&x)[2]) { return x[0] + (x[1] - x[0]) * (step.bytes - 1e6) / 1e6; };
          for (std::size_t k = 0; k < lines->second.size(); ++k) {
            const SbpPriceCache::AllToAllLine& x = lines->second[k];
            const bool ll = low_latency_cheaper(g->second[k], step.bytes, at(x.low_estimate), at(x.simple_estimate));
            value = std::max(value, ll ? at(x.low) : at(x.simple));
          }
        } else {
          value = slowest_line_time(fabric_, g->second, step.op, step.bytes);
        }
        it2 = prices_->time.emplace(ck, value).first;
      }
      t += it2->second;
    }
    return memo_[key] = t;
  }

  // Per line, its all-to-all's analytical time at 1 MB and 2 MB under the bandwidth
  // protocol and the low-latency one, then the selector's estimates of the same
  // (SbpPriceCache::all_to_all). The algorithm is the one the line's spec names at any
  // size (an all-to-all's one candidate, or the policy's).
  std::vector<SbpPriceCache::AllToAllLine> all_to_all_anchors(const std::vector<CollectiveGroup>& lines) {
    std::vector<SbpPriceCache::AllToAllLine> out;
    for (const CollectiveGroup& g : lines) {
      CollectiveSpec spec = line_spec(fabric_, g, CollectiveOp::kAllToAll, 1e6);
      const auto time = [&](double b, bool ll) {
        spec.bytes = b;
        spec.low_latency = ll;
        return analytical_collective_time(fabric_, g, spec);
      };
      const auto estimate = [&](double b, bool ll) {
        return collective_estimate(fabric_, g, CollectiveOp::kAllToAll, spec.algorithm, b, effective_channels(g, spec),
                                   spec.root, spec.peer, spec.chunks, ll);
      };
      out.push_back({{time(1e6, false), time(2e6, false)},
                     {time(1e6, true), time(2e6, true)},
                     {estimate(1e6, false), estimate(2e6, false)},
                     {estimate(1e6, true), estimate(2e6, true)}});
    }
    return out;
  }

  // The complete layout (each partial-sum dimension made B, S(0) or S(1)) that is
  // cheapest to reach and then to re-lay into `target` (none after the last layer), among
  // those the operators after layer `l` can run on (rows split by whole samples before
  // attention, columns by whole groups); B everywhere always can.
  NdSbp best_complete(const NdSbp& from, const NdSbp* target, double bytes, const LinearLayer& l) {
    std::vector<std::size_t> partial;
    for (std::size_t d = 0; d < from.size(); ++d) {
      if (from[d].kind == SbpKind::kPartialSum) partial.push_back(d);
    }
    const Sbp options[] = {kB, S(0), S(1)};
    NdSbp best = from;
    double best_t = 1e300;
    std::size_t combos = 1;
    for (std::size_t j = 0; j < partial.size(); ++j) combos *= 3;
    for (std::size_t x = 0; x < combos; ++x) {
      NdSbp layout = from;
      std::size_t code = x;
      for (std::size_t d : partial) {
        layout[d] = options[code % 3];
        code /= 3;
      }
      if (!runs_after(layout, l)) continue;
      const double t = box(from, layout, bytes) + (target ? box(layout, *target, bytes) : 0.0);
      // Earlier options win ties, up to rounding: a ring all-reduce costs exactly its
      // reduce-scatter plus its all-gather, and the last bit of the sum must not decide.
      if (t < best_t * (1 - 1e-9)) {
        best = layout;
        best_t = t;
      }
    }
    return best;
  }

  // The forward, and both backward matmuls, on the local shapes.
  std::pair<double, double> matmul_times(const LinearLayer& l, const MatmulSignature& sig) {
    std::int64_t m = rows(l), k = l.k, n = l.n;
    for (std::size_t d = 0; d < mesh_.dims.size(); ++d) {
      const int size = mesh_.dims[d];
      if (splits(sig.a[d], 0)) m = (m + size - 1) / size;
      if (splits(sig.a[d], 1)) k = (k + size - 1) / size;
      if (splits(sig.b[d], 1)) n = (n + size - 1) / size;
    }
    const auto key = std::make_tuple(m, k, n);
    if (const auto it = gemm_memo_.find(key); it != gemm_memo_.end()) return it->second;
    Operator op{OpKind::kLinear, "linear", 0, {}, 0, {1, m, n, k}, chain_.dtype, {}};
    const double mm = static_cast<double>(m), kk = static_cast<double>(k), nn = static_cast<double>(n);
    op.cost.fwd_flops = 2 * mm * kk * nn;
    op.cost.bwd_flops = 2 * op.cost.fwd_flops;
    op.cost.fwd_bytes = (mm * kk + kk * nn + mm * nn) * bytes_;
    op.cost.bwd_bytes = 2 * op.cost.fwd_bytes;
    return gemm_memo_[key] = {compute_.time(op, Pass::kForward).value(), compute_.time(op, Pass::kBackward).value()};
  }

  static SbpStage boxing_stage(const NdSbp& from, const NdSbp& to, double bytes, bool backward, double repeat) {
    SbpStage st;
    st.kind = SbpStage::Kind::kBoxing;
    st.from = from;
    st.to = to;
    st.bytes = bytes;
    st.backward = backward;
    st.repeat = repeat;
    return st;
  }

  std::int64_t rows(const LinearLayer& l) const { return l.rows > 0 ? l.rows : chain_.m; }

  const SbpChain& chain_;
  const double bytes_ = data_type_bytes(chain_.dtype);
  DeviceMesh mesh_;
  NetworkFabric& fabric_;
  const ComputeModel& compute_;
  // box()'s prices by (code(from), code(to), bytes); probed for every re-layout of every
  // plan priced, so hashed.
  struct BoxKeyHash {
    std::size_t operator()(const std::tuple<std::uint32_t, std::uint32_t, double>& k) const {
      const double bytes = std::get<2>(k);
      const std::uint64_t b = bytes == 0.0 ? 0 : std::bit_cast<std::uint64_t>(bytes);  // +0 and -0 alike
      const std::uint64_t ab = (std::uint64_t{std::get<0>(k)} << 32) | std::get<1>(k);
      return static_cast<std::size_t>((ab * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full));
    }
  };
  std::unordered_map<std::tuple<std::uint32_t, std::uint32_t, double>, double, BoxKeyHash> memo_;
  std::map<std::pair<std::size_t, double>, std::pair<double, double>> after_memo_;
  CollectivePrices own_prices_;
  CollectivePrices* prices_;
  SbpMemory last_memory_;
  RuntimeMemory runtime_;  // counted in last_memory_
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::pair<double, double>> gemm_memo_;
};

bool is_gemm(const Operator& op) { return op.kind == OpKind::kLinear || op.kind == OpKind::kConv2d; }

// "layer12.qkv" -> "layer*.qkv"; other names stay.
std::string role_of(const std::string& name) {
  if (name.rfind("layer", 0) != 0) return name;
  std::size_t i = 5;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 5 || i >= name.size() || name[i] != '.') return name;
  return "layer*" + name.substr(i);
}

}  // namespace

SbpChain chain_of(const OperatorGraph& graph, std::int64_t batch) {
  SbpChain c;
  c.batch = batch;
  for (const Operator& op : graph.ops()) {
    if (!is_gemm(op)) {
      // The largest embedding is the vocabulary's; others (positions) are replicated.
      double replicated = op.cost.params;
      if (op.kind == OpKind::kEmbedding && op.cost.params > c.embedding_params) {
        replicated = c.embedding_params;
        c.embedding_params = op.cost.params;
      }
      c.replicated_params += replicated;
      if (c.layers.empty()) {
        c.before.push_back(op);
        c.before_params += replicated;
      } else {
        LinearLayer& l = c.layers.back();
        l.own_params += replicated;
        l.after.push_back(op);
        l.whole_samples = l.whole_samples || op.kind == OpKind::kMatmul || op.kind == OpKind::kFlashAttention;
        // A norm over each query or key head needs no statistics from other devices: a
        // column split keeps whole heads.
        l.normalizes = l.normalizes ||
                       ((op.kind == OpKind::kLayerNorm || op.kind == OpKind::kRmsNorm) && !is_per_head_norm(op));
      }
      continue;
    }
    if (c.layers.empty()) {
      c.m = op.gemm.m;
      c.dtype = op.dtype;
    }
    // A bias is a GEMM's parameter beyond k x n: replicated, like a norm's.
    const double bias = std::max(0.0, op.cost.params - static_cast<double>(op.gemm.k) * static_cast<double>(op.gemm.n));
    c.replicated_params += bias;
    LinearLayer l{op.name, op.gemm.k, op.gemm.n, true, op.gemm.m};
    l.own_params = bias;
    l.role = role_of(op.name);
    l.tied = op.cost.params < 0.5 * static_cast<double>(op.gemm.k) * static_cast<double>(op.gemm.n);
    if (!op.inputs.empty()) l.in_elements = static_cast<double>(elements(graph.tensor(op.inputs.front()).shape));
    l.saved_bytes = op.cost.saved_bytes;
    c.layers.push_back(std::move(l));
  }
  return c;
}

std::vector<std::pair<std::string, std::vector<std::size_t>>> sbp_roles(const SbpChain& chain) {
  std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < chain.layers.size(); ++i) {
    const auto [it, fresh] = index.emplace(chain.layers[i].role_name(), out.size());
    if (fresh) out.push_back({chain.layers[i].role_name(), {}});
    out[it->second].second.push_back(i);
  }
  return out;
}

std::string sbp_plan_problem(const SbpChain& chain, const SbpPlan& plan) {
  if (plan.layers.size() != chain.layers.size()) {
    return "the plan has " + std::to_string(plan.layers.size()) + " signatures for " +
           std::to_string(chain.layers.size()) + " layers";
  }
  for (int d : plan.dims) {
    if (d < 1) return "a mesh dimension of size " + std::to_string(d);
  }
  if (plan.micro_batches < 1) return "micro_batches must be at least 1";
  std::map<std::string, std::string> by_role;
  for (std::size_t i = 0; i < chain.layers.size(); ++i) {
    const LinearLayer& l = chain.layers[i];
    const MatmulSignature& sig = plan.layers[i];
    if (sig.a.size() != plan.dims.size() || !valid_matmul(sig)) return l.name + ": not a matmul signature on this mesh";
    const auto [it, fresh] = by_role.emplace(l.role_name(), to_string(sig));
    if (!fresh && it->second != to_string(sig)) return l.name + ": a signature other than its role " + l.role_name() + "'s";
    if (l.column_groups > 0) {
      const double pieces = column_shards(sig.c, plan.dims);
      const double per = static_cast<double>(l.column_groups) / pieces;
      if (per != std::floor(per)) {
        return l.name + ": splits its columns " + std::to_string(static_cast<long long>(pieces)) + " ways, which its " +
               std::to_string(l.column_groups) + " column groups (key-value heads) do not divide";
      }
    }
    if (l.whole_samples && chain.batch > 0) {
      // The operators after it see the output's row splits (a partial sum's completion
      // adds splits only where these operators can run on them: Pricer::best_complete).
      const double pieces = row_shards(sig.c, plan.dims);
      const double per = static_cast<double>(chain.batch) / pieces;
      if (pieces > 1 && per != std::floor(per)) {
        return l.name + ": splits the rows " + std::to_string(static_cast<long long>(pieces)) +
               " ways before attention, which " + std::to_string(chain.batch) +
               " samples do not divide (sequence parallelism through attention is not modelled)";
      }
    }
  }
  return "";
}

int sbp_communicators(const std::vector<int>& dims) {
  return static_cast<int>(std::count_if(dims.begin(), dims.end(), [](int d) { return d > 1; }));
}

SbpMemory sbp_memory(const SbpChain& chain, const SbpPlan& plan, const RuntimeMemory& runtime) {
  SbpMemory m;
  m.runtime = runtime.bytes(sbp_communicators(plan.dims));
  const double bytes = data_type_bytes(chain.dtype);
  double params = chain.replicated_params;
  if (!chain.layers.empty()) params += chain.embedding_params / shards(plan.layers.back().b, plan.dims);
  double acts = 0;
  for (const Operator& op : chain.before) acts += op.cost.saved_bytes / shards(NdSbp(plan.dims.size(), S(0)), plan.dims);
  for (std::size_t i = 0; i < chain.layers.size(); ++i) {
    const LinearLayer& l = chain.layers[i];
    const MatmulSignature& sig = plan.layers[i];
    if (!l.tied) params += l.repeat * static_cast<double>(l.k) * static_cast<double>(l.n) / shards(sig.b, plan.dims);
    acts += l.repeat * l.saved_bytes / shards(sig.a, plan.dims);
    // The operators after it run on its output once completed, cut at least as its splits.
    double after = 0;
    for (const Operator& op : l.after) after += op.cost.saved_bytes;
    acts += l.repeat * after / shards(sig.c, plan.dims);
  }
  m.weights = params * bytes;
  m.gradients = params * bytes;
  m.optimizer = params * (bytes < 4 ? 12.0 : 8.0);
  m.activations = acts;
  return m;
}

std::vector<std::vector<int>> sbp_mesh_shapes(std::size_t n, std::size_t max_dims) {
  std::vector<std::vector<int>> out{{static_cast<int>(n)}};
  for (std::size_t a = 2; a * 2 <= n; ++a) {
    if (n % a == 0) out.push_back({static_cast<int>(a), static_cast<int>(n / a)});
  }
  if (max_dims < 3) return out;
  for (std::size_t a = 2; a * 4 <= n; ++a) {
    if (n % a != 0) continue;
    for (std::size_t b = 2; a * b * 2 <= n; ++b) {
      if ((n / a) % b == 0) out.push_back({static_cast<int>(a), static_cast<int>(b), static_cast<int>(n / (a * b))});
    }
  }
  return out;
}

std::vector<SbpSync> sbp_embedding_syncs(const SbpChain& chain, const SbpPlan& plan) {
  std::vector<SbpSync> out;
  if (chain.layers.empty() || plan.layers.size() != chain.layers.size()) return out;
  const std::size_t D = plan.dims.size();
  const double bytes = data_type_bytes(chain.dtype);
  if (chain.embedding_params > 0) {
    const MatmulSignature& last = plan.layers.back();
    const NdSbp summed = weight_gradient(last, true);
    SbpSync e{last.b, last.b, chain.embedding_params * bytes};
    for (std::size_t d = 0; d < D; ++d) {
      if (last.b[d].kind == SbpKind::kBroadcast && !(chain.layers.back().tied && summed[d].kind == SbpKind::kPartialSum)) {
        e.from[d] = kP;
      }
    }
    if (!(e.from == e.to)) out.push_back(e);
  }
  if (chain.before_params > 0) out.push_back({NdSbp(D, kP), NdSbp(D, kB), chain.before_params * bytes});
  return out;
}

SbpCost sbp_cost(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                 const ComputeModel& compute) {
  Pricer p(chain, plan.dims, devices, fabric, compute);
  return p.cost(plan);
}

std::vector<SbpStage> sbp_schedule(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                                   NetworkFabric& fabric, const ComputeModel& compute) {
  Pricer p(chain, plan.dims, devices, fabric, compute);
  return p.schedule(plan);
}

std::pair<double, double> sbp_before_times(const SbpChain& chain, const std::vector<int>& dims,
                                           const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                           const ComputeModel& compute) {
  Pricer p(chain, dims, devices, fabric, compute);
  return p.operator_times(chain.before, shards(NdSbp(dims.size(), S(0)), dims));
}

SbpPlan data_parallel_plan(const SbpChain& chain, std::vector<int> dims) {
  SbpPlan p;
  p.dims = std::move(dims);
  const std::size_t D = p.dims.size();
  for (std::size_t i = 0; i < chain.layers.size(); ++i) {
    p.layers.push_back({NdSbp(D, S(0)), NdSbp(D, kB), NdSbp(D, S(0))});
  }
  return p;
}

SbpPlan megatron_plan(const SbpChain& chain, int tp, int dp) {
  SbpPlan p;
  p.dims = dp > 1 ? std::vector<int>{dp, tp} : std::vector<int>{tp};
  const auto roles = sbp_roles(chain);
  p.layers.resize(chain.layers.size());
  for (std::size_t r = 0; r < roles.size(); ++r) {
    MatmulSignature sig = r % 2 == 0 ? MatmulSignature{{kB}, {S(1)}, {S(1)}} : MatmulSignature{{S(1)}, {S(0)}, {kP}};
    if (dp > 1) {  // the batch split over the outer dimension, weights replicated on it
      sig.a.insert(sig.a.begin(), S(0));
      sig.b.insert(sig.b.begin(), kB);
      sig.c.insert(sig.c.begin(), S(0));
    }
    for (std::size_t i : roles[r].second) p.layers[i] = sig;
  }
  return p;
}

SbpSearchResult autoddl_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                               const ComputeModel& compute, const AutoddlOptions& o) {
  SbpSearchResult best;
  double best_total = kInfinite;
  const auto roles = sbp_roles(chain);
  const std::shared_ptr<SbpPriceCache> prices = o.prices ? o.prices : make_sbp_price_cache();
  for (const std::vector<int>& dims : sbp_mesh_shapes(devices.size(), o.max_dims)) {
    Pricer pricer(chain, dims, devices, fabric, compute, prices.get(), o.runtime);
    auto objective = [&](const SbpPlan& p) {
      const double t = pricer.cost(p).total();
      if (o.memory_bytes <= 0 || !std::isfinite(t)) return t;
      const double over = pricer.last_memory().total() - o.memory_bytes;
      return over > 0 ? 1e6 + over / 1e6 : t;
    };
    // Each evaluation counted, and the lowest cost that fits remembered when it falls.
    double lowest = best.convergence.empty() ? kInfinite : best.convergence.back().second;
    auto evaluate = [&](const SbpPlan& p) {
      const double t = objective(p);
      ++best.evaluated;
      if (t < lowest && t < 1e6) {
        lowest = t;
        best.convergence.emplace_back(best.evaluated, t);
      }
      return t;
    };
    SbpPlan plan = data_parallel_plan(chain, dims);
    plan.micro_batches = o.micro_batches;
    double total = evaluate(plan);
    const std::vector<MatmulSignature> options = matmul_signatures(dims.size());
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& role : roles) {
        for (const MatmulSignature& sig : options) {
          SbpPlan trial = plan;
          for (std::size_t i : role.second) trial.layers[i] = sig;
          const double t = evaluate(trial);
          if (t < total * (1 - 1e-12)) {
            plan = trial;
            total = t;
            changed = true;
          }
        }
      }
    }
    if (total < best_total || best.plan.layers.empty()) {
      best_total = total;
      best.plan = plan;
      best.cost = pricer.cost(plan);
    }
  }
  return best;
}

void for_each_sbp_plan(const SbpChain& chain, std::size_t devices, const std::function<void(const SbpPlan&)>& visit) {
  const auto roles = sbp_roles(chain);
  for (const std::vector<int>& dims : sbp_mesh_shapes(devices)) {
    const std::vector<MatmulSignature> options = matmul_signatures(dims.size());
    SbpPlan plan = data_parallel_plan(chain, dims);
    std::function<void(std::size_t)> role = [&](std::size_t r) {
      if (r == roles.size()) {
        visit(plan);
        return;
      }
      for (const MatmulSignature& sig : options) {
        for (std::size_t i : roles[r].second) plan.layers[i] = sig;
        role(r + 1);
      }
    };
    role(0);
  }
}

SbpSearchResult exhaustive_sbp_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                      const ComputeModel& compute) {
  SbpSearchResult best;
  double best_total = kInfinite;
  std::unique_ptr<Pricer> pricer;  // for the current shape (plans come shape by shape)
  CollectivePrices prices;
  for_each_sbp_plan(chain, devices.size(), [&](const SbpPlan& plan) {
    if (!pricer || pricer->dims() != plan.dims) pricer = std::make_unique<Pricer>(chain, plan.dims, devices, fabric, compute, &prices);
    const double t = pricer->cost(plan).total();
    ++best.evaluated;
    if (t < best_total || best.plan.layers.empty()) {
      best_total = t;
      best.plan = plan;
    }
  });
  best.cost = sbp_cost(chain, best.plan, devices, fabric, compute);
  return best;
}

std::string describe_sbp_plan(const SbpChain& chain, const SbpPlan& plan) {
  std::string out = "mesh";
  for (int d : plan.dims) out += " " + std::to_string(d);
  out += "\n";
  for (const auto& [name, layers] : sbp_roles(chain)) {
    if (layers.front() < plan.layers.size()) out += "  " + name + ": " + to_string(plan.layers[layers.front()]) + "\n";
  }
  return out;
}

}  // namespace ddlsim
