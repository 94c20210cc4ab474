#include "sim/delay_pool.hpp"

#include "sim/core/task_graph.hpp"

namespace ddlsim {

void DelayPool::begin(const TaskGraph& graph) {
  graph_ = &graph;
  pending_.clear();
}

Seconds DelayPool::submit(TaskId task, Seconds now, ReplaySink& sink) {
  const Seconds duration = std::get_if<Compute>(&graph_->kind(task))->duration;  // accepts() admits only Compute
  sink.started(task, now);
  pending_.push((now + duration).value(), task);
  return pending_.next();
}

Seconds DelayPool::advance(Seconds t, ReplaySink& sink) {
  pending_.finish_due(t, sink);
  return pending_.next();
}

}  // namespace ddlsim
