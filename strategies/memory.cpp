#include "strategies/memory.hpp"

#include <algorithm>
#include <functional>

#include "strategies/pipeline.hpp"
#include "strategies/stage_costs.hpp"

namespace ddlsim {
namespace {

// Parameters of one layer: sharded by tp (the linear weights and column-parallel
// biases) and replicated (norms, row-parallel biases).
struct LayerParams {
  double sharded = 0, replicated = 0;
  double kv = 0;  // the key and value projections (TransformerConfig::kv_ways)
  // The routed experts': their weights (sharded by tp) and row-parallel biases
  // (replicated), all split by expert parallelism.
  double experts = 0, experts_replicated = 0;
  [[nodiscard]] double experts_per_device(int tp, int ep) const { return (experts / tp + experts_replicated) / ep; }
  [[nodiscard]] double per_device(int tp, const TransformerConfig& m, int ep = 1) const {
    return sharded / tp + replicated + kv / static_cast<double>(m.kv_ways(tp)) + experts_per_device(tp, ep);
  }
  // The weights of the layers that multiply in fp8 under FP8 training (not their biases,
  // norms or the router), split the same ways.
  double fp8_sharded = 0, fp8_replicated = 0, fp8_kv = 0, fp8_experts = 0;
  [[nodiscard]] double fp8_experts_per_device(int tp, int ep) const { return fp8_experts / tp / ep; }
  [[nodiscard]] double fp8_per_device(int tp, const TransformerConfig& m, int ep) const {
    return fp8_sharded / tp + fp8_replicated + fp8_kv / static_cast<double>(m.kv_ways(tp)) + fp8_experts_per_device(tp, ep);
  }
};

LayerParams layer_params(const TransformerConfig& m) {
  const double h = static_cast<double>(m.hidden), d = static_cast<double>(m.head_dim());
  const double g = static_cast<double>(m.kv_heads), f = static_cast<double>(m.ffn);
  const double w = static_cast<double>(m.attention_width());
  const bool gpt = m.family == TransformerConfig::Family::kGpt;
  LayerParams p;
  if (m.mla()) {
    // The up projections (column-parallel) and the output projection (row-parallel); the
    // down projections with their biases and the latents' norms on every tp rank.
    const double a = static_cast<double>(m.heads), dq = static_cast<double>(m.qk_head_dim());
    const double rq = static_cast<double>(m.q_lora_rank), rkv = static_cast<double>(m.kv_lora_rank);
    const double dr = static_cast<double>(m.qk_rope_dim), dn = static_cast<double>(m.qk_nope_dim);
    const double bias = m.qkv_bias ? 1 : 0, norm = gpt ? 2 : 1;
    p.sharded += (rq > 0 ? rq : h) * a * dq + rkv * a * (dn + d) + w * h;
    p.replicated += rq > 0 ? (h + bias + norm) * rq : 0;
    p.replicated += (h + bias) * (rkv + dr) + norm * rkv;
    p.fp8_sharded += (rq > 0 ? rq : h) * a * dq + rkv * a * (dn + d) + w * h;
    p.fp8_replicated += h * rq + h * (rkv + dr);
  } else {
    p.sharded += h * w + (m.qkv_bias ? w : 0) + w * h;  // Q and output projection
    p.kv += 2 * g * d * (h + (m.qkv_bias ? 1 : 0));    // K and V
    p.fp8_sharded += 2 * h * w;
    p.fp8_kv += 2 * g * d * h;
  }
  p.replicated += m.proj_bias ? h : 0;
  // The MLP, or each expert's and the router's (h x experts, on every tp rank).
  const double mlps = m.experts > 0 ? static_cast<double>(m.experts) : 1.0;
  (m.experts > 0 ? p.experts : p.sharded) += mlps * (gpt ? 2 * h * f + (m.mlp_bias ? f : 0) : 3 * h * f + (m.mlp_bias ? 2 * f : 0));
  (m.experts > 0 ? p.fp8_experts : p.fp8_sharded) += mlps * (gpt ? 2 : 3) * h * f;
  (m.experts > 0 ? p.experts_replicated : p.replicated) += mlps * (m.mlp_bias ? h : 0);
  p.replicated += h * static_cast<double>(m.experts);
  // A shared expert: an MLP of shared_ffn, and its gate (h x 1, on every tp rank).
  const double fs = static_cast<double>(m.shared_ffn);
  if (fs > 0) {
    p.sharded += gpt ? 2 * h * fs + (m.mlp_bias ? fs : 0) : 3 * h * fs + (m.mlp_bias ? 2 * fs : 0);
    p.fp8_sharded += (gpt ? 2 : 3) * h * fs;
    p.replicated += (m.mlp_bias ? h : 0) + (m.shared_gate ? h : 0);
  }
  // Two norms (one with parallel layers); a layer norm has a scale and a shift.
  p.replicated += (m.parallel_layers ? 1 : 2) * (gpt ? 2 * h : h);
  p.replicated += m.qk_norm ? 2 * d : 0;  // the query and key heads' norms
  return p;
}

// The model as the plan routes its tokens (routed_model), copied only where the plan's
// expert rows differ from the model's own.
struct Routed {
  Routed(const TransformerConfig& m, const ParallelPlan& p) : model(m) {
    if (routed_load(m, p) != m.expert_load) {
      copy = routed_model(m, p);
      model = std::cref(copy);
    }
  }
  Routed(const Routed&) = delete;
  Routed& operator=(const Routed&) = delete;
  TransformerConfig copy;
  std::reference_wrapper<const TransformerConfig> model;
};

}  // namespace

ModelStates model_states(double params, int dp, DataParallelMode mode, DataType weights, bool remainders) {
  const double n = dp;
  const double w = weight_bytes(weights);
  // Adam's two fp32 moments, and an fp32 master copy unless the weights are fp32 (or
  // its low 16 bits, which complete the bf16 weight to it).
  const double master = weights == DataType::kFp32 ? 0.0 : remainders ? 2.0 : kFp32Bytes;
  const double optimizer = 2 * kFp32Bytes + master;
  ModelStates s{w * params, w * params, optimizer * params};
  if (mode != DataParallelMode::kAllReduce) s.optimizer /= n;
  if (mode == DataParallelMode::kZero2 || mode == DataParallelMode::kZero3) s.gradients /= n;
  if (mode == DataParallelMode::kZero3) s.weights /= n;
  return s;
}

double layer_activation_bytes(const TransformerConfig& m, std::int64_t micro_batch, int tp, bool sp, Recompute rc,
                              unsigned modules) {
  const double s = static_cast<double>(m.seq), b = static_cast<double>(micro_batch), h = static_cast<double>(m.hidden);
  const double a = static_cast<double>(m.heads), t = tp, B = data_type_bytes(m.dtype);
  // The key-value share of the heads, per tp rank's share of them: g/a, or with more
  // ranks than groups one whole group on each (so g/a x t/g before the division by t).
  const double kv = static_cast<double>(m.kv_heads) / a * (t / static_cast<double>(m.kv_ways(tp)));
  const double f = static_cast<double>(m.ffn) / h;
  const double r = static_cast<double>(m.attention_width()) / h;  // Q's width over hidden (1 unless head_size)
  const double sbh = s * b * h;
  if (rc == Recompute::kFull) return sbh * B / (sp ? t : 1.0);
  // Under FP8 training a linear layer keeps its input's fp8 copy, 1 byte per element
  // (F), beside any copy another operator keeps in the model's dtype.
  const bool fp8 = m.fp8_gemms;
  const double F = fp8 ? data_type_bytes(DataType::kFp8) : B;
  const bool moe = m.experts > 0;
  // Multi-head latent attention: the latents (the query's, normed, and the key-value
  // one, normed: the norms' and up projections' inputs) are replicated like the down
  // projections' input; heads keep queries and keys of qk_head_dim (a key joined from
  // its own part and the shared rotary one) and values of head_dim.
  double width = 0;            // the latents' (query's and key-value's) over hidden
  double rq = r, rk = r * kv;  // Q's and K's width over hidden
  if (m.mla()) {
    width = static_cast<double>(m.q_lora_rank + m.kv_lora_rank) / h;
    rq = rk = a * static_cast<double>(m.qk_head_dim()) / h;
  }
  const double mask = m.residual_dropout ? 1.0 : 0.0;          // 1 byte per element
  const double scores_mask = m.attention_dropout ? 1.0 : 0.0;  // on the probabilities
  // Replicated without sequence parallelism: norm inputs, QKV and first-MLP inputs (the
  // norms' outputs), residual dropout masks; with parallel layers one norm, whose input
  // and output (the QKV's and the first MLP linear's input, kept once) are all. A
  // mixture of experts' router keeps the MLP norm's output in the model's dtype (its
  // shared expert an fp8 copy beside it).
  const unsigned rm = rc == Recompute::kSelective ? modules : 0u;
  const bool shared_copy = fp8 && m.shared_ffn > 0 && !(rm & kRecomputeSharedExperts);
  double first_output = F, second_output = moe ? B + (shared_copy ? F : 0.0) : F;
  if (m.parallel_layers) second_output = fp8 && moe ? B : 0.0;
  // Selective recomputation's modules (RecomputeModule) change what stays: a recomputed
  // MLP (mlp) or shared expert (shared_experts) keeps its input as it is, in the model's
  // dtype, and no fp8 copy of it; recomputed norms (layernorm) keep no output at all; the
  // up projections (mla_up_proj) keep their inputs, the normed latents, as they are.
  if (rm & kRecomputeMlp && !moe) {
    if (m.parallel_layers) second_output = fp8 ? B : 0.0;
    else second_output = B;
  }
  if (rm & kRecomputeLayernorm) first_output = second_output = 0.0;
  // The latents (the norms' inputs) and the normed latents (the up projections').
  const double latents = (B + (rm & kRecomputeMlaUpProj ? B : F)) * width;
  const double replicated = (m.parallel_layers ? 1 : 2) * B + first_output + second_output + 2 * mask + latents;
  // The output projection's input: flash attention keeps it too (its output), in the
  // model's dtype.
  double sharded = (m.flash_attention ? B + (fp8 ? F : 0.0) : F) * r;
  // Q, K and V, as attention keeps them, unless the up projections are remade.
  const double qkv = m.mla() && rm & kRecomputeMlaUpProj ? 0.0 : B * (rq + rk + r * kv);
  double scores = 0;  // the a s / h terms
  if (m.flash_attention) {
    // Q, K, V (the output, kept too, is the output projection's input); fp32 log-sum-exp
    // per row and head.
    sharded += qkv + 4.0 * a / h;
  } else {
    sharded += qkv;  // Q, K for the scores; V for the context
    // Softmax output (fp32 where Megatron's fused kernel does not run), dropout mask,
    // probabilities for the context matmul: the dropout's output, or without dropout the
    // softmax output itself unless that is fp32 (then its cast copy).
    const double softmax = (megatron_fused_softmax(m, micro_batch, tp) || B != 2.0) ? B : 4.0;
    const double probabilities = m.attention_dropout || softmax != B ? B : 0.0;
    scores = (softmax + scores_mask + probabilities) * a * s / h;
  }
  if (m.qk_norm) sharded += B * r * (1 + kv);  // the query and key norms' inputs
  // A mixture of experts' MLPs take each token once per expert it goes to: rows / (s b)
  // of them, with padding, each; its dispatched rows (the experts' first linear input)
  // and the experts' outputs (the combine's input, for the router probabilities'
  // gradient) are whole on every tp rank, the router's probabilities (experts per token)
  // replicated like the norm's output.
  const double rows = moe ? static_cast<double>(m.experts * m.expert_rows(micro_batch)) / (s * b) : 1.0;
  double whole = 0, router = 0;
  if (moe) {
    whole = (F + B) * rows;
    router = B * static_cast<double>(m.experts) / h;
  }
  // A shared expert's inner terms are a dense MLP's of shared_ffn (its input is the
  // router's, kept once).
  const double fs = static_cast<double>(m.shared_ffn) / h;
  // Each MLP keeps its activation's inputs (GeLU 1, SwiGLU 2 times its width, in the
  // model's dtype) and output (the down projection's input, F). Recomputed, a dense MLP
  // (mlp) or the shared expert (shared_experts) keeps none of them, the experts'
  // activation (moe_act) not its output.
  const double act_in = m.family == TransformerConfig::Family::kGpt ? B : 2 * B;
  const double inner = act_in + F;
  const double mlp_terms = moe ? (rm & kRecomputeMoeAct ? act_in : inner) * f * rows : (rm & kRecomputeMlp ? 0.0 : inner * f);
  sharded += mlp_terms + (rm & kRecomputeSharedExperts ? 0.0 : inner * fs);
  if (rm & kRecomputeCoreAttn) scores = 0;
  return sbh * (whole + (sp ? (replicated + router) / t : replicated + router) + (sharded + scores) / t);
}

double layers_activation_bytes(const ParallelPlan& p, const TransformerConfig& model, const std::vector<LayerRange>& chunks) {
  const Routed routed(model, p);
  const TransformerConfig& m = routed.model.get();
  const LayerKinds k = layer_kinds(p, m, chunks);
  const auto of = [&](const TransformerConfig& c, int layers, int recomputed) {
    if (layers == 0) return 0.0;
    const double each = layer_activation_bytes(c, p.micro_batch, p.tp, p.sequence_parallel, p.recompute, p.recompute_modules);
    if (p.recompute != Recompute::kFull) return layers * each;
    const double kept = layer_activation_bytes(c, p.micro_batch, p.tp, p.sequence_parallel, Recompute::kNone);
    return recomputed * each + (layers - recomputed) * kept;
  };
  const double primary = of(m, k.primary, k.primary_recomputed);
  return k.dense > 0 ? primary + of(m.dense_layer_model(), k.dense, k.dense_recomputed) : primary;
}

std::vector<LayerRange> stage_chunks(const ParallelPlan& p, const TransformerConfig& m, int stage) {
  const std::vector<LayerRange> all = chunk_layer_ranges(p, m);
  std::vector<LayerRange> out;
  for (std::size_t s = static_cast<std::size_t>(stage); s < all.size(); s += static_cast<std::size_t>(p.pp)) out.push_back(all[s]);
  return out;
}

double in_flight_micro_batches(const ParallelPlan& p, int stage) {
  const double m = static_cast<double>(p.micro_batches()), pp = p.pp;
  switch (p.schedule) {
    case PipelineSchedule::kGPipe: return m;
    // Combined 1F1B (overlap_ep_comm) runs one warm-up forward more.
    case PipelineSchedule::k1F1B: return std::min(m, pp - stage + (p.combined_1f1b() ? 1 : 0));
    // Activations held until the weight-gradient pass (W); ZB-H1 lets stage i defer i of
    // them, so every stage holds stage 0's count (pipeline_schedule).
    case PipelineSchedule::kZeroBubbleH1: return std::min(m, pp);
    case PipelineSchedule::kInterleaved1F1B: {
      // Chunk forwards in flight at the peak: the warm-up's, plus the one 1F1B starts
      // with (pipeline_schedule, as Megatron-LM's schedule runs them), each 1/v of the
      // stage's layers. Stage 0 gives Korthikanti et al.'s pp (1 + (pp - 1)/(pp v)).
      // (Chunks of unequal sizes, or a last group shorter than the others, hold other
      // peaks: stage_memory takes the peak of its program for those.)
      const double v = p.virtual_stages, chunks = m * v;
      const double warmup =
          interleaved_warmup(p.pp, p.virtual_stages, static_cast<int>(p.micro_batches()), stage, p.combined_1f1b(),
                             p.group_size());
      return std::min(chunks, warmup + 1) / v;
    }
  }
  return m;
}

double in_flight_losses(const ParallelPlan& p) {
  const double m = static_cast<double>(p.micro_batches());
  if (p.schedule == PipelineSchedule::kGPipe) return m;
  // The output layer's weight gradient needs the logits' gradient: held, like the
  // loss's buffers, until the last stage's deferred W passes (up to pp of them).
  if (p.schedule == PipelineSchedule::kZeroBubbleH1) return std::min(m, static_cast<double>(p.pp));
  // 1F1B runs each backward on the last stage right after its forward; so does the
  // interleaved schedule for the last chunk, unless every forward comes first (m = pp),
  // in groups that divide the micro-batches (stage_memory takes the peak of the program otherwise).
  // Combined 1F1B runs the next forward beside it: two.
  const int micro_batches = static_cast<int>(p.micro_batches());
  if (p.schedule == PipelineSchedule::kInterleaved1F1B &&
      interleaved_warmup(p.pp, p.virtual_stages, micro_batches, p.pp - 1, p.combined_1f1b(), p.group_size()) ==
          micro_batches * p.virtual_stages) {
    return m;
  }
  return p.combined_1f1b() ? std::min(m, 2.0) : 1;
}

double loss_activation_bytes(const TransformerConfig& m, std::int64_t micro_batch, int tp) {
  constexpr double kFp32 = 4.0;
  return static_cast<double>(m.seq) * static_cast<double>(micro_batch) * static_cast<double>(m.vocab) / tp * kFp32;
}

double embedding_parameters(const TransformerConfig& m, const ParallelPlan& p) {
  const double h = static_cast<double>(m.hidden);
  return static_cast<double>(m.vocab) * h / p.tp + static_cast<double>(m.position_rows()) * h + (m.embedding_norm ? 2 * h : 0.0);
}

double final_norm_parameters(const TransformerConfig& m) {
  const double h = static_cast<double>(m.hidden);
  return m.family == TransformerConfig::Family::kGpt ? 2 * h : h;
}

double output_layer_parameters(const TransformerConfig& m, const ParallelPlan& p) {
  return !m.tied_embedding || p.pp > 1 ? static_cast<double>(m.vocab) * static_cast<double>(m.hidden) / p.tp : 0.0;
}

double mtp_input_parameters(const TransformerConfig& m, const ParallelPlan& p) {
  if (m.mtp_layers == 0) return 0.0;
  const double h = static_cast<double>(m.hidden);
  return 2 * h * h / p.tp + 2 * final_norm_parameters(m);
}

double mtp_embedding_copy(const TransformerConfig& m, const ParallelPlan& p) {
  return m.mtp_layers > 0 && p.pp > 1 && !m.tied_embedding ? static_cast<double>(m.vocab) * static_cast<double>(m.hidden) / p.tp
                                                           : 0.0;
}

double mtp_activation_bytes(const ParallelPlan& p, const TransformerConfig& model) {
  if (model.mtp_layers == 0) return 0.0;
  const Routed routed(model, p);
  const TransformerConfig& m = routed.model.get();
  const TransformerConfig kind = m.mtp_dense() ? m.dense_layer_model() : m;
  const double layer = layer_activation_bytes(kind, p.micro_batch, p.tp, p.sequence_parallel, p.recompute, p.recompute_modules);
  const double inputs = 3.0 * static_cast<double>(p.micro_batch) * static_cast<double>(m.seq) * static_cast<double>(m.hidden) *
                        data_type_bytes(m.dtype) / (p.sequence_parallel ? p.tp : 1);
  return static_cast<double>(m.mtp_layers) * (layer + inputs);
}

std::vector<DeviceMemory> stage_memory(const ParallelPlan& p, const TransformerConfig& m) {
  if (p.cp > 1) return stage_memory(context_folded(p), context_share(m, p));  // each cp rank: seq / cp tokens
  const LayerParams lp = layer_params(m);
  const bool mixed = m.mixed_layers();
  const TransformerConfig dense = mixed ? m.dense_layer_model() : m;
  const LayerParams dlp = mixed ? layer_params(dense) : LayerParams{};
  std::vector<DeviceMemory> out;
  for (int i = 0; i < p.pp; ++i) {
    const std::vector<LayerRange> chunks = stage_chunks(p, m, i);
    const LayerKinds k = layer_kinds(p, m, chunks);
    DeviceMemory d;
    d.parameters = k.primary * lp.per_device(p.tp, m, p.ep);
    if (k.dense > 0) d.parameters += k.dense * dlp.per_device(p.tp, dense);
    if (i == 0) d.parameters += embedding_parameters(m, p);
    // Multi-token prediction's layers (of the last layer's kind) on the last stage.
    const bool last = i == p.pp - 1;
    const double mtp = last ? static_cast<double>(m.mtp_layers) : 0.0;
    const double mtp_primary = m.mtp_dense() ? 0.0 : mtp, mtp_dense = mtp - mtp_primary;
    if (last) {
      d.parameters += final_norm_parameters(m);
      d.parameters += output_layer_parameters(m, p);
      d.parameters += mtp * (mtp_input_parameters(m, p) + final_norm_parameters(m)) + mtp_embedding_copy(m, p);
      d.parameters += mtp_primary * lp.per_device(p.tp, m, p.ep) + mtp_dense * dlp.per_device(p.tp, dense);
    }
    // Under expert parallelism the experts' states are sharded (ZeRO-1) over the dp / ep
    // ranks holding each expert, the rest over all dp.
    const double experts = p.ep > 1 ? (k.primary + mtp_primary) * lp.experts_per_device(p.tp, p.ep) : 0.0;
    ModelStates s = model_states(d.parameters - experts, shard_size(p), p.dp_mode, m.dtype, p.master_remainders);
    if (experts > 0.0) {
      const ModelStates e = model_states(experts, shard_size(p) / p.ep, p.dp_mode, m.dtype, p.master_remainders);
      s = {s.weights + e.weights, s.gradients + e.gradients, s.optimizer + e.optimizer};
    }
    d.weights = s.weights;
    d.gradients = s.gradients;
    // s.gradients are 16-bit (sharded as ZeRO shards them) unless the model is fp32.
    // DeepSpeed's bf16 optimizer keeps fp32 copies besides them; Megatron's fp32
    // main_grad buffers replace them.
    if (m.dtype != DataType::kFp32) {
      if (p.grad_accumulation == GradAccumulation::kFp32) {
        d.gradients += 2.0 * s.gradients;
      } else if (p.grad_reduce_fp32) {
        d.gradients *= 2.0;
      }
    }
    d.optimizer = s.optimizer;
    if (m.fp8_gemms) {
      // Transformer Engine's fp8 copy of each such weight and its transpose (Hopper's
      // fp8 GEMMs take one operand layout; the backward multiplies by the transpose),
      // cast once per step and kept across its micro-batches: 2 bytes per weight. With
      // fp8_params they are the weights, no 16-bit copy beside them.
      const double fp8 = (k.primary + mtp_primary) * lp.fp8_per_device(p.tp, m, p.ep) +
                         (k.dense + mtp_dense) * dlp.fp8_per_device(p.tp, dense, 1);
      d.fp8_expert_weights = p.ep > 1 ? (k.primary + mtp_primary) * lp.fp8_experts_per_device(p.tp, p.ep) : 0.0;
      d.fp8_weights = fp8 - d.fp8_expert_weights;
      d.weights += 2 * data_type_bytes(DataType::kFp8) * fp8;
      if (p.fp8_params) d.weights -= weight_bytes(m.dtype) * fp8;
    }
    if (p.dp_mode == DataParallelMode::kZero3 && shard_size(p) > 1) {
      // ZeRO-3's working buffers: a pass holds the unit it computes gathered whole and
      // the next one, prefetched (the largest two units in a row, in the order
      // embedding, layers, output layer), and the backward that unit's whole gradient
      // until its reduce-scatter (the largest unit).
      std::vector<double> units;
      if (i == 0) units.push_back(embedding_parameters(m, p));
      for (const LayerRange& c : chunks) {
        for (std::int64_t l = c.first; l < c.first + c.count; ++l) {
          units.push_back(m.dense_layer(l) ? dlp.per_device(p.tp, dense) : lp.per_device(p.tp, m));
        }
      }
      if (last) units.push_back(final_norm_parameters(m) + output_layer_parameters(m, p));
      for (std::int64_t k = 0; last && k < m.mtp_layers; ++k) {  // as transformer_step's units
        units.push_back(mtp_input_parameters(m, p) + (k == 0 ? mtp_embedding_copy(m, p) : 0.0));
        units.push_back(m.mtp_dense() ? dlp.per_device(p.tp, dense) : lp.per_device(p.tp, m));
        units.push_back(final_norm_parameters(m));
      }
      double pair = 0, largest = 0;
      for (std::size_t u = 0; u < units.size(); ++u) {
        largest = std::max(largest, units[u]);
        pair = std::max(pair, units[u] + (u + 1 < units.size() ? units[u + 1] : 0.0));
      }
      d.weights += pair * weight_bytes(m.dtype);
      d.gradients += largest * reduced_gradient_bytes(p, m.dtype);
    }
    // (Each multi-token prediction depth has a loss of its own.)
    const double loss = last ? (1.0 + mtp) * loss_activation_bytes(m, p.micro_batch, p.tp) : 0.0;
    const double mtp_activations = last ? mtp_activation_bytes(p, m) : 0.0;
    std::vector<double> held;  // per chunk forward of this stage (the last chunk's with its loss)
    bool uneven = false;
    if (p.schedule == PipelineSchedule::kInterleaved1F1B) {
      for (const LayerRange& c : chunks) {
        held.push_back(layers_activation_bytes(p, m, {c}));
        uneven = uneven || held.back() != held.front();
      }
      held.back() += loss + mtp_activations;
      uneven = uneven || mtp_activations > 0.0 || p.micro_batches() % p.group_size() != 0;
    }
    if (uneven) {
      // Chunks of unequal sizes, or a last micro-batch group shorter than the others:
      // the peak of what the stage's program holds (interleaved_peak; a chunk forward's
      // activations until its backward).
      d.activations = interleaved_peak(held, p.pp, static_cast<int>(p.micro_batches()), i, p.combined_1f1b(), p.group_size());
    } else {
      d.activations = (layers_activation_bytes(p, m, chunks) + mtp_activations) * in_flight_micro_batches(p, i);
      // The loss keeps each in-flight micro-batch's softmax: one under 1F1B, where the
      // last stage runs each backward right after its forward.
      d.activations += loss * in_flight_losses(p);
    }
    out.push_back(d);
  }
  return out;
}

int plan_communicators(const ParallelPlan& p) {
  // With context parallelism: those of its lowering (data-parallel groups over dp x cp,
  // a ZeRO-3 shard over shard x cp) and the cp group.
  if (p.cp > 1) return plan_communicators(context_folded(p)) + 1;
  int n = (p.tp > 1) + (p.pp > 1) + (p.dp > 1);
  if (p.dp_mode == DataParallelMode::kZero3 && p.shard > 1 && p.shard < p.dp) ++n;  // shard group and replicas
  if (p.ep > 1) n += 1 + (p.ep < p.dp);  // the expert-parallel group, and the experts' data-parallel group
  return n;
}

}  // namespace ddlsim
