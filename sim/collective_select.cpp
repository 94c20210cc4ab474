// The algorithm selector: closed-form estimates from the routes each algorithm uses.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/network_fabric.hpp"
#include "support/input_error.hpp"

namespace ddlsim {
namespace {

// The latencies of `pieces` pieces in a row over a route of this latency and NIC
// transport: each its route's, the first alone with the transport (Lowering::later_piece).
double piece_latencies(double latency, double transport, double pieces) { return pieces * latency - (pieces - 1.0) * transport; }

struct Edge {
  bool low_latency = false;                                // the low-latency protocol's latencies
  double latency = 0.0;                                    // s, the largest seen
  double transport = 0.0;                                  // s, the largest seen in those (route_transport)
  double capacity = std::numeric_limits<double>::infinity();  // B/s, the smallest seen
  bool seen = false;
  void add(NetworkFabric& f, NodeId a, NodeId b) {
    const auto& r = f.first_route(a, b);
    const NetworkFabric::RouteLatency rl = f.route_latencies(r, low_latency);
    latency = std::max(latency, rl.latency);
    transport = std::max(transport, rl.transport);
    capacity = std::min(capacity, f.route_capacity(r));
    seen = true;
  }
  // The latencies of `pieces` pieces in a row (piece_latencies).
  [[nodiscard]] double latencies(double pieces) const { return piece_latencies(latency, transport, pieces); }
  // Time for `steps` steps of `bytes` each over this edge, each in `pieces` pieces.
  [[nodiscard]] double steps(double n, double bytes, double pieces = 1.0) const {
    return seen ? n * (latencies(pieces) + bytes / capacity) : 0.0;
  }
};

// Bytes per link, for the links touched alone (a hash table: a whole cluster's tree or
// exchange adds in constant time per link, where an ordered map took a search, and a
// small group on a large cluster pays for its own links, not the cluster's).
class LinkLoad {
 public:
  double& operator[](std::uint32_t l) { return value_[l]; }
  [[nodiscard]] double at(std::uint32_t l) const {
    const auto it = value_.find(l);
    return it == value_.end() ? 0.0 : it->second;
  }
  void clear() { value_.clear(); }
  // The largest of f(link, bytes) over the links touched (0 with none).
  template <class F>
  [[nodiscard]] double max_of(F&& f) const {
    double most = 0.0;
    for (const auto& [l, bytes] : value_) most = std::max(most, f(l, bytes));
    return most;
  }

 private:
  std::unordered_map<std::uint32_t, double> value_;
};

// The time the busiest link needs for its bytes.
double busiest_link(NetworkFabric& f, const LinkLoad& load) {
  return load.max_of([&](std::uint32_t l, double bytes) { return bytes / f.capacity(LinkId(l)); });
}

// How many of the transfers between these pairs, running side by side, must share one
// bottleneck link (a link of its route's smallest capacity): each pair in turn takes,
// among its candidate routes, the one whose bottleneck links carry the fewest so far (as
// adaptive routing spreads them). Parallel rings that leave a server through fewer NICs
// than rings share them; rails of their own share nothing.
double bottleneck_sharing(NetworkFabric& f, const std::vector<std::pair<NodeId, NodeId>>& pairs) {
  std::map<std::uint32_t, int> uses;
  int most = 1;
  for (const auto& [a, b] : pairs) {
    std::span<const LinkId> pick;
    bool picked = false;
    int pick_load = std::numeric_limits<int>::max();
    for (const std::span<const LinkId> r : f.routes(a, b)) {
      const double low = f.route_capacity(r);
      int load = 0;
      for (LinkId l : r) {
        if (f.capacity(l) != low) continue;
        const auto it = uses.find(l.value);
        load = std::max(load, it == uses.end() ? 0 : it->second);
      }
      if (load < pick_load) {
        pick = r;
        picked = true;
        pick_load = load;
      }
    }
    if (!picked) continue;
    const double low = f.route_capacity(pick);
    for (LinkId l : pick) {
      if (f.capacity(l) == low) most = std::max(most, ++uses[l.value]);
    }
  }
  return most;
}

// `chunks`: the pieces a pipelined algorithm forwards (0: automatic, effective_chunks).
// `bandwidth_only` (ring): without the hops' latencies, the time its bytes take (its
// ring overhead's waits included: they grow with the bytes, as a slower link would).
// `low_latency`: the protocol's latencies (low_latency_protocol; absent: S's).
double estimate(NetworkFabric& f, const CollectiveGroup& g, CollectiveOp op, CollectiveAlgorithm a, double S,
                int channels, std::size_t root = 0, std::size_t peer = 1, int chunks = 0, bool bandwidth_only = false,
                std::optional<bool> low_latency = std::nullopt) {
  using Op = CollectiveOp;
  const std::size_t p = g.ranks.size();
  const double P = static_cast<double>(p);
  const auto node = [&](std::size_t i) { return g.ranks[i]; };
  const bool ll = low_latency.value_or(low_latency_protocol(S));
  // The pieces a step, chain, tree, exchange or transfer goes in: `chunks`, or automatic.
  CollectiveSpec pieced;
  pieced.op = op;
  pieced.algorithm = a;
  pieced.bytes = S;
  pieced.chunks = chunks;
  const double c = static_cast<double>(effective_chunks(pieced));
  switch (a) {
    case CollectiveAlgorithm::kRing: {
      // Ring edges inside a domain and between domains; channels multiply the latter.
      Edge in{ll}, out{ll};
      const auto local = g.by_domain();
      // The hops between domains are those of channel 0's ring (ring_orders: each enters
      // a domain on the rail it left the last one on).
      // In one domain its edges are all the ring's (ring_orders: a direct ring where the
      // links make one, as a torus's or a DGX-1's, else rank order), closing hop too.
      const std::vector<std::size_t> first_ring = ring_orders(g, 1).front();
      if (local.size() > 1) {
        for (const auto& l : local) {
          for (std::size_t k = 0; k + 1 < l.size(); ++k) in.add(f, node(l[k]), node(l[k + 1]));
        }
      }
      for (std::size_t k = 0; k < first_ring.size(); ++k) {
        const std::size_t here = first_ring[k], next = first_ring[(k + 1) % first_ring.size()];
        if (local.size() == 1) in.add(f, node(here), node(next));
        else if (g.domain[here] != g.domain[next]) out.add(f, node(here), node(next));
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
        std::vector<std::span<const LinkId>> routes;  // every channel's hops inside a domain
        std::map<std::uint32_t, int> uses;
        for (const auto& o : orders) {
          for (std::size_t k = 0; k < o.size(); ++k) {
            const std::size_t next = o[(k + 1) % o.size()];
            if (g.domain[o[k]] != g.domain[next]) continue;
            routes.push_back(f.first_route(node(o[k]), node(next)));
            for (LinkId l : routes.back()) ++uses[l.value];
          }
        }
        double slowest = std::numeric_limits<double>::infinity();
        for (const std::span<const LinkId> r : routes) {
          for (LinkId l : r) slowest = std::min(slowest, f.capacity(l) / uses[l.value]);
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
      const double out_bw = out.capacity * channels / shared;
      // A step waits for its slowest hop, inside a domain or between two: that hop's
      // latency (once per piece) and its bytes at its rate. A ring phase inside one domain
      // also waits its ranks' ring overhead (CollectiveGroup::ring_wait): the slowest
      // rank's, for a rank's bytes of a step, once per phase.
      // A ring across domains pays, at every step, the ring's mean transport latency in
      // place of its hops' own, a step in c pieces on its first (Lowering::ring;
      // broadcast's and reduce's chains pay each hop's own).
      const bool phases = op == Op::kAllReduce || op == Op::kReduceScatter || op == Op::kAllGather;
      const double mean = !bandwidth_only && local.size() > 1 && phases ? ring_mean_transport(f, g, first_ring, ll) : 0.0;
      const double lat_in = bandwidth_only ? 0.0 : in.latency;
      const double lat_out = bandwidth_only ? 0.0 : out.latency - (mean > 0.0 ? out.transport : 0.0);
      const auto step = [&](double latencies, double bytes) {
        double t = in.seen ? latencies * lat_in + mean + bytes / in.capacity : 0.0;
        if (out.seen) t = std::max(t, latencies * lat_out + mean + bytes / out_bw);
        return t;
      };
      const double wait = local.size() == 1 ? g.phase_wait(S / P) : 0.0;
      switch (op) {
        // (A step in c pieces pays its latency c times, the transport once; automatic
        // chunks keep it whole.)
        case Op::kAllReduce: return 2.0 * (P - 1.0) * step(c, S / P) + 2.0 * wait;
        case Op::kReduceScatter:
        case Op::kAllGather: return (P - 1.0) * step(c, S / P) + wait;
        default: {
          // Broadcast and reduce: a chain through each channel's ring from (to) the root
          // pipelines c pieces: the first crosses every hop, each at its own route's
          // latency and a piece at that hop's rate (inside a domain or between two; the
          // slowest channel's chain: one that leaves the root's domain and comes back
          // crosses twice), the others follow a step apart at the slowest hop's pace.
          // (With equal hops: (P - 2 + c)(a + S/(cB)).)
          const double piece = S / c;
          const double hop_in = (in.seen ? piece / in.capacity : 0.0), hop_out = (out.seen ? piece / out_bw : 0.0);
          double fill = 0.0;
          const std::vector<std::vector<std::size_t>> one{first_ring};
          for (const auto& o : orders.empty() ? one : orders) {
            const std::size_t at = static_cast<std::size_t>(std::find(o.begin(), o.end(), root) - o.begin());
            double chain = 0.0;
            for (std::size_t k = 0; k + 1 < p; ++k) {
              const std::size_t a = o[(at + k) % p], b = o[(at + k + 1) % p];
              const auto& route = op == Op::kReduce ? f.first_route(node(b), node(a)) : f.first_route(node(a), node(b));
              chain += (bandwidth_only ? 0.0 : f.route_latency(route, ll)) + (g.domain[a] == g.domain[b] ? hop_in : hop_out);
            }
            fill = std::max(fill, chain);
          }
          // (The later pieces follow the first through each connection without its
          // transport: Lowering::later_piece.)
          const double later_in = bandwidth_only ? 0.0 : in.latency - in.transport;
          const double later_out = bandwidth_only ? 0.0 : out.latency - out.transport;
          const double slowest = std::max(in.seen ? later_in + hop_in : 0.0, out.seen ? later_out + hop_out : 0.0);
          return fill + (c - 1.0) * slowest;
        }
      }
    }
    case CollectiveAlgorithm::kTree: {
      // NCCL's trees (tree_parents), one per channel, S/t each, pipelined in c chunks:
      // the first chunk's way up from the deepest rank and back down (each hop its
      // route's latency and a chunk over its bottleneck, shared with the parent's other
      // children its route leaves by the same link and, between domains, with the other
      // trees' edges that cross the same link: every tree's first chunk reaches its
      // heads at about the same time), then the other chunks at the pace of the busiest
      // link next to a server (it carries the S/t of every tree edge, up or down, whose
      // route crosses it: a NIC shared by several trees' heads carries all of theirs; an
      // NVLink of a DGX-1's ring the trees that walk it that way).
      const int trees = std::max(channels, 1);
      const double share = S / trees, piece = share / c;
      const auto parents = tree_parents(g, trees);
      // Per link (those between switches left out: adaptive routing spreads what crosses
      // them), the bytes of every tree edge that crosses it, up or down.
      LinkLoad load;
      // Per link, the trees' edges between domains whose way down crosses it: every tree
      // sends its first chunk down such an edge at about the same time.
      LinkLoad across;
      for (const auto& parent : parents) {
        for (std::size_t i = 0; i < p; ++i) {
          if (parent[i] == i || g.domain[i] == g.domain[parent[i]]) continue;
          for (LinkId l : f.first_route(node(parent[i]), node(i))) {
            if (!f.between_switches(l)) across[l.value] += 1.0;
          }
        }
      }
      double latency = 0.0, fill = 0.0;
      for (const auto& parent : parents) {
        const TreeShape shape = tree_shape(parent);
        const auto& children = shape.children;
        // Each rank's way from the root, parents first: a parent sends a chunk to its
        // children at once (those whose routes leave it by the same link share it).
        std::vector<double> way(p, 0.0);
        for (std::size_t i : shape.top_down) {
          if (parent[i] == i) continue;
          const std::span<const LinkId> down = f.first_route(node(parent[i]), node(i));
          double sharing = 1.0;
          if (!down.empty()) {
            sharing = 0.0;
            for (std::size_t sib : children[parent[i]]) {
              const std::span<const LinkId> r = f.first_route(node(parent[i]), node(sib));
              if (!r.empty() && r.front() == down.front()) sharing += 1.0;
            }
          }
          double slowest = down.empty() ? 0.0 : sharing * piece / f.route_capacity(down);
          if (g.domain[i] != g.domain[parent[i]]) {
            for (LinkId l : down) {
              if (!f.between_switches(l)) slowest = std::max(slowest, across.at(l.value) * piece / f.capacity(l));
            }
          }
          way[i] = way[parent[i]] + f.route_latency(down, ll) + slowest;
          fill = std::max(fill, 2.0 * way[i]);
          for (const std::span<const LinkId> r : {f.first_route(node(i), node(parent[i])), down}) {
            // (The later chunks follow the first without its transport: Lowering::later_piece.)
            const NetworkFabric::RouteLatency rl = f.route_latencies(r, ll);
            latency = std::max(latency, rl.latency - rl.transport);
            for (LinkId l : r) {
              if (!f.between_switches(l)) load[l.value] += share;
            }
          }
        }
      }
      return fill + (c - 1.0) * latency + busiest_link(f, load) * (c - 1.0) / c;
    }
    case CollectiveAlgorithm::kHalvingDoubling: {
      // Step by step (recursive halving and doubling visit the same distances): at
      // distance d every rank exchanges S d / P with its partner, all at once; the step
      // takes its slowest pair's latency and its busiest link's bytes (every pair's on
      // its first route; links between switches left out, adaptive routing spreading
      // them: 8 GPUs behind one NIC load it 8 times, a DGX-1 pair on a single NVLink
      // where rank 0's has two sets the pace).
      // (Each exchange in c pieces: c latencies, the first alone with its transport.)
      double half = 0.0;
      LinkLoad load;
      for (std::size_t d = 1; d < p; d <<= 1) {
        const double bytes = S * static_cast<double>(d) / P;
        double latency = 0.0;
        load.clear();
        for (std::size_t r = 0; r < p; ++r) {
          const std::span<const LinkId> route = f.first_route(node(r), node(r ^ d));
          const NetworkFabric::RouteLatency rl = f.route_latencies(route, ll);
          latency = std::max(latency, piece_latencies(rl.latency, rl.transport, c));
          for (LinkId l : route) {
            if (!f.between_switches(l)) load[l.value] += bytes;
          }
        }
        half += latency + busiest_link(f, load);
      }
      return op == Op::kAllReduce ? 2.0 * half : half;
    }
    case CollectiveAlgorithm::kDirect: {
      // (Each send in c pieces in a row: Edge::latencies.)
      Edge e{ll};
      if (op == Op::kSendRecv) {  // root to peer
        e.add(f, node(root), node(peer));
        return e.steps(1, S, c);
      }
      // Bytes per link of sends at once on their first routes; the busiest link's time.
      LinkLoad load;
      const auto carry = [&](NodeId from, NodeId to, double bytes) {
        for (LinkId l : f.first_route(from, to)) load[l.value] += bytes;
      };
      if (op == Op::kBroadcast || op == Op::kReduce) {
        // The root's S to (or from) each other rank at once.
        for (std::size_t i = 0; i < p; ++i) {
          if (i == root) continue;
          const NodeId from = op == Op::kBroadcast ? node(root) : node(i), to = op == Op::kBroadcast ? node(i) : node(root);
          e.add(f, from, to);
          carry(from, to, S);
        }
        return e.latencies(c) + busiest_link(f, load);
      }
      // Every rank alike: rank 0's latency, and the busiest link under what the ranks of
      // rank 0's scale-up domain send and what the other ranks send them, S / P each.
      // They share the domain's NICs: 8 GPUs of a DGX sending to other servers fill its
      // 8 NICs alike (each piece leaves by the NIC of its destination's rail), and one
      // GPU per server, on different rails, receives every piece on its own NIC.
      for (std::size_t i = 1; i < p; ++i) e.add(f, node(0), node(i));
      for (std::size_t i = 0; i < p; ++i) {
        if (g.domain[i] != g.domain[0]) continue;
        for (std::size_t j = 0; j < p; ++j) {
          if (j == i) continue;
          carry(node(i), node(j), S / P);
          if (g.domain[j] != g.domain[0]) carry(node(j), node(i), S / P);  // else counted as j's send
        }
      }
      const double each = e.latencies(c) + busiest_link(f, load);
      return op == Op::kAllReduce ? 2.0 * each : each;
    }
    case CollectiveAlgorithm::kHierarchical: {
      const auto local = g.by_domain();
      const double G = static_cast<double>(local.front().size()), N = static_cast<double>(local.size());
      if (op == Op::kAllToAll) {
        // Each phase: the first domain's ranks' sends and what they receive, at once on
        // first routes; its latency and busiest link. The second forwards the first's
        // pieces as they arrive: the longer phase and a piece of the shorter.
        LinkLoad first, second;
        const auto carry = [&](LinkLoad& load, NodeId from, NodeId to, double bytes) {
          for (LinkId l : f.first_route(from, to)) load[l.value] += bytes;
        };
        Edge out{ll}, in{ll};
        for (std::size_t k = 0; k < local.front().size(); ++k) {
          const NodeId a = node(local[0][k]);
          for (std::size_t d = 1; d < local.size(); ++d) {
            const NodeId b = node(local[d][k]);
            out.add(f, a, b);
            carry(first, a, b, S / N);
            carry(first, b, a, S / N);
          }
          for (std::size_t j = 0; j < local.front().size(); ++j) {
            if (j == k) continue;
            in.add(f, a, node(local[0][j]));
            carry(second, a, node(local[0][j]), S / G);
          }
        }
        // (Each piece pays its latency, the first alone its transport: Lowering::later_piece.)
        const double t1 = out.latencies(c) + busiest_link(f, first), t2 = in.latencies(c) + busiest_link(f, second);
        return std::max(t1, t2) + std::min(t1, t2) / c;
      }
      Edge in{ll}, out{ll};
      for (std::size_t k = 0; k + 1 < local.front().size(); ++k) in.add(f, node(local[0][k]), node(local[0][k + 1]));
      // The ring across domains pays its slowest hop's latency at every step (the way
      // between two domains may cross more switches than between the first two).
      for (std::size_t d = 0; d < local.size(); ++d) out.add(f, node(local[d][0]), node(local[(d + 1) % local.size()][0]));
      // The G rings across domains run side by side, rank k of each domain in ring k;
      // rings that leave through one NIC share it.
      std::vector<std::pair<NodeId, NodeId>> crossings;
      for (std::size_t k = 0; k < local.front().size() && k < local[1].size(); ++k) {
        crossings.emplace_back(node(local[0][k]), node(local[1][k]));
      }
      const double shared = bottleneck_sharing(f, crossings);
      // The local phases wait their ranks' ring overhead (CollectiveGroup::ring_wait);
      // with one rank per domain there are none.
      const double wait = G > 1.0 ? g.phase_wait(S / G) : 0.0;
      return 2.0 * (in.steps(G - 1.0, S / G, c) + wait) + out.steps(2.0 * (N - 1.0), shared * S / G / N, c);
    }
    case CollectiveAlgorithm::kTorus: {
      // The D x ways parts (torus_used_dims, torus_ways) side by side, S / (D ways)
      // each, phase by phase: each phase takes its slowest part's rings (in a phase the
      // parts use different dimensions' links, the two ways of a wrapped ring a link's
      // two directions; the lowering waits for every part between phases).
      const auto& dims = g.torus_dims;
      const auto used = torus_used_dims(dims);
      const std::size_t D = used.size();
      const double ways = torus_ways(g);
      std::vector<double> phase(D, 0.0);
      for (std::size_t j = 0; j < D; ++j) {
        double shard = S / (static_cast<double>(D) * ways);
        for (std::size_t i = 0; i < D; ++i) {
          const std::size_t d = used[(j + i) % D];
          std::size_t stride = 1;
          for (std::size_t e = d + 1; e < dims.size(); ++e) stride *= static_cast<std::size_t>(dims[e]);
          // A step of a dimension's ring waits for its slowest hop: one link, or without
          // wraparound the closing hop back along the whole line (k - 1 links).
          Edge e{ll};
          e.add(f, node(0), node(stride));
          e.add(f, node(stride * static_cast<std::size_t>(dims[d] - 1)), node(0));
          shard /= dims[d];
          phase[i] = std::max(phase[i], e.steps(dims[d] - 1.0, shard, c));
        }
      }
      double t = 0.0;
      for (double x : phase) t += x;
      return op == Op::kAllReduce ? 2.0 * t : t;
    }
  }
  return std::numeric_limits<double>::infinity();
}

// An estimate under each protocol, and the cheaper: the low-latency protocol's
// latencies plus its rate's time (low_latency_throughput_time) against the bandwidth
// protocol's. Without the group's LL rate, by size (low_latency_protocol).
struct Priced {
  double time;
  bool low_latency;
};
template <class Estimate>  // double(bool low_latency)
Priced cheaper_protocol(const CollectiveGroup& g, CollectiveOp op, CollectiveAlgorithm a, double S, Estimate&& cost,
                        std::optional<bool> named = std::nullopt) {
  if (named) return {cost(*named), *named};
  if (!std::isfinite(g.ll_bus_bandwidth)) {
    const bool ll = low_latency_protocol(S);
    return {cost(ll), ll};
  }
  const double simple = cost(false);
  if (low_latency_throughput_time(g, op, a, S) >= simple) return {simple, false};  // its rate alone loses
  const double low = cost(true);
  return low_latency_cheaper(g, S, low, simple) ? Priced{low, true} : Priced{simple, false};
}

// The estimate under one protocol: the low-latency one's latencies and its rate's time.
double protocol_estimate(NetworkFabric& f, const CollectiveGroup& g, CollectiveOp op, CollectiveAlgorithm a, double S,
                         int channels, std::size_t root, std::size_t peer, int chunks, bool ll) {
  return estimate(f, g, op, a, S, channels, root, peer, chunks, false, ll) + (ll ? low_latency_throughput_time(g, op, a, S) : 0.0);
}

Priced priced(NetworkFabric& f, const CollectiveGroup& g, CollectiveOp op, CollectiveAlgorithm a, double S, int channels,
              std::size_t root = 0, std::size_t peer = 1, int chunks = 0, std::optional<bool> named = std::nullopt) {
  return cheaper_protocol(
      g, op, a, S, [&](bool ll) { return protocol_estimate(f, g, op, a, S, channels, root, peer, chunks, ll); }, named);
}

}  // namespace

int low_latency_channels(const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a, double bytes) {
  const bool point_to_point = op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv || a == CollectiveAlgorithm::kDirect;
  if (group.ll_channels < 2 || point_to_point) return std::max(1, group.ll_channels);
  const double ranks = a == CollectiveAlgorithm::kRing ? static_cast<double>(group.ranks.size()) : 1.0;
  const double filled = std::floor(bytes / (kLowLatencyChannelBytes * ranks));
  if (!(filled >= 1.0)) return 1;  // also NaN
  return static_cast<int>(std::min(filled, static_cast<double>(group.ll_channels)));
}

double low_latency_throughput_time(const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a, double bytes) {
  if (!std::isfinite(group.ll_bus_bandwidth) || group.ranks.size() < 2) return 0.0;
  const double share = static_cast<double>(low_latency_channels(group, op, a, bytes)) / std::max(1, group.ll_channels);
  return busbw_factor(op, group.ranks.size()) * bytes / (group.ll_bus_bandwidth * share);
}

bool choose_protocol(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec) {
  if (spec.low_latency) return *spec.low_latency;
  if (group.ranks.size() < 2 || !std::isfinite(group.ll_bus_bandwidth)) return low_latency_protocol(spec.bytes);
  return priced(fabric, group, spec.op, spec.algorithm, spec.bytes, effective_channels(group, spec), spec.root, spec.peer,
                spec.chunks)
      .low_latency;
}

double collective_estimate(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a,
                           double bytes, int channels, std::size_t root, std::size_t peer, int chunks,
                           std::optional<bool> low_latency) {
  if (group.ranks.size() < 2) return 0.0;
  if (std::string why = unsupported_reason(group, op, a); !why.empty()) throw InputError(why);
  return priced(fabric, group, op, a, bytes, channels, root, peer, chunks, low_latency).time;
}

namespace {
// The channels `a` runs with: `given` for rings and trees when > 0, else the library's
// default; 1 for the algorithms without channels.
int algorithm_channels(const CollectiveGroup& group, CollectiveAlgorithm a, int given) {
  using A = CollectiveAlgorithm;
  if (a != A::kRing && a != A::kTree) return 1;
  if (given > 0) return given;
  return a == A::kRing ? default_channels(group) : default_tree_channels(group);
}
}  // namespace

CollectiveChoice choose_algorithm(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes,
                                  int channels_given, std::optional<bool> low_latency) {
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
  if (group.ranks.size() < 2) return CollectiveChoice{candidates.front(), 1, 0.0, low_latency.value_or(low_latency_protocol(bytes))};
  double ring = std::numeric_limits<double>::infinity();  // the ring's estimate, candidates' first
  for (A a : candidates) {
    if (!unsupported_reason(group, op, a).empty()) continue;
    const int channels = algorithm_channels(group, a, channels_given);
    double ring_bytes = -1.0;  // the tree's bound below: the ring's bandwidth time, once
    const Priced t = cheaper_protocol(group, op, a, bytes, [&](bool ll) {
      double x = protocol_estimate(fabric, group, op, a, bytes, channels, 0, 1, 0, ll);
      if (a == A::kTree && x < best.estimate && ring < std::numeric_limits<double>::infinity()) {
        // NCCL's tuner gives a tree the bus bandwidth of the ring's graph at 92% and
        // converts it to algorithm bandwidth at 0.5 (the ring's at p / 2(p - 1)): it never
        // prefers a tree for bandwidth, only for its latency (src/graph/tuning.cc), even on
        // two servers, where a tree moves half a ring's bytes through each NIC and can be
        // faster. The choice follows it; the chosen tree replays as fast as it can.
        const double P = static_cast<double>(group.ranks.size());
        const int ring_channels = channels_given > 0 ? channels_given : default_channels(group);
        if (ring_bytes < 0.0) ring_bytes = estimate(fabric, group, op, A::kRing, bytes, ring_channels, 0, 1, 0, true);
        const double latency = estimate(fabric, group, op, a, 0.0, channels, 0, 1, 0, false, ll);
        const double rate = ll ? low_latency_throughput_time(group, op, a, bytes) : 0.0;
        x = std::max(x, latency + rate + ring_bytes * P / (0.92 * (P - 1.0)));
      }
      return x;
    }, low_latency);
    if (a == A::kRing) ring = t.time;
    if (t.time < best.estimate) best = CollectiveChoice{a, channels, t.time, t.low_latency};
  }
  return best;
}

CollectiveSpec chosen_spec(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes) {
  const CollectivePolicy& policy = fabric.collective_policy();
  CollectiveSpec spec;
  spec.op = op;
  spec.bytes = bytes;
  if (const auto a = policy.of(op); a && unsupported_reason(group, op, *a).empty()) {
    spec.algorithm = *a;
    spec.channels = algorithm_channels(group, *a, policy.channels);
    spec.low_latency = choose_protocol(fabric, group, spec);
    return spec;
  }
  const CollectiveChoice pick = choose_algorithm(fabric, group, op, bytes, policy.channels);
  spec.algorithm = pick.algorithm;
  spec.channels = pick.channels;
  spec.low_latency = pick.low_latency;
  return spec;
}

}  // namespace ddlsim
