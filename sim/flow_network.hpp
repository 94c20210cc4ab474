// The flow network model: transfers are flows that share every directed link's capacity
// max-min fairly, on any topology.
//
// Model. A transfer of b bytes from node s to node d, submitted at time a, takes a route
// r (a list of directed links, chosen below) and first waits the route's latency
// L(r) = sum of its links' latencies (NetworkFabric::transfer_latency: its protocol's,
// with its protocol's NIC transport), times the transfer's latency count, plus
// its wait (TaskGraph::wait), using no bandwidth (the time for the first byte to
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
// Rates change only when a flow joins or leaves, and each change is repaired where it
// acts rather than re-solved everywhere. Max-min fairness has a local certificate
// (Bertsekas and Gallager, Data Networks, section 6.5): a feasible allocation is the
// max-min fair one exactly when every flow has a bottleneck, a saturated link on which
// no flow gets more than it does (or its own route bottleneck, when it runs at that).
// The solver remembers each flow's bottleneck. On a change it takes the flows that may
// move (those that joined, and those whose bottleneck the change touched), fills them
// progressively over their links with every other flow's rate held, and checks the
// certificate for them and for every held flow whose bottleneck they cross; a held flow
// that fails, or one that outruns a set flow on the link that fixed it, joins the set,
// and the fill runs again, until all pass. The set only grows, so it ends, at worst
// with every flow coupled to the change; the result is the unique max-min allocation
// over all links, to within a relative 1e-9. A change whose flows bound nobody
// re-solves nothing. Changes at one instant are repaired together. A flow's finish time
// is its rate-weighted remaining bytes.
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
#include <span>
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
    std::uint64_t solves = 0;          // instants at which flows joined or left
    std::uint64_t fills = 0;           // progressive fills run (one per solve, more when a check fails)
    std::uint64_t flows_resolved = 0;  // flows whose rate a solve computed (summed over solves)
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
  std::span<const LinkId> choose_route(NodeId src, NodeId dst);
  void join(std::uint32_t f, double at);
  void leave(std::uint32_t f);
  void mark_dirty(const Flow& f);
  void solve();
  void fill();
  bool check();
  void next_pass();

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
  // Per flow slot: the link that bounds its rate, kCapped (its route's bottleneck) or
  // kUnsolved (it joined since the last solve).
  std::vector<std::uint32_t> bottleneck_;
  double clock_ = 0.0;                               // time of the pending changes

  // Solver scratch, sized once per begin(). flow_mark_ == epoch_: in the current solve's
  // set; link_mark_, fixed_mark_, added_mark_ and total_mark_ == pass_: the current fill's
  // links, flows fixed, flows to add, links whose total and largest rate are in
  // link_total_ and link_max_.
  std::vector<std::uint32_t> link_mark_, total_mark_, flow_mark_, fixed_mark_, added_mark_;
  std::uint32_t epoch_ = 0, pass_ = 0;
  std::vector<double> remaining_, link_total_, link_max_;
  std::vector<std::uint32_t> unfixed_;
  std::vector<std::uint32_t> set_, added_, links_;
  std::vector<double> new_rate_;
  std::vector<std::uint32_t> live_links_, live_flows_;
  std::vector<std::pair<double, std::uint32_t>> heap_;
};

}  // namespace ddlsim
