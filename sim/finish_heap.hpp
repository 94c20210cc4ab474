// Tasks that finish at instants known when they start, earliest first (ties in the
// order they came): the state of resources whose tasks never slow each other
// (AnalyticalNetwork, DelayPool).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/core/resource_model.hpp"

namespace ddlsim {

class FinishHeap {
 public:
  void clear() {
    heap_.clear();
    seq_ = 0;
  }
  void push(double finish, TaskId task) {
    heap_.push_back(Pending{finish, seq_++, task});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  [[nodiscard]] Seconds next() const { return heap_.empty() ? kNever : Seconds(heap_.front().finish); }
  /// Reports every task finishing by t to the sink, earliest first.
  void finish_due(Seconds t, ReplaySink& sink) {
    while (!heap_.empty() && heap_.front().finish <= t.value()) {
      sink.finished(heap_.front().task, Seconds(heap_.front().finish));
      std::pop_heap(heap_.begin(), heap_.end(), later);
      heap_.pop_back();
    }
  }

 private:
  struct Pending {
    double finish;
    std::uint64_t seq;
    TaskId task;
  };
  static bool later(const Pending& a, const Pending& b) {
    return a.finish != b.finish ? a.finish > b.finish : a.seq > b.seq;
  }
  std::vector<Pending> heap_;  // a min-heap on (finish, seq)
  std::uint64_t seq_ = 0;
};

}  // namespace ddlsim
