// Small clusters and a one-call replay of transfers or collectives on a network model,
// for the network and collective suites.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/analytical_network.hpp"
#include "sim/collectives.hpp"
#include "sim/core/engine.hpp"
#include "sim/flow_network.hpp"
#include "sim/network_fabric.hpp"

namespace ddlsim::test {

/// n accelerators "a0".."a{n-1}"; returns their ids.
inline std::vector<NodeId> add_chips(Cluster& c, int n) {
  std::vector<NodeId> v;
  for (int i = 0; i < n; ++i) v.push_back(c.add_node(NodeKind::kAccelerator, "a" + std::to_string(i)));
  return v;
}

/// Line rate everywhere (efficiency 1), so closed forms use the raw bandwidths.
inline NetworkFabric line_rate(const Cluster& c, const std::vector<bool>& scale_up = {}) {
  return NetworkFabric(c, std::vector<double>(c.link_count(), 1.0), scale_up);
}

enum class Model { kFlow, kAnalytical };

struct NetRun {
  double makespan = 0.0;
  std::vector<double> end;  // per task: finish time
  FlowNetwork::Stats stats;
  std::vector<double> link_bytes;  // per directed link
};

class EndTimes final : public Observer {
 public:
  void on_begin(const TaskGraph& g, std::span<ResourceModel* const>) override { end.assign(g.size(), -1.0); }
  void on_task_start(TaskId, ResourceId, Seconds) override {}
  void on_task_end(TaskId t, ResourceId, Seconds at) override { end[t.value] = at.value(); }
  std::vector<double> end;
};

/// Replays `g`, whose transfers all name ResourceId 0, on one network model.
inline NetRun run_network(const TaskGraph& g, NetworkFabric& fabric, Model model) {
  std::unique_ptr<NetworkModel> net;
  FlowNetwork* flow = nullptr;
  if (model == Model::kFlow) {
    auto f = std::make_unique<FlowNetwork>("net", fabric);
    flow = f.get();
    net = std::move(f);
  } else {
    net = std::make_unique<AnalyticalNetwork>("net", fabric);
  }
  ResourceModel* models[] = {net.get()};
  EndTimes times;
  Observer* obs[] = {&times};
  NetRun out;
  out.makespan = replay(g, models, obs).makespan.value();
  out.end = times.end;
  out.link_bytes = net->link_bytes();
  if (flow != nullptr) out.stats = flow->stats();
  return out;
}

/// The time one collective takes alone on the network.
inline double collective_time(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec,
                              Model model = Model::kFlow) {
  TaskGraph g;
  // Bandwidth shares for the analytical model, as the strategies lower collectives for it.
  lower_collective(g, ResourceId(0), group, spec, model == Model::kAnalytical ? &fabric : nullptr);
  return run_network(g, fabric, model).makespan;
}

}  // namespace ddlsim::test
