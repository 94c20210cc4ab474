// The cluster graph: accelerators, hosts, NICs and switches joined by links.
//
// Every link is full duplex: connect() adds two directed links, one per direction, each
// with its own bandwidth and the same latency, so that traffic in one direction never
// takes capacity from the other. Nodes and directed links are numbered densely in the
// order they are added (NodeId, LinkId), which keeps every derived result deterministic.
// The graph is stored with Boost.Graph; Boost stays behind this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/ids.hpp"
#include "sim/core/units.hpp"

namespace ddlsim {

struct NodeTag {};
struct LinkTag {};
using NodeId = Id<NodeTag>;
using LinkId = Id<LinkTag>;  // one direction of a physical link

enum class NodeKind : std::uint8_t { kAccelerator, kHost, kNic, kSwitch };
std::string_view node_kind_name(NodeKind k);

struct Node {
  NodeKind kind;
  std::string name;   // unique, e.g. "node3.gpu5", "leaf12"
  std::string model;  // catalog accelerator id, or a switch role such as "nvswitch", "leaf"
};

struct Link {
  NodeId from;
  NodeId to;
  BytesPerSecond bandwidth;
  Seconds latency;
  std::string kind;  // catalog link id, e.g. "nvlink4", "ib-ndr"
};

/// A torus or mesh inside a cluster, as add_torus built it: its chips in row-major order
/// (last dimension fastest), the size of each dimension and whether it wraps around.
struct TorusShape {
  std::vector<NodeId> chips;
  std::vector<int> dims;
  std::vector<bool> wrap;
};

class Cluster {
 public:
  Cluster();
  ~Cluster();
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;

  /// Adds a node; its name must be new (GraphError otherwise).
  NodeId add_node(NodeKind kind, std::string name, std::string model = {});
  /// Adds a full-duplex link a <-> b: the directed link a -> b (returned) and, right after
  /// it, b -> a. `reverse` gives b -> a its own bandwidth (default: the same).
  LinkId connect(NodeId a, NodeId b, BytesPerSecond bandwidth, Seconds latency, std::string kind,
                 std::optional<BytesPerSecond> reverse = std::nullopt);

  [[nodiscard]] std::size_t node_count() const;
  [[nodiscard]] std::size_t link_count() const;  // directed links: twice the cables
  [[nodiscard]] const Node& node(NodeId n) const;
  [[nodiscard]] const Link& link(LinkId l) const;
  /// Every directed link, indexed by LinkId: for loops that read many links (route
  /// searches), without link()'s bounds check per look-up.
  [[nodiscard]] std::span<const Link> links() const;
  /// The link in the opposite direction of l.
  [[nodiscard]] static LinkId reverse(LinkId l) { return LinkId(l.value ^ 1u); }
  [[nodiscard]] std::optional<NodeId> find(std::string_view name) const;
  /// Accelerators in the order they were added (their rank order).
  [[nodiscard]] std::span<const NodeId> accelerators() const;
  /// Directed links leaving n, in the order they were added.
  [[nodiscard]] std::span<const LinkId> out_links(NodeId n) const;
  /// Where each directed link leads (link_targets()[l] == link(l).to), packed for searches
  /// that read only that: 4 bytes a link instead of a whole Link.
  [[nodiscard]] std::span<const NodeId> link_targets() const;

  /// Breadth-first search from src by hop count: for every node, the link by which the
  /// search first reached it (invalid for src and unreachable nodes). Ties between
  /// equally short paths go to the link added first.
  [[nodiscard]] std::vector<LinkId> hop_tree(NodeId src) const;

  /// A minimum-hop path from src to dst: Boost.Graph's breadth-first search from src,
  /// stopped as soon as dst is discovered (ties to the link added first, as in
  /// hop_tree). nullopt when dst cannot be reached. Reuses scratch memory held by the
  /// cluster, so it is not safe to call from several threads at once.
  [[nodiscard]] std::optional<std::vector<LinkId>> search_path(NodeId src, NodeId dst) const;

  /// The largest rate at which the `from` nodes together can send to the `to` nodes,
  /// each directed link carrying at most its bandwidth (maximum flow, push-relabel). With
  /// the accelerators split in two halves this is the bisection bandwidth of that split.
  [[nodiscard]] BytesPerSecond max_flow(const std::vector<NodeId>& from, const std::vector<NodeId>& to) const;

  /// Shapes recorded by builders, for routing and stats that exploit them.
  void add_torus_shape(TorusShape shape);
  [[nodiscard]] const std::vector<TorusShape>& tori() const;

  /// Checks that the graph can carry traffic: at least one accelerator, and every
  /// accelerator reaches every other. Throws GraphError naming the first unreachable pair.
  void validate() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddlsim
