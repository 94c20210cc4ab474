// Collectives lowered to point-to-point transfers with dependencies, so that a network
// model sees the real traffic, step by step.
//
// Sizes follow nccl-tests: `bytes` is the all-reduce / broadcast / reduce buffer, the
// reduce-scatter input (each rank keeps bytes/p), the all-gather output (each rank
// gives bytes/p), the all-to-all send buffer of each rank (bytes/p to every rank), and
// the send/recv message. Reductions are assumed to run at memory speed beside the
// transfers and cost no time of their own.
//
// Algorithms (p ranks, S bytes, a: latency and B: bandwidth of one route, the NICs'
// transport included once per route (that of the protocol it runs, low_latency_protocol:
// the low-latency one also adds its rate's time, low_latency_throughput_time); a ring
// across domains pays at each step its hop's a less its transport plus the ring's mean
// transport, and a pipeline of chunks pays the transport on its first chunk only):
//  ring     All-reduce: reduce-scatter then all-gather around a ring, 2(p-1) steps of
//           S/p per rank: 2(p-1)a + 2(p-1)/p S/B. Reduce-scatter and all-gather take the
//           p-1 steps of their half; broadcast and reduce pipeline chunks along a chain
//           from (to) the root: (p-2+c)(a + S/(cB)) for c chunks. With several
//           channels (NCCL's rings) the data is split over rings that enter each
//           scale-up domain at a different rank, so every rank's scale-out link carries
//           one ring.
//  tree     All-reduce over NCCL's trees (tree_parents), one per channel, S/t each for t
//           channels: inside each of the D scale-up domains a chain of its ranks, across
//           domains a binary tree (heap order over the domains) joining the chains'
//           heads; reduced up to the root and broadcast down, pipelined in chunks: about
//           2 (floor(log2 D) a_out + (g - 1) a_in) plus the busiest link's bytes over its
//           bandwidth, for g ranks per domain. Odd channels take the mirror tree
//           (domains reversed, so a domain near a leaf of one is near the root of the
//           other: NCCL's double binary tree), and channel c's chains start at each
//           domain's (c g / t)-th rank, so the channels' heads, which carry the traffic
//           between domains, use every rank's NIC (NCCL gives each channel a tree of its
//           own over its own NIC: src/graph/connect.cc). With one rank per domain it is
//           a binary tree over the ranks; within one domain, a chain.
//  halving-doubling  Rabenseifner's all-reduce (power-of-two p): reduce-scatter by
//           recursive halving, all-gather by recursive doubling, exchanging with the
//           rank at distance p/2, p/4, ... : 2 log2(p) a + 2(p-1)/p S/B. Reduce-scatter and
//           all-gather take their half.
//  direct   Every rank sends to every other at once: all-to-all, all-gather,
//           reduce-scatter, all-reduce (reduce-scatter then all-gather), broadcast and
//           reduce (root to all, all to root).
//  hierarchical  All-reduce in three phases: ring reduce-scatter inside each scale-up
//           domain (g ranks), ring all-reduce of the S/g shards among the ranks with the
//           same local index across the n domains, ring all-gather inside the domain.
//           All-to-all in two: each rank sends what it holds for another domain, S/n, to
//           the rank with its local index there (all such ranks exchanging at once), then
//           every rank sends each rank of its own domain what it holds for it, S/g
//           (what arrived from the n domains, its own included); the second phase
//           forwards piece j of the first once it has arrived, so the two overlap (one
//           piece apart) where they use different links. CollectiveSpec's `across` and
//           `within` scale each phase's bytes: a mixture-of-experts dispatch that sends a
//           token once per server and once per GPU there (DeepEP) sends less than every
//           copy (dispatch_spec in strategies/stage_costs.hpp sets them).
//  torus    All-reduce, reduce-scatter and all-gather over a group that is one whole
//           torus: rings along each dimension in turn on the shrinking shard, then back,
//           every dimension at once and, where all of them wrap and have 3 or more chips,
//           both ways: D x ways parts of S / (D ways), part (j, way) starting at dimension
//           j (torus_used_dims, torus_ways). Alone on a torus of equal sides k:
//           2 sum over i of (k - 1)(a + S_i/(k B)), S_i = S / (D ways k^i).
//
// Chunks split every transfer of an algorithm into c pieces that follow each other on
// the same route, so that steps pipeline (a rank forwards piece j while piece j+1 is
// still arriving).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/collective_kinds.hpp"
#include "sim/core/task_graph.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

class NetworkFabric;

std::string_view op_name(CollectiveOp op);            // "all-reduce", ...
std::string_view algorithm_name(CollectiveAlgorithm a);  // "ring", ...
/// What a scenario's algorithm field takes: "auto" (the selector's choice), then every
/// algorithm's name.
std::vector<std::string> algorithm_choices();
std::optional<CollectiveOp> parse_op(std::string_view name);
std::optional<CollectiveAlgorithm> parse_algorithm(std::string_view name);

/// nccl-tests' bus-bandwidth factor: busbw = algbw x factor (2(p-1)/p for all-reduce,
/// (p-1)/p for reduce-scatter, all-gather and all-to-all, 1 otherwise).
double busbw_factor(CollectiveOp op, std::size_t ranks);

/// The ranks of a collective and what the algorithms need to know of their placement.
struct CollectiveGroup {
  std::vector<NodeId> ranks;           // in rank order
  std::vector<std::uint32_t> domain;   // scale-up domain of each rank
  std::vector<int> torus_dims;         // when the ranks are one whole torus, in its row-major order
  std::vector<bool> torus_wrap;        // and whether each of its dimensions wraps around
  // Per rank, the ring overhead (LinkSpec::ring_overhead) of its links, as seconds per
  // byte: the largest overhead among the links leaving it that have one, over their
  // summed capacity (its port: an A100's link to the NVSwitch, or its direct NVLinks).
  // A ring phase of the ring or hierarchical algorithm among p ranks of one scale-up
  // domain then takes p - 1 + overhead steps' time where a step fills that port: each
  // step, a rank's transfers wait ring_wait x its bytes over all channels / (p - 1)
  // beyond their latency, as waiting, not bytes (the kernel is slower, the links no
  // busier; TaskGraph::set_wait). Rings that cross domains pay none (their scale-out
  // hops set the pace), nor do torus rings. Empty when no rank has one.
  std::vector<double> ring_wait;
  /// The slowest rank's wait of one ring phase in which each rank sends `bytes` per step
  /// (all channels together): ring_wait's largest x bytes (0 when empty).
  [[nodiscard]] double phase_wait(double bytes) const;
  // Per scale-up domain (in by_domain's order): the rings along its direct links, as
  // positions in the group, when its accelerators are wired to one another and rank
  // order steps between two that are not (DGX-1's hybrid cube-mesh); when rank order is
  // itself a ring of direct links both ways (a TPU torus dimension), that ring and its
  // reverse (one channel each way); empty otherwise.
  // Ring channel c follows domain_rings[d][c mod their count] (see direct_rings).
  std::vector<std::vector<std::vector<std::size_t>>> domain_rings;
  // Per domain, in a group of several domains: whether its domain_rings are Walecki's
  // paths over a full mesh (walecki_paths in collectives.cpp: path k starts at the
  // domain's k-th rank and ends at its (k + size/2)-th, or, in the last two of an odd
  // number of such domains, at another rank, so that every channel's ring closes on the
  // rail it began on), which ring_orders chains from domain to domain on one rail; empty
  // when no domain's are.
  std::vector<bool> domain_paths;
  // Per domain whose direct rings (not paths) hold exactly its ranks: the cycles tree
  // channel t's chain follows, the (t mod count)-th (tree_parents); empty otherwise. A
  // chain loads both directions of its links, so each entry is the cycle among the
  // domain's rings (one per undirected cycle) whose slowest link leaves the most
  // bandwidth per chain beside the entries before it (ties: the first), one entry per
  // rank of the domain, as NCCL's search lays its channels by the bandwidth left.
  std::vector<std::vector<std::vector<std::size_t>>> domain_chains;
  // Groups of as many ranks that run the same collective at the same time, each listed
  // position for position with `ranks` (the other tensor-parallel ranks' data-parallel
  // groups, which Megatron-LM runs in lockstep): with bandwidth shares (the analytical
  // model), their transfers load the links next to servers beside the group's own, so
  // that groups whose ranks share a NIC share its bandwidth. The flow model ignores it
  // (its flows share the links anyway). Empty: the group runs alone. Set by the caller.
  std::vector<std::vector<NodeId>> siblings;
  // The bus bandwidth (B/s, nccl-tests' busbw) the library's low-latency protocol moves
  // the group's data at: the smallest LinkSpec::ll_bus_bandwidth along the routes from
  // the first rank to a rank of each domain (and to another rank of its own), so a
  // group that crosses a NIC gets the NIC's. Infinity: no link has one (the protocol
  // then runs only up to kLowLatencyMaxBytes; low_latency_protocol). Set by of().
  double ll_bus_bandwidth = std::numeric_limits<double>::infinity();
  // The channels the library's communicator has for a group across scale-up domains, of
  // which a small collective under the low-latency protocol launches only as many as its
  // bytes fill (low_latency_channels): NCCL's graph search lays a channel per NIC, taken
  // here as one per rank of a server (as default_channels: servers with fewer NICs than
  // GPUs are not told apart), and its ncclTopoPostset doubles them (src/graph/connect.cc),
  // at most kMaxChannels (NCCL's MAXCHANNELS). Some NCCL versions double them once more on
  // Hopper below 16; not modelled. 0: none counted (one domain, whose NVLink graph's
  // channel count ddlsim does not know: the rate is the cap at any size). Set by of().
  int ll_channels = 0;
  // The fabric the group was made on (of()), whose routes a ring across domains asks
  // for the transport latency its steps share (NetworkFabric::route_transport); null:
  // each step pays its own route's.
  NetworkFabric* fabric = nullptr;

  /// Positions in the group per scale-up domain, domains in order of their first rank,
  /// positions in group order.
  [[nodiscard]] std::vector<std::vector<std::size_t>> by_domain() const;

  /// The group of the given accelerators of the fabric's cluster (all when empty), with
  /// their domains and, when they are exactly one recorded torus in order, its shape.
  static CollectiveGroup of(NetworkFabric& fabric, std::vector<NodeId> ranks = {});
};

struct CollectiveSpec {
  CollectiveOp op = CollectiveOp::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  double bytes = 0.0;
  int chunks = 0;     // pieces per transfer; 0: automatic (effective_chunks)
  int channels = 0;   // rings (ring) or trees (tree); 0: automatic (effective_channels)
  std::size_t root = 0;  // broadcast, reduce, send/recv source (a position in the group)
  std::size_t peer = 1;  // send/recv destination (a position in the group)
  // Rings (ring, hierarchical and torus phases) as streams: each rank's sends of a phase
  // as one transfer of all its steps' bytes that pays its route's latency once per step
  // (a ring across domains: with the ring's mean transport)
  // (NCCL pipelines slices around the ring, so a rank forwards while it receives), in
  // place of a transfer per step and chunk. Alone on a uniform ring it takes the same
  // time; it makes far fewer transfers for the flow model to solve. A tree pipelined in
  // c > 1 chunks likewise: one transfer per edge and direction for all of them, started
  // when both ends are ready, paying the route's latency once per chunk and per hop of
  // the fill (2d - 1, d the tree's depth), the fill's chunk bytes left out. Lowered with
  // shares (the analytical model), trees go chunk by chunk whatever this says
  // (collective_transfer_count's `shared`).
  bool streamed = false;
  // Hierarchical all-to-all only: the share of each phase's bytes that is sent (1: S/n to
  // each other domain, S/g to each rank of the own; less where one copy serves several
  // of the destinations, as a deduplicating dispatch does). Between 0 and 1.
  double across = 1.0;  // the first phase, between domains
  double within = 1.0;  // the second, inside each domain
  // The library's protocol: true its low-latency one (NCCL's LL: cheap latencies, its
  // data at no more than the group's ll_bus_bandwidth), false its bandwidth one
  // (Simple). Absent: chosen where the collective is lowered or priced with a fabric
  // (choose_protocol: the cheaper estimate, as NCCL's tuner picks), without one by size
  // (low_latency_protocol).
  std::optional<bool> low_latency;
};

/// Automatic chunking pipelines what a chain or tree forwards hop by hop (ring broadcast
/// and reduce, tree all-reduce) in pieces of about kAutoChunkBytes, at most
/// kMaxAutoChunks of them; ring steps already pipeline and stay whole. A hierarchical
/// all-to-all's two phases pipeline in pieces of about kAutoChunkBytes of each rank's
/// send buffer, at most kMaxAutoExchangeChunks (each piece is a transfer per pair of
/// ranks in each phase; 8 leave at most an eighth of the shorter phase unhidden).
inline constexpr double kAutoChunkBytes = 1 << 20;
inline constexpr int kMaxAutoChunks = 64;
inline constexpr int kMaxAutoExchangeChunks = 8;
int effective_chunks(const CollectiveSpec& spec);

/// The library's low-latency protocol (NCCL's LL), whose link latencies the catalog may
/// give apart (LinkSpec::ll_latency, ll_transport_latency), moves a collective's data at
/// no more than the group's ll_bus_bandwidth: where the group has one, a collective runs
/// whichever protocol its estimate finds cheaper (choose_protocol), as NCCL's tuner
/// does (src/graph/tuning.cc). Where it has none, or no fabric prices the choice,
/// collectives of at most this many bytes (CollectiveSpec::bytes) run LL and larger ones
/// the bandwidth protocol: NCCL keeps LL for a few to some tens of KiB on servers of 8
/// GPUs, and 64 KiB is ddlsim's round figure.
inline constexpr double kLowLatencyMaxBytes = 64.0 * 1024.0;
[[nodiscard]] inline bool low_latency_protocol(double bytes) { return bytes <= kLowLatencyMaxBytes; }
[[nodiscard]] inline bool low_latency_protocol(const CollectiveSpec& spec) {
  return spec.low_latency.value_or(low_latency_protocol(spec.bytes));
}
/// Whether a collective of `bytes` on the group runs the low-latency protocol, given the
/// selector's estimates of it under that protocol (`low`, its rate's time included) and
/// under the bandwidth one (`simple`): where the group has an ll_bus_bandwidth, the
/// cheaper (a tie: the bandwidth one); else by size (low_latency_protocol).
[[nodiscard]] inline bool low_latency_cheaper(const CollectiveGroup& group, double bytes, double low, double simple) {
  return std::isfinite(group.ll_bus_bandwidth) ? low < simple : low_latency_protocol(bytes);
}
/// The time (s) the low-latency protocol's rate adds to a collective of `bytes` on the
/// group run by algorithm `a`: its bus bytes (busbw_factor x bytes) over the group's
/// ll_bus_bandwidth (0 when it has none), that bandwidth taken in the share of the
/// group's channels the collective runs on (low_latency_channels over ll_channels).
/// Lowered, a zero-byte transfer from the first rank to itself that waits this long
/// comes before the collective's other transfers.
[[nodiscard]] double low_latency_throughput_time(const CollectiveGroup& group, CollectiveOp op,
                                                  CollectiveAlgorithm a, double bytes);
/// NCCL's enqueue (src/enqueue.cc, ring and tree channel tuning) launches a collective of
/// S bytes on fewer of its communicator's channels while S is below channels x 512
/// threads x 8 bytes (NCCL_LL_MAX_NTHREADS x NCCL_LL_THREAD_THRESHOLD), a ring's
/// threshold times its ranks (src/graph/tuning.cc), never below one, rounding down (so
/// between multiples of 4 KiB a channel carries up to twice as much); each channel
/// moves its share at the per-channel rate, the cap over all of them (an assumption:
/// NCCL's halving of a lone channel's threads is not priced). The channels a collective
/// of `bytes` on the group runs under the low-latency protocol, out of its ll_channels:
/// as many as fill that threshold, a ring's by the ring's and every other algorithm's by
/// the tree's; all of them for all-to-all, send/recv and direct algorithms (point-to-point
/// transfers the library launches otherwise); 1 where the group counts none
/// (ll_channels 0: the rate is the cap at any size). low_latency_throughput_time scales
/// the rate by the share launched.
inline constexpr double kLowLatencyChannelBytes = 512.0 * 8.0;
[[nodiscard]] int low_latency_channels(const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a,
                                       double bytes);
/// The protocol `spec` runs on the group: spec.low_latency when given; else, where the
/// group has an ll_bus_bandwidth, the low-latency one when the selector's estimate of
/// its algorithm under it (its latencies plus low_latency_throughput_time) is below the
/// estimate under the bandwidth protocol; else by size (low_latency_protocol).
[[nodiscard]] bool choose_protocol(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec);
/// The NIC transport latency (NetworkFabric::route_transport; the low-latency
/// protocol's with `low_latency`) of the ring `order` (positions in the group, closing
/// back to the first), averaged over its hops: what each step of a ring pays in place of
/// its own (the library pipelines a ring's steps through the NICs: the data's way pays
/// the transport where it crosses them, not at every step's slowest hop).
[[nodiscard]] double ring_mean_transport(NetworkFabric& fabric, const CollectiveGroup& group,
                                         const std::vector<std::size_t>& order, bool low_latency);

/// Why `algorithm` cannot run `op` on any group (empty when it implements it).
std::string op_unsupported_reason(CollectiveOp op, CollectiveAlgorithm algorithm);
/// Why `algorithm` cannot run `op` on this group (empty when it can).
std::string unsupported_reason(const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm algorithm);

struct LoweredCollective {
  TaskId start;  // a marker: make the collective depend on something by preceding it
  TaskId end;    // a marker that finishes when every rank has its result
  std::uint64_t transfers = 0;
};

/// Adds the collective's transfers, on network resource `network`, between two markers.
/// With `shares_on`, each transfer also carries its bandwidth share (TaskGraph::share):
/// how much of its route's bottleneck it gets beside the transfers of the collective
/// that run at once with it on the links next to servers (two rings through one NIC
/// get half of it each; a tree's transfers, chunk by chunk even when streamed, those
/// of the same step of the trees' pipelines). The analytical network model divides by it; pass the fabric
/// when the graph will replay on that model (the flow model finds the sharing itself).
/// The transfers are named "all-reduce/ring" (operation/algorithm), or with `label`
/// "label (all-reduce/ring)". Throws InputError when the algorithm cannot run the
/// operation on the group.
LoweredCollective lower_collective(TaskGraph& graph, ResourceId network, const CollectiveGroup& group,
                                   const CollectiveSpec& spec, NetworkFabric* shares_on = nullptr,
                                   std::string_view label = {});

/// The collective's time under the analytical network model (each transfer: its first
/// route's latency plus its bytes times its bandwidth share over its bottleneck
/// capacity), computed while lowering, without a task graph or a replay: the same
/// figure as replaying lower_collective's graph, lowered with the fabric (shares_on),
/// on AnalyticalNetwork, at a fraction of the cost.
double analytical_collective_time(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec);

/// The same time, and the traffic the collective's transfers put on the network: the
/// bytes each link carries (on the route the analytical model takes) and the bytes the
/// group's first rank sends.
struct CollectiveTraffic {
  std::vector<std::pair<LinkId, double>> links;  // each link once, in LinkId order
  double first_rank_sends = 0.0;
};
struct CollectiveCost {
  double time = 0.0;  // s
  CollectiveTraffic traffic;
};
CollectiveCost analytical_collective_cost(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec);

/// The bandwidth shares (TaskGraph::share: at least 1) of point-to-point transfers (from,
/// to) that run at once, as the analytical model gives a collective's own transfers
/// theirs (the links next to servers they cross in common; each placed on its best
/// candidate route beside those before it, passing only through their own endpoints),
/// one per transfer: a stage's pipeline sends from every tp rank and replica at once.
std::vector<double> concurrent_transfer_shares(NetworkFabric& fabric, const std::vector<std::pair<NodeId, NodeId>>& transfers);

/// The number of transfers lower_collective would add (to refuse absurd sizes up front,
/// without pricing: for a spec that names no protocol, the one its size gives,
/// low_latency_protocol, which may count one transfer, the low-latency rate's wait, more
/// or less than the protocol lowering chooses); `shared`: lowered with bandwidth shares
/// (for the analytical model), where trees go chunk by chunk even when streamed.
std::uint64_t collective_transfer_count(const CollectiveGroup& group, const CollectiveSpec& spec, bool shared = false);

/// NCCL-like choice: the algorithm (and channel count) with the smallest closed-form time
/// estimate for this size on this group, from the latencies and bottleneck capacities
/// of the routes the algorithm uses. Only algorithms that support the operation compete,
/// and only those a collective library offers: ring, tree, hierarchical and torus, not
/// halving-doubling (which NCCL lacks; it runs when a spec names it). `channels` > 0
/// prices rings and trees with that many channels instead of the library's default.
/// Each algorithm is priced under the cheaper protocol (as choose_protocol picks, a tree
/// with NCCL's bound on its bandwidth below), or under `low_latency`'s when given.
struct CollectiveChoice {
  CollectiveAlgorithm algorithm;
  int channels;
  double estimate;  // s
  bool low_latency = false;  // the protocol the estimate is for (choose_protocol)
};
CollectiveChoice choose_algorithm(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes,
                                  int channels = 0, std::optional<bool> low_latency = std::nullopt);

/// The selector's closed-form estimate (s) of one algorithm with `channels` channels (as
/// choose_algorithm prices it; a direct broadcast, reduce or send-recv from `root`, to
/// `peer`, positions in the group), its pipelined pieces (a chain's or tree's, a
/// hierarchical all-to-all's phases) in `chunks` (0: automatic, as the selector prices
/// them), under the protocol choose_protocol gives it (`low_latency`'s when given).
/// Throws InputError when the algorithm cannot run `op` here.
double collective_estimate(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, CollectiveAlgorithm a,
                           double bytes, int channels, std::size_t root = 0, std::size_t peer = 1, int chunks = 0,
                           std::optional<bool> low_latency = std::nullopt);

/// A specification of `op` on `bytes` under the fabric's collective policy: the
/// algorithm it names for `op` when that algorithm can serve the group, else the one
/// choose_algorithm picks; rings and trees with the policy's channels when it sets them
/// (chunks automatic); the protocol choose_protocol picks for it.
CollectiveSpec chosen_spec(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes);

/// The rings of a ring algorithm with `channels` channels, as positions in the group:
/// channel c visits every scale-up domain in turn; in a switched domain (no direct
/// rings), entering the first at its (c mod size)-th rank in group order and each next
/// at the rank with the local index it left the last at, crossing it in group order,
/// backwards in every other such domain (NCCL's alternating rings: the hops between
/// servers stay on one rail); in a domain of Walecki paths (domain_paths), along the path that
/// starts at the rank with the local index it left the last domain at (at c in the
/// first), so that its hop between servers stays on one rail; in a domain with direct
/// rings (domain_rings), along its
/// (c mod count)-th ring, its entry chosen with its exit (the rank before the entry on
/// that ring) by a bounded search over each block of as many channels as the domain
/// has ranks (the last block may be shorter), so that no rank is entered or left twice
/// in a block, each channel preferring the rank group order would enter at; where the
/// search finds no such choice, every channel of the block takes that rank.
std::vector<std::vector<std::size_t>> ring_orders(const CollectiveGroup& group, int channels);

/// NCCL's trees of `channels` channels over the group (its trees.cc, connect.cc and the
/// NCCL 2.4 notes), channel t's: inside each scale-up domain a chain of its ranks headed
/// by the domain's (t x size / channels)-th rank in group order: in a domain of Walecki
/// paths (domain_paths), the path that starts there; in one with chain cycles
/// (domain_chains), around the (t mod count)-th from there; else in group order from
/// there. Across domains a binary tree in heap order over the domains (in order of their
/// first rank) whose edges join the chains' heads. An odd channel takes the second tree
/// of the double binary tree: the domains in reverse, so a domain near a leaf of one tree
/// is near the root of the other, and its chains (but for a path) walk the domain
/// backwards from their head. Returns, per channel, each position's parent (the root's
/// is itself).
std::vector<std::vector<std::size_t>> tree_parents(const CollectiveGroup& group, int channels);

/// A tree given by parents (tree_parents): its root, each position's children, and the
/// positions parents first (breadth first from the root).
struct TreeShape {
  std::size_t root = 0;
  std::vector<std::vector<std::size_t>> children;
  std::vector<std::size_t> top_down;
};
TreeShape tree_shape(const std::vector<std::size_t>& parent);

/// The torus algorithm's dimensions: those of more than one chip, in order. It splits the
/// data into D x ways parts (D of these dimensions, torus_ways): part (j, way)
/// reduce-scatters along the dimensions in the order j, j + 1, ... (mod D), every ring
/// running one way (forward or reversed), then all-gathers back in the reverse order. In
/// each phase parts that started at different dimensions use different dimensions' links
/// and the two ways a link's two directions, so a large all-reduce on a wrapped torus
/// keeps all 2D links of every chip busy, as Google's TPU pods are specified (all-reduce
/// bandwidth per pod = chips x links x one-way link bandwidth).
std::vector<std::size_t> torus_used_dims(const std::vector<int>& dims);

/// 2 when every used dimension of the group's torus wraps around and has 3 or more chips
/// (a ring and its reverse then use a link's two directions), else 1: on a mesh
/// dimension a ring closes back along its line, over the links its reverse would use,
/// and a 2-chip ring and its reverse are the same two transfers.
int torus_ways(const CollectiveGroup& group);

/// NCCL's MAXCHANNELS (src/include/device.h since 2.2x): no collective runs on more
/// channels, automatic or asked for.
inline constexpr int kMaxChannels = 64;

/// The default channel count for ring algorithms on this group: the ranks per scale-up
/// domain when the group spans several domains (one ring leaves a domain through each
/// rank's scale-out link), at most kMaxChannels (a TPU pod's 4,096 chips leave through
/// 64 of them), else the domain's direct rings (domain_rings) or 1.
int default_channels(const CollectiveGroup& group);

/// spec.channels, or when 0: default_channels for ring, default_tree_channels for tree,
/// 1 otherwise.
int effective_channels(const CollectiveGroup& group, const CollectiveSpec& spec);

/// The default channel count for the tree algorithm: with several domains, the ring's
/// (default_channels) rounded up to an even count, so that every rank heads a tree
/// between domains (its NIC carrying that tree's traffic) and the channels alternate
/// between the two trees of NCCL's double binary tree; in one domain, 2.
int default_tree_channels(const CollectiveGroup& group);

}  // namespace ddlsim
