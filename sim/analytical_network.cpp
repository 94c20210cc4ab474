#include "sim/analytical_network.hpp"

#include "sim/core/errors.hpp"
#include "sim/core/task_graph.hpp"

namespace ddlsim {
AnalyticalNetwork::AnalyticalNetwork(std::string name, NetworkFabric& fabric)
    : name_(std::move(name)), fabric_(&fabric) {}

void AnalyticalNetwork::begin(const TaskGraph& graph) {
  graph_ = &graph;
  reset_link_bytes(fabric_->cluster().link_count());
  pending_.clear();
}

Seconds AnalyticalNetwork::submit(TaskId task, Seconds now, ReplaySink& sink) {
  const auto* transfer = std::get_if<Transfer>(&graph_->kind(task));  // accepts() admits only Transfer
  const std::size_t nodes = fabric_->cluster().node_count();
  if (transfer->src.value >= nodes || transfer->dst.value >= nodes) {
    throw ReplayError("network '" + name_ + "': " + std::string(graph_->name(task)) +
                      " names an endpoint that is not a node of the cluster");
  }
  const auto& route = fabric_->first_route(NodeId(transfer->src.value), NodeId(transfer->dst.value));
  carry(route, transfer->bytes.value());
  double duration = fabric_->transfer_latency(route, *transfer) * transfer->latency_count() + graph_->wait(task);
  if (!route.empty()) duration += transfer->bytes.value() * graph_->share(task) / fabric_->route_capacity(route);
  sink.started(task, now);
  graph_->prefetch_finish(task);
  pending_.push(now.value() + duration, task);
  return pending_.next();
}

Seconds AnalyticalNetwork::advance(Seconds t, ReplaySink& sink) {
  pending_.finish_due(t, sink);
  return pending_.next();
}

}  // namespace ddlsim
