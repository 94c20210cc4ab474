#include "sim/collectives.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include "sim/core/errors.hpp"
#include "sim/network_fabric.hpp"
#include "support/input_error.hpp"

namespace ddlsim {
namespace {

constexpr std::string_view kOpNames[] = {"all-reduce", "reduce-scatter", "all-gather", "broadcast",
                                         "reduce",     "all-to-all",     "send-recv"};
constexpr std::string_view kAlgorithmNames[] = {"ring", "tree", "halving-doubling", "direct", "hierarchical", "torus"};

// The bandwidth shares of transfers that run at once, for the analytical model (which
// prices each transfer alone on its first route): a link next to a server (one end an
// accelerator, host or NIC: a scale-up port, a PCIe link, a NIC's cable) that k of them
// cross gives each 1/k of its capacity; links between switches are not counted
// (adaptive routing spreads flows over a fabric's equal paths). Which route a transfer
// is counted on:
//  - spread (rings, trees, halving-doubling, hierarchical, a direct broadcast or
//    reduce: a few transfers per rank): each in turn, those with the fewest candidate
//    routes first, takes the candidate that leaves it the most bandwidth beside those
//    placed before it (on a tie, the one through the fewest other accelerators, then
//    the earliest), as a library lays a collective's channels on NICs of their own and
//    the flow model's adaptive routing spreads them; a candidate may pass through
//    another accelerator only if it is one of the collective's ranks (a library
//    forwards through its own ranks); inside one scale-up domain, where neither end's
//    domain holds another rank, or where no candidate qualifies, the transfer takes its
//    first route. A transfer listed more than once (a ring two channels follow) takes
//    the largest share of its copies;
//  - not spread (a direct algorithm's p(p-1) sends, where looking at every candidate
//    would cost too much): its first route.
// Every link of that route next to a server counts, those into and out of another
// accelerator it passes through too: the shortest route to a GPU of another server on
// another rail goes through the GPU of its own rail there (as NCCL's PXN sends do), and
// on a DGX-1 to a GPU with no NVLink of its own through a neighbour's NVLinks; the flow
// model loads those ports too. (Until the twenty-first session they were left out, and
// a direct all-to-all or all-reduce came out up to 4-5 times faster than on the flow
// model: DGX-1, MI300X platforms.)
// A transfer's share is its first route's bottleneck capacity over the smallest
// capacity per transfer along the route it is counted on (at least 1; 1 when its links
// are its own), rounded to a float, as a task graph stores it, so that a replay and
// TimingSink price it alike. A spread set's shares depend on the set and the
// collective's ranks alone, and the fabric keeps them (NetworkFabric::cached_shares): a
// collective priced again costs a look-up.
class Shares {
 public:
  explicit Shares(NetworkFabric* fabric) : f_(fabric) {}
  Shares(const Shares&) = delete;
  Shares& operator=(const Shares&) = delete;
  ~Shares() { clear(); }
  /// Whether shares are computed at all (a fabric was given).
  [[nodiscard]] bool enabled() const { return f_ != nullptr; }

  /// Replaces the set of transfers running at once (from, to), one entry per transfer.
  /// Every transfer priced until the next call must be one of them.
  /// `members`: the collective's ranks, sorted, then each sibling's (CollectiveGroup::
  /// siblings). `others`: the transfers the siblings run at the same time, hops.size()
  /// per sibling in turn, which load the links too but are not priced here.
  void set(const std::vector<std::pair<NodeId, NodeId>>& hops, bool spread, const std::vector<std::vector<NodeId>>& members,
           const std::vector<std::pair<NodeId, NodeId>>& others = {}) {
    if (f_ == nullptr) return;
    clear();
    active_ = true;
    spread_ = spread;
    if (!spread) {
      load_ = &f_->link_counts();
      f_->prefetch_first_routes(hops);
      f_->prefetch_first_routes(others);
      for (const auto& [from, to] : hops) count(f_->first_route(from, to));
      for (const auto& [from, to] : others) count(f_->first_route(from, to));
      return;
    }
    // A spread set's shares depend on the set, its siblings' transfers and the ranks
    // alone: the fabric keeps them, keyed by all three (a marker before each part).
    std::vector<std::uint64_t> keys(hops.size());
    for (std::size_t h = 0; h < hops.size(); ++h) keys[h] = key(hops[h].first, hops[h].second);
    if (!others.empty()) {
      keys.push_back(~std::uint64_t{1});
      for (const auto& [from, to] : others) keys.push_back(key(from, to));
    }
    for (const std::vector<NodeId>& set : members) {
      keys.push_back(~std::uint64_t{0});
      for (NodeId m : set) keys.push_back(m.value);
    }
    const std::vector<float>* shares = f_->cached_shares(keys);
    std::vector<float> found;
    if (shares == nullptr) {
      if (others.empty()) {
        found = spread_shares(hops, members, std::max<std::size_t>(hops.size(), 1));
      } else {
        std::vector<std::pair<NodeId, NodeId>> all = hops;
        all.insert(all.end(), others.begin(), others.end());
        found = spread_shares(all, members, hops.size());
        found.resize(hops.size());
      }
      shares = &found;
    }
    // A transfer listed more than once (a ring used by two channels) takes the largest
    // share of its copies.
    for (std::size_t h = 0; h < hops.size(); ++h) {
      if ((*shares)[h] <= 1.0F) continue;
      float& v = share_[keys[h]];
      v = std::max(v, (*shares)[h]);
    }
    if (!found.empty()) f_->cache_shares(std::move(keys), std::move(found));
  }
  void clear() {
    release_counts();
    share_.clear();
    active_ = false;
  }
  /// The share of a transfer of the current set.
  /// `route`: the transfer's first route where the caller has it at hand.
  [[nodiscard]] double of(NodeId from, NodeId to, const std::span<const LinkId>* route = nullptr) const {
    if (!active_) return 1.0;
    if (spread_) {
      if (share_.empty()) return 1.0;
      const auto it = share_.find(key(from, to));
      return it == share_.end() ? 1.0 : static_cast<double>(it->second);
    }
    const std::span<const LinkId> first = route != nullptr ? *route : f_->first_route(from, to);
    if (first.empty()) return 1.0;
    return std::max(1.0, static_cast<double>(static_cast<float>(f_->route_capacity(first) / rate(first, 0))));
  }

 private:
  static std::uint64_t key(NodeId a, NodeId b) { return (std::uint64_t{a.value} << 32) | b.value; }
  // Zeroes the fabric's link counters this set touched and gives them back.
  void release_counts() {
    if (load_ != nullptr) {
      for (std::uint32_t l : touched_) (*load_)[l] = 0;
    }
    touched_.clear();
    load_ = nullptr;
  }

  // The spread shares of a set (see the class comment), one per transfer. `members`:
  // the ranks (sorted) of the collective whose transfers these are, and of each
  // sibling's; transfer h is the collective's (h / block)-th's.
  std::vector<float> spread_shares(const std::vector<std::pair<NodeId, NodeId>>& hops,
                                   const std::vector<std::vector<NodeId>>& members, std::size_t block) {
    load_ = &f_->link_counts();
    // Ranks per scale-up domain, per collective: a route may pass through another rank
    // of the collective (a library forwards through its own ranks), so candidates
    // matter only where an end's domain holds another rank.
    const auto& domain = f_->domain_of_node();
    std::vector<std::vector<int>> ranks_in(members.size());  // per collective, per scale-up domain
    for (std::size_t g = 0; g < members.size(); ++g) {
      for (NodeId m : members[g]) {
        const std::uint32_t d = domain[m.value];
        if (d >= ranks_in[g].size()) ranks_in[g].resize(std::size_t{d} + 1, 0);
        ++ranks_in[g][d];
      }
    }
    const auto crowded = [&](std::size_t g, NodeId n) {
      return domain[n.value] < ranks_in[g].size() && ranks_in[g][domain[n.value]] > 1;
    };
    const auto member = [&](std::size_t g, NodeId n) { return std::binary_search(members[g].begin(), members[g].end(), n); };
    // How many accelerators a route passes through on its way, or -1 if one of them is
    // not a rank of collective g.
    const auto member_transits = [&](std::size_t g, std::span<const LinkId> route) {
      int n = 0;
      for (std::size_t k = 0; k + 1 < route.size(); ++k) {
        if (!f_->into_accelerator(route[k])) continue;
        if (!member(g, f_->cluster().link(route[k]).to)) return -1;
        ++n;
      }
      return n;
    };
    std::vector<RouteSet> candidates(hops.size());  // none: empty
    std::vector<std::span<const LinkId>> firsts(hops.size());
    std::vector<std::size_t> order(hops.size());
    for (std::size_t h = 0; h < hops.size(); ++h) {
      const auto [from, to] = hops[h];
      firsts[h] = f_->first_route(from, to);
      // Inside one scale-up domain a ring's or tree's hop has its one route (NVSwitch,
      // or one NVLink); between domains, candidates where an end's domain is crowded.
      const std::size_t g = h / block;
      if (domain[from.value] != domain[to.value] && (crowded(g, from) || crowded(g, to))) candidates[h] = f_->routes(from, to);
      order[h] = h;
    }
    const auto size = [&](std::size_t h) { return candidates[h].empty() ? std::size_t{1} : candidates[h].size(); };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return size(a) < size(b); });
    std::vector<std::span<const LinkId>> taken(hops.size());
    for (std::size_t h : order) {
      std::span<const LinkId> best;
      bool chosen = false;
      double best_rate = 0;
      int best_transits = 0;
      if (!candidates[h].empty()) {
        for (const std::span<const LinkId> c : candidates[h]) {
          const int t = member_transits(h / block, c);
          if (t < 0) continue;
          const double r = rate(c, 1);
          if (!chosen || r > best_rate || (r == best_rate && t < best_transits)) {
            chosen = true;
            best = c;
            best_rate = r;
            best_transits = t;
          }
        }
      }
      taken[h] = chosen ? best : firsts[h];
      count(taken[h]);
    }
    std::vector<float> out(hops.size(), 1.0F);
    for (std::size_t h = 0; h < hops.size(); ++h) {
      if (firsts[h].empty()) continue;
      out[h] = std::max(1.0F, static_cast<float>(f_->route_capacity(firsts[h]) / rate(taken[h], 0)));
    }
    release_counts();
    return out;
  }
  void count(std::span<const LinkId> route) {
    for (std::size_t k = 0; k < route.size(); ++k) {
      if (f_->between_switches(route[k])) continue;
      if ((*load_)[route[k].value] == 0) touched_.push_back(route[k].value);
      ++(*load_)[route[k].value];
    }
  }
  // The smallest capacity per transfer along a route, with `extra` more on its counted
  // links (1: were a transfer not yet counted to take it).
  [[nodiscard]] double rate(std::span<const LinkId> route, int extra) const {
    double r = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < route.size(); ++k) {
      const int n = f_->between_switches(route[k]) ? 1 : std::max(1, (*load_)[route[k].value] + extra);
      r = std::min(r, f_->capacity(route[k]) / n);
    }
    return r;
  }
  NetworkFabric* f_;
  bool active_ = false, spread_ = false;
  std::vector<int>* load_ = nullptr;    // the fabric's link counters while counting
  std::vector<std::uint32_t> touched_;  // links counted (repeats allowed), to reset
  std::unordered_map<std::uint64_t, float> share_;  // spread: the current set's shares above 1
};

// What a collective of this spec waits for the low-latency protocol's rate
// (low_latency_throughput_time) when it runs that protocol (low_latency_protocol), else 0.
double low_latency_wait(const CollectiveGroup& group, const CollectiveSpec& spec) {
  return low_latency_protocol(spec) ? low_latency_throughput_time(group, spec.op, spec.algorithm, spec.bytes) : 0.0;
}

// Adds the transfers to a task graph.
class GraphSink {
 public:
  GraphSink(TaskGraph& g, ResourceId net, const CollectiveSpec& spec, std::string_view label)
      : g_(g), net_(net), name_(g.intern(named(std::string(op_name(spec.op)) + "/" + std::string(algorithm_name(spec.algorithm)), label))),
        protocol_(low_latency_protocol(spec) ? Transfer::kLowLatencyProtocol : 0u) {}
  TaskId send(NodeId from, NodeId to, double bytes, std::uint32_t latencies = 1, const Shares* shares = nullptr, double wait = 0.0) {
    if ((latencies & ~Transfer::kTransportInWait) >= Transfer::kTransportInWait) {
      throw GraphError("collective: too many latencies for one transfer");
    }
    const TaskId t = g_.add(Transfer{net_, EndpointId(from.value), EndpointId(to.value), Bytes(bytes), latencies | protocol_}, name_).id();
    if (wait > 0.0) g_.set_wait(t, wait);
    if (shares != nullptr) {
      if (const double share = shares->of(from, to); share > 1.0) g_.set_share(t, share);
    }
    return t;
  }
  TaskId marker() { return g_.add(Marker{}, name_).id(); }
  void edge(TaskId a, TaskId b) { g_.add_edge(a, b); }

 private:
  static std::string named(const std::string& what, std::string_view label) {
    return label.empty() ? what : std::string(label) + " (" + what + ")";
  }
  TaskGraph& g_;
  ResourceId net_;
  TaskGraph::Name name_;
  std::uint32_t protocol_;  // Transfer::kLowLatencyProtocol or 0
};

// Times the transfers as the analytical network model would, without a graph: a
// transfer finishes at the latest finish of its predecessors plus its route's latency
// and bytes over bottleneck capacity. Lowering adds every edge into a task before using
// that task as a predecessor, so each finish is final when it is first read.
class TimingSink {
 public:
  /// With `traffic`, also counts the bytes on every link and those `first` sends.
  /// `spec`: the collective (its protocol, low_latency_protocol: resolved by the caller).
  TimingSink(NetworkFabric& f, const CollectiveSpec& spec, CollectiveTraffic* traffic = nullptr, NodeId first = NodeId())
      : f_(f), cache_(kCache), traffic_(traffic), first_(first), low_latency_(low_latency_protocol(spec)) {
    if (traffic_ != nullptr) link_bytes_.assign(f.cluster().link_count(), 0.0);
  }
  TaskId send(NodeId from, NodeId to, double bytes, std::uint32_t latencies = 1, const Shares* shares = nullptr, double wait = 0.0) {
    const Price& p = price(from, to);
    const double share = shares != nullptr ? shares->of(from, to, &p.route) : 1.0;
    ready_.push_back(0.0);
    // As the network models add them (NetworkFabric::transfer_latency).
    const double own = p.latency - (Transfer::transport_in_wait(latencies) ? p.transport : 0.0);
    const double latency = own * Transfer::count_of(latencies) + wait;
    duration_.push_back(p.empty ? latency : latency + bytes * share / p.capacity);
    count(from, p, bytes);
    return TaskId(static_cast<std::uint32_t>(ready_.size() - 1));
  }
  TaskId marker() {
    ready_.push_back(0.0);
    duration_.push_back(0.0);
    return TaskId(static_cast<std::uint32_t>(ready_.size() - 1));
  }
  void edge(TaskId a, TaskId b) { ready_[b.value] = std::max(ready_[b.value], finish(a)); }
  [[nodiscard]] double finish(TaskId t) const { return ready_[t.value] + duration_[t.value]; }

  // Lowering::ring's timing without a handle per transfer: the same maxima and sums in
  // the same order, on arrays of finish times (a ring is most of a large collective).
  // (transport: the ring's mean transport latency, which each step's first piece pays in
  // place of its route's, the others none, Transfer::kTransportInWait; negative: each
  // piece its route's.)
  void ring(const std::vector<NodeId>& order, int steps, double piece, int chunks, std::vector<TaskId>& ready_of,
            const Shares& shares, const std::vector<double>& waits, double transport) {  // waits: per rank, or empty (none)
    const std::size_t p = order.size(), c = static_cast<std::size_t>(chunks);
    std::vector<double> dur(p), last(p), prev(p * c), cur(p * c);
    for (std::size_t r = 0; r < p; ++r) {
      const Price& pr = price(order[r], order[(r + 1) % p]);
      const double own = transport < 0.0 ? pr.latency : pr.latency - pr.transport + transport;
      const double latency = own + (waits.empty() ? 0.0 : waits[r]);  // as the network models add them
      dur[r] = pr.empty ? latency : latency + piece * shares.of(order[r], order[(r + 1) % p], &pr.route) / pr.capacity;
      last[r] = finish(ready_of[r]);
      count(order[r], pr, piece * static_cast<double>(steps) * static_cast<double>(chunks));
    }
    if (c == 1) {
      // One chunk (every ring all-reduce, reduce-scatter and all-gather): a rank's last
      // send is its step's only one, so each step reads the step before and nothing
      // else: the same maxima and sums as the general loop, in one the compiler vectorizes.
      for (std::size_t r = 0; r < p; ++r) last[r] = std::max(0.0, last[r]) + dur[r];
      std::vector<double> next(p);
      for (int s = 1; s < steps; ++s) {
        next[0] = std::max(std::max(0.0, last[0]), last[p - 1]) + dur[0];
        for (std::size_t r = 1; r < p; ++r) next[r] = std::max(std::max(0.0, last[r]), last[r - 1]) + dur[r];
        std::swap(last, next);
      }
    } else {
      const double later = std::max(transport, 0.0);  // what a step's later pieces do not pay
      for (int s = 0; s < steps; ++s) {
        for (std::size_t r = 0; r < p; ++r) {
          const std::size_t left = (r + p - 1) % p;
          for (std::size_t j = 0; j < c; ++j) {
            double ready = std::max(0.0, last[r]);
            if (s > 0) ready = std::max(ready, prev[left * c + j]);
            last[r] = ready + (j == 0 ? dur[r] : dur[r] - later);
            cur[r * c + j] = last[r];
          }
        }
        std::swap(prev, cur);
      }
    }
    for (std::size_t r = 0; r < p; ++r) {
      ready_.push_back(last[r]);
      duration_.push_back(0.0);
      ready_of[(r + 1) % p] = TaskId(static_cast<std::uint32_t>(ready_.size() - 1));
    }
  }

  /// The counted traffic, each link once in LinkId order.
  void collect() {
    if (traffic_ == nullptr) return;
    for (std::uint32_t l = 0; l < link_bytes_.size(); ++l) {
      if (link_bytes_[l] > 0.0) traffic_->links.emplace_back(LinkId(l), link_bytes_[l]);
    }
  }

 private:
  struct Price {
    std::uint64_t key = ~std::uint64_t{0};
    double latency = 0.0;
    double transport = 0.0;  // the part of latency that is transport (route_transport)
    double capacity = 0.0;
    bool empty = true;
    std::span<const LinkId> route;
  };
  static constexpr std::size_t kCache = 1 << 14;  // direct-mapped by (src, dst)
  const Price& price(NodeId from, NodeId to) {
    const std::uint64_t key = (std::uint64_t{from.value} << 32) | to.value;
    Price& slot = cache_[(key * 0x9E3779B97F4A7C15ull) >> 50];
    if (slot.key != key) {
      const std::span<const LinkId> route = f_.first_route(from, to);
      const NetworkFabric::RouteLatency rl = f_.route_latencies(route, low_latency_);
      slot = Price{key, rl.latency, rl.transport, f_.route_capacity(route), route.empty(), route};
    }
    return slot;
  }
  void count(NodeId from, const Price& p, double bytes) {
    if (traffic_ == nullptr) return;
    for (LinkId l : p.route) link_bytes_[l.value] += bytes;
    if (from == first_) traffic_->first_rank_sends += bytes;
  }
  NetworkFabric& f_;
  std::vector<Price> cache_;
  std::vector<double> ready_, duration_;
  CollectiveTraffic* traffic_;
  NodeId first_;
  bool low_latency_;  // the low-latency protocol's latencies (low_latency_protocol)
  std::vector<double> link_bytes_;
};

// Builds the transfers of one collective. Every helper takes, per rank position, the
// task after which that rank may start (`ready`) and returns, per position, the last
// transfer into it (its result is complete once that finishes; ranks that receive
// nothing keep their ready task).
template <class Sink>
class Lowering {
 public:
  /// With a fabric, transfers carry their bandwidth shares (Shares) among the set that
  /// runs at once, which build() and the helpers below declare with `at_once`.
  Lowering(Sink& sink, const CollectiveGroup& group, const CollectiveSpec& spec, NetworkFabric* fabric)
      : sink_(sink), group_(group), chunks_(effective_chunks(spec)), streamed_(spec.streamed),
        low_latency_(low_latency_protocol(spec)), fabric_(fabric != nullptr ? fabric : group.fabric), shares_(fabric),
        rate_wait_(low_latency_wait(group, spec)) {}

  /// After `start`, what every rank's first transfer waits for: with the low-latency
  /// protocol, a zero-byte transfer from the first rank to itself that waits the
  /// protocol's rate (low_latency_throughput_time), which its bytes take at the
  /// group's ll_bus_bandwidth beside their own transfers' time; else `start` itself.
  TaskId rate_gate(TaskId start) {
    if (rate_wait_ <= 0.0) return start;
    ++transfers_;
    const TaskId t = sink_.send(group_.ranks.front(), group_.ranks.front(), 0.0, 0u, nullptr, rate_wait_);
    sink_.edge(start, t);
    return t;
  }

  std::uint64_t transfers() const { return transfers_; }
  /// Rings from here on pay their ranks' ring overhead (CollectiveGroup::ring_wait),
  /// `channels` of them side by side (each carrying that fraction of a rank's bytes);
  /// 0: none (torus rings, and until set).
  void ring_overhead(int channels) { ring_channels_ = channels; }
  /// Whether transfers carry bandwidth shares (a fabric was given): what at_once is for.
  [[nodiscard]] bool sharing() const { return shares_.enabled(); }

  /// Declares the transfers (positions in the group, one entry per transfer) that run at
  /// once from here on, until the next call.
  void at_once(const std::vector<std::pair<std::size_t, std::size_t>>& hops, bool spread = true) {
    if (!shares_.enabled()) return;
    std::vector<std::pair<NodeId, NodeId>> nodes, others;
    nodes.reserve(hops.size());
    for (const auto& [a, b] : hops) nodes.emplace_back(group_.ranks[a], group_.ranks[b]);
    // The siblings' transfers: the same positions in each of them.
    others.reserve(hops.size() * group_.siblings.size());
    for (const std::vector<NodeId>& sibling : group_.siblings) {
      for (const auto& [a, b] : hops) others.emplace_back(sibling[a], sibling[b]);
    }
    if (members_.empty()) {
      members_.push_back(group_.ranks);
      members_.insert(members_.end(), group_.siblings.begin(), group_.siblings.end());
      for (std::vector<NodeId>& m : members_) std::sort(m.begin(), m.end());
    }
    shares_.set(nodes, spread, members_, others);
  }
  /// Every hop of these rings (each closing back to its start) at once.
  void rings_at_once(const std::vector<std::vector<std::size_t>>& rings) {
    if (!shares_.enabled()) return;
    std::vector<std::pair<std::size_t, std::size_t>> hops;
    for (const auto& r : rings) {
      if (r.size() < 2) continue;
      for (std::size_t k = 0; k < r.size(); ++k) hops.emplace_back(r[k], r[(k + 1) % r.size()]);
    }
    at_once(hops);
  }
  void none_at_once() { shares_.clear(); }

  // `steps` steps around the ring `order` (positions in the group), each moving
  // `segment` bytes from every rank to the next. A rank's step-s send follows its
  // step s-1 send (one channel sends in order) and, for s > 0, the arrival of the
  // left neighbour's step s-1 send, which it forwards or reduces into.
  void ring(const std::vector<std::size_t>& order, int steps, double segment, std::vector<TaskId>& ready) {
    const std::size_t p = order.size();
    if (p < 2 || steps <= 0) return;
    // A ring of the ring or hierarchical algorithm inside one domain waits its ranks'
    // ring overhead (CollectiveGroup::ring_wait) spread over its steps: each step a
    // rank's bytes over all channels at its wait per byte, over p - 1 (per piece: its
    // share of that).
    std::vector<double> wait;  // s per piece sent by order[r]; empty: none
    const bool one_domain =
        std::all_of(order.begin(), order.end(), [&](std::size_t r) { return group_.domain[r] == group_.domain[order[0]]; });
    if (ring_channels_ > 0 && !group_.ring_wait.empty() && one_domain) {
      for (std::size_t r : order) wait.push_back(group_.ring_wait[r] * ring_channels_ * (segment / chunks_) / static_cast<double>(p - 1));
    }
    const auto wait_of = [&](std::size_t r) { return wait.empty() ? 0.0 : wait[r]; };
    // A ring that crosses the network: every step pays the ring's mean transport latency
    // in place of its own route's (Transfer::kTransportInWait), its first piece of a step
    // in c pieces (the others follow it, Lowering::later_piece). The library pipelines a
    // ring's steps through the NICs, so the data's path pays the transport only where it
    // crosses them (NCCL's model: once per crossing), where steps in lockstep would each
    // wait for the slowest rank's, a NIC's, at every step.
    double transport = -1.0;
    if (fabric_ != nullptr && !one_domain) {
      if (const double mean = ring_mean_transport(*fabric_, group_, order, low_latency_); mean > 0.0) transport = mean;
    }
    const std::uint32_t in_wait = transport < 0.0 ? 0u : Transfer::kTransportInWait;
    const double mean = std::max(transport, 0.0);
    if (streamed_) {
      // One transfer per rank for the whole phase: all its steps' bytes, paying its
      // route's latency once per step, after its own and its left neighbour's start.
      std::vector<TaskId> into(p);
      for (std::size_t r = 0; r < p; ++r) {
        const TaskId t = send(order[r], order[(r + 1) % p], segment * steps, static_cast<std::uint32_t>(steps) | in_wait,
                              (wait_of(r) * chunks_ + mean) * steps);
        sink_.edge(ready[order[r]], t);
        sink_.edge(ready[order[(r + p - 1) % p]], t);
        into[(r + 1) % p] = t;
      }
      for (std::size_t r = 0; r < p; ++r) ready[order[r]] = into[r];
      return;
    }
    const double piece = segment / chunks_;
    if constexpr (std::is_same_v<Sink, TimingSink>) {
      std::vector<NodeId> nodes(p);
      std::vector<TaskId> in(p);
      for (std::size_t r = 0; r < p; ++r) {
        nodes[r] = group_.ranks[order[r]];
        in[r] = ready[order[r]];
      }
      sink_.ring(nodes, steps, piece, chunks_, in, shares_, wait, transport);
      for (std::size_t r = 0; r < p; ++r) ready[order[r]] = in[r];
      transfers_ += p * static_cast<std::size_t>(steps) * static_cast<std::size_t>(chunks_);
      return;
    }
    const std::size_t c = static_cast<std::size_t>(chunks_);
    std::vector<TaskId> prev(p * c), cur(p * c);  // [position][chunk]: last step's sends
    std::vector<TaskId> last(p);                  // each position's latest send
    for (std::size_t r = 0; r < p; ++r) last[r] = ready[order[r]];
    for (int s = 0; s < steps; ++s) {
      for (std::size_t r = 0; r < p; ++r) {
        const std::size_t left = (r + p - 1) % p;
        for (std::size_t j = 0; j < c; ++j) {
          const TaskId t = send(order[r], order[(r + 1) % p], piece, 1u | in_wait, wait_of(r) + (j == 0 ? mean : 0.0));
          sink_.edge(last[r], t);
          if (s > 0) sink_.edge(prev[left * c + j], t);
          last[r] = t;
          cur[r * c + j] = t;
        }
      }
      std::swap(prev, cur);
    }
    // The final piece into position r came from its left neighbour's last send.
    for (std::size_t r = 0; r < p; ++r) ready[order[(r + 1) % p]] = last[r];
  }

  // Pipelines `bytes` along each chain (positions in the group, chains[t][0] first) in
  // chunks: chunk j crosses hop k (into chains[t][k + 1]) at step j + k, after it
  // crossed hop k - 1 and chunk j - 1 crossed hop k (the first chunk also after the
  // hop's sender is ready). The transfers are added step by step and, with shares (the
  // analytical model), declared at once step by step, as trees_by_step's. done[t] starts
  // as each position's readiness and ends as chain t's results.
  void chains_by_step(const std::vector<std::vector<std::size_t>>& chains, double bytes,
                      std::vector<std::vector<TaskId>>& done) {
    const std::size_t c = static_cast<std::size_t>(chunks_);
    const double piece = bytes / chunks_;
    std::size_t steps = 0;
    std::vector<std::vector<TaskId>> sent(chains.size());  // [hop x c + chunk]
    for (std::size_t t = 0; t < chains.size(); ++t) {
      if (chains[t].size() < 2) continue;
      steps = std::max(steps, c + chains[t].size() - 2);
      sent[t].assign((chains[t].size() - 1) * c, TaskId{});
    }
    struct Move {
      std::size_t t, k, j;  // chain t's hop k, chunk j
    };
    std::vector<Move> moves;
    std::vector<std::pair<std::size_t, std::size_t>> hops;
    for (std::size_t w = 0; w < steps; ++w) {
      moves.clear();
      hops.clear();
      for (std::size_t t = 0; t < chains.size(); ++t) {
        for (std::size_t k = 0; k + 1 < chains[t].size() && k <= w; ++k) {
          if (w - k >= c) continue;
          moves.push_back({t, k, w - k});
          hops.emplace_back(chains[t][k], chains[t][k + 1]);
        }
      }
      at_once(hops);
      for (const auto& [t, k, j] : moves) {
        const auto& order = chains[t];
        const TaskId s = send(order[k], order[k + 1], piece, later_piece(j));
        sink_.edge(k == 0 ? done[t][order[0]] : sent[t][(k - 1) * c + j], s);
        if (j > 0) sink_.edge(sent[t][k * c + j - 1], s);
        else if (k > 0) sink_.edge(done[t][order[k]], s);
        sent[t][k * c + j] = s;
      }
    }
    none_at_once();
    for (std::size_t t = 0; t < chains.size(); ++t) {
      for (std::size_t k = 0; k + 1 < chains[t].size(); ++k) done[t][chains[t][k + 1]] = sent[t][k * c + c - 1];
    }
  }

  // trees_by_step's all-reduce on one tree as streams, for the flow model: one
  // transfer per edge and direction for all the chunks, started once both its ends are
  // ready (the chunks pipeline through the tree), that pays its route's latency (less
  // its NIC transport) once per chunk and once per hop of the pipeline's fill (2d - 1 for
  // a tree d hops deep), and waits the transport of the first chunk's way (below); the
  // fill's chunk bytes are not counted. Alone on a tree of uniform links without
  // transport it takes (2d + c - 1) a + S/B, the pipelined tree's time less
  // (2d - 1) S/(cB); it makes 2 transfers per edge, not 2c.
  void streamed_tree(const std::vector<std::size_t>& parent, double bytes, std::vector<TaskId>& ready) {
    const std::size_t p = parent.size();
    if (p < 2) return;
    const TreeShape shape = tree_shape(parent);
    const std::size_t root = shape.root;
    const auto& top_down = shape.top_down;
    std::vector<std::size_t> depth(p, 0);
    std::size_t deepest = 0;
    for (std::size_t i : top_down) {
      if (i != root) depth[i] = depth[parent[i]] + 1;
      deepest = std::max(deepest, depth[i]);
    }
    const auto latencies = static_cast<std::uint32_t>(static_cast<std::size_t>(chunks_) + 2 * deepest - 1);
    // The first chunk pays the transport of every hop on its way up and down
    // (Lowering::later_piece), the others none. Each edge's transfer stands for the whole
    // pipeline, so every edge waits the fill's transport, twice the most that a rank's way
    // to the root holds, and its latencies leave their own out. (Without a fabric to ask,
    // each latency keeps its route's transport, as a ring's steps do; every group made
    // by CollectiveGroup::of has one.)
    NetworkFabric* f = fabric_;
    double fill = 0.0;
    if (f != nullptr) {
      std::vector<double> way(p, 0.0);  // transport from the root to each rank
      for (std::size_t i : top_down) {
        if (i == root) continue;
        way[i] = way[parent[i]] + f->route_transport(f->first_route(group_.ranks[parent[i]], group_.ranks[i]), low_latency_);
        fill = std::max(fill, 2.0 * way[i]);
      }
    }
    const std::uint32_t pays = f != nullptr ? latencies | Transfer::kTransportInWait : latencies;
    const std::vector<TaskId> start = ready;
    for (std::size_t i = 0; i < p; ++i) {
      if (i == root) continue;
      const TaskId up = send(i, parent[i], bytes, pays, fill);
      const TaskId down = send(parent[i], i, bytes, pays, fill);
      for (TaskId t : {up, down}) {
        sink_.edge(start[i], t);
        sink_.edge(start[parent[i]], t);
      }
      const TaskId done = marker();  // i has its result: its parent's sum, and its own sent up
      sink_.edge(up, done);
      sink_.edge(down, done);
      ready[i] = done;
    }
    TaskId root_done = marker();
    sink_.edge(start[root], root_done);
    for (std::size_t i = 0; i < p; ++i) {
      if (i != root && parent[i] == root) sink_.edge(ready[i], root_done);
    }
    ready[root] = root_done;
  }

  // All-reduces over trees (one per channel, `bytes` each; parents[t][i] is the parent
  // of position i in tree t, the root's is itself): reduce up each tree and broadcast
  // back down, pipelined in chunks. Chunk j leaves a rank up once its children's chunk j
  // and its own chunk j - 1 have, and down once it has chunk j and its chunk j - 1 went
  // down; a rank of height h (0 for a leaf) sends it up at step j + h, and a rank of
  // depth k (0 for the root) down at step j + H + k, H the root's height. The transfers
  // are added step by step and, with shares (the analytical model), declared at once
  // step by step: a transfer shares its links with those of every tree in its step, not
  // with every edge of every tree. The trees' chains start at different ranks, so while
  // the pipelines fill few transfers meet on a link, and once every edge carries a chunk
  // all do. done[t] starts as each position's readiness and ends as tree t's results.
  void trees_by_step(const std::vector<std::vector<std::size_t>>& parents, double bytes,
                     std::vector<std::vector<TaskId>>& done) {
    const std::size_t p = parents.front().size(), c = static_cast<std::size_t>(chunks_);
    if (p < 2) return;
    const double piece = bytes / chunks_;
    struct Tree {
      TreeShape shape;
      std::vector<std::vector<std::size_t>> up_at;    // per height: the ranks (not the root) that send up
      std::vector<std::vector<std::size_t>> down_at;  // per depth: the ranks with children
      std::size_t top = 0;                            // the root's height
      std::vector<TaskId> up, down;                   // [position x c + chunk]: its send up / the send into it
    };
    std::vector<Tree> trees(parents.size());
    std::size_t steps = 0;
    for (std::size_t t = 0; t < parents.size(); ++t) {
      Tree& tr = trees[t];
      tr.shape = tree_shape(parents[t]);
      const auto& order = tr.shape.top_down;
      std::vector<std::size_t> height(p, 0), depth(p, 0);
      for (std::size_t k = order.size(); k-- > 1;) {  // children before parents
        const std::size_t i = order[k], up = parents[t][i];
        height[up] = std::max(height[up], height[i] + 1);
      }
      for (std::size_t i : order) {
        if (i != tr.shape.root) depth[i] = depth[parents[t][i]] + 1;
      }
      tr.top = height[tr.shape.root];
      tr.up_at.resize(tr.top);
      for (std::size_t i : order) {
        if (i != tr.shape.root) tr.up_at[height[i]].push_back(i);
        if (!tr.shape.children[i].empty()) {
          if (depth[i] >= tr.down_at.size()) tr.down_at.resize(depth[i] + 1);
          tr.down_at[depth[i]].push_back(i);
        }
      }
      tr.up.assign(p * c, TaskId{});
      tr.down.assign(p * c, TaskId{});
      steps = std::max(steps, c + tr.top + tr.down_at.size() - 1);
    }
    // Each step's sends: tree t's rank `from` sends chunk j to `to`, up (to its parent)
    // or down (to a child).
    struct Move {
      std::size_t t, from, to, j;
      bool up;
    };
    std::vector<Move> moves;
    std::vector<std::pair<std::size_t, std::size_t>> hops;
    for (std::size_t w = 0; w < steps; ++w) {
      moves.clear();
      for (std::size_t t = 0; t < trees.size(); ++t) {
        const Tree& tr = trees[t];
        // Ranks whose first chunk goes at step `at` send chunk w - at, if there is one.
        for (std::size_t h = 0; h < tr.up_at.size() && h <= w; ++h) {
          if (w - h >= c) continue;
          for (std::size_t i : tr.up_at[h]) moves.push_back({t, i, parents[t][i], w - h, true});
        }
        for (std::size_t k = 0; k < tr.down_at.size() && tr.top + k <= w; ++k) {
          if (w - tr.top - k >= c) continue;
          for (std::size_t i : tr.down_at[k]) {
            for (std::size_t ch : tr.shape.children[i]) moves.push_back({t, i, ch, w - tr.top - k, false});
          }
        }
      }
      hops.clear();
      for (const Move& m : moves) hops.emplace_back(m.from, m.to);
      at_once(hops);
      for (const auto& [t, from, to, j, up] : moves) {
        Tree& tr = trees[t];
        const auto& start = done[t];
        const TaskId s = send(from, to, piece, later_piece(j));
        if (up) {
          sink_.edge(j == 0 ? start[from] : tr.up[from * c + j - 1], s);
          for (std::size_t ch : tr.shape.children[from]) sink_.edge(tr.up[ch * c + j], s);
          tr.up[from * c + j] = s;
          continue;
        }
        if (from == tr.shape.root) {  // the root has chunk j once all its children's sums arrived
          sink_.edge(j == 0 ? start[from] : tr.down[to * c + j - 1], s);
          for (std::size_t kid : tr.shape.children[from]) sink_.edge(tr.up[kid * c + j], s);
        } else {
          sink_.edge(tr.down[from * c + j], s);
          if (j > 0) sink_.edge(tr.down[to * c + j - 1], s);
        }
        tr.down[to * c + j] = s;
      }
    }
    none_at_once();
    for (std::size_t t = 0; t < trees.size(); ++t) {
      Tree& tr = trees[t];
      const std::size_t root = tr.shape.root;
      const TaskId root_done = marker();  // the root's result: its children's last sums arrived
      sink_.edge(done[t][root], root_done);
      for (std::size_t kid : tr.shape.children[root]) sink_.edge(tr.up[kid * c + c - 1], root_done);
      for (std::size_t i = 0; i < p; ++i) {
        if (i != root) done[t][i] = tr.down[i * c + c - 1];
      }
      done[t][root] = root_done;
    }
  }

  // Recursive halving (reduce-scatter, halving = true) or doubling (all-gather) over a
  // power-of-two group: at each step every rank exchanges `bytes x fraction` with its
  // partner at distance d.
  void halving_doubling(double bytes, bool halving, std::vector<TaskId>& ready) {
    const std::size_t p = group_.ranks.size();
    if (p < 2) return;
    const int steps = std::countr_zero(p);
    std::vector<TaskId> next(p), sent(p);
    for (int k = 0; k < steps; ++k) {
      const std::size_t d = halving ? p >> (k + 1) : std::size_t{1} << k;
      const double amount = halving ? bytes / static_cast<double>(std::size_t{2} << k)
                                    : bytes * static_cast<double>(std::size_t{1} << k) / static_cast<double>(p);
      if (shares_.enabled()) {
        std::vector<std::pair<std::size_t, std::size_t>> hops;
        for (std::size_t r = 0; r < p; ++r) hops.emplace_back(r, r ^ d);
        at_once(hops);
      }
      for (std::size_t r = 0; r < p; ++r) {
        // What r sends holds what it received last step; it also follows its own last send.
        const TaskId t = chunked(r, r ^ d, amount, ready[r], k > 0 ? sent[r] : TaskId{});
        sent[r] = t;
        next[r ^ d] = t;
      }
      ready = next;
    }
  }

  // Every position in `from` sends `bytes` to every position in `to` (not itself), at once.
  void direct(const std::vector<std::size_t>& from, const std::vector<std::size_t>& to, double bytes,
              std::vector<TaskId>& ready) {
    if (shares_.enabled()) {
      std::vector<std::pair<std::size_t, std::size_t>> hops;
      for (std::size_t s : from) {
        for (std::size_t d : to) {
          if (s != d) hops.emplace_back(s, d);
        }
      }
      // From or to one rank: spread over the routes; p(p - 1) sends: first routes.
      at_once(hops, from.size() == 1 || to.size() == 1);
    }
    std::vector<std::vector<TaskId>> arrivals(group_.ranks.size());
    for (std::size_t s : from) {
      for (std::size_t d : to) {
        if (s == d) continue;
        arrivals[d].push_back(chunked(s, d, bytes, ready[s]));
      }
    }
    for (std::size_t d = 0; d < arrivals.size(); ++d) {
      if (arrivals[d].empty()) continue;
      const TaskId m = marker();
      for (TaskId t : arrivals[d]) sink_.edge(t, m);
      ready[d] = m;
    }
  }

  // Inside each group of positions every member sends `bytes` to every other (a direct
  // all-to-all per group, all groups at once), in chunks_ pieces per pair that follow
  // each other, the first after the sender's ready task. With `gate`, piece j also waits
  // for gate[sender][j]. Returns, per position and piece, a marker after every piece j
  // into it (its ready task where it receives none).
  std::vector<std::vector<TaskId>> exchange(const std::vector<std::vector<std::size_t>>& groups, double bytes,
                                            const std::vector<TaskId>& ready,
                                            const std::vector<std::vector<TaskId>>* gate) {
    const auto c = static_cast<std::size_t>(chunks_);
    std::vector<std::vector<TaskId>> into(ready.size());
    for (std::size_t r = 0; r < ready.size(); ++r) into[r].assign(c, ready[r]);
    if (shares_.enabled()) {
      std::vector<std::pair<std::size_t, std::size_t>> hops;
      for (const auto& m : groups) {
        for (std::size_t s : m) {
          for (std::size_t d : m) {
            if (s != d) hops.emplace_back(s, d);
          }
        }
      }
      at_once(hops, false);
    }
    std::vector<std::vector<std::vector<TaskId>>> arrivals(ready.size(), std::vector<std::vector<TaskId>>(c));
    for (const auto& m : groups) {
      for (std::size_t s : m) {
        for (std::size_t d : m) {
          if (s == d) continue;
          TaskId prev = ready[s];
          for (std::size_t j = 0; j < c; ++j) {
            const TaskId t = send(s, d, bytes / static_cast<double>(c), later_piece(j));
            sink_.edge(prev, t);
            if (gate != nullptr && (*gate)[s][j] != ready[s]) sink_.edge((*gate)[s][j], t);
            arrivals[d][j].push_back(t);
            prev = t;
          }
        }
      }
    }
    for (std::size_t d = 0; d < ready.size(); ++d) {
      for (std::size_t j = 0; j < c; ++j) {
        if (arrivals[d][j].empty()) continue;
        into[d][j] = marker();
        for (TaskId t : arrivals[d][j]) sink_.edge(t, into[d][j]);
      }
    }
    return into;
  }

  TaskId marker() { return sink_.marker(); }
  void edge(TaskId a, TaskId b) { sink_.edge(a, b); }

 private:
  TaskId send(std::size_t from, std::size_t to, double bytes, std::uint32_t latencies = 1, double wait = 0.0) {
    ++transfers_;
    const NodeId a = group_.ranks[from], b = group_.ranks[to];
    return sink_.send(a, b, bytes, latencies, shares_.enabled() ? &shares_ : nullptr, wait);
  }
  // The latencies of piece j of a pipelined transfer: the first pays its route's transport
  // (the pipeline's fill), the later ones follow it through the same connection without
  // (Transfer::kTransportInWait with no wait).
  static std::uint32_t later_piece(std::size_t j) { return j == 0 ? 1u : 1u | Transfer::kTransportInWait; }
  // `bytes` from one position to another as `chunks_` pieces in sequence after `after`;
  // returns the last piece.
  TaskId chunked(std::size_t from, std::size_t to, double bytes, TaskId after, TaskId also = TaskId{}) {
    TaskId prev = after;
    for (int j = 0; j < chunks_; ++j) {
      const TaskId t = send(from, to, bytes / chunks_, later_piece(static_cast<std::size_t>(j)));
      sink_.edge(prev, t);
      if (j == 0 && also.valid()) sink_.edge(also, t);
      prev = t;
    }
    return prev;
  }

  Sink& sink_;
  const CollectiveGroup& group_;
  int chunks_;
  bool streamed_;
  bool low_latency_;      // low_latency_protocol(spec)
  NetworkFabric* fabric_;  // the routes' transport: the analytical pricing's fabric, else the group's (or null)
  Shares shares_;
  std::vector<std::vector<NodeId>> members_;  // the group's ranks, sorted, then each sibling's (for shares)
  std::uint64_t transfers_ = 0;
  int ring_channels_ = 0;
  double rate_wait_;  // s, rate_gate's
};

}  // namespace

namespace {

// Entry positions (on each channel's ring) for channels [first, first + count) of a
// domain with direct rings: every rank entered at most once and left (from the rank
// before the entry on the channel's ring) at most once, each channel preferring the
// rank group order would enter at (its (c mod size)-th), then the ones after it. A
// depth-first search with a step budget; where it finds no such assignment, each
// channel takes its preferred entry.
std::vector<std::size_t> direct_entries(const CollectiveGroup& group, std::size_t d, const std::vector<std::size_t>& domain,
                                        int first, int count) {
  const auto& rings = group.domain_rings[d];
  const std::size_t n = domain.size();
  const auto ring_of = [&](int c) -> const std::vector<std::size_t>& { return rings[static_cast<std::size_t>(c) % rings.size()]; };
  const auto position = [&](const std::vector<std::size_t>& m, std::size_t rank) {
    return static_cast<std::size_t>(std::find(m.begin(), m.end(), rank) - m.begin());
  };
  std::vector<std::size_t> pick(static_cast<std::size_t>(count));
  std::vector<char> entered(group.ranks.size(), 0), left(group.ranks.size(), 0);
  std::size_t budget = 100000;
  std::function<bool(int)> place = [&](int k) {
    if (k == count) return true;
    const int c = first + k;
    const auto& m = ring_of(c);
    for (std::size_t j = 0; j < n; ++j) {
      if (budget == 0) return false;
      --budget;
      const std::size_t pos = position(m, domain[(static_cast<std::size_t>(c) + j) % n]);
      const std::size_t in = m[pos], out = m[(pos + n - 1) % n];
      if (entered[in] != 0 || left[out] != 0) continue;
      entered[in] = left[out] = 1;
      pick[static_cast<std::size_t>(k)] = pos;
      if (place(k + 1)) return true;
      entered[in] = left[out] = 0;
    }
    return false;
  };
  if (!place(0)) {
    for (int k = 0; k < count; ++k) {
      const int c = first + k;
      pick[static_cast<std::size_t>(k)] = position(ring_of(c), domain[static_cast<std::size_t>(c) % n]);
    }
  }
  return pick;
}

}  // namespace

// Consecutive channels enter a domain at different ranks; along a domain's direct rings
// entries and exits are chosen together (direct_entries).
std::vector<std::vector<std::size_t>> ring_orders(const CollectiveGroup& group, int channels) {
  if (channels <= 0) return {};
  const auto domains = group.by_domain();
  std::vector<std::vector<std::size_t>> orders(static_cast<std::size_t>(channels));
  for (auto& o : orders) o.reserve(group.ranks.size());
  // Per channel: where (which rank of its domain, in group order) it left the last domain
  // it crossed on a path (channel c enters the first at its c-th).
  std::vector<std::size_t> left_at(static_cast<std::size_t>(channels));
  for (int c = 0; c < channels; ++c) left_at[static_cast<std::size_t>(c)] = static_cast<std::size_t>(c);
  // The same for switched domains, and how many of those it has crossed.
  std::vector<std::size_t> switched_at(left_at);
  std::size_t switched_seen = 0;
  for (std::size_t d = 0; d < domains.size(); ++d) {
    const std::size_t n = domains[d].size();
    if (d < group.domain_paths.size() && group.domain_paths[d]) {
      // Walecki paths: the channel enters at the rank with the local index it left the
      // last domain at (the same rail: its hop between servers stays on one leaf), along
      // the path that starts there (path k starts at the domain's k-th rank), and leaves
      // where that path ends.
      for (int c = 0; c < channels; ++c) {
        std::size_t& k = left_at[static_cast<std::size_t>(c)];
        k %= n;
        const auto& path = group.domain_rings[d][k];
        orders[static_cast<std::size_t>(c)].insert(orders[static_cast<std::size_t>(c)].end(), path.begin(), path.end());
        k = static_cast<std::size_t>(std::lower_bound(domains[d].begin(), domains[d].end(), path.back()) - domains[d].begin());
      }
      continue;
    }
    // Direct rings that each hold every rank of the domain (as CollectiveGroup::of lays
    // them); others are ignored.
    bool direct = d < group.domain_rings.size() && !group.domain_rings[d].empty();
    if (direct) {
      std::vector<std::size_t> want = domains[d];
      std::sort(want.begin(), want.end());
      for (auto ring : group.domain_rings[d]) {
        std::sort(ring.begin(), ring.end());
        direct = direct && ring == want;
      }
    }
    // Along direct rings a channel leaves the domain from the rank before the one it
    // entered at: entries and exits are chosen together, a block of `n` channels at a
    // time, so that every rank enters and leaves once in n channels (where a rank's
    // traffic arrives and leaves decides which of the domain's NICs it crosses).
    std::vector<std::size_t> entries;
    for (int c = 0; c < channels; ++c) {
      auto& order = orders[static_cast<std::size_t>(c)];
      if (!direct) {
        // A switched domain (any order runs at the switch's rate): the channel enters at
        // the rank with the local index it left the last switched domain at (at c in
        // the first), so that its hop between servers stays on one rail, and crosses
        // the domain in rank order, backwards in every other one, so that it leaves at
        // the rank before its entry, then after it, alternately: over an even number of
        // domains it comes back to the first on the rail it left it on (NCCL's
        // alternating rings, which keep a ring's traffic off other rails' switches).
        std::size_t& k = switched_at[static_cast<std::size_t>(c)];
        const std::size_t entry = k % n;
        const bool backwards = switched_seen % 2 == 1;
        for (std::size_t i = 0; i < n; ++i) order.push_back(domains[d][(entry + (backwards ? n - i : i)) % n]);
        k = backwards ? (entry + 1) % n : (entry + n - 1) % n;
        continue;
      }
      const auto& m = group.domain_rings[d][static_cast<std::size_t>(c) % group.domain_rings[d].size()];
      if (c % static_cast<int>(n) == 0) entries = direct_entries(group, d, domains[d], c, std::min(channels - c, static_cast<int>(n)));
      const std::size_t shift = entries[static_cast<std::size_t>(c) % n];
      for (std::size_t i = 0; i < m.size(); ++i) order.push_back(m[(i + shift) % m.size()]);
    }
    if (!direct) ++switched_seen;
  }
  return orders;
}

std::vector<std::vector<std::size_t>> tree_parents(const CollectiveGroup& group, int channels) {
  const auto domains = group.by_domain();
  // Per domain, the orders its chains follow: its Walecki paths (path k from its k-th
  // rank), else its chain cycles (domain_chains), else group order.
  std::vector<std::vector<std::vector<std::size_t>>> orders(domains.size());
  std::vector<bool> paths(domains.size(), false);
  for (std::size_t d = 0; d < domains.size(); ++d) {
    paths[d] = d < group.domain_paths.size() && group.domain_paths[d];
    if (paths[d]) orders[d] = group.domain_rings[d];
    else if (d < group.domain_chains.size() && !group.domain_chains[d].empty()) orders[d] = group.domain_chains[d];
    else orders[d].push_back(domains[d]);
  }
  const auto t_count = static_cast<std::size_t>(std::max(channels, 1));
  std::vector<std::vector<std::size_t>> parents(t_count, std::vector<std::size_t>(group.ranks.size()));
  std::vector<std::vector<std::size_t>> chains(domains.size());
  for (std::size_t t = 0; t < t_count; ++t) {
    const bool mirrored = t % 2 == 1;
    // Channel t's chain starts at the domain's (t n / channels)-th rank in group order,
    // so that the channels' heads, which carry the traffic between domains, spread over
    // the domain's ranks (and their NICs) and sit on one rail in every domain: along the
    // Walecki path that starts there, or around the channel's ring (or group order) from
    // there, a mirrored channel the other way.
    for (std::size_t d = 0; d < domains.size(); ++d) {
      const std::size_t n = domains[d].size(), head = t * n / t_count % n;
      if (paths[d]) {
        chains[d] = orders[d][head];
        continue;
      }
      const auto& base = orders[d][t % orders[d].size()];
      const auto from = static_cast<std::size_t>(std::find(base.begin(), base.end(), domains[d][head]) - base.begin());
      chains[d].resize(n);
      for (std::size_t i = 0; i < n; ++i) chains[d][i] = base[(from + (mirrored ? n - i : i)) % n];
    }
    if (mirrored) std::reverse(chains.begin(), chains.end());
    auto& parent = parents[t];
    for (std::size_t d = 0; d < chains.size(); ++d) {
      const auto& chain = chains[d];
      parent[chain[0]] = d == 0 ? chain[0] : chains[(d - 1) / 2][0];
      for (std::size_t k = 1; k < chain.size(); ++k) parent[chain[k]] = chain[k - 1];
    }
  }
  return parents;
}

TreeShape tree_shape(const std::vector<std::size_t>& parent) {
  TreeShape t;
  t.children.resize(parent.size());
  for (std::size_t i = 0; i < parent.size(); ++i) {
    if (parent[i] == i) t.root = i;
    else t.children[parent[i]].push_back(i);
  }
  if (parent.empty()) return t;
  t.top_down.push_back(t.root);
  for (std::size_t k = 0; k < t.top_down.size(); ++k) {
    for (std::size_t ch : t.children[t.top_down[k]]) t.top_down.push_back(ch);
  }
  return t;
}

namespace {

std::vector<std::size_t> iota(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// The rings along dimension d of a torus in row-major order (last dimension fastest).
std::vector<std::vector<std::size_t>> torus_rings(const std::vector<int>& dims, std::size_t d) {
  std::size_t total = 1, stride = 1;
  for (int k : dims) total *= static_cast<std::size_t>(k);
  for (std::size_t e = d + 1; e < dims.size(); ++e) stride *= static_cast<std::size_t>(dims[e]);
  const auto k = static_cast<std::size_t>(dims[d]);
  std::vector<std::vector<std::size_t>> rings;
  for (std::size_t i = 0; i < total; ++i) {
    if ((i / stride) % k != 0) continue;  // i starts a ring: its coordinate d is 0
    std::vector<std::size_t> ring(k);
    for (std::size_t x = 0; x < k; ++x) ring[x] = i + x * stride;
    rings.push_back(std::move(ring));
  }
  return rings;
}

}  // namespace

std::vector<std::size_t> torus_used_dims(const std::vector<int>& dims) {
  std::vector<std::size_t> used;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] > 1) used.push_back(d);
  }
  return used;
}

int torus_ways(const CollectiveGroup& group) {
  for (std::size_t d : torus_used_dims(group.torus_dims)) {
    if (group.torus_dims[d] < 3 || d >= group.torus_wrap.size() || !group.torus_wrap[d]) return 1;
  }
  return 2;
}

int effective_chunks(const CollectiveSpec& spec) {
  if (spec.chunks > 0) return spec.chunks;
  const bool pipelined = spec.algorithm == CollectiveAlgorithm::kTree ||
                         (spec.algorithm == CollectiveAlgorithm::kRing &&
                          (spec.op == CollectiveOp::kBroadcast || spec.op == CollectiveOp::kReduce));
  if (spec.algorithm == CollectiveAlgorithm::kHierarchical && spec.op == CollectiveOp::kAllToAll) {
    return static_cast<int>(std::clamp(std::round(spec.bytes / kAutoChunkBytes), 1.0, double{kMaxAutoExchangeChunks}));
  }
  if (!pipelined) return 1;
  return static_cast<int>(std::clamp(std::round(spec.bytes / kAutoChunkBytes), 1.0, double{kMaxAutoChunks}));
}

std::string_view op_name(CollectiveOp op) { return kOpNames[static_cast<int>(op)]; }
std::string_view algorithm_name(CollectiveAlgorithm a) { return kAlgorithmNames[static_cast<int>(a)]; }

std::optional<CollectiveOp> parse_op(std::string_view name) {
  for (CollectiveOp op : kCollectiveOps) {
    if (op_name(op) == name) return op;
  }
  return std::nullopt;
}

std::vector<std::string> algorithm_choices() {
  std::vector<std::string> names{"auto"};
  for (CollectiveAlgorithm a : kCollectiveAlgorithms) names.emplace_back(algorithm_name(a));
  return names;
}

std::optional<CollectiveAlgorithm> parse_algorithm(std::string_view name) {
  for (CollectiveAlgorithm a : kCollectiveAlgorithms) {
    if (algorithm_name(a) == name) return a;
  }
  return std::nullopt;
}

double busbw_factor(CollectiveOp op, std::size_t ranks) {
  const auto p = static_cast<double>(ranks);
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (p - 1.0) / p;
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllToAll: return (p - 1.0) / p;
    default: return 1.0;
  }
}

std::vector<std::vector<std::size_t>> CollectiveGroup::by_domain() const {
  std::map<std::uint32_t, std::size_t> index;
  std::vector<std::vector<std::size_t>> local;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto [it, fresh] = index.emplace(domain[i], local.size());
    if (fresh) local.emplace_back();
    local[it->second].push_back(i);
  }
  return local;
}

// Bandwidth from member i to member j (positions in `ranks`) over the links that join
// them directly, summed; 0 where none does.
static std::vector<std::vector<double>> direct_bandwidth(const Cluster& c, const std::vector<NodeId>& ranks,
                                                         const std::vector<std::size_t>& members) {
  const std::size_t m = members.size();
  std::vector<std::vector<double>> bw(m);
  for (std::size_t i = 0; i < m; ++i) {
    bw[i].assign(m, 0.0);
    for (LinkId l : c.out_links(ranks[members[i]])) {
      for (std::size_t j = 0; j < m; ++j) {
        if (j != i && c.link(l).to == ranks[members[j]]) bw[i][j] += c.link(l).bandwidth.value();
      }
    }
  }
  return bw;
}

// Walecki's paths over a domain whose members (positions in the group, m of them, m even)
// are each linked to every other, both ways, at one bandwidth (an MI300X platform): path
// k runs member k, k + 1, k - 1, k + 2, k - 2, ... to k + m/2 (mod m) for k < m/2, and
// path k + m/2 is path k backwards. The m paths use every link once and each member
// starts one and ends one. With `label` (a permutation of 0..m-1) member i of those
// paths is member label[i] instead: the same paths over the mesh under other names, path
// label[k] from label[k] to label[k + m/2]. Returned so that path k starts at member k.
// Empty where the domain is not such a mesh.
static std::vector<std::vector<std::size_t>> walecki_paths(const Cluster& c, const std::vector<NodeId>& ranks,
                                                           const std::vector<std::size_t>& members,
                                                           const std::vector<std::size_t>& label = {}) {
  const std::size_t m = members.size();
  if (m < 4 || m % 2 != 0 || m > 64) return {};
  const auto bw = direct_bandwidth(c, ranks, members);
  for (std::size_t a = 0; a < m; ++a) {
    for (std::size_t b = 0; b < m; ++b) {
      if (b != a && (bw[a][b] <= 0 || bw[a][b] != bw[0][1])) return {};
    }
  }
  std::vector<std::vector<std::size_t>> out(m);
  for (std::size_t k = 0; k < m / 2; ++k) {
    std::vector<std::size_t>& path = out[k];
    path.push_back(k);
    for (std::size_t step = 1; path.size() < m; ++step) {
      path.push_back((k + step) % m);
      if (path.size() < m) path.push_back((k + m - step) % m);
    }
    out[k + m / 2].assign(path.rbegin(), path.rend());
  }
  if (label.size() == m) {
    std::vector<std::vector<std::size_t>> named(m);
    for (const auto& path : out) {
      auto& to = named[label[path[0]]];
      for (std::size_t i : path) to.push_back(label[i]);
    }
    out.swap(named);
  }
  for (auto& path : out) {
    for (std::size_t& i : path) i = members[i];
  }
  return out;
}

// Names for the Walecki paths of the domains of one group that take them, so that each
// channel's ring closes on the rail it started on. A channel crossing a domain on the
// path from member k leaves it at member e(k); over the whole ring its exit map is the
// product of the domains' e, which must be the identity for the hop from the last domain
// back to the first to stay on one rail. Walecki's e is k -> k + m/2, an involution, so an
// even number of domains closes. For an odd number (3 or more) of domains of m members,
// m a multiple of 4, the last two are renamed: the one before last so that its paths
// pair members 2j and 2j + 1 (e2: k -> k xor 1), the last so that they pair k and
// (k + m/2) xor 1 (e3 = e2 e1); e1 and e2 commute, so e1 e2 e3 = (e1 e2)^2 = 1. Returns,
// per domain in `sizes` (0 for a domain without paths), the naming to give it (empty:
// Walecki's own).
static std::vector<std::vector<std::size_t>> closing_labels(const std::vector<std::size_t>& sizes) {
  std::vector<std::vector<std::size_t>> labels(sizes.size());
  std::vector<std::size_t> with;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 0) with.push_back(d);
  }
  if (with.size() < 3 || with.size() % 2 == 0) return labels;
  const std::size_t m = sizes[with[0]];
  for (std::size_t d : with) {
    if (sizes[d] != m) return labels;
  }
  if (m % 4 != 0) return labels;
  // Walecki pairs k with k + m/2 (k < m/2); the renamings send that pair to the wanted one.
  std::vector<std::size_t> pairs_adjacent(m), pairs_shifted(m);
  for (std::size_t k = 0; k < m / 2; ++k) {
    pairs_adjacent[k] = 2 * k;
    pairs_adjacent[k + m / 2] = 2 * k + 1;
    pairs_shifted[k] = k;
    pairs_shifted[k + m / 2] = (k + m / 2) ^ 1U;
  }
  labels[with[with.size() - 2]] = std::move(pairs_adjacent);
  labels[with.back()] = std::move(pairs_shifted);
  return labels;
}

// The rings NCCL's search would lay along a domain's direct accelerator-to-accelerator
// links (`members`: positions in `ranks`): every Hamiltonian cycle of those links, in
// both directions, then picked greedily, each time the one whose most loaded directed
// link would carry the most bandwidth per ring (ties: the first found), while that is at
// least half the first ring's. When rank order is itself a ring of direct links both
// ways: it and its reverse. Empty when the domain is switched (no direct links), when
// rank order steps along direct links one way only, or for fewer than 3 members or (but
// for a rank-order ring) more than 16.
static std::vector<std::vector<std::size_t>> direct_rings(const Cluster& c, const std::vector<NodeId>& ranks,
                                                   const std::vector<std::size_t>& members, bool one_domain) {
  const std::size_t m = members.size();
  if (m < 3) return {};
  // Rank order already a ring of direct links both ways (a torus dimension, a row of
  // chips wired to their neighbours, a DGX-1's fully wired quad): when those are its
  // members' only links to one another (or there are too many members to search), in a
  // group within this one domain that ring and its reverse, one channel each way, so that
  // every link carries data in both directions, as TPU collectives on ICI do, and across
  // domains nothing (the channels are the domains' ranks, each leaving by its own link,
  // and rank order stays); where more links join them (the quad), the search below lays
  // rings over those too, as NCCL's does, within one domain or across several.
  const auto linked = [&](std::size_t a, std::size_t b) {
    for (LinkId l : c.out_links(ranks[members[a]])) {
      if (c.link(l).to == ranks[members[b]]) return true;
    }
    return false;
  };
  bool both_ways = true;
  for (std::size_t i = 0; i < m && both_ways; ++i) both_ways = linked(i, (i + 1) % m) && linked((i + 1) % m, i);
  if (both_ways) {
    bool only_ring = true;  // every member linked to its two ring neighbours alone
    for (std::size_t i = 0; i < m && m <= 16 && only_ring; ++i) {
      std::size_t neighbours = 0;
      for (std::size_t j = 0; j < m; ++j) neighbours += j != i && linked(i, j) ? 1 : 0;
      only_ring = neighbours == 2;
    }
    if (only_ring && !one_domain) return {};
    if (only_ring) return {members, std::vector<std::size_t>(members.rbegin(), members.rend())};
    // More links than the ring (every member wired to every other, as on an MI300X
    // platform or in a DGX-1 quad): the search below lays the channels over all of them,
    // in a group of several domains too, where rank order would put every channel on
    // the same links.
  }
  if (m > 16) return {};
  const auto bw = direct_bandwidth(c, ranks, members);
  bool any = false;
  for (const auto& row : bw) any = any || std::any_of(row.begin(), row.end(), [](double b) { return b > 0; });
  bool rank_order_direct = true;
  for (std::size_t i = 0; i < m; ++i) rank_order_direct = rank_order_direct && bw[i][(i + 1) % m] > 0;
  if (!any || (rank_order_direct && !both_ways)) return {};
  // Every Hamiltonian cycle from member 0 (each undirected cycle once: second < last).
  std::vector<std::vector<std::size_t>> cycles;
  std::vector<std::size_t> path{0};
  std::vector<bool> used(m, false);
  used[0] = true;
  std::size_t budget = 1'000'000;  // DFS steps: ample for 16 members wired sparsely
  std::function<void()> extend = [&] {
    if (budget == 0 || cycles.size() >= 4096) return;
    --budget;
    const std::size_t last = path.back();
    if (path.size() == m) {
      if (bw[last][0] > 0 && bw[0][last] > 0 && path[1] < path.back()) cycles.push_back(path);
      return;
    }
    for (std::size_t j = 1; j < m; ++j) {
      if (used[j] || bw[last][j] <= 0 || bw[j][last] <= 0) continue;
      used[j] = true;
      path.push_back(j);
      extend();
      path.pop_back();
      used[j] = false;
    }
  };
  extend();
  if (cycles.empty()) return {};
  std::vector<std::vector<std::size_t>> directed;
  for (const auto& cyc : cycles) {
    directed.push_back(cyc);
    std::vector<std::size_t> back{cyc[0]};
    for (std::size_t k = m - 1; k >= 1; --k) back.push_back(cyc[k]);
    directed.push_back(back);
  }
  std::vector<std::vector<double>> rings_on(m, std::vector<double>(m, 0.0));
  auto share = [&](const std::vector<std::size_t>& cyc) {
    double s = 1e300;
    for (std::size_t k = 0; k < m; ++k) {
      const std::size_t a = cyc[k], b = cyc[(k + 1) % m];
      s = std::min(s, bw[a][b] / (rings_on[a][b] + 1));
    }
    return s;
  };
  std::vector<std::vector<std::size_t>> out;
  double first = 0;
  while (out.size() < 2 * m) {
    std::size_t best = 0;
    double best_share = -1;
    for (std::size_t i = 0; i < directed.size(); ++i) {
      const double s = share(directed[i]);
      if (s > best_share) {
        best_share = s;
        best = i;
      }
    }
    if (out.empty()) first = best_share;
    if (best_share < first / 2) break;
    const auto& cyc = directed[best];
    for (std::size_t k = 0; k < m; ++k) rings_on[cyc[k]][cyc[(k + 1) % m]] += 1;
    std::vector<std::size_t> positions;
    for (std::size_t k : cyc) positions.push_back(members[k]);
    out.push_back(std::move(positions));
  }
  return out;
}

// The cycles tree chains follow through a domain with direct rings (see
// CollectiveGroup::domain_chains): among its rings that hold exactly its members, one per
// undirected cycle, `members.size()` picks, each the cycle whose slowest link has the most
// bandwidth per chain counting the picks before it (ties: the first).
static std::vector<std::vector<std::size_t>> chain_cycles(const Cluster& c, const std::vector<NodeId>& ranks,
                                                          const std::vector<std::size_t>& members,
                                                          const std::vector<std::vector<std::size_t>>& rings) {
  const std::size_t m = members.size();
  std::vector<std::size_t> want(members);
  std::sort(want.begin(), want.end());
  const auto local = [&](std::size_t position) {
    return static_cast<std::size_t>(std::lower_bound(want.begin(), want.end(), position) - want.begin());
  };
  // Each candidate as its undirected edges (local indices a < b).
  std::vector<std::vector<std::size_t>> cycles;
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> edges;
  for (const auto& ring : rings) {
    auto sorted = ring;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != want) continue;
    std::vector<std::pair<std::size_t, std::size_t>> e;
    for (std::size_t k = 0; k < m; ++k) {
      const std::size_t a = local(ring[k]), b = local(ring[(k + 1) % m]);
      e.emplace_back(std::min(a, b), std::max(a, b));
    }
    std::sort(e.begin(), e.end());
    if (std::find(edges.begin(), edges.end(), e) != edges.end()) continue;
    edges.push_back(std::move(e));
    cycles.push_back(ring);
  }
  if (cycles.empty()) return {};
  const auto bw = direct_bandwidth(c, ranks, want);
  std::vector<std::vector<int>> load(m, std::vector<int>(m, 0));
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t pick = 0; pick < m; ++pick) {
    std::size_t best = 0;
    double best_share = -1;
    for (std::size_t i = 0; i < cycles.size(); ++i) {
      double share = 1e300;
      for (const auto& [a, b] : edges[i]) share = std::min(share, std::min(bw[a][b], bw[b][a]) / (load[a][b] + 1));
      if (share > best_share) {
        best_share = share;
        best = i;
      }
    }
    for (const auto& [a, b] : edges[best]) ++load[a][b];
    out.push_back(cycles[best]);
  }
  return out;
}

double ring_mean_transport(NetworkFabric& fabric, const CollectiveGroup& group, const std::vector<std::size_t>& order,
                           bool low_latency) {
  const std::size_t p = order.size();
  double sum = 0.0;
  for (std::size_t r = 0; r < p; ++r) {
    sum += fabric.route_transport(fabric.first_route(group.ranks[order[r]], group.ranks[order[(r + 1) % p]]), low_latency);
  }
  return p == 0 ? 0.0 : sum / static_cast<double>(p);
}

double CollectiveGroup::phase_wait(double bytes) const {
  return ring_wait.empty() ? 0.0 : *std::max_element(ring_wait.begin(), ring_wait.end()) * bytes;
}

CollectiveGroup CollectiveGroup::of(NetworkFabric& fabric, std::vector<NodeId> ranks) {
  const Cluster& c = fabric.cluster();
  CollectiveGroup g;
  g.fabric = &fabric;
  if (ranks.empty()) ranks.assign(c.accelerators().begin(), c.accelerators().end());
  g.ranks = std::move(ranks);
  for (NodeId n : g.ranks) g.domain.push_back(fabric.domain_of_node()[n.value]);
  bool any_direct = false;
  const auto domains = g.by_domain();
  if (fabric.any_ring_overhead()) {
    bool any = false;
    g.ring_wait.assign(g.ranks.size(), 0.0);
    for (std::size_t r = 0; r < g.ranks.size(); ++r) {
      double overhead = 0.0, port = 0.0;
      for (LinkId l : c.out_links(g.ranks[r])) {
        if (fabric.ring_overhead(l) <= 0.0) continue;
        overhead = std::max(overhead, fabric.ring_overhead(l));
        port += fabric.capacity(l);
      }
      if (overhead > 0.0 && port > 0.0) {
        g.ring_wait[r] = overhead / port;
        any = true;
      }
    }
    if (!any) g.ring_wait.clear();
  }
  if (fabric.any_ll_bus_bandwidth() && g.ranks.size() > 1) {
    for (std::size_t d = 0; d < domains.size(); ++d) {
      const auto& members = domains[d];
      const std::size_t to = d == 0 ? (members.size() > 1 ? members[1] : members[0]) : members[0];
      if (to == 0) continue;
      g.ll_bus_bandwidth = std::min(g.ll_bus_bandwidth, fabric.route_ll_bus_bandwidth(fabric.first_route(g.ranks[0], g.ranks[to])));
    }
    if (domains.size() > 1) g.ll_channels = std::min(2 * default_channels(g), kMaxChannels);  // two per ring channel
  }
  bool any_paths = false;
  // Across domains a channel crosses each on a path from its entry to its exit, named so
  // that its ring closes on one rail (closing_labels).
  std::vector<std::vector<std::vector<std::size_t>>> domain_paths(domains.size());
  std::vector<std::size_t> path_sizes(domains.size(), 0);
  for (std::size_t d = 0; d < domains.size() && domains.size() > 1; ++d) {
    domain_paths[d] = walecki_paths(c, g.ranks, domains[d]);
    if (!domain_paths[d].empty()) path_sizes[d] = domains[d].size();
  }
  const auto labels = closing_labels(path_sizes);
  for (std::size_t d = 0; d < domains.size(); ++d) {
    const auto& members = domains[d];
    auto& paths = domain_paths[d];
    if (!labels[d].empty()) paths = walecki_paths(c, g.ranks, members, labels[d]);
    const bool walecki = !paths.empty();
    g.domain_paths.push_back(walecki);
    any_paths = any_paths || walecki;
    g.domain_rings.push_back(walecki ? std::move(paths) : direct_rings(c, g.ranks, members, domains.size() == 1));
    g.domain_chains.push_back(walecki ? std::vector<std::vector<std::size_t>>{} : chain_cycles(c, g.ranks, members, g.domain_rings.back()));
    any_direct = any_direct || !g.domain_rings.back().empty();
  }
  if (!any_direct) {
    g.domain_rings.clear();
    g.domain_chains.clear();
  }
  if (!any_paths) g.domain_paths.clear();
  for (const TorusShape& t : c.tori()) {
    if (t.chips == g.ranks) {
      g.torus_dims = t.dims;
      g.torus_wrap = t.wrap;
      break;
    }
  }
  return g;
}

int default_channels(const CollectiveGroup& group) {
  const auto local = group.by_domain();
  // One domain: one ring, or as many as its direct links carry.
  if (local.size() < 2) return group.domain_rings.empty() ? 1 : static_cast<int>(std::max<std::size_t>(1, group.domain_rings[0].size()));
  std::size_t most = 1;
  for (const auto& l : local) most = std::max(most, l.size());
  return static_cast<int>(std::min<std::size_t>(most, kMaxChannels));
}

int default_tree_channels(const CollectiveGroup& group) {
  if (group.by_domain().size() < 2) return 2;
  const int rings = default_channels(group);
  return std::max(2, rings + rings % 2);
}

int effective_channels(const CollectiveGroup& group, const CollectiveSpec& spec) {
  switch (spec.algorithm) {
    case CollectiveAlgorithm::kRing: return spec.channels > 0 ? spec.channels : default_channels(group);
    case CollectiveAlgorithm::kTree: return spec.channels > 0 ? spec.channels : default_tree_channels(group);
    default: return 1;  // the other algorithms have no channels
  }
}

std::string op_unsupported_reason(CollectiveOp op, CollectiveAlgorithm a) {
  using Op = CollectiveOp;
  const auto op_is = [op](std::initializer_list<Op> ops) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  const std::string what = std::string(algorithm_name(a)) + " does not implement " + std::string(op_name(op));
  switch (a) {
    case CollectiveAlgorithm::kRing:
      if (op_is({Op::kAllToAll, Op::kSendRecv})) return what + " (use direct)";
      return {};
    case CollectiveAlgorithm::kTree:
      if (!op_is({Op::kAllReduce})) return what + " (NCCL's trees serve all-reduce only)";
      return {};
    case CollectiveAlgorithm::kHalvingDoubling:
    case CollectiveAlgorithm::kTorus:
      if (!op_is({Op::kAllReduce, Op::kReduceScatter, Op::kAllGather})) return what;
      return {};
    case CollectiveAlgorithm::kDirect: return {};
    case CollectiveAlgorithm::kHierarchical:
      if (!op_is({Op::kAllReduce, Op::kAllToAll})) return what;
      return {};
  }
  return what;
}

std::string unsupported_reason(const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a) {
  if (std::string why = op_unsupported_reason(op, a); !why.empty()) return why;
  const std::size_t p = group.ranks.size();
  switch (a) {
    case CollectiveAlgorithm::kHalvingDoubling:
      if (!std::has_single_bit(p)) return "halving-doubling needs a power-of-two number of ranks, not " + std::to_string(p);
      return {};
    case CollectiveAlgorithm::kHierarchical: {
      const auto local = group.by_domain();
      if (local.size() < 2) return "hierarchical needs ranks in at least two scale-up domains";
      for (const auto& l : local) {
        if (l.size() != local.front().size()) return "hierarchical needs the same number of ranks in every scale-up domain";
      }
      return {};
    }
    case CollectiveAlgorithm::kTorus:
      if (group.torus_dims.empty()) return "torus needs the group to be one whole torus of the cluster, in its order";
      return {};
    case CollectiveAlgorithm::kRing:
    case CollectiveAlgorithm::kTree:
    case CollectiveAlgorithm::kDirect: return {};
  }
  return {};
}

// Whether a tree all-reduce is lowered as streams (streamed_tree: one transfer per edge
// and direction for all its chunks) rather than chunk by chunk (trees_by_step): streamed,
// in more than one chunk, and without shares (the analytical model's trees always go
// chunk by chunk).
namespace {
bool trees_streamed(const CollectiveSpec& spec, bool shared) {
  return spec.streamed && effective_chunks(spec) > 1 && !shared;
}
}  // namespace

std::vector<double> concurrent_transfer_shares(NetworkFabric& fabric, const std::vector<std::pair<NodeId, NodeId>>& transfers) {
  std::vector<NodeId> members;
  for (const auto& [from, to] : transfers) {
    members.push_back(from);
    members.push_back(to);
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  Shares shares(&fabric);
  shares.set(transfers, true, {members});
  std::vector<double> out;
  out.reserve(transfers.size());
  for (const auto& [from, to] : transfers) out.push_back(shares.of(from, to));
  return out;
}

namespace {
std::uint64_t algorithm_transfer_count(const CollectiveGroup& group, const CollectiveSpec& spec, bool shared) {
  using Op = CollectiveOp;
  const std::uint64_t p = group.ranks.size();
  const auto c = static_cast<std::uint64_t>(effective_chunks(spec));
  if (p < 2) return 0;
  // A streamed ring phase is one transfer per rank instead of one per step and chunk, a
  // streamed tree one per edge and direction instead of one per chunk.
  const std::uint64_t s = spec.streamed ? 1 : 0;
  switch (spec.algorithm) {
    case CollectiveAlgorithm::kRing: {
      const std::uint64_t channels = static_cast<std::uint64_t>(effective_channels(group, spec));
      const std::uint64_t per = channels * c;
      switch (spec.op) {
        case Op::kAllReduce: return s ? p * channels : 2 * (p - 1) * p * per;  // one phase of 2(p-1) steps
        case Op::kReduceScatter:
        case Op::kAllGather: return s ? p * channels : (p - 1) * p * per;
        default: return (p - 1) * per;
      }
    }
    case CollectiveAlgorithm::kTree:  // streamed: one per edge and way for all the chunks
      return static_cast<std::uint64_t>(effective_channels(group, spec)) * 2 * (p - 1) * (trees_streamed(spec, shared) ? 1 : c);
    case CollectiveAlgorithm::kHalvingDoubling: {
      const auto steps = static_cast<std::uint64_t>(std::countr_zero(p));
      return (spec.op == Op::kAllReduce ? 2 : 1) * steps * p * c;
    }
    case CollectiveAlgorithm::kDirect:
      switch (spec.op) {
        case Op::kAllReduce: return 2 * p * (p - 1) * c;
        case Op::kReduceScatter:
        case Op::kAllGather:
        case Op::kAllToAll: return p * (p - 1) * c;
        case Op::kSendRecv: return c;
        default: return (p - 1) * c;
      }
    case CollectiveAlgorithm::kHierarchical: {
      const auto local = group.by_domain();
      const std::uint64_t n = local.size(), g = local.front().size();
      if (spec.op == Op::kAllToAll) return (g * n * (n - 1) + n * g * (g - 1)) * c;  // across, then within
      if (s) return 3 * g * n;  // reduce-scatter inside, all-reduce across, all-gather inside
      return (2 * (g - 1) * g * n + 2 * (n - 1) * n * g) * c;
    }
    case CollectiveAlgorithm::kTorus: {
      // D x ways parts (torus_used_dims, torus_ways), each a pass over every dimension of
      // more than one chip.
      const auto used = torus_used_dims(group.torus_dims);
      std::uint64_t per_pass = 0;
      for (std::size_t d : used) per_pass += s ? p : static_cast<std::uint64_t>(group.torus_dims[d] - 1) * p;
      return used.size() * static_cast<std::uint64_t>(torus_ways(group)) * (spec.op == Op::kAllReduce ? 2 : 1) *
             per_pass * (s ? 1 : c);
    }
  }
  return 0;
}
}  // namespace

std::uint64_t collective_transfer_count(const CollectiveGroup& group, const CollectiveSpec& spec, bool shared) {
  const std::uint64_t n = algorithm_transfer_count(group, spec, shared);
  // The low-latency protocol's rate: one zero-byte transfer that waits it (build()).
  return n > 0 && low_latency_wait(group, spec) > 0.0 ? n + 1 : n;
}

namespace {

void check_request(const CollectiveGroup& group, const CollectiveSpec& spec) {
  using Op = CollectiveOp;
  const std::size_t p = group.ranks.size();
  if (p == 0) throw InputError("collective: the group has no ranks");
  if (group.domain.size() != p) throw InputError("collective: one scale-up domain per rank expected");
  for (const std::vector<NodeId>& sibling : group.siblings) {
    if (sibling.size() != p) throw InputError("collective: a sibling group needs as many ranks as the group");
  }
  if (spec.chunks < 0) throw InputError("collective: chunks must be at least 1 (or 0 for automatic)");
  // (A transfer counts its latencies below Transfer's protocol bits.)
  if (spec.chunks > (1 << 20)) throw InputError("collective: chunks must be at most 1048576");
  if (spec.channels < 0) throw InputError("collective: channels must be at least 1 (or 0 for automatic)");
  if (!(spec.bytes >= 0.0)) throw InputError("collective: bytes must be >= 0");
  if (!(spec.across >= 0.0 && spec.across <= 1.0) || !(spec.within >= 0.0 && spec.within <= 1.0)) {
    throw InputError("collective: the shares of a hierarchical all-to-all's phases must be between 0 and 1");
  }
  if (spec.root >= p) throw InputError("collective: root " + std::to_string(spec.root) + " is not a rank of the group");
  if (spec.op == Op::kSendRecv && (spec.peer >= p || spec.peer == spec.root)) {
    throw InputError("collective: send-recv needs a peer rank other than the root");
  }
  if (std::string why = unsupported_reason(group, spec.op, spec.algorithm); !why.empty()) throw InputError(why);
}

// Each rank's readiness once every channel's part has given it its result: the one
// part's own, or a marker after all of them.
template <class Sink>
void join_parts(Lowering<Sink>& low, const std::vector<std::vector<TaskId>>& done, std::vector<TaskId>& ready) {
  if (done.size() == 1) {
    ready = done.front();
    return;
  }
  for (std::size_t i = 0; i < ready.size(); ++i) {
    ready[i] = low.marker();
    for (const auto& d : done) low.edge(d[i], ready[i]);
  }
}

// `spec` with its protocol (CollectiveSpec::low_latency) chosen where it names none and
// a fabric can price the choice (choose_protocol).
CollectiveSpec with_protocol(NetworkFabric* fabric, const CollectiveGroup& group, const CollectiveSpec& spec) {
  CollectiveSpec out = spec;
  if (!out.low_latency && fabric != nullptr) out.low_latency = choose_protocol(*fabric, group, out);
  return out;
}

// Lowers the collective between a start marker and the returned end marker.
template <class Sink>
std::pair<TaskId, TaskId> build(Lowering<Sink>& low, const CollectiveGroup& group, const CollectiveSpec& spec) {
  using Op = CollectiveOp;
  const std::size_t p = group.ranks.size();
  const int channels = effective_channels(group, spec);
  const TaskId start = low.marker();
  std::vector<TaskId> ready(p, low.rate_gate(start));
  const double S = spec.bytes;
  const double P = static_cast<double>(p);
  const std::size_t root = spec.root;

  switch (spec.algorithm) {
    case CollectiveAlgorithm::kRing: {
      const auto orders = ring_orders(group, channels);
      const double share = S / channels;
      std::vector<std::vector<TaskId>> done(orders.size(), ready);
      if (spec.op == Op::kBroadcast || spec.op == Op::kReduce) {
        // A chain through each ring order, starting (broadcast) or ending (reduce) at the root.
        std::vector<std::vector<std::size_t>> chains;
        for (const auto& order : orders) {
          const std::size_t at = static_cast<std::size_t>(std::find(order.begin(), order.end(), root) - order.begin());
          std::vector<std::size_t> chain;
          for (std::size_t k = 0; k < p; ++k) chain.push_back(order[(at + k) % p]);
          if (spec.op == Op::kReduce) std::reverse(chain.begin(), chain.end());
          chains.push_back(std::move(chain));
        }
        low.chains_by_step(chains, share, done);
      } else if (spec.op == Op::kAllReduce || spec.op == Op::kReduceScatter || spec.op == Op::kAllGather) {
        low.rings_at_once(orders);
        low.ring_overhead(channels);
        const int steps = static_cast<int>(p - 1) * (spec.op == Op::kAllReduce ? 2 : 1);
        for (std::size_t t = 0; t < orders.size(); ++t) low.ring(orders[t], steps, share / P, done[t]);
      }
      join_parts(low, done, ready);
      break;
    }
    case CollectiveAlgorithm::kTree: {
      // NCCL's trees, one per channel, S/t each: even channels the tree, odd ones its
      // mirror (the double binary tree), each channel's chains headed by another rank.
      // With shares (the analytical model) the trees go chunk by chunk, step by step,
      // streamed or not: a stream would share its links with every edge of every tree
      // for all its time and leave out the pipeline's fill, the time that counts for the
      // small messages trees are chosen for (streaming saves the flow model's flows).
      const int trees = channels;
      const auto parents = tree_parents(group, trees);
      std::vector<std::vector<TaskId>> done(parents.size(), ready);
      if (trees_streamed(spec, low.sharing())) {
        for (std::size_t t = 0; t < parents.size(); ++t) low.streamed_tree(parents[t], S / trees, done[t]);
      } else {
        low.trees_by_step(parents, S / trees, done);
      }
      join_parts(low, done, ready);
      break;
    }
    case CollectiveAlgorithm::kHalvingDoubling:
      if (spec.op != Op::kAllGather) low.halving_doubling(S, true, ready);
      if (spec.op != Op::kReduceScatter) low.halving_doubling(S, false, ready);
      break;
    case CollectiveAlgorithm::kDirect: {
      const std::vector<std::size_t> all = iota(p);
      switch (spec.op) {
        case Op::kAllReduce:
          low.direct(all, all, S / P, ready);
          low.direct(all, all, S / P, ready);
          break;
        case Op::kReduceScatter:
        case Op::kAllGather:
        case Op::kAllToAll: low.direct(all, all, S / P, ready); break;
        case Op::kBroadcast: low.direct({root}, all, S, ready); break;
        case Op::kReduce: low.direct(all, {root}, S, ready); break;
        case Op::kSendRecv: low.direct({root}, {spec.peer}, S, ready); break;
      }
      break;
    }
    case CollectiveAlgorithm::kHierarchical: {
      const auto local = group.by_domain();
      const std::size_t gsize = local.front().size(), n = local.size();
      const double G = static_cast<double>(gsize), N = static_cast<double>(n);
      std::vector<std::vector<std::size_t>> across(gsize);
      for (std::size_t k = 0; k < gsize; ++k) {
        for (const auto& l : local) across[k].push_back(l[k]);
      }
      if (spec.op == Op::kAllToAll) {
        const auto first = low.exchange(across, S / N * spec.across, ready, nullptr);
        const auto second = low.exchange(local, S / G * spec.within, ready, &first);
        for (std::size_t r = 0; r < p; ++r) {
          if (first[r].back() == ready[r] && second[r].back() == ready[r]) continue;
          const TaskId m = low.marker();
          low.edge(first[r].back(), m);
          low.edge(second[r].back(), m);
          ready[r] = m;
        }
        break;
      }
      low.rings_at_once(local);
      low.ring_overhead(1);
      for (const auto& l : local) low.ring(l, static_cast<int>(gsize - 1), S / G, ready);
      low.rings_at_once(across);
      for (const auto& a : across) low.ring(a, 2 * static_cast<int>(n - 1), S / G / N, ready);
      low.rings_at_once(local);
      for (const auto& l : local) low.ring(l, static_cast<int>(gsize - 1), S / G, ready);
      break;
    }
    case CollectiveAlgorithm::kTorus: {
      // Every dimension's links, both ways where they wrap, at once (torus_used_dims,
      // torus_ways): part (j, way) carries S / (D ways) and reduces along the dimensions
      // in the order j, j + 1, ... (mod D), its rings running `way`, then gathers back in
      // the reverse order. Phase i of every part ends before any part starts phase i + 1:
      // then the parts use different dimensions' links (or a link's two directions) in
      // every phase, so none shares a link and no shares are needed. On sides of one
      // length the phases take equal times and the barrier costs nothing; on unequal
      // sides, parts left to run ahead would meet on one dimension's links.
      low.none_at_once();
      const auto& dims = group.torus_dims;
      const auto used = torus_used_dims(dims);
      const std::size_t D = used.size();
      if (D == 0) break;  // one chip: nothing to send
      const int ways = torus_ways(group);
      struct Part {
        std::vector<std::size_t> seq;  // its dimensions, in its order
        std::vector<double> shard;     // bytes held before phase i
        bool backwards;
      };
      std::vector<Part> parts;
      for (std::size_t j = 0; j < D; ++j) {
        for (int w = 0; w < ways; ++w) {
          Part part{{}, std::vector<double>(D + 1, S / (static_cast<double>(D) * ways)), w == 1};
          for (std::size_t i = 0; i < D; ++i) part.seq.push_back(used[(j + i) % D]);
          for (std::size_t i = 0; i < D; ++i) part.shard[i + 1] = part.shard[i] / dims[part.seq[i]];
          parts.push_back(std::move(part));
        }
      }
      // Phase i of every part (its rings along its i-th dimension), then the barrier.
      const auto phase = [&](std::size_t i) {
        std::vector<std::vector<TaskId>> done;
        for (const Part& part : parts) {
          std::vector<TaskId> r = ready;
          auto rings = torus_rings(dims, part.seq[i]);
          for (auto& ring : rings) {
            if (part.backwards) std::reverse(ring.begin(), ring.end());
            low.ring(ring, dims[part.seq[i]] - 1, part.shard[i + 1], r);
          }
          done.push_back(std::move(r));
        }
        const TaskId barrier = low.marker();
        for (const auto& d : done) {
          for (TaskId t : d) low.edge(t, barrier);
        }
        std::fill(ready.begin(), ready.end(), barrier);
      };
      if (spec.op != Op::kAllGather) {
        for (std::size_t i = 0; i < D; ++i) phase(i);
      }
      if (spec.op != Op::kReduceScatter) {
        for (std::size_t i = D; i-- > 0;) phase(i);
      }
      break;
    }
  }
  const TaskId end = low.marker();
  bool joined = false;
  TaskId last;
  for (TaskId t : ready) {
    if (t == start || t == last) continue;  // (after a barrier every rank's is the barrier)
    low.edge(t, end);
    last = t;
    joined = true;
  }
  if (!joined) low.edge(start, end);
  return {start, end};
}

}  // namespace

LoweredCollective lower_collective(TaskGraph& g, ResourceId network, const CollectiveGroup& group,
                                   const CollectiveSpec& spec, NetworkFabric* shares_on, std::string_view label) {
  check_request(group, spec);
  const CollectiveSpec resolved = with_protocol(shares_on != nullptr ? shares_on : group.fabric, group, spec);
  // Room for the transfers and about one marker per rank and phase.
  g.reserve(g.size() + collective_transfer_count(group, resolved, shares_on != nullptr) + 4 * group.ranks.size() + 2);
  GraphSink sink(g, network, resolved, label);
  Lowering<GraphSink> low(sink, group, resolved, shares_on);
  LoweredCollective out;
  std::tie(out.start, out.end) = build(low, group, resolved);
  out.transfers = low.transfers();
  return out;
}

double analytical_collective_time(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec) {
  check_request(group, spec);
  const CollectiveSpec resolved = with_protocol(&fabric, group, spec);
  TimingSink sink(fabric, resolved);
  Lowering<TimingSink> low(sink, group, resolved, &fabric);
  return sink.finish(build(low, group, resolved).second);
}

CollectiveCost analytical_collective_cost(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec) {
  check_request(group, spec);
  const CollectiveSpec resolved = with_protocol(&fabric, group, spec);
  CollectiveCost out;
  TimingSink sink(fabric, resolved, &out.traffic, group.ranks.front());
  Lowering<TimingSink> low(sink, group, resolved, &fabric);
  out.time = sink.finish(build(low, group, resolved).second);
  sink.collect();
  return out;
}


}  // namespace ddlsim
