#include "sim/compute_stream.hpp"

#include "sim/core/task_graph.hpp"

namespace ddlsim {

void ComputeStream::begin(const TaskGraph& graph) {
  graph_ = &graph;
  queue_.clear();
  head_ = 0;
  running_ = TaskId{};
  end_ = kNever;
}

inline void ComputeStream::start(TaskId task, Seconds at, ReplaySink& sink) {
  running_ = task;
  end_ = at + std::get_if<Compute>(&graph_->kind(task))->duration;  // accepts() admits only Compute
  graph_->prefetch_finish(task);
  if (head_ < queue_.size()) __builtin_prefetch(&graph_->kind(queue_[head_]));  // the next to start
  sink.started(task, at);
}

Seconds ComputeStream::submit(TaskId task, Seconds now, ReplaySink& sink) {
  if (!running_.valid()) {
    start(task, now, sink);
  } else {
    queue_.push_back(task);
  }
  return end_;
}

Seconds ComputeStream::advance(Seconds t, ReplaySink& sink) {
  while (running_.valid() && end_ <= t) {
    const Seconds at = end_;
    sink.finished(running_, at);
    if (head_ < queue_.size()) {
      start(queue_[head_++], at, sink);
      if (head_ == queue_.size()) {
        queue_.clear();
        head_ = 0;
      }
    } else {
      running_ = TaskId{};
      end_ = kNever;
    }
  }
  return end_;
}

}  // namespace ddlsim
