#include "topology/routing.hpp"

#include <algorithm>

#include "sim/core/errors.hpp"

namespace ddlsim {

const std::vector<LinkId>& ShortestPathRouter::route(NodeId src, NodeId dst) {
  const std::uint64_t key = (std::uint64_t{src.value} << 32) | dst.value;
  if (const auto it = routes_.find(key); it != routes_.end()) return it->second;
  auto tree_it = trees_.find(src.value);
  if (tree_it == trees_.end()) tree_it = trees_.emplace(src.value, cluster_->hop_tree(src)).first;
  const std::vector<LinkId>& tree = tree_it->second;
  std::vector<LinkId> path;
  for (NodeId at = dst; at != src;) {
    const LinkId via = tree.at(at.value);
    if (!via.valid()) {
      throw GraphError("no route from '" + cluster_->node(src).name + "' to '" + cluster_->node(dst).name + "'");
    }
    path.push_back(via);
    at = cluster_->link(via).from;
  }
  std::reverse(path.begin(), path.end());
  return routes_.emplace(key, std::move(path)).first->second;
}

}  // namespace ddlsim
