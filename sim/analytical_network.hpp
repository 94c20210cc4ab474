// The analytical network model: every transfer is priced alone, on its own route,
// with no contention from other collectives or sends but what its bandwidth share
// foresees (below).
//
// A transfer of b bytes from s to d takes the first minimum-hop route r that
// NetworkFabric offers (dimension order inside a torus) and lasts
//     L(r) + b s / min_{l in r} c_l,
// the route's summed latency (NetworkFabric::transfer_latency: its protocol's, with its
// protocol's NIC transport, times the transfer's latency count, plus its wait,
// TaskGraph::wait) plus its bytes over its bottleneck link's effective
// capacity (bandwidth x efficiency), s being the transfer's bandwidth share
// (TaskGraph::share, 1 unless set): a collective lowered for this model gives each
// transfer the part of the links next to servers (scale-up ports, PCIe, NICs) that the
// collective's own transfers running at once leave it (two rings through one NIC: half
// each; NCCL's trees, chunk by chunk, the transfers of the same step of their
// pipelines; see lower_collective), and its siblings' (CollectiveGroup::siblings: the
// same collective of the other tensor-parallel ranks, in a training step); a training
// step's pipeline sends carry the shares that a stage boundary's sends, all at once,
// leave each (concurrent_transfer_shares). It is not a bound on the flow model's time either way:
// other traffic does not slow a transfer here, but a share holds for the whole
// transfer, where on the flow model a link one transfer leaves idle (a ring step
// waiting on its neighbour) goes to the others. At the default channel counts the two
// agree within a few percent on the shared-NIC servers of the NCCL suite; with fewer
// channels than that, up to twice as slow here. It costs O(log n) per transfer, for
// quick estimates and searches.
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
