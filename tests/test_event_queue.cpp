#include <doctest/doctest.h>

#include "sim/core/event_queue.hpp"

using namespace ddlsim;

TEST_CASE("event queue pops in time order") {
  // Expected: 1, 2, 3, 5 regardless of push order.
  EventQueue<int> q;
  for (double t : {5.0, 1.0, 3.0, 2.0}) q.push(Seconds(t), static_cast<int>(t));
  std::vector<int> got;
  while (!q.empty()) got.push_back(q.pop().payload);
  CHECK(got == std::vector<int>{1, 2, 3, 5});
}

TEST_CASE("event queue breaks ties by insertion order") {
  // Expected: at equal times, events come out exactly in the order they were pushed,
  // also when interleaved with other times and after pops.
  EventQueue<int> q;
  for (int i = 0; i < 100; ++i) q.push(Seconds(i % 2 ? 1.0 : 2.0), i);
  std::vector<int> got;
  while (!q.empty()) got.push_back(q.pop().payload);
  std::vector<int> expected;
  for (int i = 1; i < 100; i += 2) expected.push_back(i);
  for (int i = 0; i < 100; i += 2) expected.push_back(i);
  CHECK(got == expected);
}
