#include "topology/stats.hpp"

#include <algorithm>
#include <deque>
#include <limits>

namespace ddlsim {
namespace {

// Longest hop distance from src to any accelerator (breadth-first over out_links).
std::size_t eccentricity(const Cluster& c, const std::vector<std::vector<NodeId>>& next, NodeId src) {
  std::vector<std::uint32_t> dist(c.node_count(), std::numeric_limits<std::uint32_t>::max());
  std::deque<NodeId> queue{src};
  dist[src.value] = 0;
  while (!queue.empty()) {
    const NodeId u = queue.front();
    queue.pop_front();
    for (NodeId v : next[u.value]) {
      if (dist[v.value] == std::numeric_limits<std::uint32_t>::max()) {
        dist[v.value] = dist[u.value] + 1;
        queue.push_back(v);
      }
    }
  }
  std::size_t far = 0;
  for (NodeId a : c.accelerators()) far = std::max<std::size_t>(far, dist[a.value]);
  return far;
}

}  // namespace

TopologyStats topology_stats(const Cluster& c) {
  TopologyStats s;
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    const Node& n = c.node(NodeId(static_cast<std::uint32_t>(i)));
    ++s.nodes_by_kind[std::string(node_kind_name(n.kind))];
    if (n.kind == NodeKind::kAccelerator) ++s.accelerators_by_model[n.model];
  }
  for (std::size_t l = 0; l < c.link_count(); l += 2) {
    const Link& link = c.link(LinkId(static_cast<std::uint32_t>(l)));
    const double back = c.link(LinkId(static_cast<std::uint32_t>(l + 1))).bandwidth.value() / 1e9;
    LinkGroup& g = s.links_by_kind[link.kind];
    const double fwd = link.bandwidth.value() / 1e9;
    if (g.cables++ == 0) {
      g.gbytes_per_s = fwd;
      g.min_gbytes_per_s = g.max_gbytes_per_s = fwd;
    }
    g.min_gbytes_per_s = std::min({g.min_gbytes_per_s, fwd, back});
    g.max_gbytes_per_s = std::max({g.max_gbytes_per_s, fwd, back});
  }
  // Tiers of a Clos: endpoints and server-internal switches 0, leaf 1, spine 2, core 3.
  auto tier = [&](NodeId n) {
    const std::string& m = c.node(n).model;
    return m == "leaf" ? 1 : m == "spine" ? 2 : m == "core" ? 3 : 0;
  };
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    const NodeId n(static_cast<std::uint32_t>(i));
    const int t = tier(n);
    if (t == 0 || t == 3) continue;
    double down = 0, up = 0;
    for (LinkId l : c.out_links(n)) {
      const int other = tier(c.link(l).to);
      (other < t ? down : other > t ? up : down) += c.link(l).bandwidth.value();
    }
    if (up > 0) {
      double& worst = s.oversubscription[c.node(n).model];
      worst = std::max(worst, down / up);
    }
  }
  std::vector<std::vector<NodeId>> next(c.node_count());
  for (std::size_t l = 0; l < c.link_count(); ++l) {
    const Link& link = c.link(LinkId(static_cast<std::uint32_t>(l)));
    next[link.from.value].push_back(link.to);
  }
  const auto acc = c.accelerators();
  if (acc.empty()) return s;
  s.injection_min_gbytes_per_s = std::numeric_limits<double>::infinity();
  for (NodeId a : acc) {
    double out = 0;
    for (LinkId l : c.out_links(a)) out += c.link(l).bandwidth.value() / 1e9;
    s.injection_min_gbytes_per_s = std::min(s.injection_min_gbytes_per_s, out);
    s.injection_max_gbytes_per_s = std::max(s.injection_max_gbytes_per_s, out);
  }
  constexpr std::size_t kExact = 4096, kSample = 64;
  const std::size_t sources = acc.size() <= kExact ? acc.size() : kSample;
  s.diameter_exact = acc.size() <= kExact;
  for (std::size_t i = 0; i < sources; ++i) {
    const std::size_t pick = s.diameter_exact ? i : i * (acc.size() - 1) / (kSample - 1);
    s.diameter_hops = std::max(s.diameter_hops, eccentricity(c, next, acc[pick]));
  }
  // A cluster that is one torus and nothing else (every link a torus link of one kind):
  // cutting dimension d of size k in half cuts (wrap and k > 2 ? 2 : 1) x N / k cables.
  if (c.tori().size() == 1 && c.tori()[0].chips.size() == c.node_count() && acc.size() >= 2) {
    const TorusShape& t = c.tori()[0];
    const double bw = c.link(LinkId(0)).bandwidth.value() / 1e9;
    bool uniform = true;
    for (std::size_t l = 0; l < c.link_count(); ++l) uniform = uniform && c.link(LinkId(static_cast<std::uint32_t>(l))).bandwidth.value() / 1e9 == bw;
    for (std::size_t d = 0; d < t.dims.size() && uniform; ++d) {
      const auto k = static_cast<std::size_t>(t.dims[d]);
      if (k % 2 != 0) continue;
      const double cut = static_cast<double>((t.wrap[d] && k > 2) ? 2 : 1) * static_cast<double>(acc.size() / k) * bw;
      if (s.bisection_cut.empty() || cut < s.bisection_gbytes_per_s) {
        s.bisection_gbytes_per_s = cut;
        s.bisection_cut = "torus dimension " + std::to_string(d) + " (closed form)";
      }
    }
    if (!s.bisection_cut.empty()) return s;
  }
  if (acc.size() >= 2) {
    const auto half = static_cast<std::ptrdiff_t>(acc.size() / 2);
    const std::vector<NodeId> first(acc.begin(), acc.begin() + half), second(acc.begin() + half, acc.end());
    // Both directions: links may be asymmetric.
    auto both = [&](const std::vector<NodeId>& a, const std::vector<NodeId>& b) {
      return std::min(c.max_flow(a, b).value(), c.max_flow(b, a).value()) / 1e9;
    };
    s.bisection_gbytes_per_s = both(first, second);
    s.bisection_cut = "rank order";
    for (const TorusShape& t : c.tori()) {
      if (t.chips.size() != acc.size()) continue;
      std::size_t stride = t.chips.size();
      for (std::size_t d = 0; d < t.dims.size(); ++d) {
        const auto k = static_cast<std::size_t>(t.dims[d]);
        stride /= k;
        if (k % 2 != 0) continue;
        std::vector<NodeId> low, high;
        for (std::size_t i = 0; i < t.chips.size(); ++i) (i / stride % k < k / 2 ? low : high).push_back(t.chips[i]);
        const double flow = both(low, high);
        if (flow < s.bisection_gbytes_per_s) {
          s.bisection_gbytes_per_s = flow;
          s.bisection_cut = "torus dimension " + std::to_string(d);
        }
      }
    }
  }
  return s;
}

}  // namespace ddlsim
