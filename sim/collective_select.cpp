// The algorithm selector: closed-form estimates from the routes each algorithm uses.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "sim/collectives.hpp"
#include "sim/network_fabric.hpp"
#include "support/input_error.hpp"

namespace ddlsim {
namespace {

struct Edge {
  double latency = 0.0;                                    // s, the largest seen
  double capacity = std::numeric_limits<double>::infinity();  // B/s, the smallest seen
  bool seen = false;
  void add(NetworkFabric& f, NodeId a, NodeId b) {
    const auto& r = f.first_route(a, b);
    latency = std::max(latency, f.route_latency(r));
    capacity = std::min(capacity, f.route_capacity(r));
    seen = true;
  }
  // Time for `steps` steps of `bytes` each over this edge.
  [[nodiscard]] double steps(double n, double bytes) const { return seen ? n * (latency + bytes / capacity) : 0.0; }
};


// How many of the transfers between these pairs, running side by side, must share one
// bottleneck link (a link of its route's smallest capacity): each pair in turn takes,
// among its candidate routes, the one whose bottleneck links carry the fewest so far (as
// adaptive routing spreads them). Parallel rings that leave a server through fewer NICs
// than rings share them; rails of their own share nothing.
double bottleneck_sharing(NetworkFabric& f, const std::vector<std::pair<NodeId, NodeId>>& pairs) {
  std::map<std::uint32_t, int> uses;
  int most = 1;
  for (const auto& [a, b] : pairs) {
    const std::vector<LinkId>* pick = nullptr;
    int pick_load = std::numeric_limits<int>::max();
    for (const auto& r : f.routes(a, b)) {
      const double low = f.route_capacity(r);
      int load = 0;
      for (LinkId l : r) {
        if (f.capacity(l) != low) continue;
        const auto it = uses.find(l.value);
        load = std::max(load, it == uses.end() ? 0 : it->second);
      }
      if (load < pick_load) {
        pick = &r;
        pick_load = load;
      }
    }
    if (pick == nullptr) continue;
    const double low = f.route_capacity(*pick);
    for (LinkId l : *pick) {
      if (f.capacity(l) == low) most = std::max(most, ++uses[l.value]);
    }
  }
  return most;
}

double estimate(NetworkFabric& f, const CollectiveGroup& g, CollectiveOp op, CollectiveAlgorithm a, double S,
                int channels) {
  using Op = CollectiveOp;
  const std::size_t p = g.ranks.size();
  const double P = static_cast<double>(p);
  const auto node = [&](std::size_t i) { return g.ranks[i]; };
  switch (a) {
    case CollectiveAlgorithm::kRing: {
      // Ring edges inside a domain and between domains; channels multiply the latter.
      Edge in, out;
      const auto local = g.by_domain();
      // The hops between domains are those of channel 0's ring (ring_orders: each enters
      // a domain on the rail it left the last one on).
      const auto first_ring = local.size() > 1 ? ring_orders(g, 1) : std::vector<std::vector<std::size_t>>{};
      for (std::size_t d = 0; d < local.size(); ++d) {
        const auto& l = local[d];
        for (std::size_t k = 0; k + 1 < l.size(); ++k) in.add(f, node(l[k]), node(l[k + 1]));
        if (local.size() == 1 && l.size() > 1) in.add(f, node(l.back()), node(l.front()));
      }
      for (const auto& o : first_ring) {
        for (std::size_t k = 0; k < o.size(); ++k) {
          const std::size_t next = o[(k + 1) % o.size()];
          if (g.domain[o[k]] != g.domain[next]) out.add(f, node(o[k]), node(next));
        }
      }
      // Inside the domains the channels' rings (ring_orders: along a DGX-1's direct
      // rings or a direct rank-order ring and its reverse, else rank-order edges one way
      // or the other) share links: each channel gets its
      // bottleneck's capacity over the channels crossing it, all channels the slowest
      // channel's share each.
      // Every channel's ring, for the two checks below.
      const auto orders = channels > 1 && (in.seen || local.size() > 1) ? ring_orders(g, channels)
                                                                         : std::vector<std::vector<std::size_t>>{};
      if (in.seen && channels > 1) {
        std::vector<const std::vector<LinkId>*> routes;  // every channel's hops inside a domain
        std::map<std::uint32_t, int> uses;
        for (const auto& o : orders) {
          for (std::size_t k = 0; k < o.size(); ++k) {
            const std::size_t next = o[(k + 1) % o.size()];
            if (g.domain[o[k]] != g.domain[next]) continue;
            routes.push_back(&f.first_route(node(o[k]), node(next)));
            for (LinkId l : *routes.back()) ++uses[l.value];
          }
        }
        double slowest = std::numeric_limits<double>::infinity();
        for (const auto* r : routes) {
          for (LinkId l : *r) slowest = std::min(slowest, f.capacity(l) / uses[l.value]);
        }
        in.capacity = slowest * channels;
      }
      // Where each channel leaves the first domain for the next (ring_orders); channels
      // that leave through one NIC share it.
      double shared = 1.0;
      if (local.size() > 1 && channels > 1) {
        std::vector<std::pair<NodeId, NodeId>> crossings;
        for (const auto& o : orders) {
          for (std::size_t k = 0; k + 1 < o.size(); ++k) {
            if (g.domain[o[k]] != g.domain[o[k + 1]]) {
              crossings.emplace_back(node(o[k]), node(o[k + 1]));
              break;
            }
          }
        }
        shared = bottleneck_sharing(f, crossings);
      }
      const double bw = std::min(in.capacity, out.seen ? out.capacity * channels / shared : in.capacity);
      const double lat = std::max(in.latency, out.latency);
      switch (op) {
        case Op::kAllReduce: return 2.0 * (P - 1.0) * (lat + S / P / bw);
        case Op::kReduceScatter:
        case Op::kAllGather: return (P - 1.0) * (lat + S / P / bw);
        default: {
          CollectiveSpec spec;
          spec.op = op;
          spec.bytes = S;
          const double c = effective_chunks(spec);
          return (P - 2.0 + c) * (lat + S / c / bw);
        }
      }
    }
    case CollectiveAlgorithm::kTree: {
      // NCCL's tree (tree_parents) and, with two channels, its mirror, S/t each, pipelined
      // in c chunks: the first chunk's way up from the deepest rank and back down (each
      // hop its route's latency and a chunk over its bottleneck), then the other chunks at
      // the pace of the busiest link between domains (it carries every tree edge's S/t up
      // or down that crosses it: a NIC shared by both trees' heads carries both) or of the
      // busiest rank inside a domain, all its sends there (S/t up and S/t down per tree
      // for a chain rank) over its slowest route. That is a switched domain's uplink
      // exactly; where direct links join the domain (DGX-1's NVLink, ICI) a chain rank's
      // two sends take two links and the replay can be faster: the estimate then leans
      // toward the ring, as NCCL's own tuning prices trees below rings inside a server.
      const int trees = std::clamp(channels, 1, 2);
      CollectiveSpec spec;
      spec.algorithm = a;
      spec.bytes = S;
      const double c = effective_chunks(spec);
      const double share = S / trees, piece = share / c;
      std::map<std::uint32_t, double> load;  // bytes per link, between domains
      std::vector<double> sent(p, 0.0);        // bytes per rank to ranks of its domain
      std::vector<double> slowest(p, std::numeric_limits<double>::infinity());
      double fill = 0.0, latency = 0.0;
      for (int t = 0; t < trees; ++t) {
        const std::vector<std::size_t> parent = tree_parents(g, t == 1);
        const TreeShape shape = tree_shape(parent);
        const auto& children = shape.children;
        // Each rank's way from the root (s), parents first. A parent sends a chunk to its children at once, and receives theirs at once:
        // those whose routes leave (enter) it by the same link share it.
        std::vector<double> way(p, 0.0);
        for (std::size_t i : shape.top_down) {
          if (parent[i] == i) continue;
          const auto& down = f.first_route(node(parent[i]), node(i));
          double sharing = 1.0;
          if (!down.empty()) {
            sharing = 0.0;
            for (std::size_t sib : children[parent[i]]) {
              const auto& r = f.first_route(node(parent[i]), node(sib));
              if (!r.empty() && r.front() == down.front()) sharing += 1.0;
            }
          }
          way[i] = way[parent[i]] + f.route_latency(down) + sharing * piece / f.route_capacity(down);
          fill = std::max(fill, 2.0 * way[i]);
          for (const auto& [from, to] : {std::pair{i, parent[i]}, std::pair{parent[i], i}}) {
            const auto& r = f.first_route(node(from), node(to));
            latency = std::max(latency, f.route_latency(r));
            if (g.domain[from] == g.domain[to]) {
              sent[from] += share;
              slowest[from] = std::min(slowest[from], f.route_capacity(r));
            } else {
              for (LinkId l : r) load[l.value] += share;
            }
          }
        }
      }
      double busiest = 0.0;
      for (const auto& [l, bytes] : load) busiest = std::max(busiest, bytes / f.capacity(LinkId(l)));
      for (std::size_t i = 0; i < p; ++i) {
        if (sent[i] > 0.0) busiest = std::max(busiest, sent[i] / slowest[i]);
      }
      return fill + (c - 1.0) * latency + busiest * (c - 1.0) / c;
    }
    case CollectiveAlgorithm::kHalvingDoubling: {
      Edge e;
      for (std::size_t d = 1; d < p; d <<= 1) e.add(f, node(0), node(d));
      const double steps = std::log2(P);
      const double half = steps * e.latency + (P - 1.0) / P * S / e.capacity;
      return op == Op::kAllReduce ? 2.0 * half : half;
    }
    case CollectiveAlgorithm::kDirect: {
      Edge e;
      for (std::size_t i = 1; i < p; ++i) e.add(f, node(0), node(i));
      switch (op) {
        case Op::kSendRecv: return e.steps(1, S);
        case Op::kBroadcast:
        case Op::kReduce: return e.latency + (P - 1.0) * S / e.capacity;
        case Op::kAllReduce: return 2.0 * (e.latency + (P - 1.0) * S / P / e.capacity);
        default: return e.latency + (P - 1.0) * S / P / e.capacity;
      }
    }
    case CollectiveAlgorithm::kHierarchical: {
      const auto local = g.by_domain();
      const double G = static_cast<double>(local.front().size()), N = static_cast<double>(local.size());
      Edge in, out;
      for (std::size_t k = 0; k + 1 < local.front().size(); ++k) in.add(f, node(local[0][k]), node(local[0][k + 1]));
      out.add(f, node(local[0][0]), node(local[1][0]));
      // The G rings across domains run side by side, rank k of each domain in ring k;
      // rings that leave through one NIC share it.
      std::vector<std::pair<NodeId, NodeId>> crossings;
      for (std::size_t k = 0; k < local.front().size() && k < local[1].size(); ++k) {
        crossings.emplace_back(node(local[0][k]), node(local[1][k]));
      }
      const double shared = bottleneck_sharing(f, crossings);
      return 2.0 * in.steps(G - 1.0, S / G) + out.steps(2.0 * (N - 1.0), shared * S / G / N);
    }
    case CollectiveAlgorithm::kTorus: {
      // The D x ways parts (torus_used_dims, torus_ways) side by side, S / (D ways)
      // each: the slowest part's way through its dimensions (a part's phases use links no
      // other part uses then when the dimensions are alike; the two ways of a wrapped
      // ring, the two directions).
      const auto& dims = g.torus_dims;
      const auto used = torus_used_dims(dims);
      const std::size_t D = used.size();
      const double ways = torus_ways(g);
      double worst = 0.0;
      for (std::size_t j = 0; j < D; ++j) {
        double t = 0.0, shard = S / (static_cast<double>(D) * ways);
        for (std::size_t i = 0; i < D; ++i) {
          const std::size_t d = used[(j + i) % D];
          std::size_t stride = 1;
          for (std::size_t e = d + 1; e < dims.size(); ++e) stride *= static_cast<std::size_t>(dims[e]);
          Edge e;
          e.add(f, node(0), node(stride));
          shard /= dims[d];
          t += e.steps(dims[d] - 1.0, shard);
        }
        worst = std::max(worst, t);
      }
      return op == Op::kAllReduce ? 2.0 * worst : worst;
    }
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

double collective_estimate(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a,
                           double bytes, int channels) {
  if (group.ranks.size() < 2) return 0.0;
  if (std::string why = unsupported_reason(group, op, a); !why.empty()) throw InputError(why);
  return estimate(fabric, group, op, a, bytes, channels);
}

CollectiveChoice choose_algorithm(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes) {
  using A = CollectiveAlgorithm;
  // The algorithms a collective library offers: NCCL's rings and trees (and, beside
  // them, a hierarchical all-reduce and a torus's rings). Halving-doubling is not among
  // them (NCCL has none; MPI's is what it models), so it runs only when named.
  std::vector<A> candidates;
  switch (op) {
    case CollectiveOp::kAllReduce:
      candidates = {A::kRing, A::kTree, A::kHierarchical, A::kTorus};
      break;
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather: candidates = {A::kRing, A::kTorus}; break;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce: candidates = {A::kRing}; break;
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kSendRecv: candidates = {A::kDirect}; break;
  }
  CollectiveChoice best{A::kDirect, 1, std::numeric_limits<double>::infinity()};
  if (group.ranks.size() < 2) return CollectiveChoice{candidates.front(), 1, 0.0};
  for (A a : candidates) {
    if (!unsupported_reason(group, op, a).empty()) continue;
    const int channels = a == A::kRing ? default_channels(group) : a == A::kTree ? 2 : 1;
    const double t = estimate(fabric, group, op, a, bytes, channels);
    if (t < best.estimate) best = CollectiveChoice{a, channels, t};
  }
  return best;
}

CollectiveSpec chosen_spec(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes) {
  const CollectiveChoice pick = choose_algorithm(fabric, group, op, bytes);
  CollectiveSpec spec;
  spec.op = op;
  spec.bytes = bytes;
  spec.algorithm = pick.algorithm;
  spec.channels = pick.channels;
  return spec;
}

}  // namespace ddlsim
