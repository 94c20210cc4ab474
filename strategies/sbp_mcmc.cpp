#include "strategies/sbp_mcmc.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "sim/core/engine.hpp"
#include "strategies/sbp_lowering.hpp"

namespace ddlsim {
namespace {

// splitmix64: a fixed sequence for a seed, the same everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t s_;
};

std::string key_of(const SbpPlan& p) {
  std::string k = std::to_string(p.micro_batches) + ":";
  for (int d : p.dims) k += std::to_string(d) + "x";
  for (const MatmulSignature& s : p.layers) k += to_string(s.a) + to_string(s.b) + to_string(s.c) + ";";
  return k;
}

// Whether every layout of the plan is the same along all its mesh dimensions.
bool uniform(const SbpPlan& p) {
  for (const MatmulSignature& s : p.layers) {
    for (const NdSbp* x : {&s.a, &s.b, &s.c}) {
      for (const Sbp& e : *x) {
        if (!(e == x->front())) return false;
      }
    }
  }
  return true;
}

// A uniform plan on another mesh shape: each layout's one entry on every dimension.
SbpPlan reshaped(const SbpPlan& p, const std::vector<int>& dims) {
  SbpPlan out = p;
  out.dims = dims;
  for (MatmulSignature& s : out.layers) {
    for (NdSbp* x : {&s.a, &s.b, &s.c}) *x = NdSbp(dims.size(), x->front());
  }
  return out;
}

}  // namespace

double replay_sbp_plan(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                       NetworkFabric& fabric, const ComputeModel& compute, NetworkModelKind network) {
  LoweredSbpStep s = lower_sbp_chain(chain, plan, devices, fabric, compute, network, true);
  std::vector<ResourceModel*> ptrs;
  for (auto& r : s.resources) ptrs.push_back(r.get());
  return replay(s.graph, ptrs).makespan.value();
}

McmcResult mcmc_sbp_search(const SbpChain& chain, const SbpPlan& start, const std::vector<NodeId>& devices,
                           NetworkFabric& fabric, const ComputeModel& compute, const McmcOptions& o) {
  McmcResult out;
  std::map<std::string, double> seen;
  const auto t0 = std::chrono::steady_clock::now();
  // Plans that cannot run the chain, or do not fit the memory, are never replayed: they
  // cost infinity (a walk from one accepts any proposal that can run).
  auto cost = [&](const SbpPlan& p) {
    const std::string k = key_of(p);
    const auto it = seen.find(k);
    if (it != seen.end()) return it->second;
    if (!sbp_plan_problem(chain, p).empty() || (o.memory_bytes > 0 && sbp_memory(chain, p, o.runtime).total() > o.memory_bytes)) {
      return seen[k] = std::numeric_limits<double>::infinity();
    }
    ++out.replayed;
    const double t = replay_sbp_plan(chain, p, devices, fabric, compute, o.network);
    if (out.convergence.empty() || t < out.convergence.back().second) out.convergence.emplace_back(out.replayed, t);
    return seen[k] = t;
  };
  const std::vector<std::vector<int>> shapes = sbp_mesh_shapes(devices.size(), o.max_dims);
  const auto roles = sbp_roles(chain);
  Rng rng(o.seed);
  SbpPlan cur = start;
  double t = cost(cur);
  out.plan = cur;
  out.step_s = t;
  for (int it = 0; it < o.iterations; ++it) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > o.budget_s) break;
    SbpPlan next = cur;
    if (shapes.size() > 1 && rng.below(10) == 0) {
      const std::vector<int>& shape = shapes[rng.below(shapes.size())];
      // Half the time the current plan moves to that shape, when every tensor's layout
      // is the same along all its mesh dimensions (then it means the same on any shape:
      // Megatron's 4-way split is [S(1)] on 4 devices and [S(1), S(1)] on 2 x 2, whose
      // all-reduces run as two steps of 2); else data parallelism on that shape.
      if (uniform(cur) && rng.below(2) == 0) {
        next = reshaped(cur, shape);
      } else {
        next = data_parallel_plan(chain, shape);
        next.micro_batches = cur.micro_batches;
      }
    } else {
      const std::vector<MatmulSignature> options = matmul_signatures(cur.dims.size());
      const MatmulSignature& sig = options[rng.below(options.size())];
      for (std::size_t i : roles[rng.below(roles.size())].second) next.layers[i] = sig;
    }
    const double tn = cost(next);
    if (!std::isfinite(tn) && std::isfinite(t)) continue;
    if (tn <= t || !std::isfinite(t) || rng.unit() < std::exp(-o.beta * (tn - t) / t)) {
      cur = next;
      t = tn;
      ++out.accepted;
      if (t < out.step_s) {
        out.plan = cur;
        out.step_s = t;
      }
    }
  }
  return out;
}

McmcResult exhaustive_replay_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                    const ComputeModel& compute, NetworkModelKind network) {
  McmcResult best;
  best.step_s = 1e300;
  for_each_sbp_plan(chain, devices.size(), [&](const SbpPlan& plan) {
    const double t = replay_sbp_plan(chain, plan, devices, fabric, compute, network);
    ++best.replayed;
    if (t < best.step_s) {
      best.step_s = t;
      best.plan = plan;
    }
  });
  return best;
}

}  // namespace ddlsim
