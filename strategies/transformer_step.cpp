#include "strategies/transformer_step.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "sim/collectives.hpp"
#include "sim/core/compute_stream.hpp"
#include "sim/delay_pool.hpp"
#include "strategies/memory.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/stage_costs.hpp"
#include "support/input_error.hpp"

namespace ddlsim {
namespace {

class StepLowering {
 public:
  StepLowering(const TrainingStepInputs& in, LoweredTrainingStep& out)
      : in_(in), m_(*in.model), p_(*in.plan), out_(out), g_(out.graph) {}

  void run() {
    if (std::string why = plan_problem(p_, m_, in_.fabric->cluster().accelerators().size()); !why.empty()) {
      throw InputError(why);
    }
    costs_ = stage_costs(m_, p_, *in_.compute);
    ub_ = p_.tp_comm_overlap.on && p_.tp > 1;
    add_context_ring(costs_, m_, p_, *in_.fabric);
    v_ = p_.schedule == PipelineSchedule::kInterleaved1F1B ? p_.virtual_stages : 1;
    split_ = p_.schedule == PipelineSchedule::kZeroBubbleH1;
    stages_ = p_.pp * v_;
    mb_ = static_cast<int>(p_.micro_batches());
    zero3_ = p_.dp_mode == DataParallelMode::kZero3 && p_.dp > 1;
    ep_ = p_.ep > 1;
    scatters_ = (zero3_ || p_.dp_mode == DataParallelMode::kZero2) && p_.dp > 1;
    ranges_ = chunk_layer_ranges(p_, m_);
    amax_ = m_.fp8_gemms && p_.dp * p_.tp > 1;
    priced_ = in_.network == NetworkModelKind::kAnalytical && in_.price_collectives;
    price_tp_groups();
    dpl_ = priced_ && in_.fold_replicas && replicas_identical() ? 1 : p_.dp;
    // (The replicas it lowers: a plan the analytical network folds may have many.)
    if (std::string why = plan_size_problem(p_, m_, in_.max_compute_tasks, dpl_); !why.empty()) throw TooLargeError(why);
    out_.lowered_replicas = dpl_;
    out_.priced_link_bytes.assign(in_.fabric->cluster().link_count(), 0.0);
    out_.counted_transfers = micro_batch_transfers();
    if (out_.counted_transfers > static_cast<double>(in_.max_transfers)) {
      throw TooLargeError("the step needs about " + std::to_string(static_cast<long long>(out_.counted_transfers)) +
                          " transfers on the network model (pipeline sends, ZeRO collectives and all-to-alls of " +
                          std::to_string(mb_) + (mb_ == 1 ? " micro-batch" : " micro-batches") + "), more than the limit of " +
                          std::to_string(in_.max_transfers) + " it can replay in memory; " + way_out());
    }
    make_resources();
    out_.last_backward.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    if (zero3_) out_.zero3_waits.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    if (ep_) out_.a2a_waits.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    gather_ahead_ = p_.overlap_param_gather && p_.dp > 1 && p_.dp_mode == DataParallelMode::kZero1;
    aligned_ = p_.grad_reduce_aligned();
    if (aligned_) {
      backward_exits_.resize(static_cast<std::size_t>(dpl_ * p_.pp));
      chunk_last_backward_.assign(static_cast<std::size_t>(dpl_ * p_.pp), std::vector<int>(static_cast<std::size_t>(v_), -1));
    }
    if (amax_) out_.amax_s.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    if (amax_ && p_.combined_1f1b()) out_.amax_tasks.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    if (gather_ahead_) out_.param_waits.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    out_.optimizer.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    out_.compute_parts.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    if (split_) out_.weight_pass_s.resize(static_cast<std::size_t>(dpl_ * p_.pp));
    for (int i = 0; i < p_.pp; ++i) out_.gradients_reduced.push_back(g_.add(Marker{}, "gradients reduced").id());
    memory_plan();
    const auto programs = pipeline_schedule(p_.schedule, p_.pp, v_, mb_, p_.combined_1f1b(), p_.group_size());
    for (int d = 0; d < dpl_; ++d) {
      for (int i = 0; i < p_.pp; ++i) lower_program(d, i, programs[static_cast<std::size_t>(i)]);
    }
    connect_pipeline();
    const TaskId end = g_.add(Marker{}, "step end").id();
    data_parallel_and_optimizer(end);
    count_unlowered_traffic();
    context_ring_traffic();
    list_uses();
  }

 private:
  using Key = std::tuple<int, int, int, bool>;  // (dp, virtual stage, micro-batch, forward)
  // What a stage chunk computes in order: the embedding (first chunk), `count` layers
  // (one unit per layer, except merged when nothing happens between them), the output
  // layer and loss (last chunk), then per multi-token prediction depth its input
  // (embedding, norms, projection), its layer and its output layer and loss; the
  // parameters of one device.
  enum class UnitKind { kEmbedding, kLayers, kOutput, kMtpInput };
  struct Unit {
    UnitKind kind;
    int count;
    double params;
    bool recompute = false;  // layers: recomputes its forward in backward
    double experts = 0.0;    // of params, the routed experts' under expert parallelism
    bool dense = false;      // layers: a mixture of experts' dense layers
  };
  // Where the lowering is: the replica, stage, model chunk, micro-batch and unit (in its
  // pass's order) whose tasks it adds; expert-parallel all-to-alls are keyed by it.
  struct Here {
    int d = 0, i = 0, s = 0, mb = 0, j = 0;
  };
  // An expert-parallel all-to-all: (chunk, micro-batch, pass (0 forward, 1 recomputed
  // forward, 2 backward), unit, which of the layer's two (0 towards the experts, 1 back),
  // ep group).
  using A2aKey = std::tuple<int, int, int, int, int, int>;
  // A ZeRO-3 collective (or a ZeRO-2 reduce-scatter) of one unit, micro-batch and pass,
  // shared by all replicas of a stage: (virtual stage, micro-batch, forward, unit,
  // all-gather (else reduce-scatter)).
  using CollKey = std::tuple<int, int, bool, int, bool>;
  // A collective's ranks, algorithm and (priced) cost.
  struct Choice {
    CollectiveGroup group;
    CollectiveSpec spec;
    CollectiveCost cost;  // when priced
  };
  struct Markers {
    TaskId start, end;
  };

  std::uint32_t rank(int d, int i, int k) const { return mesh_rank(p_, d, i, k); }
  NodeId node(std::uint32_t r) const { return in_.fabric->cluster().accelerators()[r]; }
  std::size_t group(int d, int i) const { return static_cast<std::size_t>(d * p_.pp + i); }

  // Virtual stage s's layers.
  const LayerRange& range(int s) const { return ranges_[static_cast<std::size_t>(v_ == 1 ? s % p_.pp : s)]; }
  // A layer's MLP half.
  const HalfLayer& mlp(const Unit& u) const { return costs_.mlp_of(!u.dense); }
  // Transformer Engine's userbuffers overlap (tp_comm_overlap) of a unit's MLP half: a
  // dense MLP's (a mixture of experts' runs its collectives as without it).
  bool ub_mlp(const Unit& u) const { return ub_ && (m_.experts == 0 || u.dense); }

  std::vector<Unit> units(int s, bool forward) const {
    std::vector<Unit> u;
    if (s == 0) u.push_back({UnitKind::kEmbedding, 1, costs_.first_params});
    const LayerRange r = range(s);
    const int recomputed = recomputed_layers(p_, r.count);  // the chunk's first ones
    // (Forward runs of layers of one kind in one task; a unit per layer where each
    // layer's weights are gathered on their own, overlap_param_gather too.)
    if (forward && p_.tp == 1 && !zero3_ && !ep_ && !gather_ahead_) {
      for (int l = 0; l < r.count;) {  // runs of layers of one kind
        const bool dense = m_.dense_layer(r.first + l);
        int n = 1;
        while (l + n < r.count && m_.dense_layer(r.first + l + n) == dense) ++n;
        u.push_back({UnitKind::kLayers, n, costs_.params_of(!dense) * n, false, 0.0, dense});
        l += n;
      }
    } else {
      for (int l = 0; l < r.count; ++l) {
        const bool dense = m_.dense_layer(r.first + l);
        const double experts = ep_ && !dense ? costs_.expert_params : 0.0;
        u.push_back({UnitKind::kLayers, 1, costs_.params_of(!dense), l < recomputed, experts, dense});
      }
    }
    if (s == stages_ - 1) {
      u.push_back({UnitKind::kOutput, 1, costs_.last_params});
      // (A depth's layer recomputes under full recomputation whatever recompute_layers
      // says; its output layer's weights are the model's.)
      const bool dense = m_.mtp_dense();
      for (std::int64_t k = 0; k < m_.mtp_layers; ++k) {
        u.push_back({UnitKind::kMtpInput, 1, costs_.mtp_params + (k == 0 ? mtp_embedding_copy(m_, p_) : 0.0)});
        u.push_back({UnitKind::kLayers, 1, costs_.params_of(!dense), p_.recompute == Recompute::kFull,
                     ep_ && !dense ? costs_.expert_params : 0.0, dense});
        u.push_back({UnitKind::kOutput, 1, final_norm_parameters(m_)});  // (the output layer's weights are the model's)
      }
    }
    return u;
  }

  // Replica d's name in traces and memory pools: "dp3", or in a context-parallel plan's
  // lowering its replica and cp rank ("dp1.cp0").
  std::string replica_name(int d) const {
    if (p_.cp_folded == 1) return "dp" + std::to_string(d);
    return "dp" + std::to_string(d / p_.cp_folded) + ".cp" + std::to_string(d % p_.cp_folded);
  }

  void make_resources() {
    auto add = [&](std::unique_ptr<ResourceModel> r) {
      out_.resources.push_back(std::move(r));
      return ResourceId(static_cast<std::uint32_t>(out_.resources.size() - 1));
    };
    std::unique_ptr<NetworkModel> net = make_network(in_.network, "network", *in_.fabric);
    out_.network_model = net.get();
    out_.network = add(std::move(net));
    if (priced_) out_.collectives = add(std::make_unique<DelayPool>("dp collectives"));
    if (amax_) out_.amax = add(std::make_unique<DelayPool>("amax reductions"));
    slow_ = in_.compute->efficiency().overlap_slowdown;
    for (int d = 0; d < dpl_; ++d) {
      for (int i = 0; i < p_.pp; ++i) {
        const std::string name = replica_name(d) + ".pp" + std::to_string(i);
        auto stream = std::make_unique<ComputeStream>(name + ".compute");
        stream->set_interference(slow_);
        out_.compute.push_back(add(std::move(stream)));
        if (slow_ > 0.0) {
          for (int k = 0; k < p_.tp; ++k) stream_of_.emplace(node(rank(d, i, k)).value, out_.compute.back());
        }
        if (p_.tp > 1) out_.tp_comm.push_back(add(std::make_unique<ComputeStream>(name + ".tp")));
      }
    }
    if (p_.overlap_tp_backward || ub_) out_.tp_overlaps.resize(out_.tp_comm.size());
    // Combined 1F1B: a forward's and a backward's all-to-alls may be ready at once; those
    // of one communicator (stage, ep group, tp rank) run one at a time, in the order
    // they become ready, on a queue of their own (priced; transfers share the network).
    if (priced_ && p_.combined_1f1b()) {
      for (int i = 0; i < p_.pp; ++i) {
        for (int g = 0; g < p_.dp / p_.ep; ++g) {
          for (int k = 0; k < p_.tp; ++k) {
            const std::string name = "pp" + std::to_string(i) + ".ep" + std::to_string(g) + ".tp" + std::to_string(k);
            a2a_queues_.push_back(add(std::make_unique<ComputeStream>(name + ".all-to-all")));
          }
        }
      }
    }
  }

  // Every tensor-parallel group's all-reduce, priced by the analytical model (with the
  // traffic it puts on the links), for all replicas: the lowering uses the times, the
  // replica check compares them, the link report counts the traffic.
  void price_tp_groups() {
    if (p_.tp == 1) return;
    for (int d = 0; d < p_.dp; ++d) {
      for (int i = 0; i < p_.pp; ++i) {
        std::vector<NodeId> ranks;
        for (int k = 0; k < p_.tp; ++k) ranks.push_back(node(rank(d, i, k)));
        const CollectiveGroup grp = CollectiveGroup::of(*in_.fabric, ranks);
        const CollectiveSpec spec = chosen_spec(*in_.fabric, grp, CollectiveOp::kAllReduce, costs_.tp_bytes);
        tp_cost_.push_back(analytical_collective_cost(*in_.fabric, grp, spec));
        tp_spec_.push_back(spec);
      }
    }
    tp_uses_.assign(tp_cost_.size(), 0);
    dispatched_tp_uses_.assign(tp_cost_.size(), 0);
  }

  // The bandwidth share of replica d's tp rank k's pipeline send from stage i to stage j
  // on the analytical model: every tp rank of every replica sends at once (the replicas
  // in lockstep), so sends whose GPUs share a NIC share it (1 on the flow model, whose
  // flows share the links anyway).
  double p2p_share(int d, int i, int j, int k) {
    if (in_.network != NetworkModelKind::kAnalytical) return 1.0;
    auto it = p2p_shares_.find({i, j});
    if (it == p2p_shares_.end()) {
      std::vector<std::pair<NodeId, NodeId>> sends;
      for (int d2 = 0; d2 < p_.dp; ++d2) {
        for (int k2 = 0; k2 < p_.tp; ++k2) sends.emplace_back(node(rank(d2, i, k2)), node(rank(d2, j, k2)));
      }
      it = p2p_shares_.emplace(std::pair{i, j}, concurrent_transfer_shares(*in_.fabric, sends)).first;
    }
    return it->second[static_cast<std::size_t>(d) * static_cast<std::size_t>(p_.tp) + static_cast<std::size_t>(k)];
  }

  // A pipeline send's time on the analytical model (its route's latency plus bytes, times
  // its share, over its bottleneck), as AnalyticalNetwork will replay it.
  double p2p_time(int d, int i, int j, int k) {
    const auto& route = in_.fabric->first_route(node(rank(d, i, k)), node(rank(d, j, k)));
    return in_.fabric->route_latency(route) +
           (route.empty() ? 0.0 : costs_.p2p_bytes * p2p_share(d, i, j, k) / in_.fabric->route_capacity(route));
  }

  // Whether every data-parallel replica is provably the same as the first under the
  // analytical model: identical compute (always), identical tensor-parallel all-reduce
  // times, identical pipeline send times and (expert parallelism) identical all-to-all
  // times in every ep group, bit for bit. Then all replicas run the same
  // schedule to the same instants, each data-parallel collective (shared by all of
  // them) starts when the first replica is ready, and replaying the first alone gives
  // the full replay's step.
  bool replicas_identical() {
    for (int g = 1; ep_ && g < p_.dp / p_.ep; ++g) {  // every expert-parallel group's all-to-alls alike
      for (int i = 0; i < p_.pp; ++i) {
        for (int k = 0; k < p_.tp; ++k) {
          for (int which : {0, 1}) {
            const double bytes = costs_.a2a_bytes_of(which);
            if (choice(i, k, CollectiveOp::kAllToAll, bytes, 2 * g).cost.time !=
                choice(i, k, CollectiveOp::kAllToAll, bytes, 0).cost.time) {
              return false;
            }
          }
        }
      }
    }
    for (int d = 1; d < p_.dp; ++d) {
      for (int i = 0; i < p_.pp; ++i) {
        if (p_.tp > 1 && tp_cost_[group(d, i)].time != tp_cost_[group(0, i)].time) return false;
        if (p_.pp == 1) continue;
        const int j = (i + 1) % p_.pp;
        for (int k = 0; k < p_.tp; ++k) {
          if (p2p_time(d, i, j, k) != p2p_time(0, i, j, k) || p2p_time(d, j, i, k) != p2p_time(0, j, i, k)) {
            return false;
          }
        }
      }
    }
    return true;
  }

  // Traffic the replay does not carry as transfers, added to priced_link_bytes: every
  // tensor-parallel all-reduce (priced), and with folded replicas the others' all-reduces
  // and pipeline sends (on the routes the analytical model takes).
  void count_unlowered_traffic() {
    auto add = [&](const CollectiveTraffic& t, double times) {
      for (const auto& [l, b] : t.links) out_.priced_link_bytes[l.value] += b * times;
    };
    for (int d = 0; d < p_.dp; ++d) {
      for (int i = 0; i < p_.pp && p_.tp > 1; ++i) {
        add(tp_cost_[group(d, i)].traffic, static_cast<double>(tp_uses_[group(d < dpl_ ? d : 0, i)]));
      }
      if (d < dpl_) continue;
      for (const auto& [i, j, k] : sends_) {
        const auto& route = in_.fabric->first_route(node(rank(d, i, k)), node(rank(d, j, k)));
        for (LinkId l : route) out_.priced_link_bytes[l.value] += costs_.p2p_bytes;
      }
    }
  }

  // Context parallelism: every key-value ring of the step (one per replica, stage and tp
  // rank; per layer and micro-batch one forward, again where the attention core is
  // recomputed, and one backward with twice the bytes), priced as the all-gathers
  // add_context_ring times: their traffic on the links, and their count in the uses.
  void context_ring_traffic() {
    const int cp = static_cast<int>(m_.context_parallel);
    if (cp <= 1 || p_.cp_folded != cp) return;
    const std::vector<int> layers = stage_layer_counts(p_, m_);
    const bool core_again = (selective_modules(p_) & kRecomputeCoreAttn) != 0;
    for (int i = 0; i < p_.pp; ++i) {
      double recomputed = core_again ? layers[static_cast<std::size_t>(i)] : 0.0;
      if (p_.recompute == Recompute::kFull) {
        for (const LayerRange& r : stage_chunks(p_, m_, i)) recomputed += recomputed_layers(p_, r.count);
      }
      const double forwards = (layers[static_cast<std::size_t>(i)] + recomputed) * mb_;
      const double backwards = static_cast<double>(layers[static_cast<std::size_t>(i)]) * mb_;
      for (int rep = 0; rep < p_.dp / cp; ++rep) {
        for (int k = 0; k < p_.tp; ++k) {
          const CollectiveGroup grp = context_ring(*in_.fabric, p_, rep, i, k);
          for (const auto& [bytes, count] : {std::pair{costs_.cp_ring_bytes(cp, false), forwards}, std::pair{costs_.cp_ring_bytes(cp, true), backwards}}) {
            if (count <= 0) continue;
            const CollectiveSpec spec = chosen_spec(*in_.fabric, grp, CollectiveOp::kAllGather, bytes);
            for (const auto& [l, b] : analytical_collective_cost(*in_.fabric, grp, spec).traffic.links) {
              out_.priced_link_bytes[l.value] += b * count;
            }
            record_use(kCpDim, spec, static_cast<std::size_t>(cp), count);
          }
        }
      }
    }
  }

  // Where a collective runs, in the order collective_uses lists them.
  enum Dim { kTpDim, kPpDim, kDpDim, kCopiesDim, kEpDim, kCpDim };
  // `count` collectives of `spec` over `ranks` ranks, in `dim`.
  void record_use(Dim dim, const CollectiveSpec& spec, std::size_t ranks, double count) {
    auto& [n, bytes] = uses_[{dim, static_cast<int>(spec.op), static_cast<int>(spec.algorithm), spec.channels, ranks}];
    n += count;
    // (A deduplicating hierarchical all-to-all: its payload as each GPU receives it once.)
    const bool shared = spec.op == CollectiveOp::kAllToAll && spec.algorithm == CollectiveAlgorithm::kHierarchical;
    bytes += count * spec.bytes * (shared ? spec.within : 1.0);
  }
  void list_uses() {
    for (int d = 0; d < p_.dp && p_.tp > 1; ++d) {
      for (int i = 0; i < p_.pp; ++i) {
        // (The dispatched buffer's all-gathers and reduce-scatters listed as themselves,
        // half of them each, on the whole buffer; the rest as the all-reduces they are.)
        const double pairs = dispatched_tp_uses_[group(d < dpl_ ? d : 0, i)] / 2.0;
        const double uses = tp_uses_[group(d < dpl_ ? d : 0, i)] - pairs * costs_.moe_tp_share;
        if (uses > 0) record_use(kTpDim, tp_spec_[group(d, i)], static_cast<std::size_t>(p_.tp), uses);
        for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
          if (pairs <= 0) break;
          CollectiveSpec spec = tp_spec_[group(d, i)];
          spec.op = op;
          spec.bytes = costs_.moe_tp_share * costs_.tp_bytes;
          record_use(kTpDim, spec, static_cast<std::size_t>(p_.tp), pairs);
        }
      }
    }
    static const char* const kDimNames[] = {"tp", "pp", "dp", "copies", "ep", "cp"};  // by Dim
    for (const auto& [key, value] : uses_) {
      const auto& [dim, op, algorithm, channels, ranks] = key;
      out_.collective_uses.push_back({kDimNames[dim], static_cast<CollectiveOp>(op), static_cast<CollectiveAlgorithm>(algorithm),
                                      channels, ranks, value.first, value.second});
    }
  }

  // Before adding `more` transfers (a `what` over `ranks` ranks): past the limit, the
  // step is refused.
  void admit_transfers(std::uint64_t more, std::string_view what, std::size_t ranks) const {
    if (out_.transfers + more <= in_.max_transfers) return;
    throw TooLargeError("the step needs more than " + std::to_string(in_.max_transfers) +
                     " transfers on the network model (" + std::to_string(out_.transfers) + " so far; one " +
                     std::string(what) + " over " + std::to_string(ranks) + " ranks adds " + std::to_string(more) +
                     "), beyond what it can replay in memory; " + way_out());
  }
  std::string way_out() const {
    if (in_.network == NetworkModelKind::kAnalytical && priced_) return "use fewer micro-batches or pipeline stages";
    return "use --network analytical (collectives priced, replicas folded), fewer micro-batches or fewer accelerators";
  }

  // The transfers that the pipeline sends, the ZeRO collectives and the expert-parallel
  // all-to-alls of every micro-batch will add (what lower_program lowers; a collective's
  // transfers as collective_transfer_count gives them for the algorithm it will run),
  // counted before anything is built. A double: the product can pass 2^64 for absurd plans.
  double micro_batch_transfers() {
    std::uint64_t per = 0;  // per micro-batch
    if (p_.pp > 1) per += static_cast<std::uint64_t>(dpl_) * 2 * static_cast<std::uint64_t>(stages_ - 1) * p_.tp;
    for (int s = 0; s < stages_ && scatters_; ++s) {
      const int i = s % p_.pp;
      for (const bool forward : {true, false}) {
        for (const Unit& u : units(s, forward)) {
          if (zero3_) per += zero3_transfers(i, true, u.params * weight_bytes(m_.dtype));
          if (!forward) per += zero3_transfers(i, false, u.params * reduced_gradient_bytes(p_, m_.dtype));
        }
      }
    }
    for (int s = 0; s < stages_ && ep_; ++s) {  // per layer 2 all-to-alls a pass (one each way), and a recomputed forward
      const int i = s % p_.pp;
      const LayerKinds k = layer_kinds(p_, m_, {range(s)});  // the expert layers: primary
      std::uint64_t events = 4 * static_cast<std::uint64_t>(k.primary) + 2 * static_cast<std::uint64_t>(k.primary_recomputed);
      if (s == stages_ - 1 && !m_.mtp_dense()) {  // multi-token prediction's expert layers (recomputed under full)
        events += static_cast<std::uint64_t>(m_.mtp_layers) * (p_.recompute == Recompute::kFull ? 6 : 4);
      }
      for (int g = 0; g < p_.dp / p_.ep; ++g) {
        for (int k = 0; k < p_.tp; ++k) {
          for (int which : {0, 1}) {
            per += events / 2 * choice_transfers(choice(i, k, CollectiveOp::kAllToAll, costs_.a2a_bytes_of(which), 2 * g));
          }
        }
      }
    }
    return static_cast<double>(per) * mb_;
  }
  // What zero3_collective adds for one key: per tp rank, a gather or scatter in each
  // shard group, then for hybrid-sharded scatters an all-reduce per shard position.
  std::uint64_t zero3_transfers(int i, bool gather, double bytes) {
    const int s = shard_size(p_), groups = p_.dp / s;
    std::uint64_t n = 0;
    for (int k = 0; k < p_.tp; ++k) {
      for (int gi = 0; gi < groups; ++gi) {
        n += choice_transfers(choice(i, k, gather ? CollectiveOp::kAllGather : CollectiveOp::kReduceScatter, bytes,
                                     groups > 1 ? 2 * gi : kAllRanks));
      }
      for (int j = 0; j < s && groups > 1 && !gather; ++j) {
        n += choice_transfers(choice(i, k, CollectiveOp::kAllReduce, bytes / s, 2 * j + 1));
      }
    }
    return n;
  }
  std::uint64_t choice_transfers(const Choice& ch) const {
    if (priced_) return 0;
    return collective_transfer_count(ch.group, ch.spec, in_.network == NetworkModelKind::kAnalytical);
  }

  // A compute task after `after` (and `also`, when valid); its time counts to `part` of
  // the stage replica's compute_parts.
  using Part = double ComputeParts::*;
  static constexpr Part kForward = &ComputeParts::forward, kBackward = &ComputeParts::backward,
                        kRecompute = &ComputeParts::recompute, kOptimizer = &ComputeParts::optimizer;
  TaskId compute(std::size_t grp, Part part, Seconds t, TaskId after, const char* name, TaskId also = TaskId()) {
    out_.compute_parts[grp].*part += t.value();
    return compute_task(grp, t, after, name, also);
  }
  // A backward that recomputes (part of) its forward first, in one task.
  TaskId backward_with_recompute(std::size_t grp, Seconds backward, Seconds recomputed, TaskId after, const char* name,
                                 TaskId also = TaskId()) {
    count_backward(grp, backward, recomputed);
    return compute_task(grp, backward + recomputed, after, name, also);
  }
  void count_backward(std::size_t grp, Seconds backward, Seconds recomputed) {
    out_.compute_parts[grp].backward += backward.value();
    out_.compute_parts[grp].recompute += recomputed.value();
  }
  // The task alone, its time counted by the caller.
  TaskId compute_task(std::size_t grp, Seconds t, TaskId after, const char* name, TaskId also) {
    const TaskId task = g_.add(Compute{out_.compute[grp], t, Flops(0.0)}, name).id();
    g_.add_edge(after, task);
    if (also.valid()) g_.add_edge(also, task);
    return task;
  }
  TaskId tp_all_reduce(std::size_t grp, TaskId after) {
    if (p_.tp == 1) return after;
    return tp_collective(grp, 1.0, after, TaskId(), "tp all-reduce", true);
  }
  // `share` of the group's all-reduce time (and traffic) on its tensor-parallel stream
  // after `after` (and `also`); `counted`: the collective's count goes with this task (the
  // two halves of a sequence-parallel pair count once).
  // Under combined 1F1B a collective may run beside the paired pass's compute, which it
  // slows (interference; not Transformer Engine's pieces, `beside_gemm`, whose closed
  // forms price it).
  TaskId tp_collective(std::size_t grp, double share, TaskId after, TaskId also, const char* name, bool counted,
                       bool beside_gemm = false) {
    if (counted) ++out_.tp_collectives;
    tp_uses_[grp] += share;
    const TaskId task = g_.add(Compute{out_.tp_comm[grp], Seconds(tp_cost_[grp].time * share), Flops(0.0)}, name).id();
    if (slow_ > 0.0 && p_.combined_1f1b() && !beside_gemm) g_.add_interference(task, out_.compute[grp]);
    g_.add_edge(after, task);
    if (also.valid()) g_.add_edge(also, task);
    return task;
  }
  // A half layer's backward (`total`, ending with its column-parallel linear's weight
  // gradient `weight`) and its tensor-parallel collective; returns what comes next waits
  // for. With overlap_tp_backward the collective runs beside the weight gradient (with
  // sequence parallelism: the output gradient's all-gather first, in line, then the
  // input gradient's reduce-scatter beside it, each half the all-reduce's time).
  // `recomputed`: the part of the forward it recomputes first (selective recomputation).
  TaskId backward_half(std::size_t grp, Seconds backward, Seconds recomputed, Seconds weight, TaskId t, TaskId ready,
                       const char* name, const char* weight_name) {
    if (!p_.overlap_tp_backward) return tp_all_reduce(grp, backward_with_recompute(grp, backward, recomputed, t, name, ready));
    count_backward(grp, backward, recomputed);
    const Seconds total = backward + recomputed;
    double share = 1.0;
    const char* comm_name = "tp all-reduce";
    if (p_.sequence_parallel) {
      t = tp_collective(grp, 0.5, t, ready, "tp all-gather", false);
      ready = TaskId();
      share = 0.5;
      comm_name = "tp reduce-scatter";
    }
    const TaskId before = compute_task(grp, total - weight, t, name, ready);
    const TaskId comm = tp_collective(grp, share, before, TaskId(), comm_name, true);
    // (NCCL's kernels beside the GEMM; tp_collective coupled it already under combined 1F1B.)
    if (slow_ > 0.0 && !p_.combined_1f1b()) g_.add_interference(comm, out_.compute[grp]);
    const TaskId grad = compute_task(grp, weight, before, weight_name, TaskId());
    out_.tp_overlaps[grp].emplace_back(comm, grad);
    const TaskId done = g_.add(Marker{}, "half layer backward done").id();
    g_.add_edge(comm, done);
    g_.add_edge(grad, done);
    return done;
  }

  // tp_comm_overlap: one overlapped GEMM (as it runs, on the compute stream) beside its
  // collective (on the tensor-parallel stream), both after `t` (and `ready`), then what
  // of the pair outlasts the longer of the two (the tail, on the tensor-parallel stream:
  // exposed communication). `counted`: as tp_collective's.
  TaskId ub_piece(std::size_t grp, const UbPiece& u, TaskId t, TaskId ready, const char* gemm_name, const char* comm_name,
                  bool counted) {
    const TaskId comm = tp_collective(grp, u.share, t, ready, comm_name, counted, true);
    const TaskId gemm = compute_task(grp, Seconds(u.gemm), t, gemm_name, ready);
    out_.tp_overlaps[grp].emplace_back(comm, gemm);
    const TaskId done = g_.add(Marker{}, "overlapped GEMM done").id();
    g_.add_edge(comm, done);
    g_.add_edge(gemm, done);
    if (u.tail <= 0.0) return done;
    const TaskId tail = g_.add(Compute{out_.tp_comm[grp], Seconds(u.tail), Flops(0.0)}, "tp overlap tail").id();
    g_.add_edge(done, tail);
    return tail;
  }
  UbHalf ub_of(std::size_t grp, const HalfLayer& h, bool mlp_half) const {
    return ub_half(h, mlp_half, p_, m_.fp8_gemms, tp_cost_[grp].time, *in_.compute);
  }
  // A half layer's forward under tp_comm_overlap (stage_costs.hpp, UbHalf).
  TaskId ub_forward(std::size_t grp, const HalfLayer& h, bool mlp_half, TaskId t, TaskId ready, const char* name) {
    const UbHalf u = ub_of(grp, h, mlp_half);
    out_.compute_parts[grp].forward += u.gather.gemm + u.forward_rest + u.scatter.gemm;
    t = ub_piece(grp, u.gather, t, ready, mlp_half ? "fc1 forward" : "qkv forward", "tp all-gather", false);
    t = compute_task(grp, Seconds(u.forward_rest), t, name, TaskId());
    return ub_piece(grp, u.scatter, t, TaskId(), mlp_half ? "fc2 forward" : "proj forward", "tp reduce-scatter", true);
  }
  // Its backward, after what the half recomputes first (selective recomputation).
  TaskId ub_backward(std::size_t grp, const HalfLayer& h, bool mlp_half, Seconds recomputed, TaskId t, TaskId ready,
                     const char* name) {
    const UbHalf u = ub_of(grp, h, mlp_half);
    count_backward(grp, Seconds(u.dgrad_gather.gemm + u.backward_rest + u.input_gather.gemm + u.wgrad_scatter.gemm), recomputed);
    if (recomputed.value() > 0.0) {
      t = compute_task(grp, recomputed, t, mlp_half ? "recompute mlp" : "recompute attention", ready);
      ready = TaskId();
    }
    t = ub_piece(grp, u.dgrad_gather, t, ready, mlp_half ? "fc2 input gradient" : "proj input gradient", "tp all-gather", false);
    t = compute_task(grp, Seconds(u.backward_rest), t, name, TaskId());
    t = ub_piece(grp, u.input_gather, t, TaskId(), mlp_half ? "fc1 input gradient" : "qkv input gradient",
                 "tp all-gather (layer input)", false);
    return ub_piece(grp, u.wgrad_scatter, t, TaskId(), mlp_half ? "fc1 weight gradient" : "qkv weight gradient",
                    "tp reduce-scatter", true);
  }

  // The ZeRO-3 collective (or ZeRO-2 reduce-scatter: DeepSpeed reduces partitioned
  // gradients in every micro-batch's backward) `key` of stage i (created with the first
  // replica that asks, one per tp rank between two shared markers); the calling replica
  // starts it after `trigger`.
  // All-gathers of one micro-batch and pass run one after another (`previous`).
  Markers zero3_collective(int i, const CollKey& key, double bytes, TaskId trigger, const CollKey* previous) {
    auto it = zero3_colls_.find(key);
    if (it == zero3_colls_.end()) {
      const bool gather = std::get<4>(key);
      const Markers mk{g_.add(Marker{}, gather ? "gather weights" : "scatter gradients").id(),
                       g_.add(Marker{}, gather ? "weights gathered" : "gradients scattered").id()};
      // Within each shard group (all dp ranks without hybrid sharding); with hybrid
      // sharding each scattered gradient shard is then all-reduced across the replicas.
      const int s = shard_size(p_), groups = p_.dp / s;
      for (int k = 0; k < p_.tp; ++k) {
        // Tp rank k's all-reduces across the groups wait for its own scatters only.
        const TaskId scattered = groups > 1 && !gather ? g_.add(Marker{}, "gradients scattered in shard groups").id() : mk.end;
        for (int gi = 0; gi < groups; ++gi) {
          const LoweredCollective c = dp_collective(i, k, gather ? CollectiveOp::kAllGather : CollectiveOp::kReduceScatter,
                                                    bytes, groups > 1 ? 2 * gi : kAllRanks);
          g_.add_edge(mk.start, c.start);
          g_.add_edge(c.end, scattered);
        }
        if (scattered == mk.end) continue;
        for (int j = 0; j < s; ++j) {
          const LoweredCollective c = dp_collective(i, k, CollectiveOp::kAllReduce, bytes / s, 2 * j + 1);
          g_.add_edge(scattered, c.start);
          g_.add_edge(c.end, mk.end);
        }
      }
      if (previous != nullptr) g_.add_edge(zero3_colls_.at(*previous).end, mk.start);
      it = zero3_colls_.emplace(key, mk).first;
    }
    g_.add_edge(trigger, it->second.start);
    return it->second;
  }

  // A multi-token prediction depth's input's tensor-parallel collectives in a pass, in
  // all-reduces of the micro-batch's hidden-size activations (tp_collective's share), as
  // Megatron-Core runs them. Forward: the vocabulary-parallel embedding's all-reduce and
  // the column-parallel projection's output gathered (half an all-reduce); with sequence
  // parallelism the embedding's reduce-scatter, the joined input (twice the hidden size)
  // gathered for the projection and its output gathered: 2. Backward: the projection's
  // input gradient, twice the hidden size, all-reduced (2), or reduce-scattered with the
  // embedding's gradient gathered (1.5).
  double mtp_tp_share(bool forward) const {
    if (p_.sequence_parallel) return forward ? 2.0 : 1.5;
    return forward ? 1.5 : 2.0;
  }

  // One unit's forward after `t` (and `ready`); returns its last task.
  TaskId forward_unit(std::size_t grp, const Unit& u, TaskId t, TaskId ready) {
    switch (u.kind) {
      case UnitKind::kEmbedding: {
        // Megatron-LM's vocabulary-parallel embedding sums its tp ranks' lookups: an
        // all-reduce of the micro-batch's activations (a reduce-scatter with sequence
        // parallelism).
        t = compute(grp, kForward, costs_.first_forward, t, "embedding forward", ready);
        if (p_.tp == 1) return t;
        return p_.sequence_parallel ? tp_collective(grp, 0.5, t, TaskId(), "tp reduce-scatter", true) : tp_all_reduce(grp, t);
      }
      case UnitKind::kOutput:
        // With sequence parallelism the output layer's input is all-gathered first.
        if (p_.tp > 1 && p_.sequence_parallel) {
          t = tp_collective(grp, 0.5, t, ready, "tp all-gather", false);
          ready = TaskId();
        }
        return compute(grp, kForward, costs_.last_forward, t, "output and loss forward", ready);
      case UnitKind::kMtpInput:
        t = compute(grp, kForward, costs_.mtp_forward, t, "mtp input forward", ready);
        return p_.tp == 1 ? t : tp_collective(grp, mtp_tp_share(true), t, TaskId(), "tp collectives (mtp input)", true);
      case UnitKind::kLayers: break;
    }
    if (ep_ && !u.dense) return moe_layer_forward(grp, kForward, t, ready);  // one layer per unit
    if (p_.tp == 1) {
      return compute(grp, kForward, (costs_.attention.forward + mlp(u).forward) * u.count, t,
                     u.count == 1 ? "layer forward" : "layers forward", ready);
    }
    for (int l = 0; l < u.count; ++l) {
      if (m_.parallel_layers) {  // both branches' partial sums reduced at once
        t = tp_all_reduce(grp, compute(grp, kForward, costs_.attention.forward + mlp(u).forward, t, "layer forward", ready));
      } else {
        t = ub_ ? ub_forward(grp, costs_.attention, false, t, ready, "attention forward")
                : tp_all_reduce(grp, compute(grp, kForward, costs_.attention.forward, t, "attention forward", ready));
        t = ub_mlp(u) ? ub_forward(grp, mlp(u), true, t, TaskId(), "mlp forward")
                      : tp_all_reduce(grp, compute(grp, kForward, mlp(u).forward, t, "mlp forward"));
      }
      ready = TaskId();
    }
    return t;
  }

  // One unit's backward (one layer, or the embedding or output layer).
  // Under the zero-bubble schedule this is the input-gradient pass (B): the backward
  // without the weight gradients, which weight_unit runs later.
  TaskId backward_unit(std::size_t grp, const Unit& u, TaskId t, TaskId ready) {
    switch (u.kind) {
      case UnitKind::kEmbedding:
        if (split_) return t;  // all of it is the table's gradient, in W (no ZeRO-3 gather to wait for)
        // With sequence parallelism the forward's reduce-scatter has an all-gather for
        // its backward (Megatron's reduce_scatter_to_sequence_parallel_region): the
        // embedding's gradient is gathered whole before the lookup's backward.
        if (p_.tp > 1 && p_.sequence_parallel) {
          t = tp_collective(grp, 0.5, t, ready, "tp all-gather", false);
          ready = TaskId();
        }
        return compute(grp, kBackward, costs_.first_backward, t, "embedding backward", ready);
      case UnitKind::kOutput:
        // The gradient of the output layer's input, summed over the tp ranks (its forward
        // copied the input to every rank): an all-reduce, or the reduce-scatter that
        // pairs the forward's all-gather with sequence parallelism.
        t = compute(grp, kBackward, costs_.last_backward - (split_ ? costs_.last_weight_gradient : Seconds(0.0)), t,
                    "output and loss backward", ready);
        if (p_.tp == 1) return t;
        return p_.sequence_parallel ? tp_collective(grp, 0.5, t, TaskId(), "tp reduce-scatter", true) : tp_all_reduce(grp, t);
      case UnitKind::kMtpInput:
        t = compute(grp, kBackward, costs_.mtp_backward - (split_ ? costs_.mtp_weight_gradient : Seconds(0.0)), t,
                    "mtp input backward", ready);
        return p_.tp == 1 ? t : tp_collective(grp, mtp_tp_share(false), t, TaskId(), "tp collectives (mtp input)", true);
      case UnitKind::kLayers: break;
    }
    if (ep_ && !u.dense) return moe_layer_backward(grp, u, t, ready);
    // Zero-bubble: the weight gradients go to the W pass, none is left to overlap with.
    const Seconds attn = costs_.attention.backward - (split_ ? costs_.attention.weight_gradients : Seconds(0.0));
    const HalfLayer& half = mlp(u);
    const Seconds mlp = half.backward - (split_ ? half.weight_gradients : Seconds(0.0));
    const Seconds attn_wg = split_ ? Seconds(0.0) : costs_.attention.weight_gradient;
    const Seconds mlp_wg = split_ ? Seconds(0.0) : half.weight_gradient;
    if (p_.tp == 1) {
      const Seconds rc = costs_.attention.recompute + half.recompute;
      return backward_with_recompute(grp, attn + mlp, p_.recompute != Recompute::kFull || u.recompute ? rc : Seconds(0.0),
                                     t, "layer backward", ready);
    }
    if (u.recompute) {
      if (m_.parallel_layers) {
        t = tp_all_reduce(grp, compute(grp, kRecompute, costs_.attention.recompute + half.recompute, t, "recompute layer", ready));
      } else {
        t = tp_all_reduce(grp, compute(grp, kRecompute, costs_.attention.recompute, t, "recompute attention", ready));
        t = tp_all_reduce(grp, compute(grp, kRecompute, half.recompute, t, "recompute mlp"));
      }
      ready = TaskId();
    }
    // Selective recomputation: each half's recomputed modules before its backward; a
    // recomputed dense MLP (mlp) runs its tensor-parallel collective again, as its
    // forward did.
    const bool selective = p_.recompute == Recompute::kSelective;
    const Seconds extra = selective ? costs_.attention.recompute : Seconds(0.0);
    Seconds mlp_extra = selective ? half.recompute : Seconds(0.0);
    if ((selective_modules(p_) & kRecomputeMlp) != 0 && (u.dense || m_.experts == 0)) {
      t = tp_all_reduce(grp, compute(grp, kRecompute, mlp_extra, t, "recompute mlp", ready));
      ready = TaskId();
      mlp_extra = Seconds(0.0);
    }
    if (m_.parallel_layers) {  // the two branches' input gradients, summed by one all-reduce
      return backward_half(grp, mlp + attn, extra + mlp_extra, attn_wg + mlp_wg, t, ready, "layer backward",
                           "layer weight gradients");
    }
    t = ub_mlp(u) ? ub_backward(grp, half, true, mlp_extra, t, ready, "mlp backward")
                  : backward_half(grp, mlp, mlp_extra, mlp_wg, t, ready, "mlp backward", "mlp weight gradient");
    if (ub_) return ub_backward(grp, costs_.attention, false, extra, t, TaskId(), "attention backward");
    return backward_half(grp, attn, extra, attn_wg, t, TaskId(), "attention backward", "attention weight gradient");
  }

  // A mixture-of-experts layer's forward under expert parallelism (`part`: kForward, or
  // kRecompute for its recomputation before the backward): the attention half and its
  // tensor-parallel all-reduce, then the MLP half in three parts with an all-to-all of
  // the dispatched tokens after the first (to the ranks holding their experts) and after
  // the experts (back), then its all-reduce (under the alltoall dispatcher with tp, an
  // all-gather of the dispatched tokens and a reduce-scatter around the experts instead).
  TaskId moe_layer_forward(std::size_t grp, Part part, TaskId t, TaskId ready) {
    const bool rc = part == kRecompute;
    const auto of = [rc](const HalfLayer& h) { return rc ? h.recompute : h.forward; };
    // (A recomputed forward runs its collectives in line, also under tp_comm_overlap.)
    t = ub_ && !rc ? ub_forward(grp, costs_.attention, false, t, ready, "attention forward")
                   : tp_all_reduce(grp, compute(grp, part, of(costs_.attention), t, rc ? "recompute attention" : "attention forward", ready));
    t = compute(grp, part, of(costs_.moe_pre), t, rc ? "recompute router and dispatch" : "router and dispatch");
    t = expert_all_to_all(grp, rc ? 1 : 0, 0, t);
    t = dispatched_tp(grp, true, t);
    t = compute(grp, part, of(costs_.experts), t, rc ? "recompute experts" : "experts forward");
    t = dispatched_tp(grp, false, t);
    t = expert_all_to_all(grp, rc ? 1 : 0, 1, t);
    const Seconds post = of(costs_.mlp) - of(costs_.moe_pre) - of(costs_.experts);
    t = compute(grp, part, post, t, rc ? "recompute combine" : "combine forward");
    return costs_.moe_tp_share > 0.0 ? t : tp_all_reduce(grp, t);
  }
  // Under Megatron-Core's alltoall dispatcher with tp > 1 (StageCosts::moe_tp_share):
  // the tp ranks' all-gather of the dispatched tokens after the all-to-all towards the
  // experts (`gather`), or the reduce-scatter of the experts' outputs before the one back
  // (in the backward, the same two of the gradients); else nothing.
  TaskId dispatched_tp(std::size_t grp, bool gather, TaskId t) {
    if (costs_.moe_tp_share <= 0.0) return t;
    dispatched_tp_uses_[grp] += 1.0;
    return tp_collective(grp, 0.5 * costs_.moe_tp_share, t, TaskId(), gather ? "tp all-gather (dispatched tokens)" : "tp reduce-scatter (experts' outputs)",
                         !gather);
  }
  // Its backward, the recomputed forward first where the layer recomputes: the MLP
  // half's parts in reverse with the two all-to-alls of the tokens' gradients between
  // them (its tensor-parallel collective after the router's and the dispatch's
  // backward, beside no weight gradient: the experts' come before the all-to-all), then
  // the attention half (with selective recomputation, its core recomputed first).
  TaskId moe_layer_backward(std::size_t grp, const Unit& u, TaskId t, TaskId ready) {
    if (u.recompute) {
      t = moe_layer_forward(grp, kRecompute, t, ready);
      ready = TaskId();
    }
    // Selective recomputation: each part's recomputed modules before its backward (the
    // MLP's norm and the shared expert with the combine's, which needs them first, the
    // experts' activation with the experts').
    const bool selective = p_.recompute == Recompute::kSelective;
    const auto extra_of = [selective](const HalfLayer& h) { return selective ? h.recompute : Seconds(0.0); };
    const Seconds post = costs_.mlp.backward - costs_.moe_pre.backward - costs_.experts.backward;
    const Seconds post_extra = extra_of(costs_.mlp) - extra_of(costs_.experts);
    t = backward_with_recompute(grp, post, post_extra, t, "combine backward", ready);
    t = expert_all_to_all(grp, 2, 0, t);
    t = dispatched_tp(grp, true, t);
    t = backward_with_recompute(grp, costs_.experts.backward, extra_of(costs_.experts), t, "experts backward");
    t = dispatched_tp(grp, false, t);
    t = expert_all_to_all(grp, 2, 1, t);
    const Seconds extra = extra_of(costs_.attention);
    if (p_.tp == 1) {
      t = compute(grp, kBackward, costs_.moe_pre.backward, t, "router and dispatch backward");
      return backward_with_recompute(grp, costs_.attention.backward, extra, t, "attention backward");
    }
    // (The MLP half's collective after the router's and the dispatch's backward, unless
    // the alltoall dispatcher's two ran around the experts.)
    t = costs_.moe_tp_share > 0.0 ? compute(grp, kBackward, costs_.moe_pre.backward, t, "router and dispatch backward")
                                  : backward_half(grp, costs_.moe_pre.backward, Seconds(0.0), Seconds(0.0), t, TaskId(),
                                                  "router and dispatch backward", "mlp weight gradient");
    if (ub_) return ub_backward(grp, costs_.attention, false, extra, t, TaskId(), "attention backward");
    return backward_half(grp, costs_.attention.backward, extra, costs_.attention.weight_gradient, t, TaskId(),
                         "attention backward", "attention weight gradient");
  }
  // One of a layer's expert-parallel all-to-alls (`pass`, `which`: see A2aKey) after
  // `after`: per tp rank, among the replica's ep group (every group when the replicas are
  // folded into one); the replicas of a group share it. Returns its end.
  TaskId expert_all_to_all(std::size_t grp, int pass, int which, TaskId after) {
    const bool folded = dpl_ < p_.dp;
    const int group = folded ? 0 : here_.d / p_.ep;
    const A2aKey key{here_.s, here_.mb, pass, here_.j, which, group};
    auto it = a2a_.find(key);
    if (it == a2a_.end()) {
      const Markers mk{g_.add(Marker{}, "all-to-all").id(), g_.add(Marker{}, "all-to-all done").id()};
      for (int g = group; g < (folded ? p_.dp / p_.ep : group + 1); ++g) {
        for (int k = 0; k < p_.tp; ++k) {
          // Combined 1F1B lowers a forward before the backward beside it: its
          // all-to-alls run in the order they become ready (their queue, or the network's
          // sharing), not in the order they are lowered.
          const LoweredCollective c =
              p_.combined_1f1b()
                  ? dp_collective_alone(here_.i, k, CollectiveOp::kAllToAll, costs_.a2a_bytes_of(which), 2 * g, kEpDim,
                                        a2a_queue(here_.i, g, k))
                  : dp_collective(here_.i, k, CollectiveOp::kAllToAll, costs_.a2a_bytes_of(which), 2 * g, kEpDim);
          g_.add_edge(mk.start, c.start);
          g_.add_edge(c.end, mk.end);
        }
      }
      it = a2a_.emplace(key, mk).first;
    }
    g_.add_edge(after, it->second.start);
    out_.a2a_waits[grp].emplace_back(after, it->second.end);
    return it->second.end;
  }

  // The zero-bubble schedule's weight-gradient pass (W) of one unit after `t`: the
  // linear layers' weight-gradient GEMMs, the output layer's, or the embedding table's
  // gradient (with sequence parallelism after the all-gather of its output gradient).
  TaskId weight_unit(std::size_t grp, const Unit& u, TaskId t) {
    Seconds w(0.0);
    switch (u.kind) {
      case UnitKind::kEmbedding:
        if (p_.tp > 1 && p_.sequence_parallel) t = tp_collective(grp, 0.5, t, TaskId(), "tp all-gather", false);
        w = costs_.first_backward;
        break;
      case UnitKind::kOutput: w = costs_.last_weight_gradient; break;
      case UnitKind::kMtpInput: w = costs_.mtp_weight_gradient; break;
      case UnitKind::kLayers: w = (costs_.attention.weight_gradients + mlp(u).weight_gradients) * u.count; break;
    }
    out_.weight_pass_s[grp] += w.value();
    return compute(grp, kBackward, w, t, u.kind == UnitKind::kEmbedding ? "embedding backward" : "weight gradients");
  }


  // Memory over the step, per stage replica: its model states from the start, and each
  // forward's activations (its chunk's layers for one micro-batch, and the loss's
  // softmax on the last chunk) from that forward until its backward ends: the replay's high-water mark
  // is the schedule's real peak (min(m, pp - i) micro-batches on stage i under 1F1B).
  void memory_plan() {
    for (const LayerRange& r : ranges_) chunk_act_.push_back(layers_activation_bytes(p_, m_, {r}));
    // (The last chunk's with its loss, and multi-token prediction's with its losses.)
    loss_act_ = static_cast<double>(1 + m_.mtp_layers) * loss_activation_bytes(m_, p_.micro_batch, p_.tp) +
                mtp_activation_bytes(p_, m_);
    for (const DeviceMemory& dm : stage_memory(p_, m_)) states_.push_back(dm.weights + dm.gradients + dm.optimizer);
    for (int d = 0; d < dpl_; ++d) {
      for (int i = 0; i < p_.pp; ++i) {
        out_.pool_names.push_back(replica_name(d) + ".pp" + std::to_string(i) + ".hbm");
      }
    }
  }
  double chunk_activations(int s) const {
    return chunk_act_[static_cast<std::size_t>(v_ == 1 ? s % p_.pp : s)] + (s == stages_ - 1 ? loss_act_ : 0.0);
  }

  void lower_program(int d, int i, const std::vector<PipelineOp>& program) {
    const std::size_t grp = group(d, i);
    const PoolId pool(static_cast<std::uint32_t>(grp));
    TaskId prev = g_.add(Allocate{pool, Bytes(states_[static_cast<std::size_t>(i)])}, "model states").id();
    TaskId last_exit;
    // The passes whose sends the next pass to start waits for (unless overlap_p2p).
    std::vector<Key> sending;
    // Combined 1F1B: while lowering the backward that runs beside a forward, where both
    // start and where the forward ends.
    TaskId pair_start, pair_forward_end;
    for (const PipelineOp& op : program) {
      const int s = op.chunk * p_.pp + i;
      here_ = {d, i, s, op.micro_batch, 0};
      const TaskId entry = op.forward   ? g_.add(Allocate{pool, Bytes(chunk_activations(s))}, "forward").id()
                           : op.weights ? g_.add(Marker{}, "weight gradients").id()
                                        : g_.add(Marker{}, "backward").id();
      const bool beside = pair_start.valid();  // the second pass of a pair
      TaskId start = beside ? pair_start : prev;
      if (op.with_next) {  // both passes of the pair start here, after the sends before them
        start = g_.add(Marker{}, "forward and backward start").id();
        g_.add_edge(prev, start);
      }
      g_.add_edge(start, entry);
      const Key key{d, s, op.micro_batch, op.forward};
      if (!beside) {
        for (const Key& k : sending) next_entry_[k] = op.with_next ? start : entry;
        sending.clear();
      }
      if (!op.weights) sending.push_back(key);  // a W pass sends nothing
      TaskId t = entry;
      // The pass that completes the micro-batch's weight gradients: the backward, or
      // under the zero-bubble schedule its W pass (the B pass only sends its gradient on).
      const bool gradients = !op.forward && (!split_ || op.weights);
      const bool last_mb_backward = gradients && op.micro_batch == mb_ - 1;
      const bool accumulating = gradients && accumulates(p_, op.micro_batch);
      // The last backward's units (and their places in the forward's order), produced
      // after its accumulation.
      std::vector<std::pair<const Unit*, int>> produced_units;
      std::vector<Unit> us = units(s, op.forward);
      if (!op.forward) std::reverse(us.begin(), us.end());
      const int n = static_cast<int>(us.size());
      // ZeRO-3: gather unit j's weights (units in this pass's order), the first one at
      // the pass's start, each next one while the unit before it computes.
      auto gather = [&](int j, TaskId trigger) {
        const CollKey key{s, op.micro_batch, op.forward, j, true};
        const CollKey prev_key{s, op.micro_batch, op.forward, j - 1, true};
        return zero3_collective(i, key, us[static_cast<std::size_t>(j)].params * weight_bytes(m_.dtype), trigger,
                                j > 0 ? &prev_key : nullptr);
      };
      for (int j = 0; j < n; ++j) {
        const Unit& u = us[static_cast<std::size_t>(j)];
        here_.j = j;
        TaskId ready;
        if (zero3_) {
          if (j == 0) gather(0, entry);
          if (j + 1 < n) gather(j + 1, t);
          ready = zero3_colls_.at(CollKey{s, op.micro_batch, op.forward, j, true}).end;
          out_.zero3_waits[grp].emplace_back(t, ready);
        }
        if (op.forward) {
          // overlap_param_gather: the unit's first forward waits for its weights' bucket
          // (data_parallel_and_optimizer adds the gather before it).
          if (gather_ahead_ && op.micro_batch == 0 && u.params > 0.0) {
            ready = g_.add(Marker{}, "weights gathered").id();
            param_waits_[{d, s, j}] = {ready, t};
            out_.param_waits[grp].emplace_back(t, ready);
          }
          t = forward_unit(grp, u, t, ready);
          continue;
        }
        if (!op.weights) t = backward_unit(grp, u, t, ready);
        if (split_ && op.weights) t = weight_unit(grp, u, t);
        if (!gradients) continue;
        if (scatters_) {
          const Markers rs =
              zero3_collective(i, CollKey{s, op.micro_batch, false, j, false}, u.params * reduced_gradient_bytes(p_, m_.dtype), t, nullptr);
          if (d == 0) g_.add_edge(rs.end, out_.gradients_reduced[static_cast<std::size_t>(i)]);
        }
        if (last_mb_backward) {
          if (accumulating) produced_units.push_back({&u, n - 1 - j});
          else produced(d, i, s, n - 1 - j, t, u);
        }
      }
      // FP8: the pass ends with its amax reduction (the zero-bubble schedule's W passes
      // run no FP8 module's backward end).
      if (amax_ && !op.weights) t = amax_reduction(grp, i, op.forward, t);
      // The micro-batch's gradients join the step's before the backward returns (autograd's
      // accumulation, DeepSpeed's update_hp_grads), so before its gradient is sent back,
      // and the step's gradients are final, ready to reduce, only after it.
      if (accumulating) {
        double params = 0.0;
        for (const Unit& u : us) params += u.params;
        t = compute(grp, kBackward, grad_accumulation_time(accumulated_params(p_, params), p_, m_.dtype, *in_.compute), t,
                    "gradient accumulation");
        for (const auto& [up, fj] : produced_units) produced(d, i, s, fj, t, *up);
      }
      last_exit = prev = t;
      if (!op.weights) {
        entries_[{d, s, op.micro_batch, op.forward}] = entry;
        exits_[{d, s, op.micro_batch, op.forward}] = t;
      }
      if (aligned_ && !op.forward) {  // (1f1b and interleaved: no W passes)
        backward_exits_[grp].push_back(t);
        if (op.micro_batch == mb_ - 1) {
          chunk_last_backward_[grp][static_cast<std::size_t>(op.chunk)] = static_cast<int>(backward_exits_[grp].size()) - 1;
        }
      }
      if (gradients) {
        prev = g_.add(Free{pool, Bytes(chunk_activations(s))}, "free activations").id();
        g_.add_edge(t, prev);
      }
      if (op.with_next) {  // the backward after it starts where it started
        pair_start = start;
        pair_forward_end = prev;
      } else if (beside) {  // the pass after the pair waits for both
        const TaskId both = g_.add(Marker{}, "forward and backward done").id();
        g_.add_edge(pair_forward_end, both);
        g_.add_edge(prev, both);
        prev = both;
        pair_start = pair_forward_end = TaskId();
      }
    }
    out_.last_backward[grp] = last_exit;
  }

  // align_param_gather: where replica d's stage i dispatches the gathers of its model
  // chunk c: the entry of its forward k = (c - 1) x group - i (the interleaved schedule's
  // forward_step_helper dispatches chunk c when k + i is chunk c - 1's first virtual
  // micro-batch). Within the first group, whole as plan_problem keeps it, forward k is
  // chunk c - 1's micro-batch 0 on stage 0 and chunk c - 2's micro-batch group - i on
  // stage i > 0. None for chunks 0 and 1 (the step's start) and past the last.
  TaskId chunk_dispatch(int d, int i, int c) const {
    if (c < 2 || c >= v_) return TaskId();
    const int group = p_.group_size();
    const int chunk = i == 0 ? c - 1 : c - 2, mb = i == 0 ? 0 : group - i;
    return entries_.at({d, chunk * p_.pp + i, mb, true});
  }

  // Stage i's amax reduction at the end of a pass after `t`, in line (stage_costs.hpp,
  // amax_reduction_bytes: the amaxes of all the stage's layers, each chunk's).
  TaskId amax_reduction(std::size_t grp, int i, bool forward, TaskId t) {
    auto [it, fresh] = amax_time_.try_emplace({i, forward}, 0.0);
    if (fresh) {
      // (Multi-token prediction's layers on the last chunk.)
      const double layers = stage_layer_counts(p_, m_)[static_cast<std::size_t>(i)] +
                            (i == p_.pp - 1 ? static_cast<double>(m_.mtp_layers) : 0.0);
      const double bytes = amax_reduction_bytes(costs_, layers, forward);
      const double all_reduce = amax_all_reduce_time(p_, *in_.fabric, i, bytes);
      it->second = all_reduce > 0.0 ? all_reduce + amax_update_time(*in_.compute) : 0.0;
    }
    if (it->second <= 0.0) return t;
    const TaskId a = g_.add(Compute{out_.amax, Seconds(it->second), Flops(0.0)}, "amax all-reduce").id();
    g_.add_edge(t, a);
    out_.amax_s[grp] += it->second;
    if (p_.combined_1f1b()) {
      out_.amax_tasks[grp].push_back(a);
      if (slow_ > 0.0) g_.add_interference(a, out_.compute[grp]);  // (beside the paired pass)
    }
    return a;
  }

  // Gradients become final in the last micro-batch's backward, in program order; every
  // replica produces the same sequence.
  // (`s`, `fj`: the unit's chunk and place in its forward.)
  void produced(int d, int i, int s, int fj, TaskId t, const Unit& u) {
    if (u.params > 0.0) contributions_[group(d, i)].push_back({t, u.params, u.experts, s, fj, u.kind == UnitKind::kLayers});
  }

  // align_grad_reduce: the task after which replica d's stage i launches the reductions
  // of its model chunk `chunk`'s buckets, all at once (Megatron-Core's schedules calling
  // the DDP's or Apex's grad sync): interleaved, the backward that is as many passes
  // after the chunk's last micro-batch's backward as the stage's rank; where there are
  // fewer, and under 1f1b on stages after the first, the schedule's end: the stage's
  // last backward and the sends after it done (the schedule launches its remaining
  // reductions after its last p2p calls return). Invalid where each bucket goes as its
  // last unit's gradients are produced (the first stage under 1f1b, and without
  // alignment).
  TaskId grad_sync_trigger(int d, int i, int chunk) {
    if (!aligned_) return TaskId();
    const std::size_t grp = group(d, i);
    if (v_ > 1) {
      const std::vector<TaskId>& exits = backward_exits_[grp];
      const int last = chunk_last_backward_[grp][static_cast<std::size_t>(chunk)];
      if (last < 0) throw std::logic_error("align_grad_reduce: a model chunk without its last micro-batch's backward");
      if (const int at = last + i; at < static_cast<int>(exits.size())) return exits[static_cast<std::size_t>(at)];
    } else if (i == 0) {
      return TaskId();
    }
    TaskId& done = schedule_end_[grp];
    if (!done.valid()) {
      done = g_.add(Marker{}, "schedule's last backward and sends done").id();
      g_.add_edge(out_.last_backward[grp], done);
      for (const TaskId t : last_sends_[grp]) g_.add_edge(t, done);
    }
    return done;
  }

  // Buckets of about bucket_bytes over stage i's contributions, in production order:
  // (first, end) index ranges, from replica 0 (all alike). Without overlap, one bucket.
  std::vector<std::pair<std::size_t, std::size_t>> buckets(int i) const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    const auto it = contributions_.find(group(0, i));
    if (it == contributions_.end()) return out;
    const auto& c = it->second;
    std::size_t first = 0;
    double bytes = 0.0;
    for (std::size_t j = 0; j < c.size(); ++j) {
      bytes += c[j].params * reduced_gradient_bytes(p_, m_.dtype);
      // (A model chunk's buckets are its own: Megatron-Core's DDP wraps each chunk, and
      // NeMo's distributed fused Adam makes each chunk's parameters buckets of their own.)
      const bool chunk_ends = j + 1 < c.size() && c[j + 1].s != c[j].s;
      if ((p_.overlap_grad_reduce && (bytes >= p_.bucket_bytes || chunk_ends)) || j + 1 == c.size()) {
        out.emplace_back(first, j + 1);
        first = j + 1;
        bytes = 0.0;
      }
    }
    return out;
  }

  void connect_pipeline() {
    for (int d = 0; d < dpl_; ++d) {
      for (int s = 0; s < stages_; ++s) {
        for (int mb = 0; mb < mb_; ++mb) {
          if (s + 1 < stages_) send(d, s, s + 1, mb, true);   // activations forward
          if (s > 0) send(d, s, s - 1, mb, false);            // gradients backward
        }
      }
    }
  }
  void send(int d, int from, int to, int mb, bool forward) {
    const TaskId src = exits_.at({d, from, mb, forward}), dst = entries_.at({d, to, mb, forward});
    const int i = from % p_.pp, j = to % p_.pp;
    if (i == j) {  // both chunks on one device (pp = 1 with interleaving is refused; kept for safety)
      g_.add_edge(src, dst);
      return;
    }
    admit_transfers(static_cast<std::uint64_t>(p_.tp), "pipeline send", 2);
    CollectiveSpec p2p;  // each tp rank's send, for every replica this one stands for
    p2p.op = CollectiveOp::kSendRecv;
    p2p.algorithm = CollectiveAlgorithm::kDirect;
    p2p.channels = 1;
    p2p.bytes = costs_.p2p_bytes;
    record_use(kPpDim, p2p, 2, static_cast<double>(p_.tp) * (dpl_ < p_.dp ? p_.dp : 1));
    for (int k = 0; k < p_.tp; ++k) {
      if (dpl_ < p_.dp) sends_.emplace_back(i, j, k);
      const TaskId t = g_.add(Transfer{out_.network, EndpointId(node(rank(d, i, k)).value),
                                       EndpointId(node(rank(d, j, k)).value), Bytes(costs_.p2p_bytes)},
                              forward ? "send activations" : "send gradients").id();
      if (const double share = p2p_share(d, i, j, k); share > 1.0) g_.set_share(t, share);
      ++out_.transfers;
      g_.add_edge(src, t);
      g_.add_edge(t, dst);
      if (aligned_ && src == out_.last_backward[group(d, i)]) last_sends_[group(d, i)].push_back(t);
      // Megatron's p2p calls return when the transfer is done: the sender's next pass
      // waits for it (plan.overlap_p2p lets it run ahead instead, beside the send and
      // receive kernels, which slow it).
      if (p_.overlap_p2p) {
        slows(t, node(rank(d, i, k)));
        slows(t, node(rank(d, j, k)));
      } else {
        if (auto it = next_entry_.find({d, from, mb, forward}); it != next_entry_.end()) g_.add_edge(t, it->second);
      }
    }
  }

  void data_parallel_and_optimizer(TaskId end) {
    const bool zero12 = p_.dp_mode == DataParallelMode::kZero1 || p_.dp_mode == DataParallelMode::kZero2;
    const bool sharded = p_.dp_mode != DataParallelMode::kAllReduce && p_.dp > 1;
    // No stage updates its weights before every stage has its gradients reduced: the
    // optimizer step first all-reduces the gradients' norm (clipping) and the overflow
    // flag (loss scaling) over the model-parallel ranks, as Megatron-LM and DeepSpeed do.
    // Those all-reduces carry a few bytes; only the wait they impose is modelled.
    const TaskId every_stage = g_.add(Marker{}, "every stage's gradients reduced").id();
    sum_copies(every_stage);
    // ZeRO-1/2's all-gather of the updated weights: 16 bits a weight, 8 for those kept in
    // FP8 (fp8_params).
    const std::vector<DeviceMemory> held = p_.fp8_params ? stage_memory(p_, m_) : std::vector<DeviceMemory>();
    for (int i = 0; i < p_.pp; ++i) {
      const TaskId stage_done = out_.gradients_reduced[static_cast<std::size_t>(i)];
      g_.add_edge(stage_done, every_stage);
      const auto& produced_by_0 = contributions_[group(0, i)];
      double stage_params = 0.0, stage_experts = 0.0;
      for (const Contribution& c : produced_by_0) {
        stage_params += c.params;
        stage_experts += c.experts;
      }
      // Under expert parallelism the experts' gradients (and ZeRO-1's weights) go over the
      // dp / ep ranks holding each expert: ranks j, j + ep, ... (communicator 2j + 1).
      const int expert_dp = p_.dp / p_.ep;
      const auto expert_collectives = [&](int k, CollectiveOp op, double bytes, TaskId after, TaskId done) {
        for (int j = 0; j < p_.ep && expert_dp > 1 && bytes > 0.0; ++j) {
          const LoweredCollective c = dp_collective(i, k, op, bytes, 2 * j + 1);
          g_.add_edge(after, c.start);
          g_.add_edge(c.end, done);
        }
      };
      if (gather_ahead_) {
        // overlap_param_gather: the previous step's updated weights gathered bucket by
        // bucket in forward order (the last produced first), one after another from the
        // step's start, each unit's first forward waiting for its bucket, the next bucket's
        // gather dispatched when the forwards reach this one (Megatron-Core's forward
        // pre-hook fetches one bucket ahead), or with align_param_gather a model chunk's
        // buckets when the forwards reach the chunk before it (chunk_dispatch). (fp8_params'
        // FP8 weights, the layers' linear ones, shared over the layers' buckets by their
        // parameters. Lowered before the gradients' reductions: a communicator runs its
        // collectives in the order they are lowered.)
        const DeviceMemory fp8 = held.empty() ? DeviceMemory{} : held[static_cast<std::size_t>(i)];
        double layer_dense = 0.0;
        for (const Contribution& c : produced_by_0) layer_dense += c.layer ? c.params - c.experts : 0.0;
        const auto bs = buckets(i);
        TaskId previous, reached;
        std::map<int, TaskId> chunk_gathered;  // align_param_gather: each chunk's last bucket gathered
        for (auto b = bs.rbegin(); b != bs.rend(); ++b) {
          double params = 0.0, experts = 0.0, layers = 0.0;
          for (std::size_t j = b->first; j < b->second; ++j) {
            params += produced_by_0[j].params, experts += produced_by_0[j].experts;
            if (produced_by_0[j].layer) layers += produced_by_0[j].params - produced_by_0[j].experts;
          }
          const double bytes =
              gathered_weight_bytes(params - experts, layer_dense > 0.0 ? fp8.fp8_weights * layers / layer_dense : 0.0, p_, m_.dtype);
          const double ebytes =
              stage_experts > 0.0 ? gathered_weight_bytes(experts, fp8.fp8_expert_weights * experts / stage_experts, p_, m_.dtype) : 0.0;
          const TaskId start = g_.add(Marker{}, "gather updated weights").id();
          if (previous.valid()) g_.add_edge(previous, start);
          // (The bucket's first unit in forward order is its last produced.)
          const Contribution& lead = produced_by_0[b->second - 1];
          const int chunk = lead.s / p_.pp;
          if (const TaskId dispatch = p_.align_param_gather ? chunk_dispatch(0, i, chunk) : reached; dispatch.valid()) {
            g_.add_edge(dispatch, start);
          }
          const auto first = param_waits_.find({0, lead.s, lead.fj});
          reached = first != param_waits_.end() ? first->second.second : TaskId();
          const TaskId gathered = g_.add(Marker{}, "bucket's weights gathered").id();
          g_.add_edge(start, gathered);
          for (int k = 0; k < p_.tp; ++k) {
            if (bytes > 0.0) {
              const LoweredCollective c = dp_collective(i, k, CollectiveOp::kAllGather, bytes);
              g_.add_edge(start, c.start);
              g_.add_edge(c.end, gathered);
            }
            expert_collectives(k, CollectiveOp::kAllGather, ebytes, start, gathered);
          }
          for (int d = 0; d < dpl_; ++d) {
            for (std::size_t j = b->first; j < b->second; ++j) {
              const auto w = param_waits_.find({d, produced_by_0[j].s, produced_by_0[j].fj});
              if (w != param_waits_.end()) g_.add_edge(gathered, w->second.first);
            }
          }
          previous = gathered;
          if (p_.align_param_gather) chunk_gathered[chunk] = gathered;
        }
        // Apex's param sync first waits for the gathers it started before (the compute
        // stream waits for its communication stream, _finish_bucket_param_sync): the
        // stage's first forward for all of chunk 0's (chunk 1's dispatch at the step's
        // start), the forward that dispatches chunk c + 1 for all of chunk c's.
        for (const auto& [c, last] : chunk_gathered) {
          for (int d = 0; d < dpl_; ++d) {
            const TaskId waiter = c == 0 ? entries_.at({d, i, 0, true}) : chunk_dispatch(d, i, c + 1);
            if (waiter.valid()) g_.add_edge(last, waiter);
          }
        }
      }
      if (p_.dp > 1 && !scatters_) {
        const CollectiveOp op = zero12 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
        for (const auto& [first, last] : buckets(i)) {
          double bytes = 0.0, expert_bytes = 0.0;
          for (std::size_t j = first; j < last; ++j) {
            bytes += (produced_by_0[j].params - produced_by_0[j].experts) * reduced_gradient_bytes(p_, m_.dtype);
            expert_bytes += produced_by_0[j].experts * reduced_gradient_bytes(p_, m_.dtype);
          }
          const TaskId ready = g_.add(Marker{}, "bucket ready").id();
          const int chunk = produced_by_0[first].s / p_.pp;  // (a bucket ends with its model chunk)
          for (int d = 0; d < dpl_; ++d) {
            TaskId after = out_.last_backward[group(d, i)];
            if (p_.overlap_grad_reduce) {
              const TaskId launch = grad_sync_trigger(d, i, chunk);
              after = launch.valid() ? launch : contributions_[group(d, i)][last - 1].t;
            }
            g_.add_edge(after, ready);
          }
          for (int k = 0; k < p_.tp; ++k) {
            const LoweredCollective c = dp_collective(i, k, op, bytes);
            g_.add_edge(ready, c.start);
            g_.add_edge(c.end, stage_done);
            expert_collectives(k, op, expert_bytes, ready, stage_done);
          }
        }
      }
      std::vector<TaskId> steps;
      for (int d = 0; d < dpl_; ++d) {
        const std::size_t grp = group(d, i);
        g_.add_edge(out_.last_backward[grp], stage_done);
        const double params =
            sharded ? (stage_params - stage_experts) / shard_size(p_) + stage_experts / (shard_size(p_) / p_.ep) : stage_params;
        const TaskId step =
            compute(grp, kOptimizer, plan_optimizer_step_time(params, p_, m_.dtype, *in_.compute), every_stage, "optimizer step");
        out_.optimizer[grp] = step;
        steps.push_back(step);
        if (!(zero12 && p_.dp > 1) || gather_ahead_) g_.add_edge(step, end);
      }
      if (zero12 && p_.dp > 1 && !gather_ahead_) {
        const TaskId gathered = g_.add(Marker{}, "updated weights gathered").id();
        // Every replica's step done: when the experts' weights are gathered apart.
        TaskId stepped;
        if (stage_experts > 0.0 && expert_dp > 1) {
          stepped = g_.add(Marker{}, "optimizer steps done").id();
          for (TaskId t : steps) g_.add_edge(t, stepped);
        }
        out_.weights_gathered.push_back(gathered);
        const DeviceMemory fp8 = held.empty() ? DeviceMemory{} : held[static_cast<std::size_t>(i)];
        const double bytes = gathered_weight_bytes(stage_params - stage_experts, fp8.fp8_weights, p_, m_.dtype);
        const double expert_bytes = gathered_weight_bytes(stage_experts, fp8.fp8_expert_weights, p_, m_.dtype);
        for (int k = 0; k < p_.tp; ++k) {
          const LoweredCollective c = dp_collective(i, k, CollectiveOp::kAllGather, bytes);
          for (TaskId t : steps) g_.add_edge(t, c.start);
          g_.add_edge(c.end, gathered);
          if (stepped.valid()) expert_collectives(k, CollectiveOp::kAllGather, expert_bytes, stepped, gathered);
        }
        g_.add_edge(gathered, end);
      }
    }
  }

  // Weights a replica holds more than one copy of have their copies' gradients summed
  // before the optimizer step, after the data-parallel reductions of the stages holding
  // them, each an all-reduce among the copies in every replica (priced for a replica
  // folded away, whose traffic still loads the links).
  void sum_copies(TaskId every_stage) {
    // A tied embedding split by the pipeline: a copy on the first stage (the input
    // embedding) and one on the last (the output layer), between each tp rank's two
    // (Megatron-LM's _allreduce_embedding_grads in finalize_model_grads; DeepSpeed's
    // pipeline engine reduces its tied modules' too).
    // Multi-token prediction's copy of an untied embedding on the last stage, likewise.
    if (p_.pp > 1 && (m_.tied_embedding || m_.mtp_layers > 0)) {
      const double bytes = static_cast<double>(m_.vocab) * static_cast<double>(m_.hidden) / p_.tp;
      for (int d = 0; d < p_.dp; ++d) {
        for (int k = 0; k < p_.tp; ++k) {
          sum_copy(d, {node(rank(d, 0, k)), node(rank(d, p_.pp - 1, k))}, bytes,
                   {out_.gradients_reduced.front(), out_.gradients_reduced.back()},
                   m_.tied_embedding ? "tied embedding all-reduce" : "embedding copy all-reduce",
                   d == 0 && k == 0, every_stage);
        }
      }
    }
    // More tp ranks than key-value groups: each group's key and value weights on each of
    // the tp / kv_heads ranks that share it (a replicated weight's gradient, as GSPMD
    // sums it; PaLM's one multi-query head over 12 ranks), the stage's layers at once.
    const double kv = m_.replicated_kv_params(p_.tp);
    if (kv == 0.0) return;
    const int sharing = m_.kv_copies(p_.tp);
    for (int i = 0; i < p_.pp; ++i) {
      int layers = i == p_.pp - 1 ? static_cast<int>(m_.mtp_layers) : 0;  // (multi-token prediction's on the last)
      for (int s = i; s < stages_; s += p_.pp) layers += range(s).count;
      if (layers == 0) continue;  // (a stage of only the embedding holds none)
      for (int d = 0; d < p_.dp; ++d) {
        for (int k0 = 0; k0 < p_.tp; k0 += sharing) {
          std::vector<NodeId> ranks;
          for (int k = k0; k < k0 + sharing; ++k) ranks.push_back(node(rank(d, i, k)));
          sum_copy(d, ranks, kv * layers, {out_.gradients_reduced[static_cast<std::size_t>(i)]},
                   "key-value group all-reduce", d == 0 && i == 0 && k0 == 0, every_stage);
        }
      }
    }
  }
  // One all-reduce of `params` gradients among `ranks` (copies in replica d), after
  // `after`; under ZeRO-3 each rank's shard of them.
  void sum_copy(int d, const std::vector<NodeId>& ranks, double params, std::initializer_list<TaskId> after,
                std::string_view what, bool first_device, TaskId every_stage) {
    double bytes = params * reduced_gradient_bytes(p_, m_.dtype);
    if (zero3_) bytes /= shard_size(p_);
    const Choice ch = choose(ranks, CollectiveOp::kAllReduce, bytes);
    record_use(kCopiesDim, ch.spec, ranks.size(), 1.0);
    if (d >= dpl_) {
      count_priced(ch, false);
      return;
    }
    if (!out_.copies_summed.valid()) {
      out_.copies_summed = g_.add(Marker{}, "copies' gradients summed").id();
      g_.add_edge(out_.copies_summed, every_stage);
    }
    const LoweredCollective c = run_choice(ch, what, first_device);
    for (TaskId t : after) g_.add_edge(t, c.start);
    g_.add_edge(c.end, out_.copies_summed);
  }

  // Which data-parallel ranks of a stage and tp rank a collective spans: every one
  // (kAllRanks), ZeRO-3 shard group g (2g: dp ranks g x shard .. (g + 1) x shard - 1), or
  // the replicas' ranks at position j of their shard groups (2j + 1: dp ranks j, j +
  // shard, ...); under expert parallelism (no ZeRO-3 then) the same with ep for shard:
  // expert-parallel group g, and the ranks holding the experts of position j.
  static constexpr int kAllRanks = -1;
  std::vector<int> dp_members(int comm) const {
    std::vector<int> out;
    const int s = ep_ ? p_.ep : shard_size(p_);
    if (comm == kAllRanks) {
      for (int d = 0; d < p_.dp; ++d) out.push_back(d);
    } else if (comm % 2 == 0) {
      for (int d = 0; d < s; ++d) out.push_back(comm / 2 * s + d);
    } else {
      for (int d = comm / 2; d < p_.dp; d += s) out.push_back(d);
    }
    return out;
  }

  // A data-parallel collective among stage i's tp rank k of every replica (or of the
  // communicator `comm` names, see dp_members), after the previous one on that
  // communicator: NCCL runs the collectives of one communicator one at a time, in the
  // order they are issued (buckets, ZeRO gathers and scatters). Counts the bytes the
  // first device sends in it.
  LoweredCollective dp_collective(int i, int k, CollectiveOp op, double bytes, int comm = kAllRanks, Dim dim = kDpDim) {
    LoweredCollective c = dp_collective_alone(i, k, op, bytes, comm, dim);
    auto [tail, fresh] = dp_tail_.try_emplace({i, k, comm}, c.end);
    if (!fresh) {
      g_.add_edge(tail->second, c.start);
      tail->second = c.end;
    }
    return c;
  }

  // `queue`, when valid: where a priced collective runs (else beside every other).
  LoweredCollective dp_collective_alone(int i, int k, CollectiveOp op, double bytes, int comm, Dim dim,
                                        ResourceId queue = ResourceId()) {
    // The first device (dp 0, stage 0, tp rank 0) is in every communicator that holds dp
    // rank 0 (its data-parallel bytes leave the expert-parallel all-to-alls out).
    const bool first_device = dim == kDpDim && i == 0 && k == 0 && (comm == kAllRanks || comm == 0 || comm == 1);
    const Choice& ch = choice(i, k, op, bytes, comm);
    record_use(dim, ch.spec, ch.group.ranks.size(), 1.0);
    return run_choice(ch, op_name(op), first_device, queue);
  }
  // The algorithm (and priced cost) of that collective, chosen once.
  const Choice& choice(int i, int k, CollectiveOp op, double bytes, int comm) {
    const auto key = std::make_tuple(i, k, op, bytes, comm);
    auto it = dp_choice_.find(key);
    if (it == dp_choice_.end()) {
      std::vector<NodeId> ranks;
      const std::vector<int> members = dp_members(comm);
      for (int d : members) ranks.push_back(node(rank(d, i, k)));
      // The stage's other tp ranks run the same collective at the same time: on the
      // analytical model their transfers take their shares of the links.
      std::vector<std::vector<NodeId>> siblings;
      for (int k2 = 0; k2 < p_.tp && in_.network == NetworkModelKind::kAnalytical; ++k2) {
        if (k2 == k) continue;
        std::vector<NodeId>& sibling = siblings.emplace_back();
        for (int d : members) sibling.push_back(node(rank(d, i, k2)));
      }
      it = dp_choice_.emplace(key, choose(ranks, op, bytes, std::move(siblings))).first;
    }
    return it->second;
  }

  // The algorithm for `op` on `bytes` over these ranks; priced, the analytical model's
  // time for the whole collective, which is what its transfers take on
  // AnalyticalNetwork (they never contend).
  // `siblings`: groups running the same collective at the same time (CollectiveGroup::
  // siblings), not weighed in the choice (NCCL's tuner sees one communicator).
  Choice choose(const std::vector<NodeId>& ranks, CollectiveOp op, double bytes,
                std::vector<std::vector<NodeId>> siblings = {}) const {
    Choice ch{CollectiveGroup::of(*in_.fabric, ranks), {}, {}};
    // (The only all-to-alls are the expert-parallel ones.)
    ch.spec = op == CollectiveOp::kAllToAll ? dispatch_spec(*in_.fabric, ch.group, m_, p_, bytes)
                                            : chosen_spec(*in_.fabric, ch.group, op, bytes);
    ch.spec.streamed = in_.stream_rings;
    ch.group.siblings = std::move(siblings);
    if (priced_) ch.cost = analytical_collective_cost(*in_.fabric, ch.group, ch.spec);
    return ch;
  }

  // A priced collective's traffic on the links, and what the first device sends in it.
  void count_priced(const Choice& ch, bool first_device) {
    for (const auto& [l, b] : ch.cost.traffic.links) out_.priced_link_bytes[l.value] += b;
    if (first_device) out_.dp_bytes_per_device += ch.cost.traffic.first_rank_sends;
  }

  // The collective in the graph: priced, one task of its time (`what` names it); else
  // its transfers (refused past the transfer limit). Counts what the first device
  // (dp 0, stage 0, tp rank 0) sends when it is in it.
  LoweredCollective run_choice(const Choice& ch, std::string_view what, bool first_device, ResourceId queue = ResourceId()) {
    if (priced_) {
      count_priced(ch, first_device);
      ++out_.priced_collectives;
      const TaskId t = g_.add(Compute{queue.valid() ? queue : out_.collectives, Seconds(ch.cost.time), Flops(0.0)}, what).id();
      for (NodeId r : ch.group.ranks) slows(t, r);
      return LoweredCollective{t, t, 0};
    }
    const std::uint64_t more = collective_transfer_count(ch.group, ch.spec, in_.network == NetworkModelKind::kAnalytical);
    admit_transfers(more, what, ch.group.ranks.size());
    const auto first = static_cast<std::uint32_t>(g_.size());
    const LoweredCollective c = lower_collective(g_, out_.network, ch.group, ch.spec,
                                                 in_.network == NetworkModelKind::kAnalytical ? in_.fabric : nullptr);
    out_.transfers += c.transfers;
    if (slow_ > 0.0) g_.add_transfer_interference(TaskId(first), [&](std::uint32_t end) { return stream_of(NodeId(end)); });
    if (first_device) {
      const std::uint32_t n0 = node(rank(0, 0, 0)).value;
      for (std::uint32_t t = first; t < g_.size(); ++t) {
        if (const auto* x = std::get_if<Transfer>(&g_.kind(TaskId(t))); x != nullptr && x->src.value == n0) {
          out_.dp_bytes_per_device += x->bytes.value();
        }
      }
    }
    return c;
  }

  // Communication task t runs NCCL kernels on device `r`: while it runs, the compute
  // stream standing for r (when r's replica is lowered) is slowed (interference).
  void slows(TaskId t, NodeId r) {
    if (slow_ <= 0.0) return;
    if (const ResourceId s = stream_of(r); s.valid()) {
      // (A stream named twice for one task would be counted twice and slowed once; the
      // check against the last entry keeps the graph lean where it is cheap.)
      const auto& v = g_.interference();
      if (!v.empty() && v.back().task == t && v.back().stream == s) return;
      g_.add_interference(t, s);
    }
  }
  // The compute stream standing for device `r` (with interference, when its replica is
  // lowered), else an invalid id.
  ResourceId stream_of(NodeId r) const {
    const auto it = stream_of_.find(r.value);
    return it == stream_of_.end() ? ResourceId() : it->second;
  }

  const TrainingStepInputs& in_;
  const TransformerConfig& m_;
  const ParallelPlan& p_;
  LoweredTrainingStep& out_;
  TaskGraph& g_;
  StageCosts costs_;
  int v_ = 1, stages_ = 1, mb_ = 1;
  std::vector<LayerRange> ranges_;  // each chunk's layers (one per stage without interleaving)
  bool zero3_ = false;
  bool split_ = false;  // zero-bubble: backwards in input-gradient (B) and weight-gradient (W) passes
  // ZeRO-2 and 3: each unit's gradients reduce-scattered after its backward, in every
  // micro-batch (the device keeps only its shard of them).
  bool scatters_ = false;
  std::vector<double> chunk_act_;  // bytes per micro-batch: each chunk's layers' activations (as ranges_)
  double loss_act_ = 0;            // bytes per micro-batch on the last chunk: the losses' softmax, multi-token prediction
  std::vector<double> states_;         // per pp stage: weights, gradients and optimizer state bytes
  bool priced_ = false;  // data-parallel collectives as one priced task each (analytical network)
  bool ub_ = false;      // tp_comm_overlap (tp > 1)
  double slow_ = 0.0;    // how much communication beside a compute stream slows it (interference)
  std::unordered_map<std::uint32_t, ResourceId> stream_of_;  // with interference: a lowered device's compute stream
  bool amax_ = false;    // FP8 GEMMs' amax reductions (more than one rank per stage)
  std::map<std::pair<int, bool>, double> amax_time_;  // by (stage, forward)
  int dpl_ = 1;          // replicas lowered: dp, or 1 when they are provably identical
  std::vector<CollectiveCost> tp_cost_;  // per (dp, pp) group, all replicas
  std::vector<CollectiveSpec> tp_spec_;  // per (dp, pp) group, all replicas
  std::vector<double> tp_uses_;          // per lowered group: its all-reduces' worth of traffic
  // Of them, per lowered group: the dispatched buffer's all-gathers and reduce-scatters
  // (dispatched_tp), each counted once.
  std::vector<double> dispatched_tp_uses_;
  // collective_uses by (dim order, op, algorithm, channels, ranks): count, bytes.
  std::map<std::tuple<int, int, int, int, std::size_t>, std::pair<double, double>> uses_;
  std::map<std::tuple<int, int, CollectiveOp, double, int>, Choice> dp_choice_;  // (pp, tp rank, op, bytes, communicator)
  std::map<std::tuple<int, int, int>, TaskId> dp_tail_;  // (pp, tp rank, communicator): the last collective's end
  std::vector<std::tuple<int, int, int>> sends_;  // replica 0's sends (pp from, pp to, tp rank), when folded
  std::map<std::pair<int, int>, std::vector<double>> p2p_shares_;  // per (stage from, to): per replica and tp rank
  std::map<Key, TaskId> entries_, exits_;
  std::map<Key, TaskId> next_entry_;  // the entry of the pass after this one in its stage's program
  std::map<CollKey, Markers> zero3_colls_;
  // Per (dp, pp) replica: (task after which, parameters) whose gradients are final.
  struct Contribution {
    TaskId t;
    double params, experts;  // experts: of params, the routed experts' under expert parallelism
    int s, fj;               // the unit's chunk and its place in the chunk's forward
    bool layer;              // a layer (whose linear weights fp8_params keeps in FP8), not the embedding or output
  };
  bool gather_ahead_ = false;  // overlap_param_gather (ZeRO-1, dp > 1)
  // align_grad_reduce under 1f1b or interleaved (pp > 1, buckets overlapped): per (dp, pp)
  // group, the ends of its backwards in program order, and per model chunk the place among
  // them of its last micro-batch's (grad_sync_trigger).
  bool aligned_ = false;
  std::vector<std::vector<TaskId>> backward_exits_;
  std::vector<std::vector<int>> chunk_last_backward_;
  // Per (dp, pp) group: the sends of its last backward's gradient, and the marker after
  // them and that backward (created when a trigger first needs it).
  std::map<std::size_t, std::vector<TaskId>> last_sends_;
  std::map<std::size_t, TaskId> schedule_end_;
  // (replica, chunk, unit): its first forward's wait, and the task before it.
  std::map<std::tuple<int, int, int>, std::pair<TaskId, TaskId>> param_waits_;
  std::map<std::size_t, std::vector<Contribution>> contributions_;
  bool ep_ = false;  // expert parallelism (ep > 1)
  Here here_;
  std::map<A2aKey, Markers> a2a_;
  std::vector<ResourceId> a2a_queues_;  // combined 1F1B, priced: per (stage, ep group, tp rank)
  // Stage i's ep group g's queue for tp rank k (none unless priced under combined 1F1B).
  ResourceId a2a_queue(int i, int g, int k) const {
    if (a2a_queues_.empty()) return ResourceId();
    return a2a_queues_[static_cast<std::size_t>((i * (p_.dp / p_.ep) + g) * p_.tp + k)];
  }
};

}  // namespace

std::string plan_size_problem(const ParallelPlan& p, const TransformerConfig& m, double max_compute_tasks, int replicas) {
  // Per replica and layer about 8 compute tasks (expert parallelism: 10, its MLP in three
  // parts); under tp_comm_overlap each overlapped GEMM, its collective, its tail and a
  // marker, about 30 (with experts 24: the attention half's). The priced collectives that every replica shares are lowered once per group,
  // whether the replicas are folded or not: per layer the expert-parallel all-to-alls
  // (up to 6: forward, backward, recomputed forward) of every ep group and tp rank, and
  // per unit (a layer, the embedding, the output layer) ZeRO-3's gathers and scatter or
  // ZeRO-2's scatter, for every shard group and tp rank (and the shard positions'
  // all-reduces across groups).
  const ParallelPlan f = context_folded(p);
  const bool ub = f.tp_comm_overlap.on && f.tp > 1;
  const double per_layer = f.ep > 1 ? (ub ? 24.0 : 10.0) : (ub ? 30.0 : 8.0), dp = f.dp;
  const double lowered = replicas > 0 ? replicas : dp;
  double shared_per_layer = f.ep > 1 ? 6.0 * dp / f.ep * f.tp : 0.0;
  const bool zero3 = f.dp_mode == DataParallelMode::kZero3, zero2 = f.dp_mode == DataParallelMode::kZero2;
  if ((zero3 || zero2) && f.dp > 1) {
    const double s = shard_size(f), groups = dp / s;
    shared_per_layer += (zero3 ? 3.0 : 1.0) * f.tp * (groups + (groups > 1 ? s : 0.0));
  }
  const double layers_per_stage = static_cast<double>(m.layers + m.mtp_layers) / f.pp;
  const double tasks = static_cast<double>(f.pp) * static_cast<double>(f.micro_batches()) * f.virtual_stages *
                       (lowered * (2.0 + per_layer * layers_per_stage) + shared_per_layer * (layers_per_stage + 2.0));
  if (tasks <= max_compute_tasks) return "";
  return "this plan would replay about " + std::to_string(static_cast<long long>(tasks)) +
         " compute tasks, more than the limit of " + std::to_string(static_cast<long long>(max_compute_tasks)) +
         "; use fewer micro-batches" +
         (lowered > 1 ? " or data-parallel replicas (the analytical network replays one of identical replicas)" : "");
}

LoweredTrainingStep lower_transformer_step(const TrainingStepInputs& in) {
  LoweredTrainingStep out;
  if (in.plan->cp > 1) {
    // The plan as given answers for its context parallelism; its lowering (every cp rank
    // a replica of its own, on its share of each sequence) for the rest.
    if (std::string why = plan_problem(*in.plan, *in.model, in.fabric->cluster().accelerators().size()); !why.empty()) {
      throw InputError(why);
    }
    const ParallelPlan folded = context_folded(*in.plan);
    const TransformerConfig share = context_share(*in.model, *in.plan);
    TrainingStepInputs lowered = in;
    lowered.plan = &folded;
    lowered.model = &share;
    StepLowering(lowered, out).run();
    return out;
  }
  StepLowering(in, out).run();
  return out;
}

}  // namespace ddlsim
