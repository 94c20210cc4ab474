// What one device of a pipeline stage computes per micro-batch, priced by the compute
// model: the operators of one transformer layer (and the embedding, output layer and
// loss on the first and last stages) sharded by tensor parallelism, in two halves that
// end where Megatron's tensor-parallel all-reduces fall (after the attention output
// projection and after the MLP's second linear layer).
//
// Sharding with tp = t (Megatron): the QKV, first MLP linear and output-layer weights are
// split by columns (n / t), the attention output projection and second MLP linear by rows
// (k / t), attention by heads (batch / t); the operators between them work on 1/t of the
// data. Norms, residual adds and residual dropouts are replicated, or with sequence
// parallelism split by the sequence (1/t). Costs and GEMM shapes are scaled accordingly.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sim/compute_model.hpp"
#include "strategies/plan.hpp"

namespace ddlsim {

class NetworkFabric;
struct CollectiveGroup;
struct CollectiveSpec;

struct HalfLayer {
  Seconds forward{0.0};
  Seconds backward{0.0};
  Seconds recompute{0.0};  // extra work before the backward under the plan's recomputation
  // The part of `backward` that ends it and can run beside the half's tensor-parallel
  // collective: the weight-gradient GEMM of its column-parallel linear (QKV; the MLP's
  // first linear or gate/up projection), half that linear's backward (its two GEMMs
  // have equal FLOPs).
  Seconds weight_gradient{0.0};
  // Every weight-gradient GEMM of the half (half of each linear layer's backward): what
  // the zero-bubble schedule's W pass runs apart from the rest of `backward`.
  Seconds weight_gradients{0.0};
  // Transformer Engine's userbuffers overlap (tp_overlap.hpp) needs the GEMMs beside
  // the collectives, as kernels (without the host's pace): the column-parallel linear's
  // forward (QKV; the MLP's first linear or gate/up projection), the row-parallel
  // linear's forward (output projection; the MLP's second linear) and its input
  // gradient (half its backward). The column-parallel linear's input gradient and
  // weight gradient are weight_gradient each.
  Seconds column_gemm{0.0}, row_gemm{0.0}, row_dgrad{0.0};
  // The same GEMMs as the plan's tp_comm_overlap runs them, in pieces of the rows
  // (tokens), each a kernel of its own: tp pieces beside a ring exchange, num_splits
  // beside a pipelined reduce-scatter (equal to the whole GEMM's time otherwise).
  Seconds column_pieces{0.0}, row_pieces{0.0}, row_dgrad_pieces{0.0};
};

struct StageCosts {
  HalfLayer attention;  // norm, QKV, attention, output projection, dropout, residual
  HalfLayer mlp;        // norm, MLP, dropout, residual
  Seconds first_forward{0.0}, first_backward{0.0};  // the embedding, on the first stage
  Seconds last_forward{0.0}, last_backward{0.0};    // final norm, output layer, loss, on the last stage
  Seconds last_weight_gradient{0.0};  // the output layer's weight gradient (part of last_backward)
  // A mixture-of-experts MLP half in three parts, for expert parallelism's all-to-alls
  // between them: before the experts (norm, router, dispatch), the experts (their grouped
  // GEMMs and activation), and after them (combine, shared expert, dropout, residual:
  // `mlp` less the other two). Zero for a dense model.
  HalfLayer moe_pre, experts;
  double a2a_bytes = 0.0;      // one tp rank's dispatched tokens: an expert-parallel all-to-all's buffer
  // Megatron-Core's alltoall dispatcher with tp > 1, sequence parallelism and ep > 1:
  // each tp rank sends its
  // 1/tp of the tokens (its sequence-parallel share) and the tp ranks all-gather what
  // arrives for their expert shards, reduce-scattering the experts' outputs before the
  // way back; the MLP half's tensor-parallel collectives are those two, on the whole
  // dispatched buffer, in place of the dense MLP's on its activations. moe_tp_share: that
  // buffer over tp_bytes (k x the routed load under balanced routing), the all-gather
  // and reduce-scatter together costing moe_tp_share of the group's all-reduce. 0 where
  // the MLP half keeps the dense one's collective (tp 1, ep 1, no sequence parallelism,
  // deepep).
  double moe_tp_share = 0.0;
  // The same tokens as the all-to-alls towards the experts carry them (the forward's
  // dispatch, the backward's combine gradient): a2a_bytes, or under fp8_dispatch 1 + 4/128
  // bytes an element. The two back (combine, dispatch gradient) carry a2a_bytes.
  double a2a_dispatch_bytes = 0.0;
  /// The all-to-all `which` of a layer's pass: 0 towards the experts, 1 back.
  [[nodiscard]] double a2a_bytes_of(int which) const { return which == 0 ? a2a_dispatch_bytes : a2a_bytes; }
  double expert_params = 0.0;  // of layer_params: the routed experts' (1/ep of them under expert parallelism)
  double tp_bytes = 0.0;     // one tensor-parallel all-reduce: micro_batch x seq x hidden activations
  double p2p_bytes = 0.0;    // activations sent between stages per micro-batch and tp rank
  double layer_params = 0.0;  // parameters of one layer on one device
  double first_params = 0.0;  // the embedding's (and position table's) on one device of the first stage
  double last_params = 0.0;   // the final norm's and output layer's (a copy of a tied embedding when split) on the last
  // A mixture of experts' dense layers (TransformerConfig::dense_layers): their MLP half
  // and a layer's parameters on one device (the attention half is the other layers').
  // Zero unless the model has both kinds.
  HalfLayer dense_mlp;
  double dense_layer_params = 0.0;
  // Multi-token prediction (TransformerConfig::mtp_layers), one depth on the last stage:
  // its embedding lookup, two norms, join and projection before its layer (after the
  // layer, its norm, output layer and loss cost as the model's last_*), and their
  // parameters on one device (mtp_input_parameters).
  Seconds mtp_forward{0.0}, mtp_backward{0.0}, mtp_weight_gradient{0.0};
  double mtp_params = 0.0;
  // Context parallelism (a model's context_share): the attention core's time per
  // micro-batch in each pass (part of attention's), the keys' and values' bytes one rank
  // sends on at each ring step, and what the ring's steps add to the attention's forward
  // and backward beyond the core they overlap (add_context_ring: included in
  // attention's forward, backward and, where the core is recomputed, recompute).
  Seconds core_forward{0.0}, core_backward{0.0};
  // FP8 GEMMs (TransformerConfig::fp8_gemms): Transformer Engine's casts and transposes
  // around one layer's linear layers per micro-batch (part of the halves' times; see
  // stage_costs.cpp, fp8_casts).
  Seconds fp8_cast_forward{0.0}, fp8_cast_backward{0.0};
  // Of them, the FP8 linear operators of one layer (each a TE module's GEMM; a grouped
  // GEMM of routed experts counted once, and a mixture of experts' dense layers counted
  // as its expert layers): what sizes the amaxes a pass reduces (amax_reduction_bytes).
  double fp8_linears = 0.0;
  double cp_kv_bytes = 0.0;
  Seconds ring_forward{0.0}, ring_backward{0.0};
  /// One pass's cp ring, as the all-gather it is priced as: cp x a rank's keys and values
  /// forward, twice that backward (their gradients go round too).
  [[nodiscard]] double cp_ring_bytes(std::int64_t cp, bool backward) const {
    return (backward ? 2.0 : 1.0) * static_cast<double>(cp) * cp_kv_bytes;
  }

  /// The MLP half of a layer that is a mixture of experts (`moe`), or of a dense one.
  [[nodiscard]] const HalfLayer& mlp_of(bool moe) const { return moe ? mlp : dense_mlp; }
  /// A layer's parameters on one device.
  [[nodiscard]] double params_of(bool moe) const { return moe ? layer_params : dense_layer_params; }
};

/// Context parallelism (plan: context_folded, model: its context_share, with
/// context_parallel > 1): the ring that passes keys and values round each replica's cp
/// ranks, priced once per stage as the analytical model times an all-gather of cp x
/// cp_kv_bytes over the cp ranks of replica 0's tp rank 0 (cp - 1 ring steps, each rank
/// sending one chunk on; every other replica's and tp rank's rings at once, sharing the
/// links as CollectiveGroup::siblings do; other stages' rings not among them: their
/// attention runs at other times), twice the bytes in backward
/// (the keys' and values' gradients go round with them). Each step overlaps the
/// attention kernel of the chunk it received before, so a pass's attention waits
/// max(0, ring - (cp - 1) / cp x core) beyond its core (the slowest stage's): added to
/// attention.forward, backward and, when the attention core is recomputed, recompute.
/// Nothing without context parallelism.
void add_context_ring(StageCosts& c, const TransformerConfig& model, const ParallelPlan& plan, NetworkFabric& fabric);
/// A context_folded plan's cp ranks of one replica (`replica`, of dp / cp_folded), stage
/// and tp rank, in ring order: the group its key-value ring runs over.
CollectiveGroup context_ring(NetworkFabric& fabric, const ParallelPlan& plan, int replica, int stage, int tp_rank);

/// FP8 GEMMs (TransformerConfig::fp8_gemms) under Transformer Engine's delayed scaling
/// (its default recipe, reduce_amax on; NeMo's and Megatron-Core's): the amax reduction
/// that ends each pass of a model chunk, when the chunk's fp8_autocast exits (forward)
/// and when its first FP8 module's backward, the last to run, returns (TE 1.6 and
/// later): one all-reduce (MAX), with async_op=False, so on the compute stream, in line,
/// of the current amaxes of every FP8 tensor the device's modules registered (each
/// module joins TE's global amax buffer once; a reduction takes the whole buffer: with
/// interleaving every chunk's, also after a chunk without layers), 3 per FP8 linear
/// layer forward (input, weight, output) and 2 backward (output and input gradients), in
/// fp32, among every rank of the stage (Megatron-Core's amax reduction group: tp x dp x
/// cp; with ParallelPlan::tp_only_amax its tp x cp ranks); then TE's fused
/// amax-and-scale update, one kernel (and the amaxes' concatenation before it, another).
/// Latency-bound (a few hundred bytes): amax_all_reduce_time, the analytical model's
/// time of the all-reduce on either network model, plus amax_update_time. A
/// forward recomputed in the backward reduces nothing more (not modelled: TE's
/// checkpointed recompute may re-enter fp8_autocast).
/// Its bytes, for a device holding `layers` layers (all its chunks'): 0 without FP8 GEMMs.
[[nodiscard]] inline double amax_reduction_bytes(const StageCosts& c, double layers, bool forward) {
  return 4.0 * (forward ? 3.0 : 2.0) * c.fp8_linears * layers;
}
/// The all-reduce of `bytes` among stage `stage`'s amax reduction group (plan: a
/// context_folded one when it has context parallelism, whose dp counts dp x cp ranks);
/// 0 for one rank or no bytes.
[[nodiscard]] double amax_all_reduce_time(const ParallelPlan& plan, NetworkFabric& fabric, int stage, double bytes);
/// The two kernels that follow it (their launches; as the slowest device's, like every kernel).
[[nodiscard]] inline double amax_update_time(const ComputeModel& compute) {
  return 2.0 * compute.efficiency().launch.value() * compute.straggler_factor();
}

/// Transformer Engine's userbuffers overlap (ParallelPlan::tp_comm_overlap) of one half
/// layer: each overlapped GEMM with its collective (`share` of the half's all-reduce
/// time and traffic; `gemm` as it runs, on fewer SMs where the communication takes
/// some; `tail` past the longer of the two, tp_overlap.hpp's closed forms). Forward: the
/// input's all-gather beside the column-parallel GEMM (QKV / fc1), the rest of the half,
/// the row-parallel GEMM (proj / fc2) beside the reduce-scatter of its output. Backward:
/// the output gradient's all-gather beside the row-parallel input gradient, the rest,
/// the layer input's all-gather (for the weight gradient) beside the column-parallel
/// input gradient, and that input gradient's reduce-scatter beside the column-parallel
/// weight gradient. Under FP8 GEMMs the all-gathers of GEMM inputs move FP8 (half the
/// bytes), as TE's buffers do.
struct UbPiece {
  double share = 0.0, gemm = 0.0, comm = 0.0, tail = 0.0;
  [[nodiscard]] double time() const { return std::max(gemm, comm) + tail; }
};
struct UbHalf {
  UbPiece gather, scatter;  // forward
  double forward_rest = 0.0;
  UbPiece dgrad_gather, input_gather, wgrad_scatter;  // backward
  double backward_rest = 0.0;
  [[nodiscard]] double forward() const { return gather.time() + forward_rest + scatter.time(); }
  [[nodiscard]] double backward() const {
    return dgrad_gather.time() + backward_rest + input_gather.time() + wgrad_scatter.time();
  }
};
/// `mlp`: the MLP half (fc sites) or attention (qkv / proj sites); `ar`: the tp group's
/// all-reduce of the half's activations; `device`: its SMs and the slowdown of a GEMM
/// beside a collective.
UbHalf ub_half(const HalfLayer& h, bool mlp, const ParallelPlan& plan, bool fp8_gemms, double ar, const ComputeModel& device);

/// (The mlp, moe_pre, experts, a2a_bytes, expert_params and layer_params fields describe
/// a mixture-of-experts layer when the model has experts; dense_mlp and
/// dense_layer_params its dense layers, if any.)
StageCosts stage_costs(const TransformerConfig& model, const ParallelPlan& plan, const ComputeModel& compute);

/// Matrix-multiply FLOPs per token that the plan's selective recomputation runs again in
/// the whole model's linear layers (mla_up_proj's up projections, mlp's dense MLPs,
/// shared_experts' shared experts; the attention core's matmuls not included): their
/// forward FLOPs, summed over the layers that have them. 0 without selective recomputation.
double recomputed_linear_flops_per_token(const TransformerConfig& model, const ParallelPlan& plan);

/// One expert-parallel all-to-all of `bytes` per rank (StageCosts::a2a_bytes: every copy
/// of every token) over `group`, under the plan's dispatcher. alltoall: the fabric's
/// choice for an all-to-all. deepep over ranks in two or more scale-up domains, as many
/// in each: the hierarchical all-to-all, its phases scaled to a token's copies once per
/// server (across = experts_spread(model, servers) / experts_per_token) and once per GPU
/// (within = experts_spread(model, ep) / experts_per_token); other groups: a direct
/// all-to-all of bytes x experts_spread(model, ep) / experts_per_token (once per GPU).
CollectiveSpec dispatch_spec(NetworkFabric& fabric, const CollectiveGroup& group, const TransformerConfig& model,
                             const ParallelPlan& plan, double bytes);

/// Bytes an element of an FP8 dispatch moves (ParallelPlan::fp8_dispatch): the value, and
/// a 4-byte scale per 128 of them.
inline constexpr double kFp8DispatchBytes = 1.0 + 4.0 / 128.0;

/// Bytes of a 16-bit gradient or weight, per parameter.
inline constexpr double kGradientBytes = 2.0;
/// Bytes of an fp32 gradient (or master weight, or moment), per parameter.
inline constexpr double kFp32Bytes = 4.0;
/// Bytes per parameter of a model's weights, and of the gradients its backward produces:
/// 4 for an fp32 model, else 2 (bf16 and fp16; an fp8 model's GEMMs take fp8 casts of
/// bf16 weights, as Transformer Engine keeps them).
inline double weight_bytes(DataType weights) { return weights == DataType::kFp32 ? kFp32Bytes : kGradientBytes; }
/// Bytes per parameter in the plan's data-parallel gradient reductions.
inline double reduced_gradient_bytes(const ParallelPlan& p, DataType weights) {
  return p.grad_reduce_fp32 ? kFp32Bytes : weight_bytes(weights);
}
/// Bytes of ZeRO-1/2's all-gather of `params` updated weights, `fp8` of which the plan
/// keeps in FP8 alone (fp8_params: 1 byte each).
inline double gathered_weight_bytes(double params, double fp8, const ParallelPlan& p, DataType weights) {
  const double w = weight_bytes(weights);
  return params * w - (p.fp8_params ? fp8 * (w - 1.0) : 0.0);
}

/// Bytes per parameter of the gradient the optimizer reads: 4 where the plan keeps fp32
/// gradients (grad_reduce_fp32, or kFp32 accumulation, or an fp32 model), else 2.
inline double optimizer_gradient_bytes(const ParallelPlan& p, DataType weights) {
  return p.grad_reduce_fp32 || p.grad_accumulation == GradAccumulation::kFp32 ? kFp32Bytes : weight_bytes(weights);
}

/// Bytes per parameter that one Adam step moves through memory, in the passes of
/// Megatron-LM's mixed-precision optimizer (Float16OptimizerWithFloat16Params.step;
/// DeepSpeed's fp16 and bf16 optimizers make these passes too, its fp16 one a flattening
/// copy more, not priced): the 16-bit gradients copied to fp32 main gradients (read 2,
/// write 4; none where they are fp32 already, gradient bytes 4); with fp16 weights, the
/// loss scale's unscale and inf/nan check (read 4, write 4); the gradient norm for
/// clipping (read 4); Adam on the fp32 main gradient (read it, the master weight and both
/// moments, write the last three: 28); the master weights copied to the 16-bit weights
/// (read 4, write 2). fp16 with 16-bit gradients: 52; bf16: 44, or 38 with fp32
/// gradients. fp32 weights need no master copy: the norm and Adam, 32.
double optimizer_bytes(double gradient_bytes, DataType weights);

/// The optimizer step over `params` parameters: memory-bound, optimizer_bytes per
/// parameter. About 10 FLOPs per 28 bytes is far below every device's ridge point, so
/// only the bytes are priced (and accelerators without an fp32 peak, TPUs, need none).
Seconds optimizer_step_time(double params, const ComputeModel& compute, double gradient_bytes, DataType weights);

/// A Megatron-style plan's optimizer step over `params` parameters of a model in
/// `weights`: the gradients it keeps (optimizer_gradient_bytes), as the replay and the
/// estimate both price it.
inline Seconds plan_optimizer_step_time(double params, const ParallelPlan& p, DataType weights,
                                        const ComputeModel& compute) {
  return optimizer_step_time(params, compute, optimizer_gradient_bytes(p, weights), weights);
}

/// Bytes per parameter moved by one micro-batch's gradient accumulation: 0 fused; for
/// kAdd 6 (read the accumulated and the new 16-bit gradient, write the sum), or 10 with
/// grad_reduce_fp32 (Megatron's `main_grad.add_(grad)` into an fp32 buffer: read 2 + 4,
/// write 4); 18 for kFp32 (read the 16-bit gradient, write it as fp32, read that and the
/// fp32 buffer, write the buffer: DeepSpeed's `hp_grad.add_(lp_grad.to(fp32))`, two
/// kernels). An fp32 model's gradients are fp32 already: 12 for kAdd and kFp32 (read
/// both, write the sum).
double grad_accumulation_bytes(const ParallelPlan& p, DataType weights);

/// One micro-batch's gradient accumulation over `params` parameters of one device (a
/// memory-bound pass; zero when fused).
Seconds grad_accumulation_time(double params, const ParallelPlan& p, DataType weights, const ComputeModel& compute);

/// Whether micro-batch `micro_batch` (0-based) pays an accumulation pass: kAdd from the
/// second on (autograd keeps the first one's gradient as it is) unless the gradients
/// accumulate into fp32 buffers (grad_reduce_fp32: Megatron adds into its zeroed
/// main_grad every time), kFp32 every one.
inline bool accumulates(const ParallelPlan& p, std::int64_t micro_batch) {
  if (p.grad_accumulation == GradAccumulation::kFp32) return true;
  return p.grad_accumulation == GradAccumulation::kAdd && (micro_batch > 0 || p.grad_reduce_fp32);
}

/// The parameters a device's gradient accumulation covers out of `params` of its chunk:
/// all of them, or its shard where the gradients are sharded (ZeRO-2 and 3).
inline double accumulated_params(const ParallelPlan& p, double params) {
  const bool sharded = p.dp > 1 && (p.dp_mode == DataParallelMode::kZero2 || p.dp_mode == DataParallelMode::kZero3);
  return sharded ? params / shard_size(p) : params;
}

}  // namespace ddlsim
