#include "topology/cluster.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <algorithm>
#include <boost/pending/queue.hpp>
#include <cmath>
#include <unordered_map>

#include "sim/core/errors.hpp"

namespace ddlsim {

std::string_view node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kAccelerator: return "accelerator";
    case NodeKind::kHost: return "host";
    case NodeKind::kNic: return "nic";
    case NodeKind::kSwitch: return "switch";
  }
  return "?";
}

namespace {
// Vertices and out-edge lists in vectors: iteration follows insertion order, which makes
// the breadth-first search (and so routing) deterministic. The edge property is the LinkId.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                    boost::property<boost::edge_index_t, std::uint32_t>>;
}  // namespace

struct Cluster::Impl {
  Graph graph;
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<NodeId> accelerators;
  std::unordered_map<std::string, NodeId> by_name;
  std::vector<TorusShape> tori;
  std::vector<std::vector<LinkId>> out;  // per node, its outgoing links: a flat index for fast searches
  std::vector<NodeId> to;                // per link, links[l].to
  // search_path scratch: colours stay white between searches (only touched ones are reset).
  mutable std::vector<boost::default_color_type> color;
  mutable std::vector<LinkId> via;
  mutable std::vector<std::uint32_t> touched;
};

Cluster::Cluster() : impl_(std::make_unique<Impl>()) {}
Cluster::~Cluster() = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;

NodeId Cluster::add_node(NodeKind kind, std::string name, std::string model) {
  if (name.empty()) throw GraphError("a cluster node needs a name");
  const NodeId id(static_cast<std::uint32_t>(impl_->nodes.size()));
  if (!impl_->by_name.emplace(name, id).second) throw GraphError("two cluster nodes are named '" + name + "'");
  boost::add_vertex(impl_->graph);
  impl_->out.emplace_back();
  impl_->nodes.push_back(Node{kind, std::move(name), std::move(model)});
  if (kind == NodeKind::kAccelerator) impl_->accelerators.push_back(id);
  return id;
}

LinkId Cluster::connect(NodeId a, NodeId b, BytesPerSecond bandwidth, Seconds latency, std::string kind,
                        std::optional<BytesPerSecond> reverse) {
  const std::size_t n = impl_->nodes.size();
  if (a.value >= n || b.value >= n) throw GraphError("link " + kind + " joins a node that does not exist");
  if (a == b) throw GraphError("link " + kind + " joins '" + impl_->nodes[a.value].name + "' to itself");
  const BytesPerSecond back = reverse.value_or(bandwidth);
  if (!(bandwidth.value() > 0) || !(back.value() > 0) || !std::isfinite(bandwidth.value()) ||
      !std::isfinite(back.value())) {
    throw GraphError("link " + kind + " between '" + impl_->nodes[a.value].name + "' and '" +
                     impl_->nodes[b.value].name + "' needs a positive bandwidth");
  }
  if (!(latency.value() >= 0) || latency == kNever) {
    throw GraphError("link " + kind + " between '" + impl_->nodes[a.value].name + "' and '" +
                     impl_->nodes[b.value].name + "' needs a finite latency >= 0");
  }
  const LinkId fwd(static_cast<std::uint32_t>(impl_->links.size()));
  impl_->links.push_back(Link{a, b, bandwidth, latency, kind});
  impl_->links.push_back(Link{b, a, back, latency, std::move(kind)});
  boost::add_edge(a.value, b.value, fwd.value, impl_->graph);
  boost::add_edge(b.value, a.value, fwd.value + 1, impl_->graph);
  impl_->out[a.value].push_back(fwd);
  impl_->out[b.value].emplace_back(fwd.value + 1);
  impl_->to.push_back(b);
  impl_->to.push_back(a);
  return fwd;
}

std::size_t Cluster::node_count() const { return impl_->nodes.size(); }
std::size_t Cluster::link_count() const { return impl_->links.size(); }
const Node& Cluster::node(NodeId n) const { return impl_->nodes.at(n.value); }
const Link& Cluster::link(LinkId l) const { return impl_->links.at(l.value); }
std::span<const Link> Cluster::links() const { return impl_->links; }

std::optional<NodeId> Cluster::find(std::string_view name) const {
  const auto it = impl_->by_name.find(std::string(name));
  if (it == impl_->by_name.end()) return std::nullopt;
  return it->second;
}

std::span<const NodeId> Cluster::accelerators() const { return impl_->accelerators; }

std::span<const LinkId> Cluster::out_links(NodeId n) const { return impl_->out.at(n.value); }
std::span<const NodeId> Cluster::link_targets() const { return impl_->to; }

namespace {
// Records, for every vertex, the edge by which the search discovered it.
class TreeRecorder : public boost::default_bfs_visitor {
 public:
  explicit TreeRecorder(std::vector<LinkId>& tree) : tree_(&tree) {}
  void tree_edge(Graph::edge_descriptor e, const Graph& g) const {
    (*tree_)[boost::target(e, g)] = LinkId(boost::get(boost::edge_index, g, e));
  }

 private:
  std::vector<LinkId>* tree_;
};
}  // namespace

std::vector<LinkId> Cluster::hop_tree(NodeId src) const {
  std::vector<LinkId> tree(impl_->nodes.size());
  if (src.value >= impl_->nodes.size()) throw GraphError("hop_tree: node " + std::to_string(src.value) + " does not exist");
  boost::breadth_first_search(impl_->graph, boost::vertex(src.value, impl_->graph),
                              boost::visitor(TreeRecorder(tree)));
  return tree;
}

BytesPerSecond Cluster::max_flow(const std::vector<NodeId>& from, const std::vector<NodeId>& to) const {
  // A flow network of the directed links plus a super-source feeding every `from` node
  // and a super-sink drained by every `to` node, in GB/s to keep the numbers well scaled.
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, double,
                      boost::property<boost::edge_residual_capacity_t, double,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const std::size_t n = impl_->nodes.size();
  FlowGraph g(n + 2);
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  auto add = [&](std::size_t u, std::size_t v, double cap) {
    const auto e = boost::add_edge(u, v, g).first;
    const auto r = boost::add_edge(v, u, g).first;
    capacity[e] = cap;
    capacity[r] = 0.0;
    reverse[e] = r;
    reverse[r] = e;
  };
  double total_in = 0.0;
  for (const Link& l : impl_->links) {
    add(l.from.value, l.to.value, l.bandwidth.value() / 1e9);
    total_in += l.bandwidth.value() / 1e9;
  }
  const std::size_t source = n, sink = n + 1;
  for (NodeId s : from) add(source, s.value, total_in);
  for (NodeId t : to) add(t.value, sink, total_in);
  const double flow = boost::push_relabel_max_flow(g, source, sink);
  return BytesPerSecond(flow * 1e9);
}

namespace {
struct Reached {};  // thrown by the visitor to end a search early

class PathRecorder : public boost::default_bfs_visitor {
 public:
  PathRecorder(std::vector<LinkId>& via, std::vector<std::uint32_t>& touched, std::uint32_t dst)
      : via_(&via), touched_(&touched), dst_(dst) {}
  void discover_vertex(Graph::vertex_descriptor v, const Graph&) const { touched_->push_back(static_cast<std::uint32_t>(v)); }
  void tree_edge(Graph::edge_descriptor e, const Graph& g) const {
    const auto v = boost::target(e, g);
    (*via_)[v] = LinkId(boost::get(boost::edge_index, g, e));
    if (v == dst_) {
      touched_->push_back(static_cast<std::uint32_t>(v));
      throw Reached{};
    }
  }

 private:
  std::vector<LinkId>* via_;
  std::vector<std::uint32_t>* touched_;
  std::uint32_t dst_;
};
}  // namespace

std::optional<std::vector<LinkId>> Cluster::search_path(NodeId src, NodeId dst) const {
  const std::size_t n = impl_->nodes.size();
  if (src.value >= n || dst.value >= n) throw GraphError("search_path: a node that does not exist");
  if (src == dst) return std::vector<LinkId>{};
  Impl& m = *impl_;
  if (m.color.size() != n) {
    m.color.assign(n, boost::white_color);
    m.via.assign(n, LinkId{});
  }
  m.touched.clear();
  bool reached = false;
  boost::queue<Graph::vertex_descriptor> queue;
  const auto colors = boost::make_iterator_property_map(m.color.begin(), boost::get(boost::vertex_index, m.graph));
  try {
    boost::breadth_first_visit(m.graph, src.value, queue, PathRecorder(m.via, m.touched, dst.value), colors);
  } catch (const Reached&) {
    reached = true;
  }
  for (std::uint32_t v : m.touched) m.color[v] = boost::white_color;
  m.color[src.value] = boost::white_color;
  if (!reached) return std::nullopt;
  std::vector<LinkId> path;
  for (NodeId at = dst; at != src; at = m.links[m.via[at.value].value].from) path.push_back(m.via[at.value]);
  std::reverse(path.begin(), path.end());
  return path;
}

void Cluster::add_torus_shape(TorusShape shape) { impl_->tori.push_back(std::move(shape)); }
const std::vector<TorusShape>& Cluster::tori() const { return impl_->tori; }

void Cluster::validate() const {
  const auto& acc = impl_->accelerators;
  if (acc.empty()) throw GraphError("the cluster has no accelerator");
  // Links are full duplex, so reachability is symmetric: one search from the first
  // accelerator decides whether every accelerator reaches every other.
  const std::vector<LinkId> tree = hop_tree(acc.front());
  for (NodeId a : acc) {
    if (a != acc.front() && !tree[a.value].valid()) {
      throw GraphError("accelerator '" + impl_->nodes[a.value].name + "' cannot reach '" +
                       impl_->nodes[acc.front().value].name + "': no path of links joins them");
    }
  }
}

}  // namespace ddlsim
