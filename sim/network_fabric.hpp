// What the network models know of a cluster: every directed link's effective capacity
// and latency, and the candidate routes between two nodes.
//
// A transfer task's endpoints are cluster nodes: EndpointId(n) is NodeId(n).
//
// Effective capacity = the link's bandwidth x its kind's efficiency in the catalog (the
// fraction of line rate NCCL-like collectives reach; 1 for kinds the catalog does not
// know, such as an explicit topology's "custom" links).
//
// Routes: between two chips of one torus the cluster recorded, the single dimension-order
// route (as TPUs route); otherwise up to kMaxCandidates distinct minimum-hop paths (of the
// equal-cost set; more where a switch on the way offers more equal next hops, up to
// kMaxWideCandidates), chosen to differ from the first hop on, of which the flow model picks
// one per transfer by load and the analytical model takes the first. Each starts with
// as long a run of scale-up links as a minimum-hop route allows (spread_walk's `lead`):
// a send to another server's GPU on another rail rides NVLink to the GPU of the
// destination's rail and leaves by its NIC, as NCCL's PXN does. Answers are cached per
// (src, dst): a word saying how many routes of how many links, then the links of all of a
// pair's candidates one after another, in blocks that never move (a pair with 64
// candidates of 6 links: 1.5 KB), found by a RouteIndex (16 bytes a slot, no allocation
// per pair). prefetch_routes and prefetch_first_routes answer many pairs with one search
// per destination.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/collective_kinds.hpp"
#include "sim/core/task.hpp"
#include "topology/cluster.hpp"
#include "topology/routing.hpp"

namespace ddlsim {

class Catalog;
class ShortestPathRouter;

/// The candidate routes between two nodes (NetworkFabric::routes): size() routes of the
/// same number of links (minimum-hop routes are equally long), one after another in the
/// fabric's store. A view: copies are cheap, and it stays valid while the fabric lives.
class RouteSet {
 public:
  RouteSet() = default;
  RouteSet(const LinkId* links, std::uint32_t count, std::uint32_t hops) : links_(links), count_(count), hops_(hops) {}
  [[nodiscard]] std::size_t size() const { return count_; }
  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] std::span<const LinkId> operator[](std::size_t i) const { return {links_ + i * hops_, hops_}; }
  [[nodiscard]] std::span<const LinkId> front() const { return (*this)[0]; }

  class iterator {
   public:
    using value_type = std::span<const LinkId>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const RouteSet* set, std::size_t i) : set_(set), i_(i) {}
    value_type operator*() const { return (*set_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const RouteSet* set_ = nullptr;
    std::size_t i_ = 0;
  };
  [[nodiscard]] iterator begin() const { return {this, 0}; }
  [[nodiscard]] iterator end() const { return {this, count_}; }

 private:
  const LinkId* links_ = nullptr;
  std::uint32_t count_ = 0;
  std::uint32_t hops_ = 0;
};

/// Route sets by pair, (src << 32 | dst) -> where the set starts in a fabric's store (its
/// count-and-length word): open addressing with linear probing, at most 3/4 full, 16
/// bytes a slot. Keys are node ids, so the key with both halves max() is never one.
class RouteIndex {
 public:
  /// The set of `key`, or null.
  [[nodiscard]] const LinkId* find(std::uint64_t key) const;
  /// Adds a key that is not in the index yet.
  void insert(std::uint64_t key, const LinkId* set);
  /// Room for `keys` keys in all without growing again.
  void reserve(std::size_t keys);
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t key;
    const LinkId* set;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  [[nodiscard]] std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::vector<Slot> slots_;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

class NetworkFabric {
 public:
  /// Candidate routes per (src, dst): kMaxCandidates, or where a switch on the way has
  /// more equal-cost next hops (a leaf with 32 uplinks), as many as it has, up to
  /// kMaxWideCandidates.
  static constexpr std::size_t kMaxCandidates = 16;
  static constexpr std::size_t kMaxWideCandidates = 64;

  /// With the catalog's link efficiencies, and the run's collective policy (automatic by default).
  NetworkFabric(const Cluster& cluster, const Catalog& catalog, const CollectivePolicy& policy = {});
  /// With the efficiency of every directed link given explicitly (tests, custom models),
  /// and which links are scale-up links (none when empty).
  NetworkFabric(const Cluster& cluster, std::vector<double> efficiency, const std::vector<bool>& scale_up = {});
  ~NetworkFabric();
  NetworkFabric(const NetworkFabric&) = delete;
  NetworkFabric& operator=(const NetworkFabric&) = delete;

  [[nodiscard]] const Cluster& cluster() const { return *cluster_; }
  /// The run's collective policy: chosen_spec (sim/collectives.hpp) follows it for every
  /// collective priced or replayed on this fabric.
  [[nodiscard]] const CollectivePolicy& collective_policy() const { return collective_policy_; }
  /// (Forgets cached_values, which may depend on the policy's choices.)
  void set_collective_policy(const CollectivePolicy& p) {
    collective_policy_ = p;
    values_.clear();
  }
  [[nodiscard]] double capacity(LinkId l) const { return capacity_[l.value]; }  // B/s
  [[nodiscard]] double latency(LinkId l) const { return latency_[l.value]; }    // s
  /// The ring overhead of l's kind in the catalog (LinkSpec::ring_overhead; 0 for kinds
  /// it does not know and on fabrics built with explicit efficiencies).
  [[nodiscard]] double ring_overhead(LinkId l) const { return ring_overhead_.empty() ? 0.0 : ring_overhead_[l.value]; }
  [[nodiscard]] bool any_ring_overhead() const { return !ring_overhead_.empty(); }
  /// Whether both ends of l are switches (a fabric's leaf, spine or core, or a switch
  /// inside a server): not a link next to an accelerator, host or NIC.
  [[nodiscard]] bool between_switches(LinkId l) const { return (ends_[l.value] & kBetweenSwitches) != 0; }
  /// Whether l leads into an accelerator.
  [[nodiscard]] bool into_accelerator(LinkId l) const { return (ends_[l.value] & kIntoAccelerator) != 0; }
  /// One counter per directed link, for code that counts transfers on links: all zero
  /// between uses (a user resets what it set before it returns the space).
  std::vector<int>& link_counts() {
    if (link_counts_.empty()) link_counts_.assign(capacity_.size(), 0);
    return link_counts_;
  }
  /// A number per transfer of a set of transfers (each a (src << 32 | dst) key, in
  /// order) that depends on the set and the fabric alone, kept by whoever derived it
  /// (the analytical model's bandwidth shares of a collective's transfers): the numbers
  /// for exactly this set, or null. Up to kMaxCachedTransfers transfers are kept.
  [[nodiscard]] const std::vector<float>* cached_shares(const std::vector<std::uint64_t>& set) const;
  void cache_shares(std::vector<std::uint64_t> set, std::vector<float> values);
  static constexpr std::size_t kMaxCachedTransfers = std::size_t{1} << 22;
  /// A caller's own numbers for a key of its own, that depend on the key and the fabric
  /// alone, its collective policy included (the search's estimate keeps the times of a
  /// mesh's collectives and sends there), or null. Up to kMaxCachedTransfers key words
  /// are kept; set_collective_policy forgets them.
  [[nodiscard]] const std::vector<double>* cached_values(const std::vector<std::uint64_t>& key) const;
  void cache_values(std::vector<std::uint64_t> key, std::vector<double> values);

  /// Candidate routes from src to dst (at least one; one empty route when src == dst).
  /// Two accelerators of one scale-up domain are joined over its scale-up links only
  /// when those give a minimum-hop route, as NCCL and CUDA peer-to-peer copies take
  /// NVLink where another way is as short (two GPUs behind one PCIe switch and NIC).
  /// Throws GraphError when dst cannot be reached. The spans stay valid while the
  /// fabric lives.
  RouteSet routes(NodeId src, NodeId dst);
  /// routes(src, dst).front(), the route the analytical model takes, found without the
  /// other candidates when they are not cached (one walk instead of kMaxCandidates).
  /// The span stays valid while the fabric lives.
  std::span<const LinkId> first_route(NodeId src, NodeId dst);

  /// Finds first_route for every pair (src, dst) not yet known, as first_route would,
  /// with one breadth-first search per destination instead of one search per pair: for
  /// the p(p - 1) sends of an all-to-all among many ranks. Pairs that cannot be routed
  /// are left for first_route to report.
  void prefetch_first_routes(const std::vector<std::pair<NodeId, NodeId>>& pairs);

  /// Finds routes for the pairs (src, dst) not yet known, as routes would, with one
  /// breadth-first search per destination instead of one search per pair, for the
  /// destinations with many unknown sources (an all-to-all's; a ring's one source per
  /// destination is left to routes, whose search stays near the pair): for a replay's
  /// transfers before the flow model routes them one by one. Pairs that cannot be routed (or name no node) are left for
  /// routes to report.
  void prefetch_routes(std::vector<std::pair<NodeId, NodeId>> pairs);
  /// How many pairs prefetch_routes has routed (tests and statistics).
  [[nodiscard]] std::size_t prefetched_routes() const { return prefetched_; }

  /// The sum of the latencies along a route plus, once, the largest transport latency
  /// among its links (LinkSpec::transport_latency: a message through a NIC); with
  /// `low_latency` (a collective of the library's low-latency protocol,
  /// low_latency_protocol in sim/collectives.hpp), those of that protocol
  /// (LinkSpec::ll_latency where the catalog gives one, LinkSpec::ll_transport_latency).
  [[nodiscard]] double route_latency(std::span<const LinkId> route, bool low_latency = false) const {
    return route_latencies(route, low_latency).latency;
  }
  /// The transport part of route_latency(route, low_latency).
  [[nodiscard]] double route_transport(std::span<const LinkId> route, bool low_latency) const {
    return route_latencies(route, low_latency).transport;
  }
  /// Both, in one walk along the route.
  struct RouteLatency {
    double latency;    // route_latency
    double transport;  // route_transport
  };
  [[nodiscard]] RouteLatency route_latencies(std::span<const LinkId> route, bool low_latency) const;
  /// One of transfer t's latencies on its route: its protocol's, less the transport that
  /// its wait already holds (Transfer::transport_in_wait).
  [[nodiscard]] double transfer_latency(std::span<const LinkId> route, const Transfer& t) const {
    const RouteLatency r = route_latencies(route, t.low_latency());
    return r.latency - (t.transport_in_wait() ? r.transport : 0.0);
  }
  /// A route's smallest effective capacity (infinity for an empty route).
  [[nodiscard]] double route_capacity(std::span<const LinkId> route) const;
  /// The smallest low-latency-protocol bus bandwidth (LinkSpec::ll_bus_bandwidth, B/s)
  /// among a route's links that have one; infinity when none has.
  [[nodiscard]] double route_ll_bus_bandwidth(std::span<const LinkId> route) const;
  /// Whether any link has a low-latency-protocol bus bandwidth.
  [[nodiscard]] bool any_ll_bus_bandwidth() const { return !ll_bus_.empty(); }

  /// The scale-up domain (server, NVLink domain, torus) of every accelerator: two
  /// accelerators share one when a path joins them over scale-up links only (links whose
  /// kind is some accelerator's scale_up in the catalog). Domains are numbered from 0 in
  /// the order of their first accelerator.
  [[nodiscard]] const std::vector<std::uint32_t>& domain_of_node() const { return domain_; }

 private:
  void init(std::vector<double> efficiency, const std::vector<bool>& scale_up_kind_link);

  const Cluster* cluster_;
  static constexpr std::uint8_t kBetweenSwitches = 1, kIntoAccelerator = 2;
  std::vector<double> capacity_;
  std::vector<double> latency_;
  std::vector<double> ring_overhead_;  // per directed link; empty: all 0
  std::vector<double> ll_latency_;     // per directed link; empty: as latency_
  std::vector<double> ll_transport_;   // per directed link; empty: all 0
  std::vector<double> transport_;      // per directed link, the bandwidth protocol's; empty: all 0
  std::vector<double> ll_bus_;         // per directed link, B/s (0: none); empty: none has one
  std::vector<std::uint8_t> ends_;  // per directed link: kBetweenSwitches | kIntoAccelerator
  std::vector<int> link_counts_;    // link_counts()
  CollectivePolicy collective_policy_;
  // cached_shares(): per hash of a set, its sets and their numbers.
  // Numbers of type V per key (a list of words), found by the key's hash; at most
  // kMaxCachedTransfers key words kept (later keys are dropped, not evicted).
  template <class V>
  class KeyedNumbers {
   public:
    [[nodiscard]] const std::vector<V>* find(const std::vector<std::uint64_t>& key) const {
      const auto it = by_hash_.find(hash(key));
      if (it == by_hash_.end()) return nullptr;
      for (const auto& [k, v] : it->second) {
        if (k == key) return &v;
      }
      return nullptr;
    }
    void add(std::vector<std::uint64_t> key, std::vector<V> values) {
      if (words_ + key.size() > kMaxCachedTransfers) return;
      words_ += key.size();
      const std::uint64_t h = hash(key);
      by_hash_[h].emplace_back(std::move(key), std::move(values));
    }
    void clear() {
      by_hash_.clear();
      words_ = 0;
    }

   private:
    static std::uint64_t hash(const std::vector<std::uint64_t>& key) {  // FNV-1a over the words
      std::uint64_t h = 1469598103934665603ull ^ key.size();
      for (std::uint64_t k : key) h = (h ^ k) * 1099511628211ull;
      return h;
    }
    std::unordered_map<std::uint64_t, std::vector<std::pair<std::vector<std::uint64_t>, std::vector<V>>>> by_hash_;
    std::size_t words_ = 0;
  };
  KeyedNumbers<float> shares_;  // cached_shares()
  KeyedNumbers<double> values_;  // cached_values()
  std::vector<std::uint32_t> domain_;  // per node; max() for nodes that are not accelerators
  std::vector<bool> scale_up_;          // per directed link
  // The walks between src and dst, appended to `out` one after another: inside their
  // scale-up domain when they share one and it holds a minimum-hop route. How many (0
  // when dst cannot be reached).
  std::size_t walks(NodeId src, NodeId dst, std::size_t count, std::vector<LinkId>& out);
  // prefetch_first_routes (count 1) and prefetch_routes (kMaxCandidates): the pairs not
  // yet known, one search per destination with at least min_sources of them.
  void prefetch(std::vector<std::pair<NodeId, NodeId>> pairs, std::size_t count, std::size_t min_sources);
  // Copies count routes of `hops` links each into the store (blocks that never move, so
  // that the views handed out stay valid), after a word of count and hops; returns where
  // the set starts (the word), which set_at reads back.
  const LinkId* store(const LinkId* links, std::uint32_t count, std::uint32_t hops);
  static RouteSet set_at(const LinkId* set) {
    return RouteSet(set + 1, set->value & kCountMask, set->value >> kCountBits);
  }
  static constexpr unsigned kCountBits = 8;  // kMaxWideCandidates fits
  static constexpr std::uint32_t kCountMask = (1u << kCountBits) - 1;
  std::unique_ptr<ShortestPathRouter> torus_router_;
  std::vector<bool> in_torus_;
  RouteIndex routes_;
  RouteIndex first_routes_;  // pairs routes_ lacks
  std::vector<std::unique_ptr<LinkId[]>> blocks_;
  LinkId* block_next_ = nullptr;
  std::size_t block_left_ = 0;
  std::vector<LinkId> found_;  // walks() scratch
  std::size_t prefetched_ = 0;
  PathScratch scratch_;
};

}  // namespace ddlsim
