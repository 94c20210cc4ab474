#include "sim/flow_network.hpp"

#include <algorithm>
#include <bit>
#include <span>
#include <limits>

#include "sim/core/errors.hpp"
#include "sim/core/task_graph.hpp"

namespace ddlsim {
namespace {

constexpr double kTie = 1e-12;  // relative: finishes this close are one instant
// A flow's bottleneck_ when no link is: it runs at its route's bottleneck capacity, or
// it has no rate yet.
constexpr std::uint32_t kCapped = 0xFFFFFFFFu;
constexpr std::uint32_t kUnsolved = 0xFFFFFFFEu;
// Bits of 64 set by a destination's sources from which its pairs are routed up front:
// 32 sources (prefetch_routes' threshold) set 25 on average, rarely under 20.
constexpr int kManySources = 20;

}  // namespace

FlowNetwork::FlowNetwork(std::string name, NetworkFabric& fabric) : name_(std::move(name)), fabric_(&fabric) {}

void FlowNetwork::begin(const TaskGraph& graph) {
  graph_ = &graph;
  reset_link_bytes(fabric_->cluster().link_count());
  stats_ = Stats{};
  flows_.clear();
  free_.clear();
  pos_begin_.clear();
  pos_cap_.clear();
  pos_pool_.clear();
  events_.reset(0);
  waiting_.clear();
  waiting_index_.clear();
  joins_.reset(0);
  const std::size_t links = fabric_->cluster().link_count();
  on_link_.assign(links, {});
  load_.assign(links, 0);
  crossings_.assign(links, 0);
  dirty_.clear();
  bottleneck_.clear();
  clock_ = 0.0;
  link_mark_.assign(links, 0);
  total_mark_.assign(links, 0);
  flow_mark_.clear();
  fixed_mark_.clear();
  added_mark_.clear();
  epoch_ = 0;
  pass_ = 0;
  remaining_.assign(links, 0.0);
  link_total_.assign(links, 0.0);
  link_max_.assign(links, 0.0);
  unfixed_.assign(links, 0);
  // Route up front the pairs whose destination many sources send to (an all-to-all's),
  // with one search per destination (NetworkFabric::prefetch_routes). One pass marks,
  // per destination, a bit of 64 per source (by a hash of the source); a destination of
  // a ring or tree has one or a few sources and so few bits, and its pairs are not even
  // listed. The routes are the same either way: this only saves time.
  const std::size_t nodes = fabric_->cluster().node_count();
  std::vector<std::uint64_t> sources(nodes, 0);
  bool many = false;
  for (std::uint32_t t = 0; t < graph.size(); ++t) {
    if (const auto* x = std::get_if<Transfer>(&graph.kind(TaskId(t))); x != nullptr && x->dst.value < nodes) {
      std::uint64_t& bits = sources[x->dst.value];
      bits |= std::uint64_t{1} << ((x->src.value * 0x9E3779B97F4A7C15ull) >> 58);
      many = many || std::popcount(bits) >= kManySources;
    }
  }
  if (!many) return;
  std::vector<std::pair<NodeId, NodeId>> pairs;
  for (std::uint32_t t = 0; t < graph.size(); ++t) {
    if (const auto* x = std::get_if<Transfer>(&graph.kind(TaskId(t)));
        x != nullptr && x->dst.value < nodes && std::popcount(sources[x->dst.value]) >= kManySources) {
      const std::pair<NodeId, NodeId> p(NodeId(x->src.value), NodeId(x->dst.value));
      if (pairs.empty() || pairs.back() != p) pairs.push_back(p);
    }
  }
  fabric_->prefetch_routes(std::move(pairs));
}

std::uint32_t FlowNetwork::new_flow() {
  if (!free_.empty()) {
    const std::uint32_t f = free_.back();
    free_.pop_back();
    return f;
  }
  const auto f = static_cast<std::uint32_t>(flows_.size());
  if (f >= (1u << 24)) {
    throw ReplayError("network '" + name_ + "': more than 2^24 transfers in flight at once");
  }
  flows_.push_back(Flow{});
  pos_begin_.push_back(0);
  pos_cap_.push_back(0);
  flow_mark_.push_back(0);
  fixed_mark_.push_back(0);
  added_mark_.push_back(0);
  bottleneck_.push_back(kUnsolved);
  new_rate_.push_back(0.0);
  events_.grow(flows_.size());
  return f;
}

std::span<const LinkId> FlowNetwork::choose_route(NodeId src, NodeId dst) {
  const RouteSet candidates = fabric_->routes(src, dst);
  if (candidates.size() == 1) return candidates.front();
  // A link every candidate crosses (the source's NIC, the destination's) bounds them all
  // alike, so the choice is made on the links where they differ: otherwise a busy NIC,
  // tighter than any fabric link, would tie every candidate and the first would win
  // however loaded its spine.
  const auto everyone = static_cast<std::uint32_t>(candidates.size());
  for (const auto& r : candidates) {
    for (LinkId l : r) ++crossings_[l.value];
  }
  std::size_t best = 0;
  double best_share = -1.0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    double share = std::numeric_limits<double>::infinity();
    for (LinkId l : candidates[i]) {
      if (crossings_[l.value] == everyone) continue;
      share = std::min(share, fabric_->capacity(l) / static_cast<double>(load_[l.value] + 1));
    }
    if (share > best_share) {
      best_share = share;
      best = i;
    }
  }
  for (const auto& r : candidates) {
    for (LinkId l : r) crossings_[l.value] = 0;
  }
  return candidates[best];
}

Seconds FlowNetwork::submit(TaskId task, Seconds now, ReplaySink& sink) {
  const auto* transfer = std::get_if<Transfer>(&graph_->kind(task));  // accepts() admits only Transfer
  const NodeId src(transfer->src.value), dst(transfer->dst.value);
  const std::size_t nodes = fabric_->cluster().node_count();
  if (src.value >= nodes || dst.value >= nodes) {
    throw ReplayError("network '" + name_ + "': " + std::string(graph_->name(task)) +
                      " names an endpoint that is not a node of the cluster");
  }
  const std::span<const LinkId> route = choose_route(src, dst);
  sink.started(task, now);
  graph_->prefetch_finish(task);
  ++stats_.flows;

  const std::uint32_t f = new_flow();
  Flow& flow = flows_[f];
  flow.route = route.data();
  flow.hops = static_cast<std::uint32_t>(route.size());
  flow.task = task;
  flow.active = false;
  flow.linked = false;
  flow.left = transfer->bytes.value();
  flow.rate = 0.0;
  flow.since = now.value();
  flow.cap = fabric_->route_capacity(route);
  for (LinkId l : route) ++load_[l.value];
  carry(route, flow.left);
  const double latency = fabric_->transfer_latency(route, *transfer) * transfer->latency_count() + graph_->wait(task);
  if (latency > 0.0) {
    const auto [it, fresh] = waiting_index_.try_emplace(std::bit_cast<std::uint64_t>(latency),
                                                        static_cast<std::uint32_t>(waiting_.size()));
    if (fresh) {
      waiting_.push_back(Waiting{latency, {}, 0});
      joins_.grow(waiting_.size());
    }
    Waiting& w = waiting_[it->second];
    w.flows.push_back(f);
    if (w.flows.size() - w.head == 1) schedule_head(it->second);
  } else {
    clock_ = now.value();
    join(f, now.value());
  }
  return next_event();
}

void FlowNetwork::schedule_head(std::uint32_t fifo) {
  Waiting& w = waiting_[fifo];
  if (w.head == w.flows.size()) {
    w.flows.clear();
    w.head = 0;
    joins_.cancel(fifo);
    return;
  }
  joins_.schedule(fifo, Seconds(flows_[w.flows[w.head]].since + w.latency));
}

void FlowNetwork::join(std::uint32_t f, double at) {
  Flow& flow = flows_[f];
  flow.active = true;
  flow.since = at;
  if (flow.hops == 0 || flow.left <= 0.0) {  // nothing to share: it has arrived
    flow.rate = std::numeric_limits<double>::infinity();
    flow.linked = false;
    events_.schedule(f, Seconds(at));
    return;
  }
  flow.linked = true;
  if (flow.hops > pos_cap_[f]) {  // this slot's position list is too short: take a new one
    pos_begin_[f] = static_cast<std::uint32_t>(pos_pool_.size());
    pos_cap_[f] = flow.hops;
    pos_pool_.resize(pos_pool_.size() + flow.hops);
  }
  std::uint32_t* pos = pos_pool_.data() + pos_begin_[f];
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    auto& on = on_link_[flow.route[h].value];
    pos[h] = static_cast<std::uint32_t>(on.size());
    on.push_back(f);
  }
  bottleneck_[f] = kUnsolved;
  mark_dirty(flow);
}

void FlowNetwork::leave(std::uint32_t f) {
  Flow& flow = flows_[f];
  const std::uint32_t* pos = pos_pool_.data() + pos_begin_[f];
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    const std::uint32_t l = flow.route[h].value;
    --load_[l];
    if (!flow.linked) continue;
    // Swap-remove f from the link's list and tell the flow moved into its place.
    auto& on = on_link_[l];
    const std::uint32_t moved = on.back();
    on[pos[h]] = moved;
    on.pop_back();
    if (moved != f) {
      const Flow& m = flows_[moved];
      for (std::uint32_t k = 0; k < m.hops; ++k) {
        if (m.route[k].value == l) {
          pos_pool_[pos_begin_[moved] + k] = pos[h];
          break;
        }
      }
    }
  }
  if (flow.linked) mark_dirty(flow);
  free_.push_back(f);
}

void FlowNetwork::mark_dirty(const Flow& f) {
  for (std::uint32_t h = 0; h < f.hops; ++h) dirty_.push_back(f.route[h].value);
}

Seconds FlowNetwork::next_event() const {
  if (!dirty_.empty()) return Seconds(clock_);  // a solve is due at the time of the change
  const Seconds finish = events_.empty() ? kNever : events_.top_time();
  const Seconds join = joins_.empty() ? kNever : joins_.top_time();
  return std::min(finish, join);
}

Seconds FlowNetwork::advance(Seconds t, ReplaySink& sink) {
  if (!dirty_.empty()) solve();
  for (;;) {
    const double at = std::min(events_.empty() ? kNever : events_.top_time(),
                               joins_.empty() ? kNever : joins_.top_time()).value();
    if (!(at <= t.value())) break;
    // Everything within a relative kTie of `at` happens at this instant: finishes first,
    // then joins.
    const double until = at + kTie * at;
    clock_ = at;
    while (!events_.empty() && events_.top_time().value() <= until) {
      const std::uint32_t f = events_.top_key();
      events_.cancel(f);
      sink.finished(flows_[f].task, t);
      leave(f);
    }
    while (!joins_.empty() && joins_.top_time().value() <= until) {
      const std::uint32_t fifo = joins_.top_key();
      Waiting& w = waiting_[fifo];
      join(w.flows[w.head++], at);
      schedule_head(fifo);
    }
    if (!dirty_.empty()) solve();
  }
  return next_event();
}

void FlowNetwork::next_pass() {
  if (++pass_ == 0) {  // the marks wrapped: clear them once every 2^32 passes
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    std::fill(total_mark_.begin(), total_mark_.end(), 0);
    std::fill(fixed_mark_.begin(), fixed_mark_.end(), 0);
    std::fill(added_mark_.begin(), added_mark_.end(), 0);
    pass_ = 1;
  }
}

void FlowNetwork::solve() {
  ++stats_.solves;
  if (++epoch_ == 0) {  // the marks wrapped: clear them once every 2^32 solves
    std::fill(flow_mark_.begin(), flow_mark_.end(), 0);
    epoch_ = 1;
  }
  // The flows the changes may move: those that joined, and those whose bottleneck is a
  // link a flow joined or left. Every other flow keeps a bottleneck the changes did not
  // touch, unless the new rates take it away, which check() finds.
  set_.clear();
  for (std::uint32_t l : dirty_) {
    for (std::uint32_t f : on_link_[l]) {
      if (flow_mark_[f] == epoch_ || (bottleneck_[f] != l && bottleneck_[f] != kUnsolved)) continue;
      flow_mark_[f] = epoch_;
      set_.push_back(f);
    }
  }
  dirty_.clear();
  if (set_.empty()) return;
  do {
    next_pass();
    ++stats_.fills;
    fill();
  } while (!check());
  stats_.flows_resolved += set_.size();
  // New rates take effect at clock_: settle the bytes each flow received until then.
  for (std::uint32_t f : set_) {
    Flow& flow = flows_[f];
    const double rate = new_rate_[f];
    if (rate == flow.rate) continue;
    if (flow.rate > 0.0) {
      flow.left = std::max(0.0, flow.left - flow.rate * (clock_ - flow.since));
    }
    flow.since = clock_;
    flow.rate = rate;
    events_.schedule(f, Seconds(clock_ + flow.left / rate));
  }
}

// Progressive filling of the set's flows (flow_mark_ == epoch_) over every link they
// cross, each link's capacity less the rates of the other flows on it, which are held.
// Records in new_rate_ each set flow's rate.
void FlowNetwork::fill() {
  constexpr double kSame = 1e-12;  // relative: shares this close are one level
  live_links_.clear();
  for (std::uint32_t f : set_) {
    const Flow& flow = flows_[f];
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t l = flow.route[h].value;
      if (link_mark_[l] != pass_) {
        link_mark_[l] = pass_;
        unfixed_[l] = 0;
        live_links_.push_back(l);
      }
      ++unfixed_[l];
    }
  }
  for (std::uint32_t l : live_links_) {
    double held = 0.0;
    for (std::uint32_t g : on_link_[l]) {
      if (flow_mark_[g] != epoch_) held += flows_[g].rate;
    }
    remaining_[l] = std::max(0.0, fabric_->capacity(LinkId(l)) - held);
  }
  links_.assign(live_links_.begin(), live_links_.end());  // for check(): the links the set crosses
  live_flows_.assign(set_.begin(), set_.end());
  double level = 0.0;  // levels only rise; rounding must not undo that
  auto fix = [&](std::uint32_t f, double rate) {
    fixed_mark_[f] = pass_;
    new_rate_[f] = rate;
    const Flow& flow = flows_[f];
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t k = flow.route[h].value;
      remaining_[k] -= rate;
      --unfixed_[k];
    }
  };
  auto open = [&](std::uint32_t f) { return flow_mark_[f] == epoch_ && fixed_mark_[f] != pass_; };
  // A link's fair share of what is left; rounding may leave a saturated link a hair below 0.
  auto share_of = [&](std::uint32_t l) { return std::max(remaining_[l], 0.0) / unfixed_[l]; };
  // A few rounds that fix every link and flow at the lowest level at once (most sets
  // have one or two levels); past that, one link or flow at a time from a heap, so that
  // many distinct levels cost O(F h log L) rather than O(levels x L).
  int rounds = 0;
  while (!live_flows_.empty() && rounds++ < 4) {
    double share = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : live_links_) share = std::min(share, share_of(l));
    double own = std::numeric_limits<double>::infinity();
    for (std::uint32_t f : live_flows_) own = std::min(own, flows_[f].cap);
    level = std::max(level, std::min(share, own));
    const double top = level * (1.0 + kSame);
    // Flows whose own bottleneck is reached keep it; then every flow on a link at the
    // level gets the level.
    for (std::uint32_t f : live_flows_) {
      if (open(f) && flows_[f].cap <= top) fix(f, std::min(flows_[f].cap, std::max(level, 0.0)));
    }
    for (std::uint32_t l : live_links_) {
      if (unfixed_[l] == 0 || share_of(l) > top) continue;
      for (std::uint32_t f : on_link_[l]) {
        if (open(f)) fix(f, level);
      }
    }
    std::erase_if(live_links_, [&](std::uint32_t l) { return unfixed_[l] == 0; });
    std::erase_if(live_flows_, [&](std::uint32_t f) { return fixed_mark_[f] == pass_; });
  }
  if (live_flows_.empty()) return;
  // Heap phase: links by share (lazily updated: stale entries are skipped), flows by cap.
  using Entry = std::pair<double, std::uint32_t>;
  auto later = [](const Entry& a, const Entry& b) { return a.first != b.first ? a.first > b.first : a.second > b.second; };
  heap_.clear();
  for (std::uint32_t l : live_links_) heap_.emplace_back(share_of(l), l);
  std::make_heap(heap_.begin(), heap_.end(), later);
  std::sort(live_flows_.begin(), live_flows_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return flows_[a].cap != flows_[b].cap ? flows_[a].cap < flows_[b].cap : a < b;
  });
  std::size_t next_flow = 0;
  auto fix_and_push = [&](std::uint32_t f, double rate) {
    fix(f, rate);
    const Flow& flow = flows_[f];
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t k = flow.route[h].value;
      if (unfixed_[k] == 0) continue;
      heap_.emplace_back(share_of(k), k);
      std::push_heap(heap_.begin(), heap_.end(), later);
    }
  };
  for (;;) {
    while (next_flow < live_flows_.size() && fixed_mark_[live_flows_[next_flow]] == pass_) ++next_flow;
    while (!heap_.empty()) {  // drop stale entries
      const auto [key, l] = heap_.front();
      if (unfixed_[l] != 0 && key == share_of(l)) break;
      std::pop_heap(heap_.begin(), heap_.end(), later);
      heap_.pop_back();
    }
    if (next_flow == live_flows_.size()) break;
    const double cap = flows_[live_flows_[next_flow]].cap;
    if (heap_.empty() || cap <= heap_.front().first) {
      level = std::max(level, cap);
      fix_and_push(live_flows_[next_flow], cap);
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [key, l] = heap_.back();
    heap_.pop_back();
    level = std::max(level, key);
    for (std::uint32_t f : on_link_[l]) {
      if (open(f)) fix_and_push(f, level);
    }
  }
}

// The certificate: every set flow, and every held flow whose bottleneck is a link the
// set crosses, must have a bottleneck under the filled rates. Records the bottlenecks
// found. A held flow without one joins the set; so do the held flows that outrun a set
// flow without one on its saturated links (they took what it should share). Returns
// whether all passed.
bool FlowNetwork::check() {
  constexpr double kClose = 1.0 - 1e-9;  // relative: saturated, or as fast as the fastest
  auto rate = [&](std::uint32_t g) { return flow_mark_[g] == epoch_ ? new_rate_[g] : flows_[g].rate; };
  auto observe = [&](std::uint32_t l) {  // link_total_[l], link_max_[l] under these rates
    if (total_mark_[l] == pass_) return;
    total_mark_[l] = pass_;
    double total = 0.0, most = 0.0;
    for (std::uint32_t g : on_link_[l]) {
      const double r = rate(g);
      total += r;
      most = std::max(most, r);
    }
    link_total_[l] = total;
    link_max_[l] = most;
  };
  auto saturated = [&](std::uint32_t l) {
    observe(l);
    return link_total_[l] >= fabric_->capacity(LinkId(l)) * kClose;
  };
  auto bottleneck_of = [&](std::uint32_t g) {
    const Flow& flow = flows_[g];
    const double r = rate(g);
    if (r >= flow.cap * kClose) return kCapped;
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t k = flow.route[h].value;
      if (saturated(k) && r >= link_max_[k] * kClose) return k;
    }
    return kUnsolved;
  };
  added_.clear();
  auto add = [&](std::uint32_t g) {
    if (flow_mark_[g] == epoch_ || added_mark_[g] == pass_) return;
    added_mark_[g] = pass_;
    added_.push_back(g);
  };
  for (std::uint32_t f : set_) {
    const std::uint32_t b = bottleneck_of(f);
    bottleneck_[f] = b;
    if (b != kUnsolved) continue;
    const Flow& flow = flows_[f];
    const std::size_t before = added_.size();
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t k = flow.route[h].value;
      if (!saturated(k)) continue;
      for (std::uint32_t g : on_link_[k]) {
        if (rate(g) > new_rate_[f]) add(g);
      }
    }
    if (added_.size() == before) {  // rounding hid the culprit: take every flow it meets
      for (std::uint32_t h = 0; h < flow.hops; ++h) {
        for (std::uint32_t g : on_link_[flow.route[h].value]) add(g);
      }
    }
  }
  for (std::uint32_t l : links_) {
    for (std::uint32_t g : on_link_[l]) {
      if (flow_mark_[g] == epoch_ || bottleneck_[g] != l) continue;
      const std::uint32_t b = bottleneck_of(g);
      if (b == kUnsolved) {
        add(g);
      } else {
        bottleneck_[g] = b;
      }
    }
  }
  if (added_.empty()) return true;
  for (std::uint32_t g : added_) {
    flow_mark_[g] = epoch_;
    set_.push_back(g);
  }
  return false;
}

}  // namespace ddlsim
