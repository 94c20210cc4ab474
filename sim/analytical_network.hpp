// The analytical network model: every transfer is priced alone, without contention.
//
// A transfer of b bytes from s to d takes the first minimum-hop route r that
// NetworkFabric offers (dimension order inside a torus) and lasts
//     L(r) + b / min_{l in r} c_l,
// the route's summed latency plus its bytes over its bottleneck link's effective
// capacity (bandwidth x efficiency). Concurrent transfers do not slow each other, so
// this is a lower bound on the flow model's time (equal when no two flows share a link).
// It costs O(log n) per transfer, for quick estimates and searches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/resource_model.hpp"
#include "sim/finish_heap.hpp"
#include "sim/network.hpp"
#include "sim/network_fabric.hpp"

namespace ddlsim {

class AnalyticalNetwork final : public NetworkModel {
 public:
  AnalyticalNetwork(std::string name, NetworkFabric& fabric);

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] bool accepts(const TaskKind& kind) const override { return kind.index() == 1; }
  void begin(const TaskGraph& graph) override;
  Seconds submit(TaskId task, Seconds now, ReplaySink& sink) override;
  [[nodiscard]] Seconds next_event() const override { return pending_.next(); }
  Seconds advance(Seconds t, ReplaySink& sink) override;

 private:
  std::string name_;
  NetworkFabric* fabric_;
  const TaskGraph* graph_ = nullptr;
  FinishHeap pending_;
};

}  // namespace ddlsim
