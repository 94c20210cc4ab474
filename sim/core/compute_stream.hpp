// A compute stream: runs one task at a time, in the order tasks arrive (FIFO), each for
// its own fixed duration (the Compute task's `duration`). Models a GPU stream or any
// serial executor: a task that arrives while another runs waits, so independent tasks on
// one stream serialize.
//
// Interference: while communication the graph says slows it runs beside it
// (TaskGraph::add_interference; the engine calls interfere() at its starts and finishes),
// its tasks run 1 + fraction times as long (set_interference; 0 by default): a task that
// starts then takes that much longer, and the one running when the count changes finishes
// its remaining work at the new pace.
//
// It lives in the core, with its hot paths inline, because the replay engine runs it
// without a virtual call: streams are most of a replay's resources and most of its
// events, and the engine (engine.cpp) calls submit() and advance() of a resource it
// knows to be a ComputeStream directly, so they inline into the replay loop. Any other
// code uses it through the ResourceModel interface like every model.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sim/core/errors.hpp"
#include "sim/core/resource_model.hpp"
#include "sim/core/task_graph.hpp"

namespace ddlsim {

class ComputeStream final : public ResourceModel {
 public:
  explicit ComputeStream(std::string name) : name_(std::move(name)) {}

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] bool accepts(const TaskKind& kind) const override { return kind.index() == 0; }
  void begin(const TaskGraph& graph) override;
  [[gnu::always_inline]] Seconds submit(TaskId task, Seconds now, ReplaySink& sink) override {
    if (!running_.valid()) {
      start(task, now, sink);
    } else {
      queue_.push_back(task);
    }
    return end_;
  }
  [[nodiscard]] Seconds next_event() const override { return end_; }

  /// How much slower its tasks run while communication runs beside it (a finite fraction
  /// >= 0; std::invalid_argument otherwise).
  void set_interference(double fraction) {
    if (!(fraction >= 0.0 && fraction < 1e9)) throw std::invalid_argument(name_ + ": interference must be a finite fraction >= 0");
    slowed_ = 1.0 + fraction;
  }
  /// `delta` more (or, negative, fewer) communications run beside it from `now` on
  /// (ReplayError when more end than started). Returns next_event().
  Seconds interfere(int delta, Seconds now) {
    beside_ += delta;
    if (beside_ < 0) throw ReplayError("resource '" + name_ + "': more communication ended beside it than started");
    const double pace = beside_ > 0 ? slowed_ : 1.0;
    if (running_.valid() && pace != pace_) end_ = now + (end_ - now) * (pace / pace_);
    pace_ = pace;
    return end_;
  }
  [[gnu::always_inline]] Seconds advance(Seconds t, ReplaySink& sink) override {
    while (running_.valid() && end_ <= t) {
      const Seconds at = end_;
      sink.finished(running_, at);
      const std::size_t waiting = queue_.size();
      if (head_ < waiting) {
        const TaskId next = queue_[head_++];
        if (head_ == waiting) {
          queue_.clear();
          head_ = 0;
        } else {
          __builtin_prefetch(&graph_->kind(queue_[head_]));  // the one after it
        }
        start(next, at, sink);
      } else {
        running_ = TaskId{};
        end_ = kNever;
      }
    }
    return end_;
  }

 private:
  [[gnu::always_inline]] void start(TaskId task, Seconds at, ReplaySink& sink) {
    running_ = task;
    end_ = at + std::get_if<Compute>(&graph_->kind(task))->duration * pace_;  // accepts() admits only Compute
    graph_->prefetch_finish(task);
    sink.started(task, at);
  }

  std::string name_;
  const TaskGraph* graph_ = nullptr;
  std::vector<TaskId> queue_;  // waiting tasks; queue_[head_] is next
  std::size_t head_ = 0;
  TaskId running_;
  Seconds end_ = kNever;
  double slowed_ = 1.0;  // the pace with communication beside it
  double pace_ = 1.0;    // how many seconds a task's second takes now
  int beside_ = 0;       // communications running beside it
};

}  // namespace ddlsim
