// Routing: which directed links a transfer from one node to another crosses.
//
// ShortestPathRouter works on any cluster: a minimum-hop path found by breadth-first
// search (ties to the link added first, so the choice is deterministic). One search per
// source fills a tree that answers every destination; each answered path is kept, so a
// repeated look-up is one hash-table probe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "topology/cluster.hpp"

namespace ddlsim {

class ShortestPathRouter {
 public:
  explicit ShortestPathRouter(const Cluster& cluster) : cluster_(&cluster) {}

  /// The links from src to dst, in order; empty when src == dst. Throws GraphError when
  /// dst cannot be reached. The reference stays valid while the router lives.
  const std::vector<LinkId>& route(NodeId src, NodeId dst);

  [[nodiscard]] std::size_t cached_routes() const { return routes_.size(); }

 private:
  const Cluster* cluster_;
  std::unordered_map<std::uint32_t, std::vector<LinkId>> trees_;   // by source node
  std::unordered_map<std::uint64_t, std::vector<LinkId>> routes_;  // by (src << 32 | dst)
};

}  // namespace ddlsim
