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
// (src, dst).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "topology/cluster.hpp"
#include "topology/routing.hpp"

namespace ddlsim {

class Catalog;
class ShortestPathRouter;

class NetworkFabric {
 public:
  /// Candidate routes per (src, dst): kMaxCandidates, or where a switch on the way has
  /// more equal-cost next hops (a leaf with 32 uplinks), as many as it has, up to
  /// kMaxWideCandidates.
  static constexpr std::size_t kMaxCandidates = 16;
  static constexpr std::size_t kMaxWideCandidates = 64;

  NetworkFabric(const Cluster& cluster, const Catalog& catalog);
  /// With the efficiency of every directed link given explicitly (tests, custom models),
  /// and which links are scale-up links (none when empty).
  NetworkFabric(const Cluster& cluster, std::vector<double> efficiency, const std::vector<bool>& scale_up = {});
  ~NetworkFabric();
  NetworkFabric(const NetworkFabric&) = delete;
  NetworkFabric& operator=(const NetworkFabric&) = delete;

  [[nodiscard]] const Cluster& cluster() const { return *cluster_; }
  [[nodiscard]] double capacity(LinkId l) const { return capacity_[l.value]; }  // B/s
  [[nodiscard]] double latency(LinkId l) const { return latency_[l.value]; }    // s
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

  /// Candidate routes from src to dst (at least one; one empty route when src == dst).
  /// Two accelerators of one scale-up domain are joined over its scale-up links only
  /// when those give a minimum-hop route, as NCCL and CUDA peer-to-peer copies take
  /// NVLink where another way is as short (two GPUs behind one PCIe switch and NIC).
  /// Throws GraphError when dst cannot be reached. The spans stay valid while the
  /// fabric lives.
  const std::vector<std::vector<LinkId>>& routes(NodeId src, NodeId dst);
  /// routes(src, dst).front(), the route the analytical model takes, found without the
  /// other candidates when they are not cached (one walk instead of kMaxCandidates).
  const std::vector<LinkId>& first_route(NodeId src, NodeId dst);

  /// Finds first_route for every pair (src, dst) not yet known, as first_route would,
  /// with one breadth-first search per destination instead of one search per pair: for
  /// the p(p - 1) sends of an all-to-all among many ranks. Pairs that cannot be routed
  /// are left for first_route to report.
  void prefetch_first_routes(const std::vector<std::pair<NodeId, NodeId>>& pairs);

  /// The sum of the latencies along a route, and its smallest effective capacity
  /// (infinity for an empty route).
  [[nodiscard]] double route_latency(std::span<const LinkId> route) const;
  [[nodiscard]] double route_capacity(std::span<const LinkId> route) const;

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
  std::vector<std::uint8_t> ends_;  // per directed link: kBetweenSwitches | kIntoAccelerator
  std::vector<int> link_counts_;    // link_counts()
  // cached_shares(): per hash of a set, its sets and their numbers.
  std::unordered_map<std::uint64_t, std::vector<std::pair<std::vector<std::uint64_t>, std::vector<float>>>> shares_;
  std::size_t cached_transfers_ = 0;
  std::vector<std::uint32_t> domain_;  // per node; max() for nodes that are not accelerators
  std::vector<bool> scale_up_;          // per directed link
  // The walks between src and dst: inside their scale-up domain when they share one
  // and it holds a minimum-hop route.
  std::vector<std::vector<LinkId>> walks(NodeId src, NodeId dst, std::size_t count);
  std::unique_ptr<ShortestPathRouter> torus_router_;
  std::vector<bool> in_torus_;
  std::unordered_map<std::uint64_t, std::vector<std::vector<LinkId>>> routes_;
  std::unordered_map<std::uint64_t, std::vector<LinkId>> first_routes_;  // pairs routes_ lacks
  PathScratch scratch_;
};

}  // namespace ddlsim
