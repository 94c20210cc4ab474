#include "strategies/sbp_search.hpp"

#include <algorithm>
#include <functional>
#include <tuple>
#include <map>
#include <memory>


namespace ddlsim {
namespace {

bool splits(const Sbp& s, int axis) { return s.kind == SbpKind::kSplit && s.axis == axis; }

// Everything a plan's cost needs, with boxing prices memoized (the descent asks for the
// same re-layouts many times).
class Pricer {
 public:
  Pricer(const SbpChain& chain, std::vector<int> dims, const std::vector<NodeId>& devices, NetworkFabric& fabric,
         const ComputeModel& compute)
      : chain_(chain), mesh_(DeviceMesh::over(std::move(dims), devices)), fabric_(fabric), compute_(compute) {}

  // The plan's steps in forward order: the boxing of each layer's input, the layer, the
  // completion of a partial output before an elementwise step.
  std::vector<SbpStage> schedule(const SbpPlan& plan) {
    std::vector<SbpStage> out;
    const std::size_t D = mesh_.dims.size();
    NdSbp from(D, S(0));  // the batch as the data loader gives it
    for (std::size_t i = 0; i < chain_.layers.size(); ++i) {
      const LinearLayer& l = chain_.layers[i];
      const MatmulSignature& sig = plan.layers[i];
      const double in_bytes = static_cast<double>(rows(l)) * static_cast<double>(l.k) * bytes_;
      if (!(from == sig.a)) out.push_back(boxing_stage(from, sig.a, in_bytes, i > 0));  // the input needs no gradient
      SbpStage layer;
      layer.kind = SbpStage::Kind::kLayer;
      layer.layer = i;
      std::tie(layer.forward_s, layer.backward_s) = matmul_times(l, sig);
      layer.weights = sig.b;
      layer.grad = weight_gradient(sig);
      layer.weight_bytes = static_cast<double>(l.k) * static_cast<double>(l.n) * bytes_;
      out.push_back(layer);
      // The output, made complete for an elementwise step if need be.
      const double out_bytes = static_cast<double>(rows(l)) * static_cast<double>(l.n) * bytes_;
      from = sig.c;
      if (l.elementwise_after && std::any_of(from.begin(), from.end(), [](const Sbp& x) { return x.kind == SbpKind::kPartialSum; })) {
        const std::size_t next = i + 1;
        const NdSbp* target = next < chain_.layers.size() ? &plan.layers[next].a : nullptr;
        const NdSbp layout = best_complete(from, target, out_bytes);
        out.push_back(boxing_stage(from, layout, out_bytes, true));
        from = layout;
      }
    }
    return out;
  }

  [[nodiscard]] const std::vector<int>& dims() const { return mesh_.dims; }

  SbpCost cost(const SbpPlan& plan) {
    SbpCost c;
    for (const SbpStage& st : schedule(plan)) {
      if (st.kind == SbpStage::Kind::kBoxing) {
        c.boxing_s += box(st.from, st.to, st.bytes) * (st.backward ? 2 : 1);
      } else {
        c.compute_s += st.forward_s + st.backward_s;
        c.gradient_sync_s += box(st.grad, st.weights, st.weight_bytes);
      }
    }
    return c;
  }

 private:
  double box(const NdSbp& a, const NdSbp& b, double bytes) {
    if (a == b) return 0.0;
    const std::string key = to_string(a) + ">" + to_string(b) + "@" + std::to_string(bytes);
    const auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    return memo_[key] = boxing_time(a, b, bytes, mesh_, fabric_);
  }

  // The complete layout (each partial-sum dimension made B, S(0) or S(1)) that is
  // cheapest to reach and then to re-lay into `target` (none after the last layer).
  NdSbp best_complete(const NdSbp& from, const NdSbp* target, double bytes) {
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
      const double t = box(from, layout, bytes) + (target ? box(layout, *target, bytes) : 0.0);
      if (t < best_t) {
        best = layout;
        best_t = t;
      }
    }
    return best;
  }

  // The forward, and both backward matmuls, on the local shapes.
  std::pair<double, double> matmul_times(const LinearLayer& l, const MatmulSignature& sig) const {
    std::int64_t m = rows(l), k = l.k, n = l.n;
    for (std::size_t d = 0; d < mesh_.dims.size(); ++d) {
      const int size = mesh_.dims[d];
      if (splits(sig.a[d], 0)) m = (m + size - 1) / size;
      if (splits(sig.a[d], 1)) k = (k + size - 1) / size;
      if (splits(sig.b[d], 1)) n = (n + size - 1) / size;
    }
    Operator op{OpKind::kLinear, "linear", 0, {}, 0, {1, m, n, k}, chain_.dtype, {}};
    const double mm = static_cast<double>(m), kk = static_cast<double>(k), nn = static_cast<double>(n);
    op.cost.fwd_flops = 2 * mm * kk * nn;
    op.cost.bwd_flops = 2 * op.cost.fwd_flops;
    op.cost.fwd_bytes = (mm * kk + kk * nn + mm * nn) * bytes_;
    op.cost.bwd_bytes = 2 * op.cost.fwd_bytes;
    return {compute_.time(op, Pass::kForward).value(), compute_.time(op, Pass::kBackward).value()};
  }

  // The weight gradient is a partial sum along every dimension where the weights are
  // broadcast but the batch or k is split or partial (S(0) x B, P x B): all-reduced.
  static NdSbp weight_gradient(const MatmulSignature& sig) {
    NdSbp grad = sig.b;
    for (std::size_t d = 0; d < grad.size(); ++d) {
      if (sig.b[d].kind == SbpKind::kBroadcast && (splits(sig.a[d], 0) || sig.a[d].kind == SbpKind::kPartialSum)) {
        grad[d] = kP;
      }
    }
    return grad;
  }

  static SbpStage boxing_stage(const NdSbp& from, const NdSbp& to, double bytes, bool backward) {
    SbpStage st;
    st.kind = SbpStage::Kind::kBoxing;
    st.from = from;
    st.to = to;
    st.bytes = bytes;
    st.backward = backward;
    return st;
  }

  std::int64_t rows(const LinearLayer& l) const { return l.rows > 0 ? l.rows : chain_.m; }

  const SbpChain& chain_;
  const double bytes_ = data_type_bytes(chain_.dtype);
  DeviceMesh mesh_;
  NetworkFabric& fabric_;
  const ComputeModel& compute_;
  std::map<std::string, double> memo_;
};

}  // namespace

SbpChain chain_of(const OperatorGraph& graph) {
  SbpChain c;
  for (const Operator& op : graph.ops()) {
    if (op.kind != OpKind::kLinear && op.kind != OpKind::kConv2d) continue;
    if (c.layers.empty()) {
      c.m = op.gemm.m;
      c.dtype = op.dtype;
    }
    c.layers.push_back(LinearLayer{op.name, op.gemm.k, op.gemm.n, true, op.gemm.m});
  }
  return c;
}

std::vector<std::vector<int>> sbp_mesh_shapes(std::size_t n) {
  std::vector<std::vector<int>> out{{static_cast<int>(n)}};
  for (std::size_t a = 2; a * 2 <= n; ++a) {
    if (n % a == 0) out.push_back({static_cast<int>(a), static_cast<int>(n / a)});
  }
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

SbpPlan data_parallel_plan(const SbpChain& chain, std::vector<int> dims) {
  SbpPlan p;
  p.dims = std::move(dims);
  const std::size_t D = p.dims.size();
  for (std::size_t i = 0; i < chain.layers.size(); ++i) {
    p.layers.push_back({NdSbp(D, S(0)), NdSbp(D, kB), NdSbp(D, S(0))});
  }
  return p;
}

SbpPlan megatron_plan(const SbpChain& chain, int devices) {
  SbpPlan p;
  p.dims = {devices};
  for (std::size_t i = 0; i < chain.layers.size(); ++i) {
    if (i % 2 == 0) p.layers.push_back({{kB}, {S(1)}, {S(1)}});
    else p.layers.push_back({{S(1)}, {S(0)}, {kP}});
  }
  return p;
}

SbpSearchResult autoddl_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                               const ComputeModel& compute) {
  SbpSearchResult best;
  double best_total = 1e300;
  for (const std::vector<int>& dims : sbp_mesh_shapes(devices.size())) {
    Pricer pricer(chain, dims, devices, fabric, compute);
    SbpPlan plan = data_parallel_plan(chain, dims);
    double total = pricer.cost(plan).total();
    ++best.evaluated;
    const std::vector<MatmulSignature> options = matmul_signatures(dims.size());
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t i = 0; i < plan.layers.size(); ++i) {
        for (const MatmulSignature& sig : options) {
          SbpPlan trial = plan;
          trial.layers[i] = sig;
          const double t = pricer.cost(trial).total();
          ++best.evaluated;
          if (t < total * (1 - 1e-12)) {
            plan = trial;
            total = t;
            changed = true;
          }
        }
      }
    }
    if (total < best_total) {
      best_total = total;
      best.plan = plan;
      best.cost = pricer.cost(plan);
    }
  }
  return best;
}

void for_each_sbp_plan(const SbpChain& chain, std::size_t devices, const std::function<void(const SbpPlan&)>& visit) {
  for (const std::vector<int>& dims : sbp_mesh_shapes(devices)) {
    const std::vector<MatmulSignature> options = matmul_signatures(dims.size());
    SbpPlan plan = data_parallel_plan(chain, dims);
    std::function<void(std::size_t)> layer = [&](std::size_t i) {
      if (i == plan.layers.size()) {
        visit(plan);
        return;
      }
      for (const MatmulSignature& sig : options) {
        plan.layers[i] = sig;
        layer(i + 1);
      }
    };
    layer(0);
  }
}

SbpSearchResult exhaustive_sbp_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                      const ComputeModel& compute) {
  SbpSearchResult best;
  double best_total = 1e300;
  std::unique_ptr<Pricer> pricer;  // for the current shape (plans come shape by shape)
  for_each_sbp_plan(chain, devices.size(), [&](const SbpPlan& plan) {
    if (!pricer || pricer->dims() != plan.dims) pricer = std::make_unique<Pricer>(chain, plan.dims, devices, fabric, compute);
    const double t = pricer->cost(plan).total();
    ++best.evaluated;
    if (t < best_total) {
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
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const MatmulSignature& s = plan.layers[i];
    out += "  " + (i < chain.layers.size() ? chain.layers[i].name : std::to_string(i)) + ": " + to_string(s.a) + " x " +
           to_string(s.b) + " -> " + to_string(s.c) + "\n";
  }
  return out;
}

}  // namespace ddlsim
