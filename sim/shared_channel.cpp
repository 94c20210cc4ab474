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

// The two formulas of the model, shared by the state's real updates and next_event()'s
// look-ahead, so that a predicted finish is the one later computed, to the bit.
// V and its time after moving from time `t` to `to` with n transfers sharing.
inline void SharedChannel::progress(double& v, Seconds& t, Seconds to, std::size_t n) const {
  if (n > 0 && to > t) v += (to - t).value() * capacity_.value() / static_cast<double>(n);
  if (to > t) t = to;
}

// When the transfer of smallest tag finishes, from V = v at time t with n > 0 sharing.
inline Seconds SharedChannel::finish(double v, Seconds t, double min_tag, std::size_t n) const {
  return t + Seconds(std::max(0.0, min_tag - v) * static_cast<double>(n) / capacity_.value());
}

inline void SharedChannel::progress_to(Seconds t) { progress(v_, t_, t, active_.size()); }

inline void SharedChannel::join(TaskId task, double bytes) {
  active_.push_back(Active{v_ + bytes, seq_++, task});
  std::push_heap(active_.begin(), active_.end(), [](const Active& a, const Active& b) { return later(a, b); });
}

inline void SharedChannel::pop_active() {
  std::pop_heap(active_.begin(), active_.end(), [](const Active& a, const Active& b) { return later(a, b); });
  active_.pop_back();
}

inline Seconds SharedChannel::next_finish() const {
  if (active_.empty()) return kNever;
  return finish(v_, t_, active_.front().tag, active_.size());
}

// The next finish, with the joins due before it played forward on copies of the state.
// A join changes every active transfer's rate but finishes nothing, so it needs no event
// of the replay's own: advance() plays the same joins, with the same arithmetic in the
// same order, on its way to this finish, which therefore falls exactly at this time.
// At most kJoinsAhead joins are played forward; past that the next join is returned as
// an event, as every join was before, so that many transfers submitted at once do not
// cost a walk over all of them per submission.
Seconds SharedChannel::next_event() const {
  double v = v_;
  Seconds t = t_;
  std::size_t n = active_.size();
  double min_tag = n > 0 ? active_.front().tag : 0.0;
  for (std::size_t w = waiting_head_;; ++w) {
    const Seconds finish_at = n == 0 ? kNever : finish(v, t, min_tag, n);
    const Seconds join_at = w < waiting_.size() ? waiting_[w].join_at : kNever;
    if (finish_at <= join_at) return finish_at;  // departures first at equal times, as in play_to()
    if (w - waiting_head_ == kJoinsAhead) return join_at;
    progress(v, t, join_at, n);
    const double tag = v + waiting_[w].bytes;
    min_tag = n == 0 ? tag : std::min(min_tag, tag);
    ++n;
  }
}

// Every join and finish due at or before t, in time order, departures first at equal
// times (a joining transfer does not slow one that is done).
inline void SharedChannel::play_to(Seconds t, ReplaySink& sink) {
  for (;;) {
    const Seconds join_at = waiting_head_ < waiting_.size() ? waiting_[waiting_head_].join_at : kNever;
    const Seconds finish_at = next_finish();
    const Seconds e = std::min(join_at, finish_at);
    if (e > t) break;
    progress_to(e);
    if (finish_at <= join_at) {
      v_ = std::max(v_, active_.front().tag);
      const TaskId done = active_.front().task;
      pop_active();
      sink.finished(done, e);
    } else {
      const Waiting& w = waiting_[waiting_head_++];
      join(w.task, w.bytes);
      if (waiting_head_ == waiting_.size()) {
        waiting_.clear();
        waiting_head_ = 0;
      }
    }
  }
  progress_to(t);
}

Seconds SharedChannel::submit(TaskId task, Seconds now, ReplaySink& sink) {
  // Joins are not always replay events, so some may be due, and a finish may be due at
  // `now` if the replay has not yet advanced this model at `now`: play them first, as
  // advance(now) would (it then finds nothing left to do at `now`).
  play_to(now, sink);
  sink.started(task, now);
  graph_->prefetch_finish(task);
  const double bytes = std::get_if<Transfer>(&graph_->kind(task))->bytes.value();  // accepts() admits only Transfer
  if (latency_.value() > 0.0) {
    waiting_.push_back(Waiting{now + latency_, bytes, task});
  } else {
    join(task, bytes);
  }
  return next_event();
}

Seconds SharedChannel::advance(Seconds t, ReplaySink& sink) {
  play_to(t, sink);
  return next_event();
}

}  // namespace ddlsim
