#include "sim/network_fabric.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <string>

#include "sim/core/errors.hpp"
#include "topology/catalog.hpp"
#include "topology/routing.hpp"

namespace ddlsim {
namespace {

// A figure of each directed link's kind in the catalog (`fallback` for kinds it does not know).
template <class Field>
std::vector<double> per_link_kind(const Cluster& c, const Catalog& catalog, double fallback, Field field) {
  const std::vector<std::string> ids = catalog.link_ids();
  const std::set<std::string, std::less<>> known(ids.begin(), ids.end());
  std::vector<double> out(c.link_count(), fallback);
  for (std::uint32_t l = 0; l < c.link_count(); ++l) {
    const std::string& kind = c.link(LinkId(l)).kind;
    if (known.contains(kind)) out[l] = field(catalog.link(kind));
  }
  return out;
}

std::vector<double> catalog_efficiency(const Cluster& c, const Catalog& catalog) {
  return per_link_kind(c, catalog, 1.0, [](const LinkSpec& s) { return s.efficiency; });
}

// A link kind's figure for every link (0 for kinds the catalog does not know); empty when
// no link's is above 0.
template <class Field>
std::vector<double> per_link_kind_or_empty(const Cluster& c, const Catalog& catalog, Field field) {
  std::vector<double> out = per_link_kind(c, catalog, 0.0, field);
  if (std::none_of(out.begin(), out.end(), [](double x) { return x > 0.0; })) out.clear();
  return out;
}

std::vector<double> catalog_ring_overhead(const Cluster& c, const Catalog& catalog) {
  return per_link_kind_or_empty(c, catalog, [](const LinkSpec& s) { return s.ring_overhead; });
}

// The low-latency protocol's latency of every link (its kind's ll_latency, else the
// link's own `latency`); empty when no link's differs.
std::vector<double> catalog_ll_latency(const Cluster& c, const Catalog& catalog, const std::vector<double>& latency) {
  std::vector<double> out =
      per_link_kind(c, catalog, -1.0, [](const LinkSpec& s) { return s.ll_latency ? s.ll_latency->value() : -1.0; });
  bool any = false;
  for (std::size_t l = 0; l < out.size(); ++l) {
    if (out[l] < 0.0) out[l] = latency[l];
    any = any || out[l] != latency[l];
  }
  if (!any) out.clear();
  return out;
}

// The transport latency of every link's kind under the low-latency protocol (`ll`) or
// the bandwidth one; empty when none has one.
std::vector<double> catalog_transport(const Cluster& c, const Catalog& catalog, bool ll) {
  return per_link_kind_or_empty(
      c, catalog, [ll](const LinkSpec& s) { return (ll ? s.ll_transport_latency : s.transport_latency).value(); });
}

std::vector<bool> catalog_scale_up(const Cluster& c, const Catalog& catalog) {
  std::set<std::string, std::less<>> kinds;
  for (const std::string& id : catalog.accelerator_ids()) kinds.insert(catalog.accelerator(id).scale_up);
  std::vector<bool> up(c.link_count(), false);
  for (std::uint32_t l = 0; l < c.link_count(); ++l) up[l] = kinds.contains(c.link(LinkId(l)).kind);
  return up;
}

std::uint32_t find(std::vector<std::uint32_t>& parent, std::uint32_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

NetworkFabric::NetworkFabric(const Cluster& cluster, const Catalog& catalog, const CollectivePolicy& policy)
    : cluster_(&cluster), collective_policy_(policy) {
  init(catalog_efficiency(cluster, catalog), catalog_scale_up(cluster, catalog));
  ring_overhead_ = catalog_ring_overhead(cluster, catalog);
  ll_latency_ = catalog_ll_latency(cluster, catalog, latency_);
  ll_transport_ = catalog_transport(cluster, catalog, true);
  transport_ = catalog_transport(cluster, catalog, false);
  ll_bus_ = per_link_kind_or_empty(cluster, catalog, [](const LinkSpec& s) {
    return s.ll_bus_bandwidth ? s.ll_bus_bandwidth->value() : 0.0;
  });
}

NetworkFabric::NetworkFabric(const Cluster& cluster, std::vector<double> efficiency, const std::vector<bool>& scale_up)
    : cluster_(&cluster) {
  if (efficiency.size() != cluster.link_count()) throw GraphError("NetworkFabric: one efficiency per directed link expected");
  if (!scale_up.empty()) {
    if (scale_up.size() != cluster.link_count()) throw GraphError("NetworkFabric: one scale-up flag per directed link expected");
    // Route searches read the flags both ways along a cable (connect() adds a -> b, then
    // b -> a), so both directions must agree.
    for (std::size_t l = 0; l + 1 < scale_up.size(); l += 2) {
      if (scale_up[l] != scale_up[l + 1]) throw GraphError("NetworkFabric: a cable's two directions must agree on scale-up");
    }
  }
  init(std::move(efficiency), scale_up.empty() ? std::vector<bool>(cluster.link_count(), false) : scale_up);
}

NetworkFabric::~NetworkFabric() = default;

void NetworkFabric::init(std::vector<double> efficiency, const std::vector<bool>& scale_up) {
  const Cluster& c = *cluster_;
  const std::size_t links = c.link_count();
  capacity_.resize(links);
  latency_.resize(links);
  ends_.resize(links);
  for (std::uint32_t l = 0; l < links; ++l) {
    const Link& k = c.link(LinkId(l));
    if (!(efficiency[l] > 0.0 && efficiency[l] <= 1.0)) throw GraphError("NetworkFabric: efficiency must be in (0, 1]");
    capacity_[l] = k.bandwidth.value() * efficiency[l];
    latency_[l] = k.latency.value();
    const NodeKind from = c.node(k.from).kind, to = c.node(k.to).kind;
    ends_[l] = static_cast<std::uint8_t>((from == NodeKind::kSwitch && to == NodeKind::kSwitch ? kBetweenSwitches : 0) |
                                         (to == NodeKind::kAccelerator ? kIntoAccelerator : 0));
  }

  // Scale-up domains: union the ends of every scale-up link, then number the classes
  // that hold accelerators in the order of their first accelerator.
  scale_up_ = scale_up;
  std::vector<std::uint32_t> parent(c.node_count());
  std::iota(parent.begin(), parent.end(), 0u);
  for (std::uint32_t l = 0; l < links; l += 2) {
    if (!scale_up[l]) continue;
    const Link& k = c.link(LinkId(l));
    parent[find(parent, k.from.value)] = find(parent, k.to.value);
  }
  constexpr auto kNone = std::numeric_limits<std::uint32_t>::max();
  domain_.assign(c.node_count(), kNone);
  std::vector<std::uint32_t> number(c.node_count(), kNone);
  std::uint32_t next = 0;
  for (NodeId a : c.accelerators()) {
    const std::uint32_t root = find(parent, a.value);
    if (number[root] == kNone) number[root] = next++;
    domain_[a.value] = number[root];
  }

  in_torus_.assign(c.node_count(), false);
  for (const TorusShape& t : c.tori()) {
    for (NodeId n : t.chips) in_torus_[n.value] = true;
  }
  if (!c.tori().empty()) torus_router_ = std::make_unique<ShortestPathRouter>(c);
}

const LinkId* RouteIndex::find(std::uint64_t key) const {
  if (slots_.empty()) return nullptr;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(key);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return slots_[i].set;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

void RouteIndex::insert(std::uint64_t key, const LinkId* set) {
  reserve(size_ + 1);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(key);
  while (slots_[i].key != kEmpty) i = (i + 1) & mask;
  slots_[i] = Slot{key, set};
  ++size_;
}

void RouteIndex::reserve(std::size_t keys) {
  if (keys * 4 <= slots_.size() * 3) return;
  std::size_t capacity = 16;
  unsigned shift = 60;
  while (keys * 4 > capacity * 3) {
    capacity *= 2;
    --shift;
  }
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, nullptr});
  shift_ = shift;
  const std::size_t mask = capacity - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    std::size_t i = home(s.key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

const LinkId* NetworkFabric::store(const LinkId* links, std::uint32_t count, std::uint32_t hops) {
  constexpr std::size_t kBlock = std::size_t{1} << 14;  // links per block
  if (count > kCountMask || hops >= (std::uint32_t{1} << (32 - kCountBits))) {
    throw GraphError("a route of " + std::to_string(hops) + " links, more than the " +
                     std::to_string((std::uint32_t{1} << (32 - kCountBits)) - 1) + " a route may have");
  }
  const std::size_t n = std::size_t{count} * hops + 1;
  if (n > block_left_) {
    const std::size_t size = std::max(kBlock, n);
    blocks_.emplace_back(new LinkId[size]);
    block_next_ = blocks_.back().get();
    block_left_ = size;
  }
  LinkId* at = block_next_;
  at[0] = LinkId((hops << kCountBits) | count);
  if (n > 1) std::copy_n(links, n - 1, at + 1);  // (links is null for a node's route to itself)
  block_next_ += n;
  block_left_ -= n;
  return at;
}

RouteSet NetworkFabric::routes(NodeId src, NodeId dst) {
  const std::uint64_t key = (std::uint64_t{src.value} << 32) | dst.value;
  if (const LinkId* set = routes_.find(key)) return set_at(set);
  const LinkId* set = nullptr;
  if (src == dst) {
    set = store(nullptr, 1, 0);
  } else if (in_torus_[src.value] && in_torus_[dst.value]) {
    // ShortestPathRouter takes the torus's dimension-order route when both chips are in
    // one recorded torus, and a minimum-hop path otherwise.
    const std::vector<LinkId> route = torus_router_->find_route(src, dst);
    set = store(route.data(), 1, static_cast<std::uint32_t>(route.size()));
  } else {
    const std::size_t n = walks(src, dst, kMaxCandidates, found_);
    if (n == 0) throw GraphError("no route from '" + cluster_->node(src).name + "' to '" + cluster_->node(dst).name + "'");
    set = store(found_.data(), static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(found_.size() / n));
  }
  routes_.insert(key, set);
  return set_at(set);
}

std::span<const LinkId> NetworkFabric::first_route(NodeId src, NodeId dst) {
  const std::uint64_t key = (std::uint64_t{src.value} << 32) | dst.value;
  if (const LinkId* set = routes_.find(key)) return set_at(set).front();
  if (const LinkId* set = first_routes_.find(key)) return set_at(set).front();
  if (src == dst || (in_torus_[src.value] && in_torus_[dst.value])) return routes(src, dst).front();
  // The first spread walk does not depend on how many follow it.
  if (walks(src, dst, 1, found_) == 0) {
    throw GraphError("no route from '" + cluster_->node(src).name + "' to '" + cluster_->node(dst).name + "'");
  }
  const LinkId* set = store(found_.data(), 1, static_cast<std::uint32_t>(found_.size()));
  first_routes_.insert(key, set);
  return set_at(set).front();
}

std::size_t NetworkFabric::walks(NodeId src, NodeId dst, std::size_t count, std::vector<LinkId>& out) {
  constexpr auto kNone = std::numeric_limits<std::uint32_t>::max();
  const std::size_t wide = count == kMaxCandidates ? kMaxWideCandidates : 0;
  out.clear();
  if (domain_[src.value] == kNone || domain_[src.value] != domain_[dst.value]) {
    return spread_shortest_paths(*cluster_, src, dst, count, scratch_, out, nullptr, wide, &scale_up_);
  }
  // Two accelerators of one scale-up domain: its own links when they are as short as
  // any other way.
  const std::size_t inside = spread_shortest_paths(*cluster_, src, dst, count, scratch_, out, &scale_up_, wide);
  std::vector<LinkId> any;
  const std::size_t found = spread_shortest_paths(*cluster_, src, dst, 1, scratch_, any, nullptr, 0, &scale_up_);
  if (inside > 0 && found > 0 && out.size() / inside == any.size()) return inside;
  out.clear();
  if (found == 0 || count == 1) {
    out.insert(out.end(), any.begin(), any.end());
    return found;
  }
  return spread_shortest_paths(*cluster_, src, dst, count, scratch_, out, nullptr, wide, &scale_up_);
}

void NetworkFabric::prefetch_first_routes(const std::vector<std::pair<NodeId, NodeId>>& pairs) { prefetch(pairs, 1, 1); }

void NetworkFabric::prefetch_routes(std::vector<std::pair<NodeId, NodeId>> pairs) {
  // A ring's or tree's few sources per destination are left to routes(): a search from
  // each, which in a large cluster stays near the pair, costs less than one over the
  // whole cluster.
  constexpr std::size_t kSourcesWorthIt = 32;
  prefetch(std::move(pairs), kMaxCandidates, kSourcesWorthIt);
}

void NetworkFabric::prefetch(std::vector<std::pair<NodeId, NodeId>> pairs, std::size_t count, std::size_t min_sources) {
  // Below this many unknown pairs a bidirectional search per pair (two small balls in a
  // fat tree) costs less than whole-cluster searches.
  constexpr std::size_t kWorthIt = 256;
  constexpr auto kNone = std::numeric_limits<std::uint32_t>::max();
  const bool candidates = count == kMaxCandidates;  // else the first routes alone
  const std::size_t wide = candidates ? kMaxWideCandidates : 0;
  RouteIndex& known = candidates ? routes_ : first_routes_;
  const std::size_t nodes = cluster_->node_count();
  const auto key = [](NodeId src, NodeId dst) { return (std::uint64_t{src.value} << 32) | dst.value; };
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
    return a.second.value != b.second.value ? a.second.value < b.second.value : a.first.value < b.first.value;
  });
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::erase_if(pairs, [&](const std::pair<NodeId, NodeId>& p) {
    const auto [src, dst] = p;
    return src.value >= nodes || dst.value >= nodes || src == dst || (in_torus_[src.value] && in_torus_[dst.value]) ||
           routes_.find(key(src, dst)) != nullptr || known.find(key(src, dst)) != nullptr;
  });
  if (pairs.size() < kWorthIt) return;
  known.reserve(known.size() + pairs.size());  // at most one growth
  std::vector<std::uint32_t> any, inside;
  // The sources of a destination share its next hops (each node's links scanned once
  // for all of them): the tables follow `any` and `inside`, cleared for each destination.
  NextHopTable any_hops(*cluster_, any, nullptr, &scale_up_), inside_hops(*cluster_, inside, &scale_up_, nullptr);
  for (std::size_t i = 0; i < pairs.size();) {
    const NodeId dst = pairs[i].second;
    std::size_t sources = 0;
    while (i + sources < pairs.size() && pairs[i + sources].second == dst) ++sources;
    if (sources < min_sources) {
      i += sources;
      continue;
    }
    distances_from(*cluster_, dst, any);
    any_hops.clear();
    bool inside_done = false;
    for (; i < pairs.size() && pairs[i].second == dst; ++i) {
      const NodeId src = pairs[i].first;
      if (any[src.value] == kNone) continue;  // no route: routes() and first_route() report it
      // As walks(src, dst, count): inside a shared scale-up domain when that is as short
      // (a minimum-hop route's length is its source's distance).
      found_.clear();
      std::size_t n = 0;
      if (domain_[src.value] != kNone && domain_[src.value] == domain_[dst.value]) {
        if (!inside_done) {
          distances_from(*cluster_, dst, inside, &scale_up_);
          inside_hops.clear();
          inside_done = true;
        }
        if (inside[src.value] == any[src.value]) n = spread_paths(inside_hops, src, dst, count, found_, wide);
      }
      if (n == 0) n = spread_paths(any_hops, src, dst, count, found_, wide);
      known.insert(key(src, dst),
                   store(found_.data(), static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(found_.size() / n)));
      if (candidates) ++prefetched_;
    }
  }
}

const std::vector<float>* NetworkFabric::cached_shares(const std::vector<std::uint64_t>& set) const { return shares_.find(set); }

void NetworkFabric::cache_shares(std::vector<std::uint64_t> set, std::vector<float> values) {
  shares_.add(std::move(set), std::move(values));
}

const std::vector<double>* NetworkFabric::cached_values(const std::vector<std::uint64_t>& key) const { return values_.find(key); }

void NetworkFabric::cache_values(std::vector<std::uint64_t> key, std::vector<double> values) {
  values_.add(std::move(key), std::move(values));
}

NetworkFabric::RouteLatency NetworkFabric::route_latencies(std::span<const LinkId> route, bool low_latency) const {
  const std::vector<double>& latency = low_latency && !ll_latency_.empty() ? ll_latency_ : latency_;
  const std::vector<double>& transports = low_latency ? ll_transport_ : transport_;
  double sum = 0.0, transport = 0.0;
  for (LinkId l : route) {
    sum += latency[l.value];
    if (!transports.empty()) transport = std::max(transport, transports[l.value]);
  }
  return {sum + transport, transport};
}

double NetworkFabric::route_ll_bus_bandwidth(std::span<const LinkId> route) const {
  double low = std::numeric_limits<double>::infinity();
  if (ll_bus_.empty()) return low;
  for (LinkId l : route) {
    if (ll_bus_[l.value] > 0.0) low = std::min(low, ll_bus_[l.value]);
  }
  return low;
}

double NetworkFabric::route_capacity(std::span<const LinkId> route) const {
  double low = std::numeric_limits<double>::infinity();
  for (LinkId l : route) low = std::min(low, capacity_[l.value]);
  return low;
}

}  // namespace ddlsim
