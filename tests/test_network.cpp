// The network models against textbook max-min cases and their own closed forms.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "network_fixtures.hpp"
#include "sim/core/compute_stream.hpp"
#include "sim/core/errors.hpp"
#include "topology/catalog.hpp"
#include "topology/presets.hpp"

using namespace ddlsim;
using namespace ddlsim::test;
using ddlsim::test::Approx;

namespace {
TaskId transfer(TaskGraph& g, NodeId a, NodeId b, double bytes) {
  return g.add(Transfer{ResourceId(0), EndpointId(a.value), EndpointId(b.value), Bytes(bytes)}, "t").id();
}

// Hosts h[0], h[1] on leaf "la", h[2], h[3] on leaf "lb", both leaves joined by spines
// "s0" and "s1", every link 10 GB/s; returns the spines.
std::pair<NodeId, NodeId> two_leaves_two_spines(Cluster& c, const std::vector<NodeId>& h) {
  const NodeId la = c.add_node(NodeKind::kSwitch, "la"), lb = c.add_node(NodeKind::kSwitch, "lb");
  const NodeId s0 = c.add_node(NodeKind::kSwitch, "s0"), s1 = c.add_node(NodeKind::kSwitch, "s1");
  const BytesPerSecond B(10e9);
  c.connect(h[0], la, B, Seconds(0.0), "x");
  c.connect(h[1], la, B, Seconds(0.0), "x");
  c.connect(h[2], lb, B, Seconds(0.0), "x");
  c.connect(h[3], lb, B, Seconds(0.0), "x");
  for (NodeId s : {s0, s1}) {
    c.connect(la, s, B, Seconds(0.0), "x");
    c.connect(lb, s, B, Seconds(0.0), "x");
  }
  return {s0, s1};
}
// A route's links as a vector, to compare routes (spans have no ==).
std::vector<LinkId> links_of(std::span<const LinkId> route) { return {route.begin(), route.end()}; }

}  // namespace

TEST_CASE("two flows on one link get half of it each") {
  // Expected: link of 10 GB/s, two 1 GB transfers at once: 5 GB/s each, both end at
  // 1 / 5 = 0.2 s. The analytical model ignores contention: 0.1 s each.
  Cluster c;
  const auto n = add_chips(c, 2);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  const TaskId a = transfer(g, n[0], n[1], 1e9), b = transfer(g, n[0], n[1], 1e9);
  const NetRun flow = run_network(g, f, Model::kFlow);
  CHECK(flow.end[a.value] == Approx(0.2).epsilon(1e-12));
  CHECK(flow.end[b.value] == Approx(0.2).epsilon(1e-12));
  const NetRun ana = run_network(g, f, Model::kAnalytical);
  CHECK(ana.makespan == Approx(0.1).epsilon(1e-12));
}

TEST_CASE("each link counts the bytes of every transfer routed over it") {
  // Expected: a0 - s - a1; 1 GB from a0 to a1 and 0.5 GB back: a0->s and s->a1 carry
  // 1e9 bytes, a1->s and s->a0 5e8, in both models.
  Cluster c;
  const auto n = add_chips(c, 2);
  const NodeId sw = c.add_node(NodeKind::kSwitch, "s");
  c.connect(n[0], sw, BytesPerSecond(10e9), Seconds(0.0), "x");
  c.connect(sw, n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  transfer(g, n[0], n[1], 1e9);
  transfer(g, n[1], n[0], 5e8);
  for (Model m : {Model::kFlow, Model::kAnalytical}) {
    const NetRun r = run_network(g, f, m);
    std::map<std::pair<std::string, std::string>, double> by_name;
    for (std::uint32_t l = 0; l < c.link_count(); ++l) {
      by_name[{c.node(c.link(LinkId(l)).from).name, c.node(c.link(LinkId(l)).to).name}] = r.link_bytes[l];
    }
    CHECK(by_name[{"a0", "s"}] == 1e9);
    CHECK(by_name[{"s", "a1"}] == 1e9);
    CHECK(by_name[{"a1", "s"}] == 5e8);
    CHECK(by_name[{"s", "a0"}] == 5e8);
  }
}

TEST_CASE("the opposite direction of a cable is a separate link") {
  // Expected: 1 GB each way over a 10 GB/s full-duplex cable: 0.1 s for both.
  Cluster c;
  const auto n = add_chips(c, 2);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  transfer(g, n[0], n[1], 1e9);
  transfer(g, n[1], n[0], 1e9);
  CHECK(run_network(g, f, Model::kFlow).makespan == Approx(0.1).epsilon(1e-12));
}

TEST_CASE("parking lot: the long flow and each short flow share every link equally") {
  // Line n0 - n1 - n2 - n3 of links of B = 8 GB/s. One long flow n0 -> n3 of b = 1 GB and
  // short flows n0->n1, n1->n2, n2->n3 of 2b. Every link carries two flows, so max-min
  // gives each B/2: the long flow ends at b / (B/2) = 0.25 s. The short flows have moved
  // b by then and finish their last b at the full B: 0.25 + 1/8 = 0.375 s.
  Cluster c;
  const auto n = add_chips(c, 4);
  for (int i = 0; i < 3; ++i) c.connect(n[i], n[i + 1], BytesPerSecond(8e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  const TaskId lng = transfer(g, n[0], n[3], 1e9);
  std::vector<TaskId> shorts;
  for (int i = 0; i < 3; ++i) shorts.push_back(transfer(g, n[i], n[i + 1], 2e9));
  const NetRun r = run_network(g, f, Model::kFlow);
  CHECK(r.end[lng.value] == Approx(0.25).epsilon(1e-12));
  for (TaskId s : shorts) CHECK(r.end[s.value] == Approx(0.375).epsilon(1e-12));
}

TEST_CASE("max-min: a flow limited elsewhere leaves its unused share to others") {
  // n0 -(10 GB/s)- n1 -(4 GB/s)- n2. Flow A n0->n2, B n0->n1, C n1->n2. The 4 GB/s link
  // is the bottleneck: A and C get 2 each; B gets the rest of its link, 10 - 2 = 8. With
  // bytes A = 2 GB, B = 8 GB, C = 2 GB all three end together at 1 s.
  Cluster c;
  const auto n = add_chips(c, 3);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
  c.connect(n[1], n[2], BytesPerSecond(4e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  const TaskId a = transfer(g, n[0], n[2], 2e9), b = transfer(g, n[0], n[1], 8e9), cc = transfer(g, n[1], n[2], 2e9);
  const NetRun r = run_network(g, f, Model::kFlow);
  CHECK(r.end[a.value] == Approx(1.0).epsilon(1e-12));
  CHECK(r.end[b.value] == Approx(1.0).epsilon(1e-12));
  CHECK(r.end[cc.value] == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("a transfer alone pays its route's latency plus bytes over the bottleneck") {
  // Expected: hops of 1 us and 2 us, bandwidths 10 and 5 GB/s, 1 GB: 3e-6 + 0.2 s, the
  // same in both models; efficiency 0.5 on every link doubles the bandwidth term.
  Cluster c;
  const auto n = add_chips(c, 3);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(1e-6), "x");
  c.connect(n[1], n[2], BytesPerSecond(5e9), Seconds(2e-6), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  transfer(g, n[0], n[2], 1e9);
  CHECK(run_network(g, f, Model::kFlow).makespan == Approx(3e-6 + 0.2).epsilon(1e-12));
  CHECK(run_network(g, f, Model::kAnalytical).makespan == Approx(3e-6 + 0.2).epsilon(1e-12));
  NetworkFabric half(c, std::vector<double>(c.link_count(), 0.5));
  CHECK(run_network(g, half, Model::kFlow).makespan == Approx(3e-6 + 0.4).epsilon(1e-12));
}

TEST_CASE("a flow that joins later slows the first one only from then on") {
  // 10 GB/s link; A (1 GB) starts at 0; B (1 GB) starts when a 0.05 s-long transfer on
  // another link ends. A moves 0.5 GB alone, then both share: A's last 0.5 GB at 5 GB/s
  // ends at 0.15 s; B has 0.5 GB left then and finishes alone at 0.15 + 0.05 = 0.2 s.
  Cluster c;
  const auto n = add_chips(c, 4);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
  c.connect(n[2], n[3], BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  const TaskId a = transfer(g, n[0], n[1], 1e9);
  const TaskId delay = transfer(g, n[2], n[3], 0.5e9);
  const TaskId b = transfer(g, n[0], n[1], 1e9);
  g.add_edge(delay, b);
  const NetRun r = run_network(g, f, Model::kFlow);
  CHECK(r.end[a.value] == Approx(0.15).epsilon(1e-12));
  CHECK(r.end[b.value] == Approx(0.2).epsilon(1e-12));
}

TEST_CASE("a flow that leaves re-solves only the flows it bounded") {
  // Hosts s0 and s1 (10 GB/s NICs) on switch x each send two flows over x -> y (30 GB/s)
  // to four hosts on y: s0 two of 1 GB, s1 two of 2 GB. Each NIC gives its two flows
  // 5 GB/s (x -> y carries 20 of its 30), so s0's flows end at 1 / 5 = 0.2 s and s1's at
  // 2 / 5 = 0.4 s. When s0's flows leave, s1's keep their NIC as bottleneck, which the
  // leaving flows never crossed: nothing is re-solved then, so the 4 flows of the
  // first solve are the only ones, in one fill.
  Cluster c;
  const auto h = add_chips(c, 6);
  const NodeId x = c.add_node(NodeKind::kSwitch, "x"), y = c.add_node(NodeKind::kSwitch, "y");
  c.connect(h[0], x, BytesPerSecond(10e9), Seconds(0.0), "x");
  c.connect(h[1], x, BytesPerSecond(10e9), Seconds(0.0), "x");
  c.connect(x, y, BytesPerSecond(30e9), Seconds(0.0), "x");
  for (std::size_t i = 2; i < 6; ++i) c.connect(y, h[i], BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  for (std::size_t i = 0; i < 4; ++i) transfer(g, h[i / 2], h[2 + i], i < 2 ? 1e9 : 2e9);
  const NetRun r = run_network(g, f, Model::kFlow);
  for (std::size_t i = 0; i < 4; ++i) CHECK(r.end[i] == Approx(i < 2 ? 0.2 : 0.4).epsilon(1e-12));
  CHECK(r.stats.flows_resolved == 4);
  CHECK(r.stats.fills == 1);
}

namespace {
// Every flow's finish time by brute force: at each arrival or finish, progressive
// filling over every link of every active flow, from scratch (the textbook algorithm,
// no incremental state), then the clock moves to the next arrival or finish.
std::vector<double> max_min_by_brute_force(const std::vector<std::vector<std::uint32_t>>& routes,
                                           const std::vector<double>& capacity, const std::vector<double>& bytes,
                                           const std::vector<double>& start) {
  const std::size_t n = routes.size();
  std::vector<double> left = bytes, end(n, -1.0), rate(n, 0.0);
  std::vector<bool> active(n, false);
  double now = 0.0;
  for (;;) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!active[i] && end[i] < 0.0 && start[i] <= now) active[i] = true;
    }
    std::vector<bool> fixed(n, false);
    std::vector<double> used(capacity.size(), 0.0);
    std::size_t open = 0;
    for (std::size_t i = 0; i < n; ++i) open += active[i] ? 1 : 0;
    while (open > 0) {
      std::vector<int> unfixed(capacity.size(), 0);
      for (std::size_t i = 0; i < n; ++i) {
        if (active[i] && !fixed[i]) {
          for (std::uint32_t l : routes[i]) ++unfixed[l];
        }
      }
      double level = std::numeric_limits<double>::infinity();
      for (std::size_t l = 0; l < capacity.size(); ++l) {
        if (unfixed[l] > 0) level = std::min(level, (capacity[l] - used[l]) / unfixed[l]);
      }
      std::vector<bool> full(capacity.size(), false);
      for (std::size_t l = 0; l < capacity.size(); ++l) {
        full[l] = unfixed[l] > 0 && (capacity[l] - used[l]) / unfixed[l] <= level * (1.0 + 1e-12);
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (!active[i] || fixed[i]) continue;
        bool at_full = false;
        for (std::uint32_t l : routes[i]) at_full = at_full || full[l];
        if (!at_full) continue;
        fixed[i] = true;
        rate[i] = level;
        --open;
        for (std::uint32_t l : routes[i]) used[l] += level;
      }
    }
    double next = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      if (active[i]) next = std::min(next, now + left[i] / rate[i]);
      if (!active[i] && end[i] < 0.0) next = std::min(next, start[i]);
    }
    if (next == std::numeric_limits<double>::infinity()) break;
    for (std::size_t i = 0; i < n; ++i) {
      if (!active[i]) continue;
      left[i] -= rate[i] * (next - now);
      if (left[i] <= bytes[i] * 1e-12) {
        active[i] = false;
        end[i] = next;
      }
    }
    now = next;
  }
  return end;
}
}  // namespace

TEST_CASE("the flow model's repaired rates give the finish times of max-min solved from scratch") {
  // 240 flows (0.1-2 GB, starting over 0.3 s) between the 32 hosts of a two-level tree
  // (8 leaves of 4; 25 GB/s host links, 40 GB/s uplinks: oversubscribed 2.5:1, unique
  // routes), replayed by the flow model, which repairs the max-min allocation at each
  // arrival and finish where it changed, and by a brute-force progressive filling over
  // every link at every event. Expected: every finish time the same, within 1e-9
  // relative (the two sum the bytes in different orders).
  for (std::uint64_t seed : {7u, 11u}) {
    Cluster c;
    const auto hosts = add_chips(c, 32);
    const NodeId root = c.add_node(NodeKind::kSwitch, "root");
    for (int l = 0; l < 8; ++l) {
      const NodeId leaf = c.add_node(NodeKind::kSwitch, "leaf" + std::to_string(l));
      for (int k = 0; k < 4; ++k) c.connect(hosts[l * 4 + k], leaf, BytesPerSecond(25e9), Seconds(0.0), "x");
      c.connect(leaf, root, BytesPerSecond(40e9), Seconds(0.0), "x");
    }
    NetworkFabric f = line_rate(c);
    std::uint64_t s = seed;
    auto next = [&] {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<double>(s >> 11) / 9007199254740992.0;
    };
    TaskGraph g;
    std::vector<std::unique_ptr<ResourceModel>> models;
    models.push_back(std::make_unique<FlowNetwork>("net", f));
    const auto* flow = static_cast<const FlowNetwork*>(models.front().get());
    std::vector<std::vector<std::uint32_t>> routes;
    std::vector<double> bytes, start;
    std::vector<TaskId> transfers;
    for (int i = 0; i < 240; ++i) {
      const int a = static_cast<int>(next() * 32), b = (a + 1 + static_cast<int>(next() * 31)) % 32;
      bytes.push_back(0.1e9 + next() * 1.9e9);
      start.push_back(next() * 0.3);
      const auto& candidates = f.routes(hosts[a], hosts[b]);
      REQUIRE(candidates.size() == 1);
      routes.emplace_back();
      for (LinkId l : candidates.front()) routes.back().push_back(l.value);
      const ResourceId stream(static_cast<std::uint32_t>(models.size()));
      models.push_back(std::make_unique<ComputeStream>("delay"));
      const TaskId delay = g.add(Compute{stream, Seconds(start.back()), Flops(0.0)}, "delay").id();
      transfers.push_back(transfer(g, hosts[a], hosts[b], bytes.back()));
      g.add_edge(delay, transfers.back());
    }
    std::vector<double> capacity;
    for (std::uint32_t l = 0; l < c.link_count(); ++l) capacity.push_back(f.capacity(LinkId(l)));
    const std::vector<double> expected = max_min_by_brute_force(routes, capacity, bytes, start);
    std::vector<ResourceModel*> ptrs;
    for (auto& m : models) ptrs.push_back(m.get());
    EndTimes ends;
    Observer* obs[] = {&ends};
    replay(g, ptrs, obs);
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      CHECK(ends.end[transfers[i].value] == Approx(expected[i]).epsilon(1e-9));
    }
    CHECK(flow->stats().fills > flow->stats().solves);  // some repairs had to grow their set
  }
}

TEST_CASE("adaptive routing spreads flows over equal-cost paths") {
  // Two leaves joined by two spines (10 GB/s links). Two 1 GB flows from leaf A's
  // hosts to leaf B's: the second takes the other spine, so both end at 0.1 s, not 0.2.
  Cluster c;
  const auto h = add_chips(c, 4);
  two_leaves_two_spines(c, h);
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  transfer(g, h[0], h[2], 1e9);
  transfer(g, h[1], h[3], 1e9);
  CHECK(run_network(g, f, Model::kFlow).makespan == Approx(0.1).epsilon(1e-12));
}

TEST_CASE("adaptive routing looks past a busy NIC to the fabric behind it") {
  // Two leaves joined by two spines, every link 10 GB/s; host h4 hangs off spine s0 and
  // h5 off s1. h0 sends two flows of 1 GB to h2 (its NIC gives each 5 GB/s); then h4 and
  // h5 each send 1 GB to h3, which can only go down from their own spine. h0's NIC
  // bounds both of its candidate routes alike, so its second flow must be placed by the
  // spines behind it: over the other spine. Then each spine's link down to lb carries two
  // flows, every flow gets 5 GB/s and all end at 0.2 s. Placed by the NIC alone (a tie:
  // the first route again), one spine's link down would carry three flows at 10/3 GB/s:
  // 0.3 s.
  Cluster c;
  const auto h = add_chips(c, 6);
  const auto [s0, s1] = two_leaves_two_spines(c, h);
  c.connect(h[4], s0, BytesPerSecond(10e9), Seconds(0.0), "x");
  c.connect(h[5], s1, BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  REQUIRE(f.routes(h[0], h[2]).size() == 2);
  REQUIRE(f.routes(h[4], h[3]).size() == 1);
  REQUIRE(f.routes(h[5], h[3]).size() == 1);
  TaskGraph g;
  transfer(g, h[0], h[2], 1e9);
  transfer(g, h[0], h[2], 1e9);
  transfer(g, h[4], h[3], 1e9);
  transfer(g, h[5], h[3], 1e9);
  CHECK(run_network(g, f, Model::kFlow).makespan == Approx(0.2).epsilon(1e-12));
}

TEST_CASE("adaptive routing finds every uplink of a wide leaf, and every cable down") {
  // Two leaves of 32 hosts joined by 16 spines, two cables from each leaf to each spine
  // (32 uplinks per leaf: full bisection), every link 10 GB/s. 32 flows of 1 GB, host i
  // of leaf A to host i of leaf B, can each have an uplink and a downlink of their own:
  // all end at 0.1 s. With 16 candidate routes per pair (a window of 16 uplinks) the
  // last flows found theirs all taken and shared: 0.2 s; the candidates now number the
  // distinct paths, 32 uplinks x 2 cables down = 64.
  Cluster c;
  const auto h = add_chips(c, 64);
  const NodeId la = c.add_node(NodeKind::kSwitch, "la"), lb = c.add_node(NodeKind::kSwitch, "lb");
  const BytesPerSecond B(10e9);
  for (int i = 0; i < 32; ++i) {
    c.connect(h[static_cast<std::size_t>(i)], la, B, Seconds(0.0), "x");
    c.connect(h[static_cast<std::size_t>(32 + i)], lb, B, Seconds(0.0), "x");
  }
  for (int s = 0; s < 16; ++s) {
    const NodeId spine = c.add_node(NodeKind::kSwitch, "s" + std::to_string(s));
    for (int k = 0; k < 2; ++k) {
      c.connect(la, spine, B, Seconds(0.0), "x");
      c.connect(lb, spine, B, Seconds(0.0), "x");
    }
  }
  NetworkFabric f = line_rate(c);
  CHECK(f.routes(h[0], h[32]).size() == 64);
  TaskGraph g;
  for (std::size_t i = 0; i < 32; ++i) transfer(g, h[i], h[32 + i], 1e9);
  CHECK(run_network(g, f, Model::kFlow).makespan == Approx(0.1).epsilon(1e-12));
}

TEST_CASE("a transfer to itself or of no bytes takes only its latency") {
  Cluster c;
  const auto n = add_chips(c, 2);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(1e-6), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  const TaskId self = transfer(g, n[0], n[0], 1e9);
  const TaskId empty = transfer(g, n[0], n[1], 0.0);
  for (Model m : {Model::kFlow, Model::kAnalytical}) {
    const NetRun r = run_network(g, f, m);
    CHECK(r.end[self.value] == 0.0);
    CHECK(r.end[empty.value] == Approx(1e-6).epsilon(1e-12));
  }
}

TEST_CASE("a transfer naming a node the cluster lacks is a replay error") {
  Cluster c;
  const auto n = add_chips(c, 2);
  c.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
  NetworkFabric f = line_rate(c);
  TaskGraph g;
  g.add(Transfer{ResourceId(0), EndpointId(0), EndpointId(7), Bytes(1.0)}, "bad");
  CHECK_THROWS_AS(run_network(g, f, Model::kFlow), ReplayError);
  CHECK_THROWS_AS(run_network(g, f, Model::kAnalytical), ReplayError);
}

TEST_CASE("catalog efficiencies scale the link capacity by kind") {
  // Expected: an NVLink 3 link of 300 GB/s at the catalog's efficiency; a kind the
  // catalog does not know runs at line rate.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  const auto n = add_chips(c, 3);
  const LinkId nv = c.connect(n[0], n[1], BytesPerSecond(300e9), Seconds(0.0), "nvlink3");
  const LinkId custom = c.connect(n[1], n[2], BytesPerSecond(10e9), Seconds(0.0), "custom");
  NetworkFabric f(c, cat);
  CHECK(f.capacity(nv) == Approx(300e9 * cat.link("nvlink3").efficiency));
  CHECK(cat.link("nvlink3").efficiency < 1.0);
  CHECK(f.capacity(custom) == Approx(10e9));
}

TEST_CASE("the first route alone is the first of the candidate routes") {
  // Expected: first_route, asked before routes(), returns what routes().front() returns
  // afterwards, on a two-pod DGX A100 fabric.
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.nodes = 24;
  const Cluster c = build_preset(cat, "dgx-a100", o);
  NetworkFabric f(c, cat);
  const auto& acc = c.accelerators();
  for (std::size_t i = 0; i < acc.size(); i += 7) {
    const NodeId a = acc[i], b = acc[(i * 31 + 5) % acc.size()];
    const std::span<const LinkId> first = f.first_route(a, b);
    CHECK(links_of(f.routes(a, b).front()) == links_of(first));
    CHECK(f.first_route(a, b).data() == f.routes(a, b).front().data());  // now answered from the candidates
  }
}

TEST_CASE("routes found for many pairs at once are the ones found pair by pair") {
  // Expected: prefetch_first_routes (one search per destination) leaves first_route
  // answering exactly what a fabric that searched each pair alone answers, on a DGX-1
  // fabric (NVLink cube-mesh inside, where some GPU pairs take a detour), on a two-pod
  // DGX A100 fabric, and on DGX A100s with 4 NICs, each behind a PCIe switch with two
  // GPUs (as short a way between those two as NVLink, which they must take); a pair
  // asked for twice and a rank paired with itself change nothing.
  const Catalog cat = Catalog::builtin();
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    PresetOptions o;
    o.nodes = k == 1 ? 24 : 8;
    if (k == 2) o.nics_per_node = 4;
    const Cluster c = build_preset(cat, k == 0 ? "dgx1-v100" : "dgx-a100", o);
    NetworkFabric alone(c, cat), batched(c, cat);
    const auto& acc = c.accelerators();
    std::vector<std::pair<NodeId, NodeId>> pairs;
    for (std::size_t i = 0; i < acc.size(); i += 3) {
      for (std::size_t j = 0; j < acc.size(); j += 2) pairs.emplace_back(acc[i], acc[j]);
    }
    pairs.push_back(pairs.front());
    REQUIRE(pairs.size() >= 256);  // enough for the batched search to run
    batched.prefetch_first_routes(pairs);
    for (const auto& [a, b] : pairs) CHECK(links_of(batched.first_route(a, b)) == links_of(alone.first_route(a, b)));
  }
}

TEST_CASE("candidate routes found for many pairs at once are the ones found pair by pair") {
  // Expected: prefetch_routes (one search per destination) leaves routes answering
  // exactly the candidates, in order, that a fabric searching each pair alone finds, on
  // the fabrics of the test above and on a two-level fat tree whose leaves have more
  // uplinks than kMaxCandidates (wide candidate sets); a pair listed twice, a rank paired
  // with itself, a pair already known and a node the cluster lacks change nothing.
  const Catalog cat = Catalog::builtin();
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    PresetOptions o;
    o.nodes = k == 1 ? 24 : (k == 3 ? 48 : 8);
    if (k == 2) o.nics_per_node = 4;
    const Cluster c = build_preset(cat, k == 0 ? "dgx1-v100" : (k == 3 ? "dgx-h100" : "dgx-a100"), o);
    NetworkFabric alone(c, cat), batched(c, cat);
    const auto& acc = c.accelerators();
    std::vector<std::pair<NodeId, NodeId>> pairs;
    for (std::size_t j = 0; j < acc.size(); j += 5) {
      for (std::size_t i = 0; i < acc.size(); ++i) pairs.emplace_back(acc[i], acc[j]);  // every source
    }
    pairs.emplace_back(acc[1], acc[2]);  // a destination with one source: left to routes
    pairs.push_back(pairs.front());
    REQUIRE(pairs.size() >= 256);  // enough for the batched search to run (32 sources per destination)
    const std::size_t known = batched.routes(pairs[1].first, pairs[1].second).size();
    std::vector<std::pair<NodeId, NodeId>> asked = pairs;
    asked.emplace_back(acc[0], NodeId(static_cast<std::uint32_t>(c.node_count() + 5)));
    batched.prefetch_routes(asked);
    // Every destination's sources but the one already known and the rank itself; not
    // the pair whose destination has one source.
    const std::size_t destinations = (acc.size() + 4) / 5;
    CHECK(batched.prefetched_routes() == destinations * (acc.size() - 1) - 1);
    CHECK(batched.routes(pairs[1].first, pairs[1].second).size() == known);
    std::size_t widest = 0;
    for (const auto& [a, b] : pairs) {
      const RouteSet mine = batched.routes(a, b), theirs = alone.routes(a, b);
      REQUIRE(mine.size() == theirs.size());
      widest = std::max(widest, mine.size());
      for (std::size_t r = 0; r < mine.size(); ++r) CHECK(links_of(mine[r]) == links_of(theirs[r]));
    }
    if (k == 3) CHECK(widest > NetworkFabric::kMaxCandidates);
  }
}

TEST_CASE("the route index finds every key it was given and no other, across growth") {
  // Expected: after 50,000 inserts (keys of the form src << 32 | dst, as the fabric
  // keys pairs, many sharing a destination), find returns each key's own pointer, keys
  // never inserted are absent (null), the size counts the keys, and growing (from empty
  // and past a reserve) moves nothing out of reach.
  RouteIndex index;
  CHECK(index.find(7) == nullptr);
  std::vector<LinkId> targets(50000);
  const auto key = [](std::uint64_t i) { return ((i % 997) << 32) | (i / 997); };
  index.reserve(1000);
  for (std::uint64_t i = 0; i < targets.size(); ++i) index.insert(key(i), &targets[i]);
  CHECK(index.size() == targets.size());
  std::size_t wrong = 0;
  for (std::uint64_t i = 0; i < targets.size(); ++i) wrong += index.find(key(i)) != &targets[i];
  CHECK(wrong == 0);
  std::size_t found = 0;
  for (std::uint64_t i = targets.size(); i < 2 * targets.size(); ++i) found += index.find(key(i)) != nullptr;
  CHECK(found == 0);
}

TEST_CASE("routes between the chips of a torus are its dimension-order routes") {
  // Expected: the fabric's one candidate between two chips of a 4x4x4 TPU v4 slice (and
  // the first route, asked first or after) is TorusRouter's dimension-order route, and
  // between chips of two slices joined over the data-centre network a minimum-hop path
  // as ShortestPathRouter finds it.
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.dims = std::vector<int>{4, 4, 4};
  o.pods = 2;
  const Cluster c = build_preset(cat, "tpu-v4-pod", o);
  NetworkFabric f(c, cat);
  ShortestPathRouter reference(c);
  const auto& acc = c.accelerators();
  REQUIRE(acc.size() == 128);
  std::size_t checked = 0;
  for (std::size_t i = 0; i < acc.size(); i += 3) {
    for (std::size_t j = 0; j < acc.size(); j += 7) {
      const std::vector<LinkId> want = reference.route(acc[i], acc[j]);
      if ((i + j) % 2 == 0) CHECK(links_of(f.first_route(acc[i], acc[j])) == links_of(want));
      const RouteSet got = f.routes(acc[i], acc[j]);
      REQUIRE(got.size() == 1);
      CHECK(links_of(got.front()) == links_of(want));
      CHECK(links_of(f.first_route(acc[i], acc[j])) == links_of(want));
      ++checked;
    }
  }
  CHECK(checked == 43 * 19);
}
