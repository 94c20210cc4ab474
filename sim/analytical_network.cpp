#include "sim/analytical_network.hpp"

#include <algorithm>

#include "sim/core/errors.hpp"
#include "sim/core/task_graph.hpp"

namespace ddlsim {
namespace {
bool later(const auto& a, const auto& b) { return a.finish != b.finish ? a.finish > b.finish : a.seq > b.seq; }
}  // namespace

AnalyticalNetwork::AnalyticalNetwork(std::string name, NetworkFabric& fabric)
    : name_(std::move(name)), fabric_(&fabric) {}

void AnalyticalNetwork::begin(const TaskGraph& graph) {
  graph_ = &graph;
  reset_link_bytes(fabric_->cluster().link_count());
  heap_.clear();
  seq_ = 0;
}

Seconds AnalyticalNetwork::submit(TaskId task, Seconds now, ReplaySink& sink) {
  const auto* transfer = std::get_if<Transfer>(&graph_->kind(task));  // accepts() admits only Transfer
  const std::size_t nodes = fabric_->cluster().node_count();
  if (transfer->src.value >= nodes || transfer->dst.value >= nodes) {
    throw ReplayError("network '" + name_ + "': " + std::string(graph_->name(task)) +
                      " names an endpoint that is not a node of the cluster");
  }
  const auto& route = fabric_->routes(NodeId(transfer->src.value), NodeId(transfer->dst.value)).front();
  carry(route, transfer->bytes.value());
  double duration = fabric_->route_latency(route);
  if (!route.empty()) duration += transfer->bytes.value() / fabric_->route_capacity(route);
  sink.started(task, now);
  graph_->prefetch_finish(task);
  heap_.push_back(Pending{now.value() + duration, seq_++, task});
  std::push_heap(heap_.begin(), heap_.end(), [](const Pending& a, const Pending& b) { return later(a, b); });
  return next_event();
}

Seconds AnalyticalNetwork::next_event() const { return heap_.empty() ? kNever : Seconds(heap_.front().finish); }

Seconds AnalyticalNetwork::advance(Seconds t, ReplaySink& sink) {
  while (!heap_.empty() && heap_.front().finish <= t.value()) {
    sink.finished(heap_.front().task, t);
    std::pop_heap(heap_.begin(), heap_.end(), [](const Pending& a, const Pending& b) { return later(a, b); });
    heap_.pop_back();
  }
  return next_event();
}

}  // namespace ddlsim
