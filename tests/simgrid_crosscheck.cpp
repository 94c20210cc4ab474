// Cross-check of the flow network model against SimGrid's CM02 model (max-min fair
// sharing, cross-traffic off), on shared topologies and flow sets.
//
// Both simulators get the same directed links (capacities), the same routes (ddlsim's,
// on topologies where the minimum-hop route is unique) and the same flows (source,
// destination, bytes, start time); every flow's finish time must agree within 1%.
// Latencies are zero: with latency, CM02 weights each flow's share by its route's
// latency (RTT unfairness), which ddlsim's model deliberately does not, and ddlsim's
// latency handling is checked against closed forms in test_network.cpp instead.
//
// A plain program (SimGrid's engine is one per process): prints one line per case and
// exits non-zero on any disagreement. Built and run by CTest when SimGrid is installed.
#include <simgrid/s4u.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "network_fixtures.hpp"
#include "sim/core/compute_stream.hpp"
#include "sim/core/engine.hpp"
#include "sim/flow_network.hpp"
#include "sim/network_fabric.hpp"

namespace sg4 = simgrid::s4u;
using namespace ddlsim;

namespace {

struct Flow {
  int src, dst;  // accelerator indices
  double bytes;
  double start;  // s
};

struct Case {
  std::string name;
  Cluster cluster;
  std::vector<Flow> flows;
  std::vector<double> ddlsim_end, simgrid_end;
};

std::vector<NodeId> chips(Cluster& c, int n, const std::string& prefix) {
  std::vector<NodeId> v;
  for (int i = 0; i < n; ++i) v.push_back(c.add_node(NodeKind::kAccelerator, prefix + std::to_string(i)));
  return v;
}

// Deterministic pseudo-random numbers (64-bit LCG), so the flow sets never change.
struct Lcg {
  std::uint64_t s;
  double next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

// Two-level tree: `leaves` switches of `per_leaf` hosts (links B_edge) under one root
// (uplinks B_up): unique routes, contention on the uplinks.
Cluster tree(int leaves, int per_leaf, double b_edge, double b_up) {
  Cluster c;
  const auto hosts = chips(c, leaves * per_leaf, "h");
  const NodeId root = c.add_node(NodeKind::kSwitch, "root");
  for (int l = 0; l < leaves; ++l) {
    const NodeId leaf = c.add_node(NodeKind::kSwitch, "leaf" + std::to_string(l));
    for (int k = 0; k < per_leaf; ++k) c.connect(hosts[l * per_leaf + k], leaf, BytesPerSecond(b_edge), Seconds(0.0), "x");
    c.connect(leaf, root, BytesPerSecond(b_up), Seconds(0.0), "x");
  }
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  {  // Textbook: n0 -(10)- n1 -(4)- n2; flows n0->n2, n0->n1, n1->n2.
    Case k{"three flows, two links", Cluster{}, {}, {}, {}};
    const auto n = chips(k.cluster, 3, "n");
    k.cluster.connect(n[0], n[1], BytesPerSecond(10e9), Seconds(0.0), "x");
    k.cluster.connect(n[1], n[2], BytesPerSecond(4e9), Seconds(0.0), "x");
    k.flows = {{0, 2, 2e9, 0.0}, {0, 1, 8e9, 0.0}, {1, 2, 2e9, 0.0}};
    out.push_back(std::move(k));
  }
  {  // Parking lot of 5 links with staggered short flows.
    Case k{"parking lot", Cluster{}, {}, {}, {}};
    const auto n = chips(k.cluster, 6, "n");
    for (int i = 0; i < 5; ++i) k.cluster.connect(n[i], n[i + 1], BytesPerSecond((6 + i) * 1e9), Seconds(0.0), "x");
    k.flows.push_back({0, 5, 3e9, 0.0});
    for (int i = 0; i < 5; ++i) k.flows.push_back({i, i + 1, (1 + i) * 1e9, 0.05 * i});
    out.push_back(std::move(k));
  }
  for (std::uint64_t seed : {1u, 2u, 3u}) {  // Random flow sets on an oversubscribed tree.
    Case k{"tree, random flows (seed " + std::to_string(seed) + ")", tree(4, 4, 25e9, 40e9), {}, {}, {}};
    Lcg rng{seed};
    for (int f = 0; f < 60; ++f) {
      const int a = static_cast<int>(rng.next() * 16), b = (a + 1 + static_cast<int>(rng.next() * 15)) % 16;
      k.flows.push_back({a, b, 0.1e9 + rng.next() * 2e9, rng.next() * 0.3});
    }
    out.push_back(std::move(k));
  }
  return out;
}

void run_ddlsim(Case& k) {
  NetworkFabric fabric(k.cluster, std::vector<double>(k.cluster.link_count(), 1.0));
  TaskGraph g;
  std::vector<std::unique_ptr<ResourceModel>> models;
  models.push_back(std::make_unique<FlowNetwork>("net", fabric));
  std::vector<TaskId> transfers;
  const auto acc = k.cluster.accelerators();
  for (const Flow& f : k.flows) {
    // A delay on its own stream holds the flow back until its start time.
    const ResourceId stream(static_cast<std::uint32_t>(models.size()));
    models.push_back(std::make_unique<ComputeStream>("delay"));
    const TaskId delay = g.add(Compute{stream, Seconds(f.start), Flops(0.0)}, "delay").id();
    const TaskId t = g.add(Transfer{ResourceId(0), EndpointId(acc[f.src].value), EndpointId(acc[f.dst].value), Bytes(f.bytes)}, "flow").id();
    g.add_edge(delay, t);
    transfers.push_back(t);
  }
  std::vector<ResourceModel*> ptrs;
  for (auto& m : models) ptrs.push_back(m.get());
  test::EndTimes ends;
  Observer* obs[] = {&ends};
  replay(g, ptrs, obs);
  for (TaskId t : transfers) k.ddlsim_end.push_back(ends.end[t.value]);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Case> all = cases();
  for (Case& k : all) run_ddlsim(k);

  sg4::Engine e(&argc, argv);
  e.set_config("network/model:CM02");
  e.set_config("network/crosstraffic:0");
  e.set_config("network/TCP-gamma:0");
  e.set_config("contexts/factory:thread");
  auto* zone = sg4::create_full_zone("crosscheck");
  // Every case gets its own hosts and links in one platform; they share nothing.
  std::vector<std::vector<sg4::Host*>> hosts(all.size());
  for (std::size_t ci = 0; ci < all.size(); ++ci) {
    Case& k = all[ci];
    const std::string p = "c" + std::to_string(ci) + ".";
    for (NodeId a : k.cluster.accelerators()) hosts[ci].push_back(zone->create_host(p + k.cluster.node(a).name, 1e9));
    std::vector<sg4::Link*> links;
    for (std::uint32_t l = 0; l < k.cluster.link_count(); ++l) {
      links.push_back(zone->create_link(p + "l" + std::to_string(l), k.cluster.link(LinkId(l)).bandwidth.value())->set_latency(0)->seal());
    }
    NetworkFabric fabric(k.cluster, std::vector<double>(k.cluster.link_count(), 1.0));
    const auto acc = k.cluster.accelerators();
    for (std::size_t a = 0; a < acc.size(); ++a) {
      for (std::size_t b = 0; b < acc.size(); ++b) {
        if (a == b) continue;
        const auto& routes = fabric.routes(acc[a], acc[b]);
        if (routes.size() != 1) {
          std::fprintf(stderr, "%s: route %zu -> %zu is not unique\n", k.name.c_str(), a, b);
          return 1;
        }
        std::vector<sg4::LinkInRoute> route;
        for (LinkId l : routes.front()) route.emplace_back(links[l.value]);
        zone->add_route(hosts[ci][a]->get_netpoint(), hosts[ci][b]->get_netpoint(), nullptr, nullptr, route, false);
      }
    }
    k.simgrid_end.assign(k.flows.size(), -1.0);
  }
  zone->seal();
  for (std::size_t ci = 0; ci < all.size(); ++ci) {
    for (std::size_t fi = 0; fi < all[ci].flows.size(); ++fi) {
      Case* k = &all[ci];
      sg4::Host* src = hosts[ci][k->flows[fi].src];
      sg4::Host* dst = hosts[ci][k->flows[fi].dst];
      sg4::Actor::create("flow", src, [k, fi, src, dst]() {
        sg4::this_actor::sleep_for(k->flows[fi].start);
        sg4::Comm::sendto_async(src, dst, static_cast<std::uint64_t>(k->flows[fi].bytes))->wait();
        k->simgrid_end[fi] = sg4::Engine::get_clock();
      });
    }
  }
  e.run();

  int failures = 0;
  for (const Case& k : all) {
    double worst = 0.0;
    for (std::size_t i = 0; i < k.flows.size(); ++i) {
      worst = std::max(worst, std::abs(k.ddlsim_end[i] - k.simgrid_end[i]) / k.simgrid_end[i]);
    }
    const bool ok = worst <= 0.01;
    failures += ok ? 0 : 1;
    std::printf("%-36s %3zu flows: worst relative difference %.2e %s\n", k.name.c_str(), k.flows.size(), worst,
                ok ? "(within 1%)" : "(MORE THAN 1%)");
  }
  return failures == 0 ? 0 : 1;
}
