// The flow network model: transfers are flows that share every directed link's capacity
// max-min fairly, on any topology.
//
// Model. A transfer of b bytes from node s to node d, submitted at time a, takes a route
// r (a list of directed links, chosen below) and first waits the route's latency
// L(r) = sum of its links' latencies, using no bandwidth (the time for the first byte to
// cross the switches). It then becomes an active flow until its b bytes have arrived.
// Active flows get the max-min fair rates of the links they cross: with c_l the effective
// capacity of link l (bandwidth x efficiency, NetworkFabric) and F_l the active flows
// crossing it, the rates x_f are the unique allocation such that
//     sum_{f in F_l} x_f <= c_l for every link, and
//     every flow crosses a saturated link on which no other flow gets more than it does.
// They are found by progressive filling: raise a common level; when it reaches a link's
// fair share (c_l - fixed_l) / unfixed_l, or a flow's own route bottleneck, fix those
// flows there and charge them to every link they cross; repeat. All links and flows that
// reach one level are fixed together. Alone on its route a transfer therefore takes
// L(r) + b / min_l c_l, and k equal flows on one bottleneck link get c_l / k each.
//
// Rates change only when a flow joins or leaves, and only for flows coupled to it:
// sharing, directly or through other flows, a link that can saturate. A link that cannot
// saturate never binds, so dropping it changes no rate. Which can: a link that is some
// flow's first or last hop (a NIC, mostly) when its flows' route bottlenecks add up to
// more than its capacity; any other link when upper bounds on its flows' rates do. The
// bound of flow f: its route bottleneck, and for each of its first and last links k
// that can saturate, c_k less the lower bounds of k's other flows; a flow's lower bound
// is min over its links of c_l / n_l (n_l flows on l), which max-min fairness gives
// every flow. Those bounds hold for the problem without the dropped links, so the
// dropped links' constraints hold for its solution, which is therefore the solution of
// the whole problem. So a busy NIC's flows do not couple everything they cross behind
// it. A link that stops being a constraint brings its flows into the next re-solve.
// Every change re-solves that connected component and nothing else, at a cost of
// O(levels x (L_c + F_c h)) for F_c flows of h hops on L_c links. Changes at one instant
// are solved together. A flow's finish time is its rate-weighted remaining bytes.
//
// Route choice: among the minimum-hop routes NetworkFabric offers (one, dimension order,
// inside a torus), a transfer takes the one whose tightest link would give it the
// largest share, counting the transfers already routed over each link (adaptive
// routing, as InfiniBand and Spectrum-X fabrics do per flow); links every candidate
// crosses are left out of that comparison (they would bound all alike); ties go to the
// first.
//
// Assumptions: fluid flows (no packets, no queues, no congestion control dynamics: rates
// settle instantly); latency is paid once per transfer before its bytes flow; the two
// directions of a cable are independent links. Finishes within a relative 1e-12 of
// each other are reported together at the earlier time.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/core/event_queue.hpp"
#include "sim/core/resource_model.hpp"
#include "sim/network.hpp"
#include "sim/network_fabric.hpp"

namespace ddlsim {

class FlowNetwork final : public NetworkModel {
 public:
  struct Stats {
    std::uint64_t flows = 0;           // transfers carried
    std::uint64_t solves = 0;          // re-solves (each of one or more components)
    std::uint64_t components = 0;      // connected components re-solved
    std::uint64_t flows_resolved = 0;  // flows whose rate a re-solve computed (summed over solves)
  };

  FlowNetwork(std::string name, NetworkFabric& fabric);

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] bool accepts(const TaskKind& kind) const override { return kind.index() == 1; }
  void begin(const TaskGraph& graph) override;
  Seconds submit(TaskId task, Seconds now, ReplaySink& sink) override;
  [[nodiscard]] Seconds next_event() const override;
  Seconds advance(Seconds t, ReplaySink& sink) override;

  [[nodiscard]] const Stats& stats() const { return stats_; }

 private:
  struct Flow {
    const LinkId* route;
    std::uint32_t hops;
    TaskId task;
    bool active;   // false while it waits its route's latency
    bool linked;   // listed on its links (active and with bytes to move)
    double left;   // bytes still to arrive at time `since`
    double rate;   // B/s since `since`
    double since;
    double cap;    // its route's bottleneck capacity: an upper bound on its rate
  };

  std::uint32_t new_flow();
  const std::vector<LinkId>& choose_route(NodeId src, NodeId dst);
  void join(std::uint32_t f, double at);
  void leave(std::uint32_t f);
  void mark_dirty(const Flow& f);
  void solve();
  void solve_component();
  void fill();

  std::string name_;
  NetworkFabric* fabric_;
  const TaskGraph* graph_ = nullptr;
  Stats stats_;

  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_;
  // Where each flow sits in each of its links' lists (pos_pool_[pos_begin_[f] + hop]),
  // so that leaving costs O(hops) however many flows share a link.
  std::vector<std::uint32_t> pos_begin_, pos_cap_, pos_pool_;
  EventQueue events_;  // per flow slot: its finish time, once its rate is known
  // Flows waiting out their route's latency, one FIFO per distinct latency: submits come
  // in time order, so each FIFO is in join order, and only the FIFOs' heads need a heap.
  struct Waiting {
    double latency;
    std::vector<std::uint32_t> flows;
    std::size_t head = 0;
  };
  std::vector<Waiting> waiting_;
  std::unordered_map<std::uint64_t, std::uint32_t> waiting_index_;  // latency bits -> FIFO
  EventQueue joins_;  // per FIFO: its head's join time
  void schedule_head(std::uint32_t fifo);
  std::vector<std::vector<std::uint32_t>> on_link_;  // active flows per directed link
  std::vector<std::uint32_t> load_;                  // flows routed over each link (waiting or active)
  std::vector<std::uint32_t> crossings_;             // choose_route scratch: candidates crossing each link (0 between calls)
  std::vector<std::uint32_t> dirty_;                 // links whose flows changed since the last solve
  // Sum of the route bottlenecks of the flows on each link. A link whose demand fits
  // its capacity can never be saturated, so it constrains nothing and couples nothing.
  std::vector<double> demand_;
  // Linked flows that start or end on each link (it is their first or last hop).
  std::vector<std::uint32_t> ends_on_;
  [[nodiscard]] bool may_saturate(std::uint32_t l) const;  // demand_ over capacity
  // Whether l is a constraint of the current solve (the header says when); cached per solve.
  bool saturable(std::uint32_t l);
  // An upper bound on f's max-min rate from its first and last links (cached per solve).
  double bound(std::uint32_t f);
  std::vector<std::uint32_t> sat_epoch_, bound_epoch_;
  std::vector<std::uint8_t> sat_;
  std::vector<std::uint8_t> was_saturable_;  // each link's saturable() when a solve last looked at it
  std::vector<double> lower_, upper_;
  double clock_ = 0.0;                               // time of the pending changes

  // Solver scratch, sized once per begin().
  std::vector<std::uint32_t> link_mark_, flow_mark_, fixed_mark_;  // visited / rate fixed in the current solve
  std::uint32_t epoch_ = 0;
  std::vector<double> remaining_;
  std::vector<std::uint32_t> unfixed_;
  std::vector<std::uint32_t> seeds_, comp_links_, comp_flows_;
  std::vector<double> new_rate_;
  std::vector<std::uint32_t> live_links_, live_flows_;
  std::vector<std::pair<double, std::uint32_t>> heap_;
};

}  // namespace ddlsim
