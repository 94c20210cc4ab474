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
  demand_.assign(links, 0.0);
  ends_on_.assign(links, 0);
  was_saturable_.assign(links, 0);
  sat_epoch_.assign(links, 0);
  sat_.assign(links, 0);
  dirty_.clear();
  clock_ = 0.0;
  link_mark_.assign(links, 0);
  flow_mark_.clear();
  fixed_mark_.clear();
  bound_epoch_.clear();
  lower_.clear();
  upper_.clear();
  epoch_ = 0;
  remaining_.assign(links, 0.0);
  unfixed_.assign(links, 0);
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
  bound_epoch_.push_back(0);
  lower_.push_back(0.0);
  upper_.push_back(0.0);
  new_rate_.push_back(0.0);
  events_.grow(flows_.size());
  return f;
}

const std::vector<LinkId>& FlowNetwork::choose_route(NodeId src, NodeId dst) {
  const auto& candidates = fabric_->routes(src, dst);
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
  const std::vector<LinkId>& route = choose_route(src, dst);
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
  const double latency = fabric_->route_latency(route) * transfer->latencies;
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
    demand_[flow.route[h].value] += flow.cap;
  }
  ++ends_on_[flow.route[0].value];
  if (flow.hops > 1) ++ends_on_[flow.route[flow.hops - 1].value];
  mark_dirty(flow);
}

void FlowNetwork::leave(std::uint32_t f) {
  Flow& flow = flows_[f];
  const std::uint32_t* pos = pos_pool_.data() + pos_begin_[f];
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    const std::uint32_t l = flow.route[h].value;
    --load_[l];
    if (!flow.linked) continue;
    demand_[l] -= flow.cap;
    if (on_link_[l].size() == 1) demand_[l] = 0.0;  // no rounding residue on an empty link
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
  if (flow.linked) {
    --ends_on_[flow.route[0].value];
    if (flow.hops > 1) --ends_on_[flow.route[flow.hops - 1].value];
    mark_dirty(flow);
  }
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

bool FlowNetwork::may_saturate(std::uint32_t l) const {
  return on_link_[l].size() > 1 && demand_[l] > fabric_->capacity(LinkId(l)) * (1.0 + 1e-12);
}

bool FlowNetwork::saturable(std::uint32_t l) {
  if (!may_saturate(l)) return false;
  if (ends_on_[l] > 0) return true;  // kept whenever its route bottlenecks could fill it
  if (sat_epoch_[l] == epoch_) return sat_[l] != 0;
  double sum = 0.0;
  for (std::uint32_t f : on_link_[l]) sum += bound(f);
  sat_epoch_[l] = epoch_;
  sat_[l] = sum > fabric_->capacity(LinkId(l)) * (1.0 + 1e-12) ? 1 : 0;
  return sat_[l] != 0;
}

double FlowNetwork::bound(std::uint32_t f) {
  // The lower bounds of every flow on f's first and last links, then f's upper bound.
  auto lower = [&](std::uint32_t g) {
    if (bound_epoch_[g] == epoch_) return lower_[g];
    const Flow& flow = flows_[g];
    double least = std::numeric_limits<double>::infinity();
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t k = flow.route[h].value;
      least = std::min(least, fabric_->capacity(LinkId(k)) / static_cast<double>(on_link_[k].size()));
    }
    bound_epoch_[g] = epoch_;
    lower_[g] = least;
    upper_[g] = -1.0;  // not yet known
    return least;
  };
  lower(f);
  if (upper_[f] >= 0.0) return upper_[f];
  const Flow& flow = flows_[f];
  double most = flow.cap;
  const std::uint32_t ends[2] = {flow.route[0].value, flow.route[flow.hops - 1].value};
  for (int e = 0; e < (flow.hops > 1 ? 2 : 1); ++e) {
    const std::uint32_t k = ends[e];
    if (!may_saturate(k)) continue;  // not a constraint: it bounds nothing
    double others = 0.0;
    for (std::uint32_t g : on_link_[k]) {
      if (g != f) others += lower(g);
    }
    most = std::min(most, fabric_->capacity(LinkId(k)) - others);
  }
  upper_[f] = std::max(most, 0.0);
  return upper_[f];
}

void FlowNetwork::solve() {
  ++stats_.solves;
  if (++epoch_ == 0) {  // the marks wrapped: clear them once every 2^32 solves
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    std::fill(flow_mark_.begin(), flow_mark_.end(), 0);
    std::fill(fixed_mark_.begin(), fixed_mark_.end(), 0);
    std::fill(bound_epoch_.begin(), bound_epoch_.end(), 0);
    std::fill(sat_epoch_.begin(), sat_epoch_.end(), 0);
    epoch_ = 1;
  }
  seeds_.swap(dirty_);
  dirty_.clear();
  // One connected component at a time: the flows on a changed link, and everything
  // coupled to them through links that can saturate. Components do not interact.
  for (std::uint32_t seed : seeds_) {
    if (link_mark_[seed] == epoch_) continue;
    link_mark_[seed] = epoch_;
    comp_links_.clear();
    comp_flows_.clear();
    std::size_t scan = 0;
    auto visit_link = [&](std::uint32_t l) {
      for (std::uint32_t f : on_link_[l]) {
        if (flow_mark_[f] == epoch_) continue;
        flow_mark_[f] = epoch_;
        comp_flows_.push_back(f);
      }
    };
    const bool constraint = saturable(seed);
    if (constraint) comp_links_.push_back(seed);
    was_saturable_[seed] = constraint ? 1 : 0;
    visit_link(seed);
    while (scan < comp_flows_.size()) {
      const Flow& flow = flows_[comp_flows_[scan++]];
      for (std::uint32_t h = 0; h < flow.hops; ++h) {
        const std::uint32_t l = flow.route[h].value;
        if (link_mark_[l] == epoch_) continue;
        // A link that was a constraint and no longer is (its flows' bounds fell) still
        // brings in its flows: their rates were solved under it.
        const bool now = saturable(l), before = was_saturable_[l] != 0;
        if (!now && !before) continue;
        was_saturable_[l] = now ? 1 : 0;
        link_mark_[l] = epoch_;
        if (now) comp_links_.push_back(l);
        visit_link(l);
      }
    }
    if (!comp_flows_.empty()) solve_component();
  }
  seeds_.clear();
}

void FlowNetwork::solve_component() {
  ++stats_.components;
  stats_.flows_resolved += comp_flows_.size();
  if (comp_links_.empty()) {  // nothing can saturate: every flow runs at its route's bottleneck
    for (std::uint32_t f : comp_flows_) new_rate_[f] = flows_[f].cap;
  } else {
    fill();
  }
  // New rates take effect at clock_: settle the bytes each flow received until then.
  for (std::uint32_t f : comp_flows_) {
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

// Progressive filling over the component: the saturable links in comp_links_ are the
// constraints, each flow also bounded by its own route bottleneck.
void FlowNetwork::fill() {
  constexpr double kSame = 1e-12;  // relative: shares this close are one level
  live_links_.clear();
  for (std::uint32_t l : comp_links_) {
    remaining_[l] = fabric_->capacity(LinkId(l));
    unfixed_[l] = static_cast<std::uint32_t>(on_link_[l].size());
    live_links_.push_back(l);
  }
  live_flows_.assign(comp_flows_.begin(), comp_flows_.end());
  double level = 0.0;  // levels only rise; rounding must not undo that
  auto fix = [&](std::uint32_t f, double rate) {
    fixed_mark_[f] = epoch_;
    new_rate_[f] = rate;
    const Flow& flow = flows_[f];
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const std::uint32_t k = flow.route[h].value;
      if (link_mark_[k] != epoch_ || !saturable(k)) continue;  // not a constraint here
      remaining_[k] -= rate;
      --unfixed_[k];
    }
  };
  // A few rounds that fix every link and flow at the lowest level at once (most
  // components have one or two levels); past that, one link or flow at a time from a
  // heap, so that many distinct levels cost O(F h log L) rather than O(levels x L).
  int rounds = 0;
  while (!live_flows_.empty() && rounds++ < 4) {
    double share = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : live_links_) share = std::min(share, remaining_[l] / unfixed_[l]);
    double own = std::numeric_limits<double>::infinity();
    for (std::uint32_t f : live_flows_) own = std::min(own, flows_[f].cap);
    level = std::max(level, std::min(share, own));
    const double top = level * (1.0 + kSame);
    // Flows whose own bottleneck is reached keep it; then every flow on a link at the
    // level gets the level.
    for (std::uint32_t f : live_flows_) {
      if (fixed_mark_[f] != epoch_ && flows_[f].cap <= top) fix(f, std::min(flows_[f].cap, std::max(level, 0.0)));
    }
    for (std::uint32_t l : live_links_) {
      if (unfixed_[l] == 0 || remaining_[l] / unfixed_[l] > top) continue;
      for (std::uint32_t f : on_link_[l]) {
        if (fixed_mark_[f] != epoch_) fix(f, level);
      }
    }
    std::erase_if(live_links_, [&](std::uint32_t l) { return unfixed_[l] == 0; });
    std::erase_if(live_flows_, [&](std::uint32_t f) { return fixed_mark_[f] == epoch_; });
  }
  if (live_flows_.empty()) return;
  // Heap phase: links by share (lazily updated: stale entries are skipped), flows by cap.
  using Entry = std::pair<double, std::uint32_t>;
  auto later = [](const Entry& a, const Entry& b) { return a.first != b.first ? a.first > b.first : a.second > b.second; };
  heap_.clear();
  for (std::uint32_t l : live_links_) heap_.emplace_back(remaining_[l] / unfixed_[l], l);
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
      if (link_mark_[k] != epoch_ || !saturable(k) || unfixed_[k] == 0) continue;
      heap_.emplace_back(remaining_[k] / unfixed_[k], k);
      std::push_heap(heap_.begin(), heap_.end(), later);
    }
  };
  for (;;) {
    while (next_flow < live_flows_.size() && fixed_mark_[live_flows_[next_flow]] == epoch_) ++next_flow;
    while (!heap_.empty()) {  // drop stale entries
      const auto [key, l] = heap_.front();
      if (unfixed_[l] != 0 && key == remaining_[l] / unfixed_[l]) break;
      std::pop_heap(heap_.begin(), heap_.end(), later);
      heap_.pop_back();
    }
    const bool have_flow = next_flow < live_flows_.size();
    if (!have_flow) break;
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
      if (fixed_mark_[f] != epoch_) fix_and_push(f, level);
    }
  }
}

}  // namespace ddlsim
