// A deterministic priority queue of timed events.
//
// A binary min-heap ordered by (time, insertion sequence): two events at the same time
// come out in the order they were pushed, so a replay never depends on the heap's
// internal layout or on the standard library's implementation.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/core/units.hpp"

namespace ddlsim {

template <class Payload>
class EventQueue {
 public:
  struct Event {
    Seconds time;
    std::uint64_t seq;
    Payload payload;
  };

  void push(Seconds time, Payload payload) {
    heap_.push_back(Event{time, next_seq_++, std::move(payload)});
    sift_up(heap_.size() - 1);
  }

  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const { return heap_.size(); }
  [[nodiscard]] const Event& top() const { return heap_.front(); }

  Event pop() {
    Event out = std::move(heap_.front());
    heap_.front() = std::move(heap_.back());
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return out;
  }

  void clear() {
    heap_.clear();
    next_seq_ = 0;
  }

  [[nodiscard]] std::size_t memory_bytes() const { return heap_.capacity() * sizeof(Event); }

 private:
  static bool before(const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.seq < b.seq;
  }

  void sift_up(std::size_t i) {
    Event e = std::move(heap_[i]);
    while (i > 0) {
      std::size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = std::move(heap_[parent]);
      i = parent;
    }
    heap_[i] = std::move(e);
  }

  void sift_down(std::size_t i) {
    const std::size_t n = heap_.size();
    Event e = std::move(heap_[i]);
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], e)) break;
      heap_[i] = std::move(heap_[child]);
      i = child;
    }
    heap_[i] = std::move(e);
  }

  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace ddlsim
