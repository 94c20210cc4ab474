// Decoder-only transformers (GPT, Llama and their relatives) as operator graphs.
//
// One block per layer, pre-normalisation:
//   GPT (Megatron):  x + Dropout(Proj(Attn(QKV(LN(x)))));  then  x + Dropout(FC2(GeLU(FC1(LN(x)))))
//                    (ReLU squared in place of GeLU: Nemotron-4)
//   Llama:           x + O(Attn(QKV(RMS(x))));              then  x + Down(SwiGLU(GateUp(RMS(x))))
// or, with parallel_layers (PaLM, GPT-J, GPT-NeoX), both branches on one norm of the
// same input:        x + Attention(N(x)) + MLP(N(x))
// with learned position embeddings and a tied output embedding for GPT, rotary positions
// (not costed: an elementwise op on Q and K) and an untied output for Llama, grouped-query
// attention when kv_heads < heads. Attention is either plain -- scores = Q K^T, softmax,
// dropout, context = P V, as separate operators that keep their inputs -- or fused
// (flash-style: keeps Q, K, V, the output and a log-sum-exp, and recomputes the scores
// in backward). Layout changes (head splits, transposes) are views and cost nothing.
// A mixture-of-experts model (experts > 0, Mixtral, Qwen3-MoE) replaces every layer's
// MLP by a router (a linear layer to one logit per expert, and a softmax), the dispatch
// of each token to its experts_per_token experts, the experts' MLPs (each of the model's
// MLP form and ffn size) as grouped GEMMs, and the combine, which sums each token's
// expert outputs weighted by the router's probabilities. Routing is taken as balanced:
// every expert gets ceil(tokens x experts_per_token / experts) rows. A shared expert
// (Qwen2-MoE, GLM-4.5) is a dense MLP beside them on every token, optionally gated.
// Some layers of a mixture of experts may keep a dense MLP of their own FFN size
// (GLM-4.5's and DeepSeek-V3's first_k_dense_replace, Qwen-MoE's mlp_only_layers).
// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2; kv_lora_rank > 0) projects the
// norm's output down to a query latent (q_lora_rank wide, then normed) and a key-value
// latent (kv_lora_rank wide, normed) with a rotary key of qk_rope_dim shared by the
// heads, and up again from the latents: each head's query (qk_nope_dim + qk_rope_dim),
// key without rotary part (qk_nope_dim) and value (v_head_dim). Each head's key joins its
// own part and the shared rotary one (a copy); attention then runs as usual with heads of
// qk_nope_dim + qk_rope_dim for the scores and v_head_dim for the context, and the output
// projection maps heads x v_head_dim back to hidden. Without a query latent
// (q_lora_rank 0) the query is projected from the norm's output directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/operator_graph.hpp"

namespace ddlsim {

struct TransformerConfig {
  std::string name;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // = heads without grouped-query attention
  std::int64_t ffn = 0;       // hidden size of the MLP
  std::int64_t seq = 0;       // sequence length of a sample
  std::int64_t vocab = 0;
  enum class Family { kGpt, kLlama } family = Family::kGpt;
  bool tied_embedding = true;     // the output layer reuses the input embedding
  bool qkv_bias = true;           // the Q, K, V projection has a bias (GPT, Qwen2)
  bool proj_bias = true;          // the attention output projection has a bias (GPT)
  bool mlp_bias = true;           // the MLP's linear layers have biases (GPT)
  bool learned_positions = true;  // a positions x hidden table (GPT)
  // Rows of that table, the longest sequence the model takes (GPT-2's n_positions); 0:
  // seq. A shorter training sequence (--seq) leaves the table, and its parameters, whole.
  std::int64_t positions = 0;
  // Dropouts of GPT training (HuggingFace GPT-2's embd_pdrop, attn_pdrop, resid_pdrop):
  // after the embedding; on the attention probabilities (under flash attention inside
  // the kernel, which keeps no mask; its random-number cost is not modelled); after the
  // attention's output projection and after the MLP.
  bool embedding_dropout = true;
  bool attention_dropout = true;
  bool residual_dropout = true;
  bool embedding_norm = false;    // a layer norm of the embedding's output (BLOOM's word_embeddings_layernorm)
  bool flash_attention = false;
  // Attention and MLP side by side on one norm of the layer's input (PaLM's "parallel
  // layers"): one norm per layer, and under tensor parallelism one all-reduce per
  // layer and pass where the serial block has two.
  bool parallel_layers = false;
  // The GPT family's MLP activation is ReLU squared (Nemotron-4, Primer) instead of GeLU:
  // the same non-gated form, one elementwise kernel that keeps its input either way.
  bool squared_relu = false;
  DataType dtype = DataType::kBf16;
  // FP8 training as Transformer Engine runs it (workload gemm_dtype "fp8"): the layers'
  // linear layers (attention projections, MLPs, experts; not the router, the embedding
  // or the output layer) multiply in fp8 and keep their inputs' fp8 copies for backward,
  // everything else stays in dtype. OperatorGraph::linear has the details.
  bool fp8_gemms = false;
  // The size of one attention head; 0: hidden / heads. Models whose heads together are
  // narrower or wider than the residual stream set it (PaLM 540B: 48 heads of 256 on a
  // hidden size of 18432; Gemma, Mistral NeMo, Qwen3): Q and the attention output then
  // have heads x head_size columns, and the output projection maps them back to hidden.
  std::int64_t head_size = 0;
  // An RMS norm over each query and key head before attention (Qwen3): a head-size
  // scale each, shared by the heads.
  bool qk_norm = false;
  // Mixture of experts: every layer's MLP is `experts` experts of ffn each, of which
  // each token goes to experts_per_token; 0 experts: a dense MLP (experts_per_token 0).
  std::int64_t experts = 0;
  std::int64_t experts_per_token = 0;
  // Group-limited routing (DeepSeek's n_group and topk_group): the experts in
  // expert_groups equal groups in order, each token's experts all within
  // groups_per_token of them (0 and 0: any experts). It changes no FLOP; a dispatch that
  // sends a token once per server it goes to sends fewer copies (experts_spread).
  std::int64_t expert_groups = 0;
  std::int64_t groups_per_token = 0;
  // Routing imbalance (a scenario's workload moe_imbalance): the rows the busiest
  // expert-parallel rank's experts take over the balanced count, 1 balanced. It holds
  // under expert parallelism only: a rank that holds every expert takes each of its
  // tokens' copies whatever the routing. What a plan makes of it, with its capacity
  // factor, is expert_load (strategies/plan.hpp: routed_load).
  double moe_imbalance = 1.0;
  // The rows each expert takes over the balanced count, which expert_rows scales by: 1
  // in a model as read; a plan's routed_load in the copy its costs and memory are
  // priced with.
  double expert_load = 1.0;
  // Beside the experts, a shared expert every token goes through: an MLP of the model's
  // form with this FFN size (0: none), its output scaled by a sigmoid gate (a linear
  // layer from the hidden size to one logit, Qwen2-MoE's shared_expert_gate) when
  // shared_gate, and added to the experts' combined output.
  std::int64_t shared_ffn = 0;
  bool shared_gate = false;
  // Layers of a mixture of experts whose MLP is dense, a flag per layer from the first
  // (layers past the end: experts); each such MLP is of the model's form with dense_ffn
  // (0: ffn) and has no router, experts or shared expert.
  std::vector<bool> dense_layers;
  std::int64_t dense_ffn = 0;
  // Multi-head latent attention when kv_lora_rank > 0 (kv_heads = heads, head_size 0,
  // no qk_norm). qkv_bias puts biases on the two down projections, proj_bias on the
  // output projection (DeepSeek's attention_bias); the up projections have none.
  std::int64_t q_lora_rank = 0;  // 0: the query projected from the norm's output directly
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  // Multi-token prediction (DeepSeek-V3's MTP; Megatron-Core's --mtp-num-layers): after
  // the model, mtp_layers modules in a chain, depth k predicting the token k + 2 ahead:
  // the shared embedding of the tokens shifted by k + 1 and the previous depth's hidden
  // state (the model's before its final norm), each normed, joined and projected back to
  // hidden size, one transformer layer of the kind of the model's last, a norm, the
  // shared output layer and a loss of its own. All on the last pipeline stage.
  std::int64_t mtp_layers = 0;
  // Context parallelism's share (strategies/plan.hpp: context_share): seq is one of
  // context_parallel ranks' tokens of each sample, and the attention's queries meet the
  // keys of all of them, context_parallel x seq (flash attention only). 1 in a model
  // as read.
  std::int64_t context_parallel = 1;

  /// Whether the attention is multi-head latent attention.
  [[nodiscard]] bool mla() const { return kv_lora_rank > 0; }
  /// The size of a query and key head (the scores' inner size).
  [[nodiscard]] std::int64_t qk_head_dim() const { return mla() ? qk_nope_dim + qk_rope_dim : head_dim(); }
  /// heads x (qk_head_dim + head_dim) / 2: the w of the attention's 4 w s forward FLOPs
  /// per token (scores and context, s keys); attention_width() unless the query and
  /// value heads differ in size (multi-head latent attention).
  [[nodiscard]] double attention_flop_width() const {
    return static_cast<double>(heads) * static_cast<double>(qk_head_dim() + head_dim()) / 2.0;
  }

  /// Whether layer l's MLP is a mixture of experts.
  [[nodiscard]] bool moe_layer(std::int64_t l) const {
    return experts > 0 && !(l >= 0 && l < static_cast<std::int64_t>(dense_layers.size()) && dense_layers[static_cast<std::size_t>(l)]);
  }
  /// Whether layer l is a mixture of experts' dense layer (never in a dense model).
  [[nodiscard]] bool dense_layer(std::int64_t l) const { return experts > 0 && !moe_layer(l); }
  /// Whether the multi-token prediction layers are dense layers among experts (they
  /// take the model's last layer's kind, as Megatron-Core builds them).
  [[nodiscard]] bool mtp_dense() const { return dense_layer(layers - 1); }
  /// The FFN size of a dense layer's MLP: dense_ffn in a mixture of experts that sets
  /// it, else ffn.
  [[nodiscard]] std::int64_t dense_mlp_ffn() const { return experts > 0 && dense_ffn > 0 ? dense_ffn : ffn; }
  /// Of layers first .. first + count - 1, how many are mixtures of experts.
  [[nodiscard]] std::int64_t moe_layers_in(std::int64_t first, std::int64_t count) const {
    std::int64_t n = 0;
    for (std::int64_t l = first; l < first + count; ++l) n += moe_layer(l) ? 1 : 0;
    return n;
  }
  /// Whether some layers are mixtures of experts and some dense.
  [[nodiscard]] bool mixed_layers() const { return experts > 0 && moe_layers_in(0, layers) < layers; }
  /// The model with its dense layers' MLP in every layer: no experts, FFN dense_ffn.
  [[nodiscard]] TransformerConfig dense_layer_model() const {
    TransformerConfig d = *this;
    d.ffn = dense_mlp_ffn();
    d.experts = d.experts_per_token = d.shared_ffn = d.expert_groups = d.groups_per_token = 0;
    d.shared_gate = false;
    d.dense_layers.clear();
    d.dense_ffn = 0;
    return d;
  }

  /// Rows each expert takes from a batch of `batch` sequences:
  /// ceil(batch x seq x experts_per_token x expert_load / experts), under balanced
  /// routing (expert_load 1) ceil(batch x seq x experts_per_token / experts); 0 for a
  /// dense model.
  [[nodiscard]] std::int64_t expert_rows(std::int64_t batch) const;
  /// The size of a value head (and with it of the attention output's heads; of every
  /// head unless the attention is multi-head latent attention).
  [[nodiscard]] std::int64_t head_dim() const { return mla() ? v_head_dim : head_size > 0 ? head_size : hidden / heads; }
  /// Rows of the learned position table (positions, or seq when unset); 0 without one.
  [[nodiscard]] std::int64_t position_rows() const { return learned_positions ? (positions > 0 ? positions : seq) : 0; }
  /// Columns of the attention output (and of Q unless the attention is multi-head latent
  /// attention): heads x head_dim() (= hidden unless head_size says otherwise).
  [[nodiscard]] std::int64_t attention_width() const { return heads * head_dim(); }
  /// The tp ranks the key-value groups split over: tp, or the g groups when there are
  /// more ranks than groups (each rank then holds one whole group, replicated tp / g
  /// times, as PaLM's multi-query head over its 12 model-parallel ranks).
  [[nodiscard]] std::int64_t kv_ways(int tp) const { return tp < kv_heads ? tp : kv_heads; }
  /// How many of `tp` ranks hold each key-value group: tp / kv_ways(tp), 1 unless there
  /// are more ranks than groups.
  [[nodiscard]] int kv_copies(int tp) const { return static_cast<int>(tp / kv_ways(tp)); }
  /// A layer's key and value weights (and biases) that each of `tp` ranks holds as a
  /// copy of its group's when there are more ranks than groups, else 0: 2 head_dim
  /// (hidden + bias). Their gradients are summed over the kv_copies(tp) ranks that
  /// share the group before the optimizer step.
  [[nodiscard]] double replicated_kv_params(int tp) const {
    if (kv_copies(tp) == 1) return 0.0;
    return 2.0 * static_cast<double>(head_dim()) * static_cast<double>(hidden + (qkv_bias ? 1 : 0));
  }
};

/// Megatron-style GPT: layer norm, GeLU MLP of 4h, biases, learned positions, tied
/// embedding, dropout, plain attention.
TransformerConfig gpt_config(std::string name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                             std::int64_t seq, std::int64_t vocab);
/// Llama: RMS norm, SwiGLU MLP, no biases, rotary positions, untied embedding, no
/// dropout, flash attention, grouped-query attention with kv_heads.
TransformerConfig llama_config(std::string name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                               std::int64_t kv_heads, std::int64_t ffn, std::int64_t seq, std::int64_t vocab);

/// Why the configuration cannot be built (empty when it can): non-positive sizes, heads
/// not dividing hidden (without an explicit head_size), kv_heads not dividing heads.
std::string transformer_problem(const TransformerConfig& c);

/// Under balanced routing, with the experts in `parts` equal runs in order (the experts
/// of one GPU, or of one server, in an expert-parallel group of `parts` GPUs or
/// servers): the expected number of parts a token's experts_per_token experts fall in.
/// Each token takes groups_per_token of the expert groups alike, then its experts alike
/// among theirs (all experts when there are no groups). 0 for a dense model; `parts`
/// must divide the experts.
double experts_spread(const TransformerConfig& c, std::int64_t parts);

/// Why a batch of `batch` sequences of `c` is beyond what ddlsim models (empty when it is
/// not): a batch outside 1 to 1,000,000, attention scores (batch x heads x seq^2) or a
/// layer's widest activation (batch x seq x max(hidden, 2 ffn), a mixture of experts'
/// experts_per_token times that) over 1e18 elements, where the arithmetic would overflow.
std::string transformer_batch_problem(const TransformerConfig& c, std::int64_t batch);

/// Whether `op` is a norm over each query or key head (qk_norm: q_norm, k_norm), which a
/// split of the heads keeps whole: it needs no statistics from other devices and its
/// head-size scale is shared, not split.
inline bool is_per_head_norm(const Operator& op) {
  return op.name.ends_with(".q_norm") || op.name.ends_with(".k_norm");
}

/// Whether Megatron-LM's fused attention softmax (FusedScaleMaskSoftmax: scale, causal
/// mask and softmax in one kernel on 16-bit scores) runs for plain attention with this
/// micro-batch on each of `tp` tensor-parallel ranks. Its is_kernel_available
/// (megatron/model/fused_softmax.py) asks for 16-bit scores, 16 < key length <= 4096
/// (2048 in the 2021-22 code vTrain's measurements ran), query and key lengths multiples
/// of 4, and attention batches (micro-batch x heads per rank) a multiple of 4 and of the
/// causal kernel's batches per block (4 for keys longer than 128, 8 up to 128). Otherwise
/// PyTorch's path runs: the scores cast to fp32, scaled, masked, softmaxed and cast back,
/// five kernels each way (StageCosts prices them; memory keeps the fp32 softmax).
bool megatron_fused_softmax(const TransformerConfig& c, std::int64_t micro_batch, int tp);

/// One training step of `batch` sequences: embedding, the layers (operators of layer i
/// carry layer = i), final norm, output layer and cross-entropy loss.
OperatorGraph build_transformer(const TransformerConfig& c, std::int64_t batch);

}  // namespace ddlsim
