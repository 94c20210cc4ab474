// Routing: which directed links a transfer from one node to another crosses.
//
// ShortestPathRouter works on any cluster: between two chips of one torus (as recorded by
// add_torus), the torus's dimension-order route; otherwise a minimum-hop path found by Boost.Graph's
// breadth-first search (Cluster::search_path; ties to the link added first, so the choice
// is deterministic). A search stops as soon as it reaches the destination, so a nearby pair (two GPUs of one server) costs
// a few steps even in a 16,384-GPU cluster; each answered path is kept, so a repeated
// look-up is one hash-table probe.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "topology/cluster.hpp"

namespace ddlsim {

class TorusRouter;

class ShortestPathRouter {
 public:
  explicit ShortestPathRouter(const Cluster& cluster);
  ~ShortestPathRouter();

  /// The links from src to dst, in order; empty when src == dst. Throws GraphError when
  /// dst cannot be reached. The reference stays valid while the router lives.
  const std::vector<LinkId>& route(NodeId src, NodeId dst);
  /// The same route, found again and not kept (for a caller that keeps routes itself).
  [[nodiscard]] std::vector<LinkId> find_route(NodeId src, NodeId dst);

  [[nodiscard]] std::size_t cached_routes() const { return routes_.size(); }

 private:
  const Cluster* cluster_;
  std::unordered_map<std::uint64_t, std::vector<LinkId>> routes_;  // by (src << 32 | dst)
  // Pairs inside one torus the cluster recorded take its dimension-order route (over the
  // chips' own links, as TPUs do) rather than a shortcut through hosts and the DCN.
  std::vector<std::int32_t> torus_of_;  // node -> index in cluster.tori(), or -1
  std::vector<std::unique_ptr<TorusRouter>> tori_;
};

}  // namespace ddlsim

namespace ddlsim {

/// Every minimum-hop path from src to dst (the equal-cost multi-path set), at most
/// `limit` of them, in a deterministic order: lexicographic by the links' ids along the
/// path. Empty when dst cannot be reached; one empty path when src == dst.
std::vector<std::vector<LinkId>> shortest_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t limit = 64);

/// Scratch memory for path searches, reused across calls (sized to the cluster on first use).
struct PathScratch {
  std::vector<std::uint32_t> dist;      // to dst
  std::vector<NodeId> touched;
  std::vector<std::uint32_t> from_src;  // from src (bidirectional search)
  std::vector<NodeId> touched_src;
};

/// The next hops open to walks towards one destination (spread_paths): at each node, the
/// links that bring it one hop closer by `dist`, flagged `usable` (when given), and while a
/// walk's leading run of `lead` links lasts, only flagged ones after which the rest of the
/// run can still follow. They depend on the node and the run left alone, not on where the
/// walk began, so a table kept across the sources of one destination scans each node's
/// links once for all of them (a switch with 64 ports once, not once per source and walk).
/// Bound to one destination's `dist`, `usable` and `lead`, which must outlive it unchanged.
class NextHopTable {
 public:
  NextHopTable(const Cluster& c, const std::vector<std::uint32_t>& dist, const std::vector<bool>* usable = nullptr,
               const std::vector<bool>* lead = nullptr);

  /// Forgets every node's next hops (the destination's dist, usable or lead flags have
  /// changed in place), keeping the memory for the next destination.
  void clear();

  /// The next hops open at n to a walk with `run` links of its leading run left.
  std::span<const LinkId> at(NodeId n, std::uint32_t run);
  /// The most `lead` links a minimum-hop path from n can take one after another from there
  /// (0 without `lead`, or when none of n's closer links is flagged).
  std::uint32_t lead_run(NodeId n);
  /// How many links out of n bring dst closer (flagged usable; `lead` aside), and where
  /// the first of them goes.
  std::pair<std::size_t, NodeId> closer_links(NodeId n);

  /// Where each link leads (Cluster::link_targets).
  [[nodiscard]] std::span<const NodeId> targets() const { return to_; }
  [[nodiscard]] const std::vector<std::uint32_t>& dist() const { return dist_; }

 private:
  friend std::size_t spread_paths(NextHopTable& hops, NodeId src, NodeId dst, std::size_t count,
                                  std::vector<LinkId>& out, std::size_t widen_to);
  struct Slot {
    std::uint64_t key = 0;  // (node + 1) << 32 | what; 0: free
    std::uint32_t a = 0, b = 0;
  };
  Slot& find(std::uint64_t key, bool& found);
  // Fibonacci hashing: the top bits of the key times 2^64 / phi.
  std::size_t home(std::uint64_t key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  const Cluster& c_;
  std::span<const NodeId> to_;  // Cluster::link_targets
  const std::vector<std::uint32_t>& dist_;
  const std::vector<bool>* usable_;
  const std::vector<bool>* lead_;
  std::vector<Slot> slots_;  // open addressing, 2^(64 - shift_) long
  int shift_ = 58;
  std::size_t used_ = 0;
  std::vector<LinkId> pool_;  // the next hops, [a, b) of a slot
  // spread_paths' repeat check (walk hashes, their table), kept between its calls.
  std::vector<std::uint64_t> hashes_;
  std::vector<std::uint32_t> seen_;
};

/// Up to `count` distinct minimum-hop paths from src to dst that differ from the first
/// hop on (walks that take a different next hop at every level, as ECMP hashing spreads
/// flows over spines and cores), deterministic for a given (src, dst). Empty when dst
/// cannot be reached; one empty path when src == dst.
/// With `usable` (one flag per directed link, both directions of a cable alike), only
/// the flagged links are searched. With `widen_to` above `count`, as many walks as there
/// are distinct ones (the product of the equal-cost choices along the first walk), up
/// to widen_to, where that is more than count (a leaf with 32 uplinks to spines with 2
/// cables down each: 64 walks).
/// With `lead` (one flag per directed link, both directions alike), every walk first
/// takes as long a run of flagged links as a minimum-hop path allows, then spreads as
/// usual: given a cluster's scale-up links, a transfer to another server rides NVLink to
/// the GPU whose NIC is nearest the destination and enters the network there (NCCL's PXN,
/// which keeps a send on its destination's rail), where that is as short as any way.
std::vector<std::vector<LinkId>> spread_shortest_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t count,
                                                       PathScratch& scratch, const std::vector<bool>* usable = nullptr,
                                                       std::size_t widen_to = 0, const std::vector<bool>* lead = nullptr);

/// spread_shortest_paths with the paths appended to `out` one after another (each as many
/// links long: minimum-hop paths are equally long), without a vector per path; returns
/// how many (0 when dst cannot be reached).
std::size_t spread_shortest_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t count, PathScratch& scratch,
                                  std::vector<LinkId>& out, const std::vector<bool>* usable = nullptr,
                                  std::size_t widen_to = 0, const std::vector<bool>* lead = nullptr);

/// The same with the hops to dst given (`dist`, as distances_from finds them; src must
/// reach dst): the walks from many sources to one destination then share one search
/// instead of one per pair.
std::size_t spread_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t count,
                         const std::vector<std::uint32_t>& dist, std::vector<LinkId>& out,
                         const std::vector<bool>* usable = nullptr, std::size_t widen_to = 0,
                         const std::vector<bool>* lead = nullptr);

/// The same over a table of next hops to dst (its dist, usable and lead), which the
/// sources of one destination share (each node's links scanned once for them all).
std::size_t spread_paths(NextHopTable& hops, NodeId src, NodeId dst, std::size_t count, std::vector<LinkId>& out,
                         std::size_t widen_to = 0);

/// Walk j of spread_shortest_paths from src to dst: its next hops among the links that
/// bring dst one hop closer by `dist` (hops to dst, exact on every node of every
/// minimum-hop path from src; src must reach dst).
/// Walks j >= `plain` also shift their later choices by j / (the first choice's width),
/// so that more walks than that width still differ.
/// With `lead`, the leading run of flagged links as spread_shortest_paths says.
std::vector<LinkId> spread_walk(const Cluster& c, NodeId src, NodeId dst, std::size_t j,
                                const std::vector<std::uint32_t>& dist, const std::vector<bool>* usable = nullptr,
                                std::size_t plain = std::numeric_limits<std::size_t>::max(),
                                const std::vector<bool>* lead = nullptr);

/// Hops from every node to dst (links are full duplex: a breadth-first search from dst),
/// max() where dst cannot be reached; with `usable`, over the flagged links only. One
/// search serves the walks from every source to dst (spread_walk), where a
/// bidirectional search per pair would repeat most of the work.
void distances_from(const Cluster& c, NodeId dst, std::vector<std::uint32_t>& dist,
                    const std::vector<bool>* usable = nullptr);

/// Dimension-order routing on a torus or mesh built by add_torus (chips in its row-major
/// order): correct dimension 0 first, then 1, ...; around a ring the shorter way, the
/// positive direction on a tie. Routes are cached like ShortestPathRouter's. Throws
/// GraphError, naming the two chips, when a step a route may take has no link.
class TorusRouter {
 public:
  TorusRouter(const Cluster& c, std::vector<NodeId> chips, std::vector<int> dims, std::vector<bool> wrap);
  /// For a shape the cluster recorded (Cluster::tori()).
  TorusRouter(const Cluster& c, const TorusShape& shape) : TorusRouter(c, shape.chips, shape.dims, shape.wrap) {}
  const std::vector<LinkId>& route(NodeId src, NodeId dst);
  /// The same route, found again and not kept (for a caller that keeps routes itself).
  [[nodiscard]] std::vector<LinkId> find_route(NodeId src, NodeId dst);

 private:
  std::vector<int> dims_;
  std::vector<bool> wrap_;
  std::vector<std::size_t> stride_;
  std::vector<std::uint32_t> index_;  // node id -> chip index (or max)
  std::vector<LinkId> step_;          // [chip][dim][0: +1, 1: -1] -> link
  std::unordered_map<std::uint64_t, std::vector<LinkId>> routes_;
};

}  // namespace ddlsim
