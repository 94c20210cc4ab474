// A parallel plan for a transformer: how many devices split it which way, and how.
//
// Devices form a mesh of dp x pp x tp laid over the cluster's accelerators in rank order,
// in the plan's axis order, innermost first: by default tp innermost (consecutive ranks,
// inside a server), then pp, then dp, as Megatron and Llama 3 order them, so rank r has
//   tp rank = r mod tp,  pp rank = (r / tp) mod pp,  dp rank = r / (tp pp).
// A step processes global_batch samples: each data-parallel replica takes
// global_batch / dp of them in micro-batches of micro_batch, m = global_batch / (dp x
// micro_batch) micro-batches per step, through pp pipeline stages scheduled by GPipe
// (all forwards, then all backwards), 1F1B (one forward, one backward in the steady
// state), interleaved 1F1B (v model chunks per device) or zero-bubble ZB-H1 (1F1B with
// each backward split into its input gradient and its weight gradient, the latter
// deferred into the bubble; strategies/pipeline.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strategies/tp_overlap.hpp"
#include "workloads/transformer.hpp"

namespace ddlsim {

enum class PipelineSchedule { kGPipe, k1F1B, kInterleaved1F1B, kZeroBubbleH1 };
/// Every schedule with the name scenarios and reports give it ("gpipe", "1f1b",
/// "interleaved", "zero-bubble"), in that order.
inline constexpr std::pair<const char*, PipelineSchedule> kScheduleNames[] = {
    {"gpipe", PipelineSchedule::kGPipe},
    {"1f1b", PipelineSchedule::k1F1B},
    {"interleaved", PipelineSchedule::kInterleaved1F1B},
    {"zero-bubble", PipelineSchedule::kZeroBubbleH1}};
inline const char* schedule_name(PipelineSchedule s) {
  for (const auto& [name, kind] : kScheduleNames) {
    if (kind == s) return name;
  }
  return "?";
}
enum class DataParallelMode { kAllReduce, kZero1, kZero2, kZero3 };  // FSDP full sharding = ZeRO-3
enum class Recompute { kNone, kSelective, kFull };
/// The parts of a layer that selective recomputation recomputes in backward instead of
/// keeping their activations (Megatron-Core's --recompute-modules), a bit set:
///  - core_attn: the attention core (scores, softmax, dropout, context); its inputs Q, K,
///    V and its output stay (Korthikanti et al.'s selective recomputation);
///  - layernorm: the two input norms (their outputs, the QKV's and the MLP's input, are
///    not kept: remade from the norms' inputs, the residual stream);
///  - mla_up_proj: multi-head latent attention's up projections and key concatenation
///    (the heads' Q, K and V are not kept: remade from the normed latents, which stay,
///    as Megatron-Core's checkpoint keeps them);
///  - moe_act: the experts' activation function (its output, the down projection's
///    input, is not kept; its inputs are);
///  - mlp: a dense layer's whole MLP (its inner activations are not kept; its input is);
///  - shared_experts: a mixture of experts' shared expert, whole, likewise.
/// Each recomputed part's forward runs again before its backward.
enum RecomputeModule : unsigned {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeLayernorm = 1u << 1,
  kRecomputeMlaUpProj = 1u << 2,
  kRecomputeMoeAct = 1u << 3,
  kRecomputeMlp = 1u << 4,
  kRecomputeSharedExperts = 1u << 5,
};
/// Every module with the name scenarios give it, in Megatron-Core's spelling.
inline constexpr std::pair<const char*, RecomputeModule> kRecomputeModuleNames[] = {
    {"core_attn", kRecomputeCoreAttn}, {"layernorm", kRecomputeLayernorm},   {"mla_up_proj", kRecomputeMlaUpProj},
    {"moe_act", kRecomputeMoeAct},     {"mlp", kRecomputeMlp},               {"shared_experts", kRecomputeSharedExperts}};
/// Megatron-Core's default modules: the attention core alone.
inline constexpr unsigned kDefaultRecomputeModules = kRecomputeCoreAttn;
/// How a device adds each micro-batch's weight gradients to the step's: kFused, inside
/// the weight-gradient GEMMs (Megatron's --gradient-accumulation-fusion, the default of
/// Megatron-Core); kAdd, by a separate pass over the gradients in the model's dtype for
/// every micro-batch after the first (PyTorch autograd accumulating into .grad, as
/// DeepSpeed's engines and Megatron-LM before its fusion do); kFp32, by converting every
/// micro-batch's 16-bit gradients to fp32 and adding them to fp32 buffers (DeepSpeed's
/// bf16 optimizer, BF16_Optimizer.update_hp_grads after each backward).
enum class GradAccumulation { kFused, kAdd, kFp32 };

/// How an expert-parallel plan sends tokens to their experts' GPUs and back (see
/// ParallelPlan::dispatcher).
enum class TokenDispatcher { kAllToAll, kDeepEp };
inline const char* dispatcher_name(TokenDispatcher d) { return d == TokenDispatcher::kAllToAll ? "alltoall" : "deepep"; }
inline const char* grad_accumulation_name(GradAccumulation g) {
  return g == GradAccumulation::kFused ? "fused" : g == GradAccumulation::kAdd ? "add" : "fp32";
}
/// A device's compute time in a step by purpose (s): forward passes, backward passes
/// (input and weight gradients, and adding each micro-batch's gradients to the step's),
/// forwards recomputed before their backward, and the optimizer step.
struct ComputeParts {
  double forward = 0, backward = 0, recompute = 0, optimizer = 0;
  // What communication beside the stream added to its tasks (the replay's interference;
  // 0 in the lowering's sums).
  double interference = 0;
  [[nodiscard]] double total() const { return forward + backward + recompute + optimizer + interference; }
};

enum class MeshAxis { kTp, kPp, kDp, kCp };
/// An axis as scenario files spell it: "tp", "pp", "dp" or "cp".
inline const char* axis_name(MeshAxis a) {
  return a == MeshAxis::kTp ? "tp" : a == MeshAxis::kPp ? "pp" : a == MeshAxis::kDp ? "dp" : "cp";
}

struct ParallelPlan {
  std::string name;
  int dp = 1, tp = 1, pp = 1;
  /// Expert parallelism (mixture-of-experts models): each group of ep consecutive
  /// data-parallel ranks splits every MoE layer's experts, experts / ep on each, and
  /// exchanges the dispatched tokens by all-to-all before and after the experts
  /// (Megatron-Core's alltoall token dispatcher, expert tensor parallelism = tp: each tp
  /// rank sends its 1/tp of the tokens, the tp ranks all-gather what arrives and each
  /// holds its 1/tp of each local expert; StageCosts::moe_tp_share). An
  /// expert's gradients are reduced over the dp / ep ranks that hold it (ranks j, j + ep,
  /// ...), the rest of the model's over all dp. ep divides dp (dp x cp
  /// with context parallelism); 1: no expert parallelism.
  int ep = 1;
  /// Context parallelism (Megatron-Core's --context-parallel-size): each sample's
  /// sequence split over cp ranks, each holding the tokens of 2 cp-th chunks of it (the
  /// i-th and the (2 cp - 1 - i)-th, so that causal attention costs every rank alike);
  /// every operator but attention works on the rank's seq / cp tokens, and attention's
  /// queries meet every key of the sequence, the other ranks' keys and values passed
  /// round the cp ranks in a ring (Transformer Engine's p2p context parallelism: cp - 1
  /// steps, each rank sending its current chunk on while it computes with it; the
  /// backward sends the keys' and values' gradients round too). The weights are
  /// replicated over the cp ranks and their gradients reduced over dp x cp ranks, as
  /// Megatron's data-parallel group with context parallelism; a distributed optimizer
  /// shards over those dp x cp ranks. With expert parallelism each ep group is ep
  /// consecutive ranks of those dp x cp (cp inside dp: Megatron-Core 0.7-0.9's groups),
  /// the experts' gradients going over the dp x cp / ep ranks holding the same experts.
  /// Needs flash attention. 1: no context parallelism.
  int cp = 1;
  /// Set by context_folded alone (1 otherwise): the plan is a context-parallel plan's
  /// lowering, its dp ranks in groups of cp_folded consecutive ones that are one
  /// replica's context-parallel ranks (mesh_rank lays them out on the cp axis).
  int cp_folded = 1;
  int virtual_stages = 1;  // model chunks per device (interleaved 1F1B only)
  /// Interleaved 1F1B only: how many consecutive micro-batches run through one model
  /// chunk before the device moves to its next chunk (Megatron-Core's
  /// --microbatch-group-size-per-virtual-pipeline-stage); the last group takes what is
  /// left. Between pp and the micro-batches per step, leaving a last group of none or of
  /// at least pp. 0: pp.
  int microbatch_group = 0;
  /// How the mesh's axes map onto consecutive ranks, innermost first (a permutation of
  /// tp, pp and dp, with cp among them or left out: then cp sits just inside dp).
  std::vector<MeshAxis> order{MeshAxis::kTp, MeshAxis::kPp, MeshAxis::kDp};
  std::int64_t global_batch = 1;
  std::int64_t micro_batch = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  DataParallelMode dp_mode = DataParallelMode::kAllReduce;
  /// ZeRO-3 only: the data-parallel ranks one copy of the model states is sharded over,
  /// consecutive in dp; the dp / shard groups replicate each other, and each layer's
  /// gradient shard is all-reduced across them after its reduce-scatter (hybrid sharding:
  /// PyTorch FSDP's HYBRID_SHARD, MiCS; PaLM sharded within each TPU pod). 0: all dp ranks.
  int shard = 0;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  /// With selective recomputation: the modules recomputed (RecomputeModule bits).
  unsigned recompute_modules = kDefaultRecomputeModules;
  /// With full recomputation: how many layers of each model chunk (a stage, or each of
  /// its virtual chunks) recompute their forward in backward, the first ones; the others
  /// keep their activations (Megatron's --recompute-method block
  /// --recompute-num-layers). 0: every layer.
  int recompute_layers = 0;
  /// Layers per pipeline stage (pp entries summing to the layers), or with interleaving
  /// per model chunk in model order (pp x virtual_stages entries; chunk s on stage
  /// s mod pp, as Megatron-Core's pipeline layout); empty: balanced.
  std::vector<int> stage_layers;
  /// Gradient reduction (all-reduce; ZeRO-1/2 reduce-scatter) in buckets of about this
  /// many bytes, each started as soon as backward has produced it when
  /// overlap_grad_reduce, else all after the whole backward.
  double bucket_bytes = 25.0 * 1024 * 1024;
  bool overlap_grad_reduce = true;
  /// overlap_grad_reduce under pipeline parallelism, 1f1b or interleaved: the schedule
  /// starts the reductions, at the same moment on every stage, as Megatron-LM does by
  /// default (its --no-align-grad-reduce, before it --no-delay-grad-reduce, turns that
  /// off) and NeMo's recipes do (grad_sync_func, for Apex's distributed fused Adam and
  /// Megatron-Core's DDP alike): under 1f1b the first stage's buckets go as its last
  /// backward produces them and every other stage's all at once after its last backward
  /// and its sends;
  /// interleaved, a model chunk's buckets all at once after the backward that comes as
  /// many passes after the chunk's last micro-batch's backward as the stage's pipeline
  /// rank, and those of chunks not started by the end (the first chunk's) after the
  /// stage's last backward and its sends (the schedule's end, where it launches what is
  /// left). false (ddlsim's default, the plain data-parallel hooks): each
  /// bucket as the last micro-batch's backward produces it, on every stage. No effect
  /// without overlap_grad_reduce (as Megatron hands the schedule its grad sync only then),
  /// under ZeRO-2 and 3 (no buckets), under gpipe or zero-bubble, or with pp 1.
  bool align_grad_reduce = false;
  /// ZeRO-1: the all-gather of the updated weights runs bucket by bucket (the gradient
  /// buckets, in forward order) beside the next step's forward passes, each unit's first
  /// forward waiting for its bucket (Megatron-Core's --overlap-param-gather, NeMo's
  /// overlap_param_sync), instead of after the optimizer step. The replay, one step in
  /// steady state, starts with those gathers and ends with the optimizer step.
  bool overlap_param_gather = false;
  /// overlap_param_gather under the interleaved schedule: the gathers dispatched a model
  /// chunk at a time, every bucket of chunk c + 1 when the forwards reach chunk c, at the
  /// same time on every stage (the forward of virtual micro-batch c x group - stage), and
  /// those of chunks 0 and 1 at the step's start, instead of one bucket ahead of the
  /// forwards by the forward pre-hook: NeMo's distributed fused Adam under the
  /// interleaved schedule (through the schedule's param_sync_func; Megatron-Core's
  /// --align-param-gather dispatches alike). As Apex's param sync, each dispatch first
  /// waits for the gathers before it: the stage's first forward for all of chunk 0's,
  /// the forward dispatching chunk c + 1 for all of chunk c's.
  bool align_param_gather = false;
  /// Pipeline sends run beside the sender's next pass (Megatron's
  /// --overlap-p2p-communication); false: the next pass waits for them, as Megatron's
  /// default batch_isend_irecv + wait and DeepSpeed's pipeline engine do.
  bool overlap_p2p = false;
  /// The backward's tensor-parallel communication of each half layer runs beside the
  /// weight-gradient GEMM of its column-parallel linear (QKV, the MLP's first linear), as
  /// Megatron's asynchronous tensor-parallel all-reduce does
  /// (LinearWithGradAccumulationAndAsyncCommunication): the input gradient's all-reduce,
  /// or with sequence parallelism its reduce-scatter (half the all-reduce's time; the
  /// all-gather of the output gradient before the half stays in line). false: the
  /// half's collective follows its whole backward.
  bool overlap_tp_backward = false;
  /// Transformer Engine's userbuffers overlap of the tensor-parallel collectives
  /// (strategies/tp_overlap.hpp): with sequence parallelism, each half layer's
  /// all-gather and reduce-scatter in pieces beside its linear layers' GEMMs, forward and
  /// backward, the communication kernels taking SMs from the GEMMs. Off by default.
  TpCommOverlap tp_comm_overlap;
  /// Expert parallelism only (ep > 1): Megatron-Core's combined 1F1B
  /// (--overlap-moe-expert-parallel-comm). In the 1F1B steady state each forward runs
  /// beside the backward that follows it, on one compute stream, so that either pass's
  /// all-to-alls overlap the other's compute; one warm-up forward more (pipeline_schedule)
  /// keeps each such pair independent, and each device holds one chunk forward's
  /// activations more. Priced, the all-to-alls of one communicator run one at a time.
  /// The 1F1B and interleaved schedules only; with ep 1 it changes nothing.
  bool overlap_ep_comm = false;
  /// Expert parallelism only (ep > 1): how tokens reach their experts' GPUs and come
  /// back. kAllToAll: Megatron-Core's alltoall dispatcher, one copy of a token per expert
  /// it goes to, each straight to that expert's GPU (an all-to-all over the ep group).
  /// kDeepEp: DeepEP's kernels (Megatron-Core's flex dispatcher): a token crosses the
  /// scale-out network once per server holding any of its experts, to the GPU with the
  /// sender's local index there, which forwards it once to each GPU of that server
  /// holding any of them over the scale-up network, the two hops overlapping (a
  /// hierarchical all-to-all; the combine the same way back). Group-limited routing
  /// (expert_groups) narrows the servers a token reaches. An ep group inside one server,
  /// or spread unevenly over servers: one copy per GPU, straight (a direct all-to-all).
  /// With ep 1 it changes nothing.
  TokenDispatcher dispatcher = TokenDispatcher::kAllToAll;
  /// DeepEP only (dispatcher kDeepEp), with FP8 GEMMs (TransformerConfig::fp8_gemms):
  /// the all-to-alls that carry tokens towards their experts (the forward's dispatch and,
  /// in the backward, the combine's gradient) move FP8 values with one fp32 scale per 128
  /// of them, 1 + 4/128 bytes an element, as DeepSeek-V3 trained (its report, section
  /// 3.3: dispatch in FP8, both combines in BF16; DeepEP's kernels quantize in
  /// 128-element blocks); the two that carry them back keep the model's 16 bits.
  bool fp8_dispatch = false;
  /// Mixtures of experts: each expert takes at most this many times its balanced rows,
  /// ceil(tokens x experts_per_token / experts x capacity_factor) (Megatron-Core's
  /// --moe-expert-capacity-factor), the tokens beyond it dropped; 0: no capacity, every
  /// token kept.
  double capacity_factor = 0.0;
  /// With capacity_factor: every expert takes exactly its capacity, short ones padded
  /// (Megatron-Core's --moe-pad-expert-input-to-capacity), so compute and all-to-alls
  /// move capacity rows whatever the routing.
  bool pad_to_capacity = false;
  /// Mixtures of experts: true (the default), a rank's experts run as grouped GEMMs on
  /// its dispatched rows as they lie (Megatron-Core's --moe-grouped-gemm, set by most of
  /// its MoE recipes); false, one after another (Megatron-Core's SequentialMLP, its own
  /// default): each expert's kernels launched apart, its output copied into a zeroed buffer
  /// of all the rank's rows, and in the backward each expert's input gradient built as a
  /// zeroed buffer of all the rows with its own copied in, the experts' buffers then summed
  /// (PyTorch's slice backward and gradient accumulation).
  bool grouped_gemm = true;
  /// How each micro-batch's gradients join the step's (see GradAccumulation).
  GradAccumulation grad_accumulation = GradAccumulation::kFused;
  /// true: the data-parallel gradient reductions (all-reduce, ZeRO's reduce-scatters)
  /// carry fp32 gradients, 4 bytes per parameter, and the device holds 4-byte gradient
  /// buffers (Megatron's --accumulate-allreduce-grads-in-fp32, its default under bf16;
  /// DeepSpeed's bf16 optimizer); false: the model's 16-bit gradients, 2 bytes.
  bool grad_reduce_fp32 = false;
  /// true: the optimizer keeps each fp32 master weight as the low 16 bits that the bf16
  /// weight lacks, 2 bytes per parameter where a whole fp32 copy takes 4 (Apex's
  /// DistributedFusedAdam with store_param_remainders, which NeMo's distributed Adam
  /// turns on for bf16 weights; scenario field master_weights "remainders"). bf16 models
  /// only. The optimizer step's traffic is priced as with the fp32 copy.
  bool master_remainders = false;
  /// FP8 training (workload gemm_dtype "fp8"): the weights of the layers that multiply in
  /// FP8 are kept in FP8 alone, with their transposes, 2 bytes per weight where a bf16
  /// copy beside them takes 4, and the data-parallel all-gather of the updated weights
  /// moves them in 1 byte (NeMo's fp8_params, Megatron-Core's --fp8-param-gather); the
  /// optimizer keeps its fp32 master copy. With zero 0 to 2.
  bool fp8_params = false;
  /// FP8 GEMMs (Transformer Engine's delayed scaling): the ranks among which each pass of
  /// a model chunk reduces the device's FP8 amaxes (stage_costs.hpp,
  /// amax_reduction_bytes): false, every rank of the stage (tp x dp x cp, Megatron-Core's
  /// default amax reduction group); true, its tensor- and context-parallel ranks alone
  /// (Megatron-Core's tp_only_amax_red; scenario field tp_only_amax_red).
  bool tp_only_amax = false;

  [[nodiscard]] int devices() const { return dp * cp * tp * pp; }
  /// Whether the schedule pairs forwards with backwards (overlap_ep_comm in effect).
  [[nodiscard]] bool combined_1f1b() const { return overlap_ep_comm && ep > 1; }
  [[nodiscard]] std::int64_t micro_batches() const { return global_batch / (dp * micro_batch); }
  /// The interleaved schedule's micro-batch group (microbatch_group, or pp when 0).
  [[nodiscard]] int group_size() const { return microbatch_group > 0 ? microbatch_group : pp; }
  /// Whether align_grad_reduce is in effect: set, with overlapped buckets (zero 0 and 1)
  /// and a 1f1b or interleaved pipeline.
  [[nodiscard]] bool grad_reduce_aligned() const {
    return align_grad_reduce && overlap_grad_reduce && pp > 1 &&
           (dp_mode == DataParallelMode::kAllReduce || dp_mode == DataParallelMode::kZero1) &&
           (schedule == PipelineSchedule::k1F1B || schedule == PipelineSchedule::kInterleaved1F1B);
  }
};

/// The smallest interleaved micro-batch group from pp up that leaves a last group of
/// none or at least pp of `micro_batches` (at least pp of them): pp when it divides them.
std::int64_t fitting_microbatch_group(int pp, std::int64_t micro_batches);

/// Why the plan cannot run this model on `devices` accelerators (empty when it can):
/// tp not dividing heads (or kv_heads, or the FFN), pp x v more than the layers (or a
/// partition that does not add up), a batch not divisible by dp x micro-batch, an
/// interleaved schedule with fewer micro-batches than pp or micro-batch groups that
/// Megatron-Core refuses, more devices than the cluster has, ...
std::string plan_problem(const ParallelPlan& plan, const TransformerConfig& model, std::size_t devices);

/// The rows each expert of a mixture of experts takes under the plan, over the balanced
/// count (TransformerConfig::expert_load): with pad_to_capacity the capacity factor;
/// else the busiest expert-parallel rank's load, the model's moe_imbalance with ep > 1
/// (at most what the rank's experts can take: each token's copies for them,
/// ep x min(experts_per_token, experts / ep) / experts_per_token) and 1 with ep 1 (a
/// rank holding every expert takes its tokens' copies whatever the routing), capped by
/// the capacity factor where there is one. 1 for a dense model.
double routed_load(const TransformerConfig& model, const ParallelPlan& plan);
/// The model with its expert rows as the plan routes them (expert_load = routed_load).
TransformerConfig routed_model(const TransformerConfig& model, const ParallelPlan& plan);

/// The rank (position among the cluster's accelerators) of mesh coordinate (dp d, pp i,
/// tp k) in the plan's axis order, innermost first. In a context_folded plan d counts
/// dp x cp_folded ranks: cp rank d mod cp_folded of replica d / cp_folded.
std::uint32_t mesh_rank(const ParallelPlan& plan, int d, int i, int k);

/// A context-parallel plan (cp > 1) as the step's lowering, its estimate and its memory
/// take it: each cp rank a data-parallel replica of its own (dp x cp of them, cp_folded
/// = cp, global_batch x cp so that each still runs global_batch / (dp x micro_batch)
/// micro-batches; a ZeRO-3 shard x cp), on the model's context_share. Its gradient
/// reductions and optimizer shards then span dp x cp ranks, as Megatron's. A plan
/// without context parallelism comes back as it is.
ParallelPlan context_folded(const ParallelPlan& plan);
/// The model as one context-parallel rank of the plan computes it: seq / cp tokens per
/// sample, its attention's keys spanning cp times them (TransformerConfig::
/// context_parallel); the learned position table keeps its rows. The model itself
/// without context parallelism.
TransformerConfig context_share(const TransformerConfig& model, const ParallelPlan& plan);

/// The data-parallel ranks one copy of the model states is sharded over: the plan's
/// shard under ZeRO-3 when set, else dp (ZeRO-1/2/3 shard over every replica).
inline int shard_size(const ParallelPlan& p) { return p.shard > 0 ? p.shard : p.dp; }

/// How many of a model chunk's `chunk_layers` layers recompute their forward in backward
/// (the first ones): all under full recomputation, or the plan's recompute_layers if
/// fewer; none otherwise (selective recomputation is per operator, not per layer).
inline int recomputed_layers(const ParallelPlan& p, int chunk_layers) {
  if (p.recompute != Recompute::kFull) return 0;
  return p.recompute_layers > 0 && p.recompute_layers < chunk_layers ? p.recompute_layers : chunk_layers;
}

/// The modules selective recomputation recomputes (RecomputeModule bits): the plan's
/// recompute_modules under selective recomputation, none otherwise.
inline unsigned selective_modules(const ParallelPlan& p) {
  return p.recompute == Recompute::kSelective ? p.recompute_modules : 0u;
}
/// The module names of a set of RecomputeModule bits, comma-separated ("core_attn, moe_act").
std::string recompute_module_names(unsigned modules);

/// The plan's mesh in words: "dp D x tp T x pp P", with " x cp C" after dp where cp > 1
/// (the run table and describe_plan go on from it, each naming ep its own way).
std::string mesh_text(const ParallelPlan& p);

/// The layers of each pipeline stage: the sum of its model chunks' (chunk_layer_ranges).
std::vector<int> stage_layer_counts(const ParallelPlan& plan, const TransformerConfig& model);

/// A model chunk's layers: first .. first + count - 1.
struct LayerRange {
  std::int64_t first = 0;
  int count = 0;
};
/// Every model chunk's layers in model order: pp x virtual_stages chunks with
/// interleaving (chunk s on stage s mod pp), else one per stage; the plan's stage_layers,
/// or balanced (the first layers % chunks chunks get one more).
std::vector<LayerRange> chunk_layer_ranges(const ParallelPlan& plan, const TransformerConfig& model);

/// How many layers of the whole model recompute their forward in backward (the first
/// recomputed_layers of every model chunk).
int plan_recomputed_layers(const ParallelPlan& plan, const TransformerConfig& model);

/// The layers of some model chunks by kind: `primary`, of the model's own form (every
/// layer of a dense model; a mixture of experts' expert layers), and `dense`, a mixture
/// of experts' dense layers (TransformerConfig::dense_layers); the `_recomputed` counts
/// are those among each chunk's first recomputed_layers.
struct LayerKinds {
  int primary = 0, dense = 0, primary_recomputed = 0, dense_recomputed = 0;
};
LayerKinds layer_kinds(const ParallelPlan& plan, const TransformerConfig& model, const std::vector<LayerRange>& chunks);

}  // namespace ddlsim
