#include <doctest/doctest.h>

#include <limits>

#include <sstream>

#include "sim/core/errors.hpp"
#include "sim/core/task_graph.hpp"

using namespace ddlsim;

TEST_CASE("successor lists keep insertion order across the inline-to-chunk boundary") {
  // Expected: for every out-degree from 0 to 40 (inline holds 3, chunks hold 7), the
  // successors come back exactly in the order the edges were added.
  for (std::uint32_t degree = 0; degree <= 40; ++degree) {
    TaskGraph g;
    const TaskId src = g.add(Marker{}).id();
    std::vector<std::uint32_t> expected;
    for (std::uint32_t i = 0; i < degree; ++i) expected.push_back(g.add(Marker{}).id().value);
    // Interleave another task's edges so that chunks of the two lists alternate.
    const TaskId other = g.add(Marker{}).id();
    for (std::uint32_t i = 0; i < degree; ++i) {
      g.add_edge(src, TaskId(expected[i]));
      g.add_edge(other, TaskId(expected[i]));
    }
    std::vector<std::uint32_t> got;
    g.for_each_successor(src, [&](TaskId s) { got.push_back(s.value); });
    CHECK(got == expected);
    CHECK(g.out_degree(src) == degree);
    CHECK(g.edge_count() == 2 * degree);
    if (degree > 0) CHECK(g.in_degree(TaskId(expected[0])) == 2);
  }
}

TEST_CASE("task kinds are a closed variant with names and resources") {
  // Expected: each kind reports its name; compute and transfer tasks report their
  // resource, a marker none; names are kept, unnamed tasks have an empty name.
  TaskGraph g;
  const auto c = g.add(Compute{ResourceId(2), Seconds(1), Flops(5)}, "gemm").id();
  const auto t = g.add(Transfer{ResourceId(3), EndpointId(0), EndpointId(1), Bytes(8)}, "send").id();
  const auto m = g.add(Marker{}).id();
  const auto a = g.add(Allocate{PoolId(0), Bytes(4)}, "alloc").id();
  CHECK(kind_name(g.kind(c)) == "compute");
  CHECK(kind_name(g.kind(t)) == "transfer");
  CHECK(kind_name(g.kind(a)) == "allocate");
  CHECK(resource_of(g.kind(c)) == ResourceId(2));
  CHECK(resource_of(g.kind(t)) == ResourceId(3));
  CHECK_FALSE(resource_of(g.kind(m)).valid());
  CHECK(g.name(c) == "gemm");
  CHECK(g.name(m).empty());
}

TEST_CASE("identical names are stored once") {
  // Expected: a thousand tasks sharing one long name cost the same as a thousand unnamed
  // tasks, plus one copy of the name (well under 1 KiB).
  TaskGraph named;
  TaskGraph unnamed;
  named.reserve(1000);
  unnamed.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    named.add(Marker{}, "the same long name for every task, long enough to need the heap");
    unnamed.add(Marker{});
  }
  CHECK(named.memory_bytes() - unnamed.memory_bytes() < 1024);
  CHECK(named.name(TaskId(999)) == "the same long name for every task, long enough to need the heap");
}

TEST_CASE("bad construction calls are rejected") {
  // Expected: an edge to a task that does not exist, a negative duration, an infinite
  // transfer and a negative allocation are GraphErrors.
  TaskGraph g;
  const TaskId a = g.add(Marker{}).id();
  CHECK_THROWS_AS(g.add_edge(a, TaskId(7)), GraphError);
  CHECK_THROWS_AS(g.add(Compute{ResourceId(0), Seconds(-1), Flops(0)}), GraphError);
  CHECK_THROWS_AS(g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(1), Bytes(1.0 / 0.0)}), GraphError);
  CHECK_THROWS_AS(g.add(Allocate{PoolId(0), Bytes(-4)}), GraphError);
}

TEST_CASE("a transfer's bandwidth share is 1 unless set, and at least 1") {
  // Expected: tasks read share 1 until one is given a share, those after it too; a share
  // below 1, not finite, or for a task that does not exist is a GraphError; the shares
  // cost no memory until one is set.
  TaskGraph g;
  const TaskId a = g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(1), Bytes(8)}).id();
  const std::size_t before = g.memory_bytes();
  g.set_share(a, 1.0);
  CHECK(g.memory_bytes() == before);
  const TaskId b = g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(1), Bytes(8)}).id();
  g.set_share(b, 2.5);
  const TaskId c = g.add(Marker{}).id();
  CHECK(g.share(a) == 1.0);
  CHECK(g.share(b) == 2.5);
  CHECK(g.share(c) == 1.0);
  CHECK_THROWS_AS(g.set_share(a, 0.5), GraphError);
  CHECK_THROWS_AS(g.set_share(a, std::numeric_limits<double>::infinity()), GraphError);
  CHECK_THROWS_AS(g.set_share(a, std::numeric_limits<double>::quiet_NaN()), GraphError);
  CHECK_THROWS_AS(g.set_share(TaskId(9), 2.0), GraphError);
}

TEST_CASE("GraphViz dump names every task and edge") {
  // Expected: a compute task with quotes in its name (escaped), a marker drawn as a
  // diamond, and the edge between them.
  TaskGraph g;
  auto a = g.add(Compute{ResourceId(0), Seconds(1), Flops(0)}, "fwd \"L0\"");
  auto b = g.add(Marker{}, "join");
  a.precede(b);
  std::ostringstream os;
  g.write_dot(os);
  const std::string dot = os.str();
  CHECK(dot.rfind("digraph tasks {", 0) == 0);
  CHECK(dot.find("t0 [label=\"fwd \\\"L0\\\"\\ncompute\"]") != std::string::npos);
  CHECK(dot.find("t1 [label=\"join\\nmarker\", shape=diamond]") != std::string::npos);
  CHECK(dot.find("t0 -> t1;") != std::string::npos);
}

TEST_CASE("a collective's transfers slow their ends' streams, and a transfer to itself every stream they slow") {
  // Expected: a collective of a wait (node 0 to itself) then transfers 0 -> 1 and 1 -> 2,
  // node i's compute standing on stream 10 + i, node 3 on none: each transfer slows its
  // two ends' streams (in that order), the wait those of nodes 0, 1 and 2 (by id), and a
  // marker nothing; tasks before `first` are left alone.
  TaskGraph g;
  const TaskId before = g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(0), Bytes(0.0)}).id();
  const TaskId first = g.add(Marker{}).id();
  const TaskId wait = g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(0), Bytes(0.0), 0}).id();
  const TaskId a = g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(1), Bytes(8.0)}).id();
  const TaskId b = g.add(Transfer{ResourceId(0), EndpointId(1), EndpointId(2), Bytes(8.0)}).id();
  const TaskId c = g.add(Transfer{ResourceId(0), EndpointId(2), EndpointId(3), Bytes(8.0)}).id();
  g.add_transfer_interference(first, [](std::uint32_t node) { return node < 3 ? ResourceId(10 + node) : ResourceId(); });
  std::vector<std::pair<std::uint32_t, std::uint32_t>> got;
  for (const auto& x : g.interference()) got.emplace_back(x.task.value, x.stream.value);
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> expected{
      {wait.value, 10}, {wait.value, 11}, {wait.value, 12}, {a.value, 10}, {a.value, 11}, {b.value, 11}, {b.value, 12}, {c.value, 12}};
  CHECK(got == expected);
  CHECK(before.value < first.value);
}
