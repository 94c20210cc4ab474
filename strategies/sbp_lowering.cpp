#include "strategies/sbp_lowering.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "sim/collectives.hpp"
#include "sim/core/compute_stream.hpp"
#include "sim/delay_pool.hpp"
#include "strategies/stage_costs.hpp"
#include "support/input_error.hpp"

namespace ddlsim {
namespace {

class SbpLowering {
 public:
  SbpLowering(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices, NetworkFabric& fabric,
              const ComputeModel& compute, NetworkModelKind network, bool fold, LoweredSbpStep& out)
      : chain_(chain), plan_(plan), fabric_(fabric), compute_(compute), out_(out), g_(out.graph),
        mesh_(DeviceMesh::over(plan.dims, devices)) {
    std::unique_ptr<NetworkModel> net = make_network(network, "network", fabric);
    out_.resources.push_back(std::move(net));
    out_.network = ResourceId(0);
    analytical_ = network == NetworkModelKind::kAnalytical;
    out_.folded = fold && analytical_;
    if (out_.folded) {
      out_.resources.push_back(std::make_unique<DelayPool>("collectives"));
      priced_ = ResourceId(static_cast<std::uint32_t>(out_.resources.size() - 1));
    }
    devices_ = out_.folded ? 1 : mesh_.size();
    // Interference: collectives slow the compute beside them (the gradient
    // synchronizations beside the backward; a re-layout's compute waits for it anyway).
    slow_ = compute.efficiency().overlap_slowdown;
    for (std::size_t p = 0; p < devices_; ++p) {
      auto stream = std::make_unique<ComputeStream>("dev" + std::to_string(p) + ".compute");
      stream->set_interference(slow_);
      out_.resources.push_back(std::move(stream));
      out_.compute.push_back(ResourceId(static_cast<std::uint32_t>(out_.resources.size() - 1)));
      if (slow_ > 0.0) stream_of_.emplace(mesh_.devices[p].value, out_.compute.back());
    }
  }

  void run() {
    const std::vector<SbpStage> stages = sbp_schedule(chain_, plan_, mesh_.devices, fabric_, compute_);
    for (const LinearLayer& l : chain_.layers) {
      if (l.repeat != 1) throw InputError("layer " + l.name + " stands for " + std::to_string(l.repeat) + " layers; the replay needs every layer");
    }
    if (const std::string why = sbp_plan_problem(chain_, plan_); !why.empty()) throw InputError(why);
    const TaskId start = g_.add(Marker{}, "step start").id();
    last_.assign(devices_, start);
    const auto [before_f, before_b] = sbp_before_times(chain_, plan_.dims, mesh_.devices, fabric_, compute_);
    std::vector<std::vector<TaskId>> gradients(devices_);  // per device: ends of its weight-gradient collectives
    for (int pass = 0; pass < plan_.micro_batches; ++pass) {
      const bool last_pass = pass + 1 == plan_.micro_batches;  // gradients are synchronized once, in the last backward
      if (!chain_.before.empty()) computes(before_f, true);
      for (const SbpStage& st : stages) {
        if (st.kind == SbpStage::Kind::kBoxing) {
          relay(st.from, st.to, st.bytes, last_);
        } else {
          computes(st.forward_s, true);
        }
      }
      for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
        const SbpStage& st = *it;
        if (st.kind == SbpStage::Kind::kBoxing) {
          if (st.backward) relay(gradient_sbp(st.to), gradient_sbp(st.from), st.bytes, last_);
          continue;
        }
        computes(st.backward_s, false);
        if (st.kind == SbpStage::Kind::kElementwise || !last_pass) continue;
        synchronize(st.syncs, gradients);
      }
      if (!chain_.before.empty()) computes(before_b, false);
      if (last_pass) synchronize(sbp_embedding_syncs(chain_, plan_), gradients);
    }
    // Each device's optimizer step on its local parameters, once its gradients are in.
    const SbpMemory mem = sbp_memory(chain_, plan_);
    const double params = mem.weights / data_type_bytes(chain_.dtype);
    const Seconds step = optimizer_step_time(params, compute_, kGradientBytes, chain_.dtype);
    out_.compute_parts.optimizer = step.value();
    const TaskId end = g_.add(Marker{}, "step end").id();
    for (std::size_t p = 0; p < devices_; ++p) {
      const TaskId t = g_.add(Compute{out_.compute[p], step, Flops(0.0)}, "optimizer").id();
      g_.add_edge(last_[p], t);
      for (TaskId x : gradients[p]) g_.add_edge(x, t);
      g_.add_edge(t, end);
    }
  }

 private:
  void computes(double seconds, bool forward) {
    (forward ? out_.compute_parts.forward : out_.compute_parts.backward) += seconds;
    const char* name = forward ? "forward" : "backward";
    for (std::size_t p = 0; p < devices_; ++p) {
      const TaskId t = g_.add(Compute{out_.compute[p], Seconds(seconds), Flops(0.0)}, name).id();
      g_.add_edge(last_[p], t);
      last_[p] = t;
    }
  }

  // Gradient synchronizations, off the backward's path (they overlap), after the backward
  // so far and after the synchronizations before them: one communication stream runs
  // them in turn, as the cost's flow shop has them. Each device's last one is added to
  // `gradients` (its optimizer step waits for them).
  void synchronize(const std::vector<SbpSync>& syncs, std::vector<std::vector<TaskId>>& gradients) {
    for (const SbpSync& x : syncs) {
      if (x.from == x.to || x.bytes <= 0) continue;
      std::vector<TaskId> sync = last_;
      for (std::size_t p = 0; p < devices_; ++p) {
        if (gradients[p].empty()) continue;
        const TaskId ready = g_.add(Marker{}, "gradient sync ready").id();
        g_.add_edge(last_[p], ready);
        g_.add_edge(gradients[p].back(), ready);
        sync[p] = ready;
      }
      const std::vector<TaskId> before = sync;
      relay(x.from, x.to, x.bytes, sync);
      for (std::size_t p = 0; p < devices_; ++p) {
        if (sync[p] != before[p]) gradients[p].push_back(sync[p]);
      }
    }
  }

  // Re-lays a tensor from `from` to `to`: per boxing step, a collective on every line.
  void relay(const NdSbp& from, const NdSbp& to, double bytes, std::vector<TaskId>& last) {
    for (const BoxingStep& step : boxing_steps(from, to, bytes, mesh_)) {
      if (step.local) continue;
      if (out_.folded) {  // device 0's line, priced
        const TaskId t = g_.add(Compute{priced_, Seconds(priced_time(step)), Flops(0.0)}, std::string(op_name(step.op))).id();
        if (slow_ > 0.0) g_.add_interference(t, out_.compute[0]);
        g_.add_edge(last[0], t);
        last[0] = t;
        ++out_.collectives;
        continue;
      }
      for (const std::vector<std::size_t>& members : mesh_.lines(step.mesh_dim)) {
        std::vector<NodeId> nodes;
        for (std::size_t p : members) nodes.push_back(mesh_.devices[p]);
        const CollectiveGroup group = CollectiveGroup::of(fabric_, nodes);
        const CollectiveSpec spec = line_spec(fabric_, group, step.op, step.bytes);
        const auto first = static_cast<std::uint32_t>(g_.size());
        const LoweredCollective c = lower_collective(g_, out_.network, group, spec, analytical_ ? &fabric_ : nullptr);
        ++out_.collectives;
        if (slow_ > 0.0) {
          g_.add_transfer_interference(TaskId(first), [&](std::uint32_t end) {
            const auto s = stream_of_.find(end);
            return s == stream_of_.end() ? ResourceId() : s->second;
          });
        }
        for (std::size_t p : members) {
          g_.add_edge(last[p], c.start);
          last[p] = c.end;
        }
      }
    }
  }

  // The analytical time of the step's collective: the slowest of its lines (all of them
  // alike on a symmetric mesh; out_.fold_exact records whether they were).
  double priced_time(const BoxingStep& step) {
    const auto key = std::make_tuple(step.mesh_dim, static_cast<int>(step.op), step.bytes);
    if (const auto it = priced_memo_.find(key); it != priced_memo_.end()) return it->second;
    double slowest = 0, fastest = std::numeric_limits<double>::infinity();
    for (const std::vector<std::size_t>& members : mesh_.lines(step.mesh_dim)) {
      std::vector<NodeId> nodes;
      for (std::size_t p : members) nodes.push_back(mesh_.devices[p]);
      const CollectiveGroup group = CollectiveGroup::of(fabric_, nodes);
      const double t = analytical_collective_time(fabric_, group, line_spec(fabric_, group, step.op, step.bytes));
      slowest = std::max(slowest, t);
      fastest = std::min(fastest, t);
    }
    if (slowest - fastest > 1e-9 * slowest) out_.fold_exact = false;
    return priced_memo_[key] = slowest;
  }

  const SbpChain& chain_;
  const SbpPlan& plan_;
  NetworkFabric& fabric_;
  const ComputeModel& compute_;
  LoweredSbpStep& out_;
  TaskGraph& g_;
  DeviceMesh mesh_;
  std::vector<TaskId> last_;  // per device: its latest task on the step's path
  std::size_t devices_ = 0;   // devices with a compute stream: all, or 1 when folded
  ResourceId priced_{0};      // folded: the collectives' delay pool
  double slow_ = 0.0;         // the device's overlap_slowdown (interference)
  std::unordered_map<std::uint32_t, ResourceId> stream_of_;  // a device's compute stream, by node
  bool analytical_ = false;   // replayed on the analytical model: collectives carry bandwidth shares
  std::map<std::tuple<std::size_t, int, double>, double> priced_memo_;
};

}  // namespace

NdSbp gradient_sbp(const NdSbp& s) {
  NdSbp g = s;
  for (Sbp& x : g) {
    if (x.kind == SbpKind::kBroadcast) x = kP;
    else if (x.kind == SbpKind::kPartialSum) x = kB;
  }
  return g;
}

LoweredSbpStep lower_sbp_chain(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                               NetworkFabric& fabric, const ComputeModel& compute, NetworkModelKind network, bool fold) {
  LoweredSbpStep out;
  SbpLowering(chain, plan, devices, fabric, compute, network, fold, out).run();
  return out;
}

}  // namespace ddlsim
