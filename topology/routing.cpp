#include "topology/routing.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <span>
#include <string>

#include "sim/core/errors.hpp"

namespace ddlsim {

ShortestPathRouter::ShortestPathRouter(const Cluster& cluster) : cluster_(&cluster) {
  const auto& tori = cluster.tori();
  if (tori.empty()) return;
  torus_of_.assign(cluster.node_count(), -1);
  for (std::size_t t = 0; t < tori.size(); ++t) {
    for (NodeId n : tori[t].chips) torus_of_[n.value] = static_cast<std::int32_t>(t);
  }
  tori_.resize(tori.size());
}

ShortestPathRouter::~ShortestPathRouter() = default;

const std::vector<LinkId>& ShortestPathRouter::route(NodeId src, NodeId dst) {
  const std::uint64_t key = (std::uint64_t{src.value} << 32) | dst.value;
  if (const auto it = routes_.find(key); it != routes_.end()) return it->second;
  return routes_.emplace(key, find_route(src, dst)).first->second;
}

std::vector<LinkId> ShortestPathRouter::find_route(NodeId src, NodeId dst) {
  if (!torus_of_.empty() && src.value < torus_of_.size() && dst.value < torus_of_.size() &&
      torus_of_[src.value] >= 0 && torus_of_[src.value] == torus_of_[dst.value]) {
    const auto t = static_cast<std::size_t>(torus_of_[src.value]);
    if (!tori_[t]) tori_[t] = std::make_unique<TorusRouter>(*cluster_, cluster_->tori()[t]);
    return tori_[t]->find_route(src, dst);
  }
  std::optional<std::vector<LinkId>> path = cluster_->search_path(src, dst);
  if (!path) throw GraphError("no route from '" + cluster_->node(src).name + "' to '" + cluster_->node(dst).name + "'");
  return std::move(*path);
}


namespace {

constexpr std::uint32_t kFar = std::numeric_limits<std::uint32_t>::max();

// Distances to dst for the walks of a minimum-hop path search from src: exact on every
// node of every minimum-hop path from src to dst, kFar on nodes of no such path that
// the search did not reach. A bidirectional breadth-first search: layers grow from src
// (s.from_src) and from dst (s.dist), the smaller frontier first, until they meet; the
// first meeting after a whole layer gives the distance D = min(from_src + dist) over
// nodes labelled by both. Every minimum-hop path then crosses the meeting set (its node
// at from_src = r_src is also within dst's radius, since r_src + r_dst >= D): nodes of
// such paths beyond it already have their distance to dst, and those before it (from_src
// < r_src) are found going back through the source side's layers, each getting
// D - from_src. In a
// fat tree this visits two balls of half the diameter instead of the whole cluster. The
// nodes given a distance are listed in s.touched (reset_distances restores kFar).
void distances_to(const Cluster& c, NodeId src, NodeId dst, PathScratch& s, const std::vector<bool>* usable = nullptr) {
  if (s.dist.size() != c.node_count()) s.dist.assign(c.node_count(), kFar);
  if (s.from_src.size() != c.node_count()) s.from_src.assign(c.node_count(), kFar);
  s.touched.assign(1, dst);
  s.touched_src.assign(1, src);
  s.dist[dst.value] = 0;
  s.from_src[src.value] = 0;
  const std::span<const NodeId> to = c.link_targets();
  std::uint32_t best = src == dst ? 0 : kFar;
  // Frontiers: [begin, end) of each side's touched list.
  std::size_t t_begin = 0, s_begin = 0;
  while (best == kFar) {
    const std::size_t t_size = s.touched.size() - t_begin, s_size = s.touched_src.size() - s_begin;
    if (t_size == 0 || s_size == 0) break;  // one side is exhausted: no route
    const bool grow_src = s_size < t_size;
    std::vector<NodeId>& list = grow_src ? s.touched_src : s.touched;
    std::vector<std::uint32_t>& mine = grow_src ? s.from_src : s.dist;
    const std::vector<std::uint32_t>& other = grow_src ? s.dist : s.from_src;
    std::size_t& begin = grow_src ? s_begin : t_begin;
    const std::size_t end = list.size();
    for (std::size_t i = begin; i < end; ++i) {
      const NodeId u = list[i];
      for (LinkId l : c.out_links(u)) {
        // Links are full duplex, so the reverse of l exists too (and a mask flags both
        // directions of a cable alike).
        if (usable != nullptr && !(*usable)[l.value]) continue;
        const NodeId v = to[l.value];
        if (mine[v.value] != kFar) continue;
        mine[v.value] = mine[u.value] + 1;
        list.push_back(v);
        if (other[v.value] != kFar) best = std::min(best, mine[v.value] + other[v.value]);
      }
    }
    begin = end;
  }
  if (best != kFar && best > 0) {
    // Back through the source side's layers, deepest first (touched_src lists them in
    // order): a node gets D - from_src when one of its links leads a layer further to a
    // node with a distance. Such a node is on a minimum-hop path: either given its
    // distance here, or reached by both sides, and every node both reached has from_src
    // + dist = D (the search stopped at the first layer that met, and layers are whole,
    // so a meeting node one hop nearer dst would have met a layer earlier). Scanning the
    // inner layers' links costs at most what growing them did, where scanning the
    // meeting set's would not: in a three-tier fat tree that set is every core switch,
    // 64 links each.
    for (std::size_t i = s.touched_src.size(); i-- > 0;) {
      const NodeId u = s.touched_src[i];
      if (s.dist[u.value] != kFar) continue;
      const std::uint32_t k = s.from_src[u.value];
      for (LinkId l : c.out_links(u)) {
        if (usable != nullptr && !(*usable)[l.value]) continue;
        const NodeId v = to[l.value];
        if (s.from_src[v.value] != k + 1 || s.dist[v.value] == kFar) continue;
        s.dist[u.value] = best - k;
        s.touched.push_back(u);
        break;
      }
    }
  }
  for (NodeId n : s.touched_src) s.from_src[n.value] = kFar;
}

void reset_distances(PathScratch& s) {
  for (NodeId n : s.touched) s.dist[n.value] = kFar;
}

// Whether link l (out of `at`) may be taken (flagged usable) and brings dst one hop closer.
bool closer(std::span<const NodeId> to, LinkId l, NodeId at, const std::vector<std::uint32_t>& dist,
            const std::vector<bool>* usable) {
  return (usable == nullptr || (*usable)[l.value]) && dist[to[l.value].value] + 1 == dist[at.value];
}

// Walk j from src to dst over `hops` (spread_walk says how it chooses), appended to `out`;
// `run` is the leading run of lead links the walk takes from src (hops.lead_run(src)).
void walk(NextHopTable& hops, NodeId src, NodeId dst, std::uint32_t run, std::size_t j, std::size_t plain,
          std::vector<LinkId>& out) {
  // At hop d take the next hop with index (j + salt + d) mod (number of next hops), so
  // that walks j differ from the first hop on. Walks from `plain` on add j / m1 after the
  // first choice of m1 > 1 next hops, so that walk j + m1 leaves as walk j does and then
  // differs (a leaf's 32 uplinks, then a spine's 2 cables down: 64 walks, each its own pair).
  std::size_t shift = 0;
  bool chosen = false;  // past the first choice of more than one next hop
  const std::uint64_t salt = (std::uint64_t{src.value} * 0x9E3779B97F4A7C15ull) ^ (dst.value * 0xC2B2AE3D27D4EB4Full);
  const std::span<const NodeId> to = hops.targets();
  NodeId at = src;
  for (std::uint32_t d = 0; at != dst; ++d) {
    // A walk takes one hop per level: d hops from src, what is left of the run is run - d.
    const std::span<const LinkId> next = hops.at(at, run > d ? run - d : 0);
    const std::size_t options = next.size();
    const std::size_t k = (j + shift + (salt >> (d % 32)) + d) % options;
    if (j >= plain && options > 1 && !chosen) shift = j / options;
    chosen = chosen || options > 1;
    out.push_back(next[k]);
    at = to[next[k].value];
  }
}

}  // namespace

std::vector<std::vector<LinkId>> shortest_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t limit) {
  // Distances to dst, then walk from src along links that bring dst one hop closer.
  PathScratch scratch;
  distances_to(c, src, dst, scratch);
  const std::vector<std::uint32_t>& dist = scratch.dist;
  const std::uint32_t far = kFar;
  std::vector<std::vector<LinkId>> paths;
  if (dist[src.value] == far) return paths;
  std::vector<LinkId> path;
  // Depth-first over the next-hop choices, in link id order (out_links lists a node's
  // links in the order they were added, which is id order).
  auto walk = [&](auto&& self, NodeId at) -> void {
    if (paths.size() >= limit) return;
    if (at == dst) {
      paths.push_back(path);
      return;
    }
    for (LinkId l : c.out_links(at)) {
      const NodeId next = c.link(l).to;
      if (dist[next.value] + 1 != dist[at.value]) continue;
      path.push_back(l);
      self(self, next);
      path.pop_back();
      if (paths.size() >= limit) return;
    }
  };
  walk(walk, src);
  return paths;
}

std::vector<std::vector<LinkId>> spread_shortest_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t count,
                                                       PathScratch& scratch, const std::vector<bool>* usable,
                                                       std::size_t widen_to, const std::vector<bool>* lead) {
  std::vector<LinkId> flat;
  const std::size_t n = spread_shortest_paths(c, src, dst, count, scratch, flat, usable, widen_to, lead);
  std::vector<std::vector<LinkId>> paths(n);
  const std::size_t hops = n == 0 ? 0 : flat.size() / n;
  for (std::size_t i = 0; i < n; ++i) paths[i].assign(flat.begin() + i * hops, flat.begin() + (i + 1) * hops);
  return paths;
}

std::size_t spread_shortest_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t count, PathScratch& scratch,
                                  std::vector<LinkId>& out, const std::vector<bool>* usable, std::size_t widen_to,
                                  const std::vector<bool>* lead) {
  distances_to(c, src, dst, scratch, usable);
  std::size_t n = 0;
  if (scratch.dist[src.value] != kFar) n = spread_paths(c, src, dst, count, scratch.dist, out, usable, widen_to, lead);
  reset_distances(scratch);
  return n;
}

NextHopTable::NextHopTable(const Cluster& c, const std::vector<std::uint32_t>& dist, const std::vector<bool>* usable,
                           const std::vector<bool>* lead)
    : c_(c), to_(c.link_targets()), dist_(dist), usable_(usable), lead_(lead), slots_(64) {}

// Kinds of entry besides next hops (whose `what` is the run left, far below these).
constexpr std::uint32_t kLeadRun = 0xFFFFFFFF, kCloser = 0xFFFFFFFE;

void NextHopTable::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  used_ = 0;
  pool_.clear();
}

NextHopTable::Slot& NextHopTable::find(std::uint64_t key, bool& found) {
  if (2 * (used_ + 1) > slots_.size()) {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    --shift_;
    for (const Slot& e : old) {
      if (e.key == 0) continue;
      std::size_t k = home(e.key);
      while (slots_[k].key != 0) k = (k + 1) & (slots_.size() - 1);
      slots_[k] = e;
    }
  }
  std::size_t k = home(key);
  while (slots_[k].key != 0 && slots_[k].key != key) k = (k + 1) & (slots_.size() - 1);
  found = slots_[k].key != 0;
  if (!found) {
    slots_[k].key = key;
    ++used_;
  }
  return slots_[k];
}

std::span<const LinkId> NextHopTable::at(NodeId n, std::uint32_t run) {
  bool found = false;
  const std::uint64_t key = (std::uint64_t{n.value} + 1) << 32 | run;
  if (const Slot& s = find(key, found); found) return {pool_.data() + s.a, pool_.data() + s.b};
  const auto begin = static_cast<std::uint32_t>(pool_.size());
  for (LinkId l : c_.out_links(n)) {
    if (!closer(to_, l, n, dist_, usable_)) continue;
    if (run > 0 && !((*lead_)[l.value] && lead_run(to_[l.value]) + 1 == run)) continue;
    pool_.push_back(l);
  }
  // lead_run may have added entries (and moved the slots): find the slot again.
  Slot& s = find(key, found);
  s.a = begin;
  s.b = static_cast<std::uint32_t>(pool_.size());
  return {pool_.data() + s.a, pool_.data() + s.b};
}

std::uint32_t NextHopTable::lead_run(NodeId n) {
  if (lead_ == nullptr) return 0;
  bool found = false;
  const std::uint64_t key = (std::uint64_t{n.value} + 1) << 32 | kLeadRun;
  if (const Slot& s = find(key, found); found) return s.a;
  std::uint32_t best = 0;
  for (LinkId l : c_.out_links(n)) {
    if ((*lead_)[l.value] && closer(to_, l, n, dist_, usable_)) best = std::max(best, 1 + lead_run(to_[l.value]));
  }
  find(key, found).a = best;
  return best;
}

std::pair<std::size_t, NodeId> NextHopTable::closer_links(NodeId n) {
  bool found = false;
  const std::uint64_t key = (std::uint64_t{n.value} + 1) << 32 | kCloser;
  Slot& s = find(key, found);
  if (!found) {
    s.a = 0;
    s.b = n.value;
    for (LinkId l : c_.out_links(n)) {
      if (closer(to_, l, n, dist_, usable_) && s.a++ == 0) s.b = to_[l.value].value;
    }
  }
  return {s.a, NodeId(s.b)};
}

std::size_t spread_paths(const Cluster& c, NodeId src, NodeId dst, std::size_t count,
                         const std::vector<std::uint32_t>& dist, std::vector<LinkId>& out,
                         const std::vector<bool>* usable, std::size_t widen_to, const std::vector<bool>* lead) {
  NextHopTable hops(c, dist, usable, lead);
  return spread_paths(hops, src, dst, count, out, widen_to);
}

std::size_t spread_paths(NextHopTable& hops, NodeId src, NodeId dst, std::size_t count, std::vector<LinkId>& out,
                         std::size_t widen_to) {
  const std::size_t plain = count;
  if (widen_to > count) {
    // The choices of next hops along the first walk, multiplied (the same at every
    // node of one level of a regular fabric): how many distinct walks there are.
    std::size_t widest = 1;
    for (NodeId at = src; at != dst;) {
      const auto [options, next] = hops.closer_links(at);
      widest = std::min(widest * options, widen_to);
      at = next;
    }
    count = std::max(count, widest);
  }
  const std::uint32_t run = hops.lead_run(src);
  if (count == 1) {  // one walk: nothing to repeat
    walk(hops, src, dst, run, 0, plain, out);
    return 1;
  }
  // Walks that repeat an earlier one are dropped: a hash per walk kept, in an open
  // addressing table of (walk + 1), finds the kept walks a new one may repeat.
  const std::size_t base = out.size(), length = hops.dist()[src.value];
  std::size_t kept = 0;
  std::vector<std::uint64_t>& hashes = hops.hashes_;
  std::vector<std::uint32_t>& table = hops.seen_;
  hashes.clear();
  table.assign(std::bit_ceil(2 * count + 2), 0);
  const std::size_t mask = table.size() - 1;
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t start = out.size();
    walk(hops, src, dst, run, j, plain, out);
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t k = start; k < out.size(); ++k) h = (h ^ out[k].value) * 1099511628211ull;
    std::size_t k = static_cast<std::size_t>(h >> 32) & mask;
    bool repeat = false;
    for (; table[k] != 0; k = (k + 1) & mask) {
      const std::size_t other = table[k] - 1;
      if (hashes[other] == h && std::equal(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(),
                                           out.begin() + static_cast<std::ptrdiff_t>(base + other * length))) {
        repeat = true;
        break;
      }
    }
    if (repeat) {
      out.resize(start);
      continue;
    }
    table[k] = static_cast<std::uint32_t>(++kept);
    hashes.push_back(h);
  }
  return kept;
}

std::vector<LinkId> spread_walk(const Cluster& c, NodeId src, NodeId dst, std::size_t j,
                                const std::vector<std::uint32_t>& dist, const std::vector<bool>* usable,
                                std::size_t plain, const std::vector<bool>* lead) {
  NextHopTable hops(c, dist, usable, lead);
  std::vector<LinkId> path;
  path.reserve(dist[src.value]);
  walk(hops, src, dst, hops.lead_run(src), j, plain, path);
  return path;
}

void distances_from(const Cluster& c, NodeId dst, std::vector<std::uint32_t>& dist, const std::vector<bool>* usable) {
  dist.assign(c.node_count(), kFar);
  std::vector<NodeId> layer{dst}, next;
  dist[dst.value] = 0;
  for (std::uint32_t d = 1; !layer.empty(); ++d) {
    next.clear();
    for (NodeId u : layer) {
      for (LinkId l : c.out_links(u)) {
        if (usable != nullptr && !(*usable)[l.value]) continue;
        const NodeId v = c.link(l).to;
        if (dist[v.value] != kFar) continue;
        dist[v.value] = d;
        next.push_back(v);
      }
    }
    std::swap(layer, next);
  }
}

TorusRouter::TorusRouter(const Cluster& c, std::vector<NodeId> chips, std::vector<int> dims, std::vector<bool> wrap)
    : dims_(std::move(dims)), wrap_(std::move(wrap)) {
  const std::size_t n = dims_.size();
  std::size_t total = 1;
  for (int k : dims_) total *= static_cast<std::size_t>(k);
  if (n == 0 || wrap_.size() != n || chips.size() != total) throw GraphError("TorusRouter: chips do not match dims");
  stride_.assign(n, 1);
  for (std::size_t d = n - 1; d-- > 0;) stride_[d] = stride_[d + 1] * static_cast<std::size_t>(dims_[d + 1]);
  index_.assign(c.node_count(), std::numeric_limits<std::uint32_t>::max());
  for (std::size_t i = 0; i < total; ++i) index_[chips[i].value] = static_cast<std::uint32_t>(i);
  step_.assign(total * n * 2, LinkId{});
  for (std::size_t i = 0; i < total; ++i) {
    for (LinkId l : c.out_links(chips[i])) {
      const std::uint32_t j = index_[c.link(l).to.value];
      if (j == std::numeric_limits<std::uint32_t>::max()) continue;
      for (std::size_t d = 0; d < n; ++d) {
        const auto k = static_cast<std::size_t>(dims_[d]);
        const std::size_t x = i / stride_[d] % k;
        const std::size_t plus = (x + 1) % k, minus = (x + k - 1) % k;
        const std::size_t base = i - x * stride_[d];
        if (j == base + plus * stride_[d] && (x + 1 < k || wrap_[d])) step_[(i * n + d) * 2] = l;
        if (j == base + minus * stride_[d] && (x > 0 || wrap_[d])) step_[(i * n + d) * 2 + 1] = l;
      }
    }
  }
  // Every step a route may take must have its link (the chips' order and the wrap flags
  // must match the cluster's links).
  for (std::size_t i = 0; i < total; ++i) {
    for (std::size_t d = 0; d < n; ++d) {
      const auto k = static_cast<std::size_t>(dims_[d]);
      const std::size_t x = i / stride_[d] % k;
      if (k < 2 || (x + 1 == k && !wrap_[d])) continue;
      const std::size_t j = i - x * stride_[d] + (x + 1) % k * stride_[d];
      if (!step_[(i * n + d) * 2].valid() || !step_[(j * n + d) * 2 + 1].valid()) {
        throw GraphError("chips '" + c.node(chips[i]).name + "' and '" + c.node(chips[j]).name +
                         "' are neighbours along dimension " + std::to_string(d) + (x + 1 == k ? " (its wrap-around)" : "") +
                         " but no link joins them (chips are listed row-major, the last dimension fastest)");
      }
    }
  }
}

const std::vector<LinkId>& TorusRouter::route(NodeId src, NodeId dst) {
  const std::uint64_t key = (std::uint64_t{src.value} << 32) | dst.value;
  if (const auto it = routes_.find(key); it != routes_.end()) return it->second;
  return routes_.emplace(key, find_route(src, dst)).first->second;
}

std::vector<LinkId> TorusRouter::find_route(NodeId src, NodeId dst) {
  const std::size_t n = dims_.size();
  if (src.value >= index_.size() || dst.value >= index_.size() ||
      index_[src.value] == std::numeric_limits<std::uint32_t>::max() ||
      index_[dst.value] == std::numeric_limits<std::uint32_t>::max()) {
    throw GraphError("TorusRouter: a node that is not a chip of this torus");
  }
  std::size_t at = index_[src.value];
  const std::size_t target = index_[dst.value];
  std::vector<LinkId> path;
  for (std::size_t d = 0; d < n; ++d) {
    const auto k = static_cast<std::size_t>(dims_[d]);
    std::size_t x = at / stride_[d] % k;
    const std::size_t y = target / stride_[d] % k;
    const std::size_t up = (y + k - x) % k;  // hops going +1
    const bool plus = wrap_[d] ? up <= k - up : y > x;
    while (x != y) {
      const LinkId l = step_[(at * n + d) * 2 + (plus ? 0 : 1)];  // there (the constructor checked)
      path.push_back(l);
      const std::size_t nx = plus ? (x + 1) % k : (x + k - 1) % k;
      at = at - x * stride_[d] + nx * stride_[d];
      x = nx;
    }
  }
  return path;
}

}  // namespace ddlsim
