#include <doctest/doctest.h>

#include <vector>

#include "sim/core/event_queue.hpp"
#include "sim/core/tournament_queue.hpp"

using namespace ddlsim;

// Every case runs on both queues, which promise the same order: the binary heap
// (EventQueue: the flow network, and the replay engine above 128 resources) and the
// tournament tree (TournamentQueue: the replay engine up to 128 resources).
#define QUEUES EventQueue, TournamentQueue

namespace {
template <class Q>
std::vector<std::uint32_t> drain(Q& q) {
  std::vector<std::uint32_t> keys;
  while (!q.empty()) {
    keys.push_back(q.top_key());
    q.cancel(q.top_key());
  }
  return keys;
}
}  // namespace

TEST_CASE_TEMPLATE("events come out in time order", Q, QUEUES) {
  // Expected: keys scheduled at 5, 1, 3, 2 s come out as 1, 3, 2, 0 (by time).
  Q q(4);
  q.schedule(0, Seconds(5));
  q.schedule(1, Seconds(1));
  q.schedule(2, Seconds(3));
  q.schedule(3, Seconds(2));
  CHECK(q.top_time() == Seconds(1));
  CHECK(drain(q) == std::vector<std::uint32_t>{1, 3, 2, 0});
}

TEST_CASE_TEMPLATE("ties are broken by the order of scheduling", Q, QUEUES) {
  // Expected: 100 keys, odd ones at 1 s and even ones at 2 s, come out odd keys first in
  // the order scheduled, then even keys in the order scheduled.
  Q q(100);
  for (std::uint32_t k = 0; k < 100; ++k) q.schedule(k, Seconds(k % 2 ? 1.0 : 2.0));
  std::vector<std::uint32_t> expected;
  for (std::uint32_t k = 1; k < 100; k += 2) expected.push_back(k);
  for (std::uint32_t k = 0; k < 100; k += 2) expected.push_back(k);
  CHECK(drain(q) == expected);
}

TEST_CASE_TEMPLATE("rescheduling moves an event and puts it behind equal times", Q, QUEUES) {
  // Expected: key 0 moved from 1 s to 3 s goes after key 1 (already at 3 s); key 2 moved
  // earlier to 0.5 s comes first; cancelled key 3 never comes out.
  Q q(4);
  q.schedule(0, Seconds(1));
  q.schedule(1, Seconds(3));
  q.schedule(2, Seconds(4));
  q.schedule(3, Seconds(2));
  q.schedule(0, Seconds(3));
  q.schedule(2, Seconds(0.5));
  q.cancel(3);
  CHECK(q.time_of(3) == kNever);
  CHECK(q.time_of(0) == Seconds(3));
  CHECK(drain(q) == std::vector<std::uint32_t>{2, 1, 0});
}

TEST_CASE_TEMPLATE("the heap stays ordered under many random moves", Q, QUEUES) {
  // Expected: after 10,000 pseudo-random schedules and cancels on 50 keys, popping
  // yields non-decreasing times, ties in scheduling order.
  Q q(50);
  std::vector<double> time(50, -1);
  std::vector<std::uint64_t> order(50, 0);
  std::uint64_t x = 12345, step = 0;
  for (int i = 0; i < 10000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto key = static_cast<std::uint32_t>((x >> 33) % 50);
    if ((x >> 20) % 7 == 0) {
      q.cancel(key);
      time[key] = -1;
    } else {
      time[key] = static_cast<double>((x >> 40) % 20);
      order[key] = step++;
      q.schedule(key, Seconds(time[key]));
    }
  }
  double last_t = -1;
  std::uint64_t last_order = 0;
  std::size_t live = 0;
  for (double t : time) live += t >= 0 ? 1 : 0;
  CHECK(q.size() == live);
  while (!q.empty()) {
    const auto k = q.top_key();
    CHECK(q.top_time().value() == time[k]);
    CHECK(time[k] >= last_t);
    if (time[k] == last_t) CHECK(order[k] > last_order);
    last_t = time[k];
    last_order = order[k];
    q.cancel(k);
  }
}

TEST_CASE_TEMPLATE("growing keeps every event and its order", Q, QUEUES) {
  // Expected: events of keys 0..2 at 3, 1, 2 s survive growing from 3 to 1000 keys; key
  // 999 added at 1 s after them comes after key 1 (same time, scheduled later).
  Q q(3);
  q.schedule(0, Seconds(3));
  q.schedule(1, Seconds(1));
  q.schedule(2, Seconds(2));
  q.grow(1000);
  q.schedule(999, Seconds(1));
  CHECK(q.size() == 4);
  CHECK(drain(q) == std::vector<std::uint32_t>{1, 999, 2, 0});
}

TEST_CASE_TEMPLATE("reset empties the queue and restarts the tie order", Q, QUEUES) {
  // Expected: after reset, no events remain and new ties come out in their new order.
  Q q(8);
  for (std::uint32_t k = 0; k < 8; ++k) q.schedule(k, Seconds(1));
  q.reset(5);
  CHECK(q.empty());
  CHECK(q.time_of(0) == kNever);
  q.schedule(4, Seconds(2));
  q.schedule(3, Seconds(2));
  CHECK(drain(q) == std::vector<std::uint32_t>{4, 3});
}

TEST_CASE_TEMPLATE("one key, and more keys than 2^24 refused", Q, QUEUES) {
  // Expected: a queue of one key works (the tree rounds up to two leaves); 2^24 + 1 keys
  // throw std::length_error.
  Q q(1);
  q.schedule(0, Seconds(0.5));
  CHECK(q.top_key() == 0);
  CHECK(q.top_time() == Seconds(0.5));
  q.cancel(0);
  CHECK(q.empty());
  CHECK_THROWS_AS(Q((std::size_t{1} << 24) + 1), std::length_error);
}
