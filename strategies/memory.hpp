// Memory per device under a parallel plan: model states and activations.
//
// Model states (mixed-precision Adam, the ZeRO paper's accounting, Rajbhandari et al.
// 2020): per parameter 2 bytes of 16-bit weights, 2 of 16-bit gradients and K = 12 of
// optimizer state (fp32 master weights, Adam's first and second moments); an fp32 model
// 4 + 4 + 8 (no master copy). ZeRO-3 adds its working buffers, which the paper leaves
// out: the largest two consecutive units' weights gathered whole (one computing, the
// next prefetched) and the largest unit's whole gradient before its reduce-scatter. ZeRO-1 shards
// the optimizer state over the dp ranks, ZeRO-2 also the gradients, ZeRO-3 (FSDP) also
// the weights. A device holds its pipeline stage's parameters divided by tp (layer norms
// and biases of row-parallel layers replicated; the key and value projections divided by
// at most their g groups: with tp > g each rank holds one whole group); the first stage the input embedding, the
// last the final norm and the output layer (with a tied embedding and pp > 1, a copy of
// the embedding for it, as Megatron does).
//
// Activations (Korthikanti et al. 2022, generalised): per layer and micro-batch, in units
// of s b h bytes with B bytes per element, t = tp, g/a the key-value share of the heads:
//   attention: norm input B, QKV input B, [plain] Q and K B(1 + g/a), softmax output
//     B a s/h, dropout mask a s/h, probabilities B a s/h and V B g/a, [flash] Q, K, V and
//     output B(2 + 2g/a) and a fp32 log-sum-exp per row; output projection input B,
//     dropout mask 1;
//   MLP: norm input B, first linear input B, GeLU input and second linear input
//     B f/h each (SwiGLU: its two inputs 2B f/h and the down projection's input B f/h),
//     dropout mask 1; a mixture of experts (r = experts x rows per expert / s b, about
//     experts_per_token times the plan's expert load, routed_load): the router's probabilities B E/h (replicated), the dispatched
//     rows and the experts' outputs B r each (whole on every tp rank, sequence
//     parallelism or not), the experts' inner terms r times the MLP's (divided by t).
// Without sequence parallelism the norm inputs, the QKV and first-MLP-linear inputs and
// the residual dropout masks are replicated on every tp rank and the rest is divided by
// t; with it everything is divided by t. For GPT this gives s b h (34 + 5as/h) at t = 1,
// s b h (10 + 24/t + 5as/(ht)) with tp, s b h (34/t + 5as/(ht)) with sequence parallelism.
// Under FP8 training (TransformerConfig::fp8_gemms) a linear layer's input is kept as
// a 1-byte copy (F), beside any copy another operator keeps in B: the norms' outputs
// F (a mixture of experts' MLP norm output B, kept by the router, + F for a shared
// expert), the output projection's input B + F under flash attention, the dispatched
// rows and the down projections' inputs F.
// Selective recomputation drops what its modules remake (plan.hpp, RecomputeModule):
// core_attn the a s/h terms (the scores), layernorm the two norm outputs (replicated),
// mla_up_proj Q, K and V, moe_act the experts' activation output (F f/h x r), mlp a
// dense layer's inner terms (its input then kept in B), shared_experts the shared
// expert's (and its input's fp8 copy); full
// recomputation keeps only each layer's input (B, divided by t with sequence
// parallelism). A pipeline stage keeps the activations of the micro-batches in flight:
// GPipe all m; 1F1B min(m, pp - i) on stage i; interleaved 1F1B min(m v, w_i + 1) chunk
// forwards of 1/v of the stage's layers each, w_i = 2 (pp - i - 1) + (v - 1) pp its
// warm-up (m v when m = pp: Megatron-LM then runs every forward first), which on stage 0
// is Korthikanti et al.'s pp (1 + (pp - 1)/(pp v)). The last stage also keeps the loss's
// fp32 softmax of the logits (seq x micro_batch x vocab / t elements, 4 bytes each): of
// all m micro-batches under GPipe (and interleaving with m = pp), else of one. The
// replay tracks the same quantities over time (transformer_step's memory pools); its
// peaks equal these figures exactly.
#pragma once

#include <vector>

#include "strategies/plan.hpp"

namespace ddlsim {

struct DeviceMemory {
  double parameters = 0;  // count held by the device (before ZeRO sharding)
  double weights = 0;     // bytes
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  // Of `parameters`, the weights of the layers that multiply in FP8 under FP8 training
  // (not their biases, norms or the router), apart from the routed experts' under expert parallelism
  // (fp8_expert_weights): what ParallelPlan::fp8_params keeps in FP8 alone.
  double fp8_weights = 0, fp8_expert_weights = 0;
  [[nodiscard]] double total() const { return weights + gradients + optimizer + activations; }
};

/// Model-state bytes of `params` parameters replicated over dp ranks in this mode:
/// {weights, gradients, optimizer}: 2 + 2 + 12 bytes per parameter for a 16-bit model
/// (bf16, fp16, fp8's bf16 weights), 4 + 4 + 8 for an fp32 one (no master copy).
struct ModelStates {
  double weights, gradients, optimizer;
  [[nodiscard]] double total() const { return weights + gradients + optimizer; }
};
/// `remainders`: the master copy kept as 16-bit remainders (ParallelPlan::master_remainders).
ModelStates model_states(double params, int dp, DataParallelMode mode, DataType weights = DataType::kBf16, bool remainders = false);

/// Parameters on one device of the first stage's embedding (and position table), the
/// last stage's final norm, and its output layer (a copy of a tied embedding when the
/// pipeline splits them; none when it does not).
double embedding_parameters(const TransformerConfig& m, const ParallelPlan& plan);
double final_norm_parameters(const TransformerConfig& m);
double output_layer_parameters(const TransformerConfig& m, const ParallelPlan& plan);
/// Multi-token prediction: one depth's input parameters on one device of the last stage
/// (the projection from twice the hidden size, split by columns over tp, and the
/// embedding's and hidden state's norms; its layer's and final norm's apart).
double mtp_input_parameters(const TransformerConfig& m, const ParallelPlan& plan);
/// The embedding table's copy multi-token prediction keeps on the last stage (vocab x
/// hidden / tp, its gradient summed with the first stage's): where a pipeline splits the
/// model and the output layer is not a tied copy already; else 0.
double mtp_embedding_copy(const TransformerConfig& m, const ParallelPlan& plan);
/// Activation bytes multi-token prediction keeps for one micro-batch on the last stage,
/// all depths: each layer's (as the model's layers of its kind; recomputed under full
/// recomputation), the embedding norm's input and the projection's input (twice the
/// hidden size), split by the sequence with sequence parallelism; not its losses.
double mtp_activation_bytes(const ParallelPlan& plan, const TransformerConfig& m);

/// Activation bytes one layer keeps for one micro-batch of `micro_batch` sequences;
/// `modules` (RecomputeModule bits) are those selective recomputation remakes.
double layer_activation_bytes(const TransformerConfig& m, std::int64_t micro_batch, int tp, bool sequence_parallel,
                              Recompute recompute, unsigned modules = kDefaultRecomputeModules);

/// Activation bytes the layers of model chunks `chunks` keep for one micro-batch under
/// the plan's recomputation: with full recomputation of only recompute_layers per chunk,
/// the others keep everything; a mixture of experts' dense layers keep a dense layer's;
/// the loss is not included.
double layers_activation_bytes(const ParallelPlan& plan, const TransformerConfig& m, const std::vector<LayerRange>& chunks);

/// The model chunks pipeline stage `stage` holds (chunk_layer_ranges).
std::vector<LayerRange> stage_chunks(const ParallelPlan& plan, const TransformerConfig& m, int stage);

/// Bytes the loss keeps for one micro-batch of `micro_batch` sequences until its backward:
/// the softmax of the logits in fp32, as Megatron-LM's vocab-parallel cross-entropy
/// computes it, split over tp.
double loss_activation_bytes(const TransformerConfig& m, std::int64_t micro_batch, int tp);

/// Micro-batches whose activations stage `stage` holds at once, at its peak (under the
/// interleaved schedule in units of the stage's layers: chunk forwards / v, for chunks
/// of equal sizes and micro-batch groups dividing the micro-batches).
double in_flight_micro_batches(const ParallelPlan& plan, int stage);

/// Micro-batches whose loss (its softmax of the logits) the last stage holds at once.
double in_flight_losses(const ParallelPlan& plan);

/// Memory of a device of each pipeline stage (all tp and dp ranks of a stage alike).
std::vector<DeviceMemory> stage_memory(const ParallelPlan& plan, const TransformerConfig& m);

/// Memory the software stack holds on every device beside the model's tensors, from the
/// start of the step to its end: the runtime's context (CUDA's driver state and loaded
/// kernels) and the buffers of each collective communicator the device joins (NCCL
/// allocates them per communicator, linear in its channels). The catalog gives the
/// figures per accelerator (context_mib, communicator_mib).
struct RuntimeMemory {
  double context_bytes = 0;
  double communicator_bytes = 0;
  [[nodiscard]] double bytes(int communicators) const { return context_bytes + communicator_bytes * communicators; }
};

/// The communicators a device of the plan joins: one per parallel dimension of more
/// than one rank (tensor, pipeline, data), two for data parallelism with hybrid ZeRO-3
/// sharding (the shard group and the replicas), and with expert parallelism the
/// expert-parallel group and, when ep < dp, the experts' data-parallel group. Groups a framework creates beside these
/// (Megatron's embedding and model-parallel groups) are not counted.
int plan_communicators(const ParallelPlan& plan);

}  // namespace ddlsim
