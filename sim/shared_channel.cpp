#include "sim/shared_channel.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/core/task_graph.hpp"

namespace ddlsim {
namespace {
bool later(const auto& a, const auto& b) {  // heap order for std::*_heap: min on (tag, seq)
  if (a.tag != b.tag) return a.tag > b.tag;
  return a.seq > b.seq;
}
}  // namespace

SharedChannel::SharedChannel(std::string name, BytesPerSecond capacity, Seconds latency)
    : name_(std::move(name)), capacity_(capacity), latency_(latency) {
  if (!(capacity.value() > 0.0) || !(latency.value() >= 0.0) || latency == kNever) {
    throw std::invalid_argument("channel '" + name_ + "': capacity must be positive and latency finite and >= 0");
  }
}

void SharedChannel::begin(const TaskGraph& graph) {
  graph_ = &graph;
  active_.clear();
  waiting_.clear();
  waiting_head_ = 0;
  v_ = 0.0;
  t_ = Seconds(0.0);
  seq_ = 0;
}

inline void SharedChannel::progress_to(Seconds t) {
  if (!active_.empty() && t > t_) {
    v_ += (t - t_).value() * capacity_.value() / static_cast<double>(active_.size());
  }
  if (t > t_) t_ = t;
}

inline void SharedChannel::join(TaskId task) {
  const double bytes = std::get_if<Transfer>(&graph_->kind(task))->bytes.value();  // accepts() admits only Transfer
  active_.push_back(Active{v_ + bytes, seq_++, task});
  std::push_heap(active_.begin(), active_.end(), [](const Active& a, const Active& b) { return later(a, b); });
}

inline void SharedChannel::pop_active() {
  std::pop_heap(active_.begin(), active_.end(), [](const Active& a, const Active& b) { return later(a, b); });
  active_.pop_back();
}

inline Seconds SharedChannel::next_finish() const {
  if (active_.empty()) return kNever;
  const double left = std::max(0.0, active_.front().tag - v_);
  return t_ + Seconds(left * static_cast<double>(active_.size()) / capacity_.value());
}

Seconds SharedChannel::next_event() const {
  const Seconds join = waiting_head_ < waiting_.size() ? waiting_[waiting_head_].join_at : kNever;
  return std::min(join, next_finish());
}

Seconds SharedChannel::submit(TaskId task, Seconds now, ReplaySink& sink) {
  progress_to(now);
  sink.started(task, now);
  graph_->prefetch_finish(task);
  if (latency_.value() > 0.0) {
    waiting_.push_back(Waiting{now + latency_, task});
  } else {
    join(task);
  }
  return next_event();
}

Seconds SharedChannel::advance(Seconds t, ReplaySink& sink) {
  for (;;) {
    const Seconds join_at = waiting_head_ < waiting_.size() ? waiting_[waiting_head_].join_at : kNever;
    const Seconds finish_at = next_finish();
    const Seconds e = std::min(join_at, finish_at);
    if (e > t) break;
    progress_to(e);
    if (finish_at <= join_at) {
      // Departures first at equal times, so a joining transfer does not slow a finished one.
      v_ = std::max(v_, active_.front().tag);
      const TaskId done = active_.front().task;
      pop_active();
      sink.finished(done, e);
    } else {
      join(waiting_[waiting_head_++].task);
      if (waiting_head_ == waiting_.size()) {
        waiting_.clear();
        waiting_head_ = 0;
      }
    }
  }
  progress_to(t);
  return next_event();
}

}  // namespace ddlsim
