// A deterministic queue of timed events, at most one pending event per key.
//
// The replay engine keys events by resource: each resource has one "next event" time,
// which moves as work arrives and completes. The queue is an indexed binary min-heap
// ordered by (time, sequence): every schedule() call takes a fresh sequence number, so
// events at the same time come out in the order they were scheduled, independent of the
// heap's layout or the standard library. Moving an event re-sifts it in place, so the
// common "advance the earliest resource, then reschedule it" costs one sift-down and no
// stale entries accumulate.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/event_key.hpp"
#include "sim/core/units.hpp"

namespace ddlsim {

class EventQueue {
 public:
  /// Keys are 0 .. keys-1; at most 2^24 of them.
  explicit EventQueue(std::size_t keys = 0) { reset(keys); }

  /// Empties the queue and sets the number of keys, keeping allocated memory.
  void reset(std::size_t keys) {
    event_key::check_keys(keys, "EventQueue");
    heap_.clear();
    pos_.assign(keys, kAbsent);
    next_seq_ = 0;
  }

  /// Raises the number of keys to `keys` (never lowers it), keeping every event.
  void grow(std::size_t keys) {
    event_key::check_keys(keys, "EventQueue");
    if (keys > pos_.size()) pos_.resize(keys, kAbsent);
  }

  /// Sets the event of `key` to `time` (inserting it, or moving an existing one). It goes
  /// after every event already scheduled for the same time.
  /// `time` must be >= 0 and finite (the replay never schedules into the past).
  void schedule(std::uint32_t key, Seconds t) {
    const Entry e{event_key::make(t, next_seq_++, key)};
    const std::uint32_t i = pos_[key];
    if (i == kAbsent) {
      heap_.push_back(e);
      sift_up(static_cast<std::uint32_t>(heap_.size() - 1), e);
    } else if (before(e, heap_[i])) {
      sift_up(i, e);
    } else {
      sift_down(i, e);
    }
  }

  /// Removes the event of `key`, if any.
  void cancel(std::uint32_t key) {
    const std::uint32_t i = pos_[key];
    if (i == kAbsent) return;
    pos_[key] = kAbsent;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    if (i > 0 && before(last, heap_[(i - 1) / kArity])) sift_up(i, last);
    else sift_down(i, last);
  }

  [[nodiscard]] bool empty() const { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const { return heap_.size(); }
  [[nodiscard]] std::uint32_t top_key() const { return heap_.front().key(); }
  [[nodiscard]] Seconds top_time() const { return event_key::time_of(heap_.front().k); }
  /// The time of `key`'s event, or kNever if it has none.
  [[nodiscard]] Seconds time_of(std::uint32_t key) const {
    return pos_[key] == kAbsent ? kNever : event_key::time_of(heap_[pos_[key]].k);
  }

  [[nodiscard]] std::size_t memory_bytes() const {
    return heap_.capacity() * sizeof(Entry) + pos_.capacity() * sizeof(std::uint32_t);
  }

 private:
  static constexpr std::uint32_t kAbsent = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t kArity = 2;
  // One event_key per event (sim/core/event_key.hpp): time, then scheduling order.
  struct Entry {
    event_key::Key k;
    [[nodiscard]] std::uint32_t key() const { return event_key::key_of(k); }
  };

  static bool before(const Entry& a, const Entry& b) { return a.k < b.k; }

  void place(std::uint32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.key()] = i;
  }

  void sift_up(std::uint32_t i, const Entry e) {
    while (i > 0) {
      const std::uint32_t parent = (i - 1) / kArity;
      if (!before(e, heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, e);
  }

  void sift_down(std::uint32_t i, const Entry e) {
    const auto n = static_cast<std::uint32_t>(heap_.size());
    const Entry* h = heap_.data();
    for (;;) {
      const std::uint32_t first = kArity * i + 1;
      if (first >= n) break;
      std::uint32_t child = first;
      if (first + 1 < n) child += static_cast<std::uint32_t>(before(h[first + 1], h[first]));
      if (!before(h[child], e)) break;
      place(i, h[child]);
      i = child;
    }
    place(i, e);
  }

  std::vector<Entry> heap_;
  std::vector<std::uint32_t> pos_;  // index in heap_ of each key's event, or kAbsent
  std::uint64_t next_seq_ = 0;
};

}  // namespace ddlsim
