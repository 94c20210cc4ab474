#include "strategies/stage_costs.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include "sim/collectives.hpp"
#include "sim/network_fabric.hpp"
#include "strategies/memory.hpp"
#include "workloads/transformer.hpp"

namespace ddlsim {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// How an operator of the builders splits under tensor parallelism.
enum class Split { kColumns, kRows, kHeads, kInner, kPerHead, kReplicated, kWhole };

Split split_of(const Operator& op) {
  const std::string_view n = op.name;
  // (Multi-head latent attention: the up projections from the latents split by heads;
  // the down projections to them and the latents' norms are replicated, or split by the
  // sequence with sequence parallelism, as Megatron-Core runs them.)
  if (ends_with(n, ".qkv") || ends_with(n, ".fc1") || ends_with(n, ".gate_up") || ends_with(n, ".q_up") ||
      ends_with(n, ".q_proj") || ends_with(n, ".kv_up") || ends_with(n, ".eh_proj") || n == "output") {
    return Split::kColumns;
  }
  if (ends_with(n, ".proj") || ends_with(n, ".fc2") || ends_with(n, ".down")) return Split::kRows;
  if (n.find(".attention") != std::string_view::npos || ends_with(n, ".k_concat")) return Split::kHeads;
  if (ends_with(n, ".gelu") || ends_with(n, ".squared_relu") || ends_with(n, ".swiglu") || n == "loss") return Split::kInner;
  if (is_per_head_norm(op)) return Split::kPerHead;  // heads split, scale shared
  // A mixture of experts' dispatch and combine move every token on every tp rank (with
  // sequence parallelism, after the tokens are gathered), as the dense MLP's first
  // linear takes the whole input.
  // (and the sum of the experts' and the shared expert's partial outputs, before the
  // tensor-parallel reduction).
  if (ends_with(n, ".dispatch") || ends_with(n, ".combine") || ends_with(n, ".shared_sum")) return Split::kWhole;
  return Split::kReplicated;  // norms, residual adds and dropouts, embeddings
}

// A linear layer's `pass` run as k GEMMs of 1/k of its rows each (its time `whole` when
// k is 1).
Seconds in_pieces(const Operator& op, Pass pass, int k, const ComputeModel& compute, Seconds whole) {
  if (k <= 1) return whole;
  k = static_cast<int>(std::min<std::int64_t>(k, std::max<std::int64_t>(1, op.gemm.m)));  // (at most a row each)
  Operator piece = op;
  piece.gemm.m = std::max<std::int64_t>(1, op.gemm.m / k);
  piece.cost.fwd_flops /= k, piece.cost.bwd_flops /= k, piece.cost.fwd_bytes /= k, piece.cost.bwd_bytes /= k;
  return compute.time(piece, pass) * static_cast<double>(k);
}

// A routed expert's operator (the experts' grouped linear layers and activation).
bool in_experts(const Operator& op) {
  const std::string_view n = op.name;
  return n.find(".experts.") != std::string_view::npos && !ends_with(n, ".dispatch") && !ends_with(n, ".combine") &&
         !ends_with(n, ".shared_sum");
}

// One rank's share of an operator under tensor parallelism (sequence parallelism `sp`)
// and expert parallelism (ep: a grouped linear layer keeps experts / ep of its weights,
// each taking the tokens of ep ranks: the same FLOPs in fewer, taller GEMMs).
// The QKV projection's key-value columns split only as far as whole groups go
// (TransformerConfig::kv_ways): with more ranks than groups each computes one group.
Operator sharded(Operator op, const TransformerConfig& m, int tp, bool sp, int ep) {
  if (ep > 1 && op.kind == OpKind::kLinear && in_experts(op)) {
    const double weights = op.cost.params * data_type_bytes(op.dtype) * (1.0 - 1.0 / ep);
    op.cost.fwd_bytes -= weights;
    op.cost.bwd_bytes -= 2.0 * weights;
    op.cost.params /= ep;
    op.gemm.batch /= ep;
    op.gemm.m *= ep;
  }
  const Split s = split_of(op);
  const double t = tp;
  if (s == Split::kWhole) return op;
  if (s == Split::kReplicated && !(sp && op.kind != OpKind::kEmbedding)) return op;
  op.cost.fwd_flops /= t;
  op.cost.bwd_flops /= t;
  op.cost.fwd_bytes /= t;
  op.cost.bwd_bytes /= t;
  op.cost.params /= (s == Split::kReplicated || s == Split::kPerHead ? 1.0 : t);
  op.cost.saved_bytes /= t;
  const auto div = [tp](std::int64_t& v) { v = std::max<std::int64_t>(1, v / tp); };
  switch (s) {
    case Split::kColumns: div(op.gemm.n); break;
    case Split::kRows: div(op.gemm.k); break;
    case Split::kHeads: div(op.gemm.batch); break;
    // A replicated linear layer under sequence parallelism (a router, MLA's down
    // projections) takes this rank's share of the tokens.
    case Split::kReplicated: div(op.gemm.m); break;
    default: break;
  }
  if (ends_with(op.name, ".qkv") && m.kv_ways(tp) < tp) {
    const double w = static_cast<double>(m.attention_width()), d = static_cast<double>(m.head_dim());
    const double kv = 2.0 * d * static_cast<double>(m.kv_heads);
    const double f = (w / t + 2.0 * d) / ((w + kv) / t);  // this rank's columns (one group) over the even split's
    op.cost.fwd_flops *= f;
    op.cost.bwd_flops *= f;
    op.cost.params *= f;
    op.gemm.n = static_cast<std::int64_t>(m.attention_width() / tp + 2 * m.head_dim());
  }
  return op;
}

bool attention_core(const Operator& op) { return op.name.find(".attention") != std::string::npos; }

// The recompute module (RecomputeModule bit) a layer's operator belongs to, 0 for none.
unsigned recompute_module(const Operator& op) {
  if (attention_core(op)) return kRecomputeCoreAttn;
  const std::string_view n = op.name;
  const std::string_view local = n.substr(n.find('.') + 1);  // past "layerN."
  for (const char* norm : {"ln1", "norm1", "ln2", "norm2"}) {
    if (local == norm) return kRecomputeLayernorm;
  }
  for (const char* up : {"q_up", "q_proj", "kv_up", "k_concat"}) {
    if (local == up) return kRecomputeMlaUpProj;
  }
  if (local == "experts.swiglu" || local == "experts.gelu") return kRecomputeMoeAct;
  if (local.rfind("shared.", 0) == 0 || local == "shared_gate") return kRecomputeSharedExperts;
  for (const char* mlp : {"fc1", "gelu", "squared_relu", "fc2", "gate_up", "swiglu", "down"}) {
    if (local == mlp) return kRecomputeMlp;
  }
  return 0;
}

// PyTorch's softmax path where Megatron's fused kernel does not run
// (megatron_fused_softmax): bytes moved per score element by each of its kernels.
// Forward: cast to fp32 (read 2, write 4), scale (4, 4), mask (4, 4), softmax (4, 4),
// cast back (4, 2); backward, their gradients in reverse: cast (2, 4), softmax (read the
// output and the gradient, write one: 12), mask (4, 4), scale (4, 4), cast (4, 2).
constexpr double kUnfusedForward[] = {6, 8, 8, 8, 6};
constexpr double kUnfusedBackward[] = {6, 12, 8, 8, 6};

// One memory-bound kernel of `like`'s moving `bytes` in `pass`, priced by the compute
// model (with its launch overhead).
Seconds memory_kernel(const Operator& like, double bytes, Pass pass, const ComputeModel& compute) {
  Operator k = like;
  k.cost = OpCost{};
  (pass == Pass::kForward ? k.cost.fwd_bytes : k.cost.bwd_bytes) = bytes;
  return compute.time(k, pass);
}

// The unfused kernels' time for `elements` scores on one device.
Seconds unfused_softmax(const Operator& like, double elements, const double (&bytes)[5], Pass pass,
                        const ComputeModel& compute) {
  Seconds t(0.0);
  for (double b : bytes) t += memory_kernel(like, b * elements, pass, compute);
  return t;
}

// Transformer Engine's memory-bound FP8 kernels around one of a layer's FP8 linear
// layers (`raw` unsharded: m tokens, k inputs, n outputs; `op` this rank's share), as
// Megatron-Core's TE modules run them (TE 1.10-1.11, delayed scaling): added to its
// forward `f` and backward `b`, with the kernels the host issues (one launch each). A
// column-parallel layer whose input is a norm's output (QKV, fc1 or gate/up, MLA's up
// projections: TELayerNormColumnParallelLinear) gets it in FP8 from the norm itself; a
// mixture of experts' shared expert (TEColumnParallelLinear after the MLP's norm) casts
// its input first (its shard under sequence parallelism). Its backward casts and
// transposes its output gradient (read 16-bit, write FP8 twice:
// fp8_cast_transpose(_bgrad)_fused) and transposes the input's FP8 copy for the weight
// gradient (read and write 1 byte; the whole sequence under sequence parallelism,
// gathered again). A row-parallel layer (attention projection, fc2 or down:
// TERowParallelLinear) casts its input shard in forward (and transposes it there without
// sequence parallelism); its backward casts the output gradient and transposes it:
// without sequence parallelism the whole gradient at once, with it each rank its shard,
// transposed again once gathered, and the input's FP8 copy transposed for the weight
// gradient. A replicated layer (MLA's down projections: TELinear, on the rank's tokens)
// casts and transposes its input in forward and its output gradient in backward.
// A routed expert's linear layer casts and transposes its input in forward and its
// output gradient in backward, on the rank's dispatched rows (see below). Weights are
// taken as FP8 already (NeMo's fp8_params) and their transposes as cached; the pass's
// amax reduction is stage_costs.hpp's (amax_reduction_bytes). All of it counts in the
// backward (B) pass.
void fp8_casts(const Operator& raw, const Operator& op, const ParallelPlan& plan, DataType act, double tokens,
               const ComputeModel& compute, Seconds& f, Seconds& b, int& kf, int& kb) {
  const Split s = split_of(raw);
  const double m = static_cast<double>(raw.gemm.batch * raw.gemm.m), k = static_cast<double>(raw.gemm.k),
               n = static_cast<double>(raw.gemm.n), t = plan.tp, A = data_type_bytes(act), F = 1.0;
  const bool sp = plan.sequence_parallel && plan.tp > 1;
  const auto kernel = [&](double bytes, Pass pass, Seconds& into, int& count) {
    into += memory_kernel(raw, bytes, pass, compute);
    ++count;
  };
  if (in_experts(raw) || s == Split::kReplicated) {
    // A routed expert's linear layer (a plain Linear, or one of TE's grouped ones, on the
    // rank's dispatched rows, whole on each tp rank) or a replicated one (on the rank's
    // tokens, its share under sequence parallelism): its input cast and transposed in
    // the forward, its output gradient in the backward, on the rank's shard of the
    // weight (one kernel each, as a grouped GEMM's multi-tensor cast runs them).
    // Under fp8_dispatch an expert's tokens travel in FP8 already: the first linear's
    // input was cast before the dispatch, once per token (`tokens`, the rank's own), not
    // per copy (the FP8 rows' transpose for its weight gradient, rows x k x 2 bytes, left
    // out: DeepSeek-V3's recipe, which dispatches in FP8, quantizes in its own kernels).
    const double rows = static_cast<double>(op.gemm.batch * op.gemm.m);
    if (in_experts(raw) && plan.fp8_dispatch && s == Split::kColumns) {
      kernel(tokens * static_cast<double>(op.gemm.k) * (A + F), Pass::kForward, f, kf);
    } else {
      kernel(rows * static_cast<double>(op.gemm.k) * (A + 2 * F), Pass::kForward, f, kf);
    }
    kernel(rows * static_cast<double>(op.gemm.n) * (A + 2 * F), Pass::kBackward, b, kb);
    return;
  }
  if (s == Split::kRows) {
    const double shard = m * static_cast<double>(op.gemm.k);  // the input's elements on this rank
    kernel(shard * (A + F + (sp ? 0.0 : F)), Pass::kForward, f, kf);
    if (sp) {
      kernel(m * n / t * (A + F), Pass::kBackward, b, kb);
      kernel(m * n * 2 * F, Pass::kBackward, b, kb);
      kernel(shard * 2 * F, Pass::kBackward, b, kb);
    } else {
      kernel(m * n * (A + 2 * F), Pass::kBackward, b, kb);
    }
  } else if (s == Split::kColumns) {
    // (The shared expert's first linear: its input cast, the shard under sequence parallelism.)
    if (raw.name.find(".shared.") != std::string::npos) kernel(m * k / (sp ? t : 1.0) * (A + F), Pass::kForward, f, kf);
    kernel(m * static_cast<double>(op.gemm.n) * (A + 2 * F), Pass::kBackward, b, kb);
    kernel(m * k * 2 * F, Pass::kBackward, b, kb);
  }
}

}  // namespace

StageCosts stage_costs(const TransformerConfig& model, const ParallelPlan& plan, const ComputeModel& compute) {
  TransformerConfig one = model;
  one.layers = 1;
  one.dense_layers.clear();  // its layer a mixture of experts where the model has experts
  one.mtp_layers = std::min<std::int64_t>(model.mtp_layers, 1);  // one depth's operators before its layer
  one.expert_load = routed_load(model, plan);  // the busiest rank's expert rows, or its capacity
  const OperatorGraph g = build_transformer(one, plan.micro_batch);
  StageCosts c;
  bool in_mlp = false;
  // Operators with work in each pass, per half layer: the host issues each one.
  struct Issued {
    int forward = 0, backward = 0, recompute = 0;
    int backward_single = 0;  // backward kernels of one launch each (FP8 casts), not two
  } attention, mlp;
  bool dispatched = false;  // past a mixture of experts' dispatch
  double dispatched_bytes = 0.0;  // a rank's dispatched rows (the dispatch's output), bytes
  bool sequential_buffers = false;  // SequentialMLP's buffers priced (once, at the first expert operator)
  const int local_experts = model.experts > 0 ? static_cast<int>(model.experts / std::max(1, plan.ep)) : 0;
  const bool sequential = !plan.grouped_gemm && local_experts > 0;
  // Work a mixture of experts adds among its experts (in the MLP half): its forward and
  // backward, the kernels the host issues for them (backward ones at the forward's
  // dispatch or at twice it), and its forward again where the layer is recomputed.
  const auto among_experts = [&](Seconds f, Seconds b, int forwards, int backwards, int single_backwards, bool recomputed) {
    c.mlp.forward += f, c.mlp.backward += b;
    c.experts.forward += f, c.experts.backward += b;
    mlp.forward += forwards, mlp.backward += backwards, mlp.backward_single += single_backwards;
    if (recomputed) {
      c.mlp.recompute += f, c.experts.recompute += f;
      mlp.recompute += forwards;
    }
  };
  const unsigned modules = selective_modules(plan);
  for (const Operator& raw : g.ops()) {
    const Operator op = sharded(raw, model, plan.tp, plan.sequence_parallel, plan.ep);
    Seconds f = compute.time(op, Pass::kForward), b = compute.time(op, Pass::kBackward);
    int kernels = 1;  // what the host issues for this operator in each pass
    if (op.kind == OpKind::kSoftmax && attention_core(op) && data_type_bytes(model.dtype) == 2.0 &&
        !megatron_fused_softmax(model, plan.micro_batch, plan.tp)) {
      const double scores = static_cast<double>(plan.micro_batch) * static_cast<double>(model.heads / plan.tp) *
                            static_cast<double>(model.seq) * static_cast<double>(model.seq);
      f = unfused_softmax(op, scores, kUnfusedForward, Pass::kForward, compute);
      b = unfused_softmax(op, scores, kUnfusedBackward, Pass::kBackward, compute);
      kernels = 5;
    }
    // (Experts one after another: each expert operator as one kernel per local expert, on
    // its rows and weights, its FP8 casts too.)
    const int pieces = sequential && in_experts(op) ? local_experts : 1;
    if (pieces > 1) {
      Operator piece = op;
      piece.gemm.batch = std::max<std::int64_t>(1, op.gemm.batch / pieces);
      piece.cost.fwd_flops /= pieces, piece.cost.bwd_flops /= pieces;
      piece.cost.fwd_bytes /= pieces, piece.cost.bwd_bytes /= pieces;
      f = compute.time(piece, Pass::kForward) * static_cast<double>(pieces);
      b = compute.time(piece, Pass::kBackward) * static_cast<double>(pieces);
      kernels = pieces;
    }
    if (op.layer > 0) continue;  // the multi-token prediction layer: priced as the model's layers
    if (op.layer < 0 && op.name.rfind("mtp", 0) == 0) {
      // A multi-token prediction depth's embedding, norms, join and projection (its
      // norm, output layer and loss after its layer cost as the model's).
      if (ends_with(op.name, ".final_norm") || ends_with(op.name, ".output") || ends_with(op.name, ".loss")) continue;
      c.mtp_forward += f;
      c.mtp_backward += b;
      if (op.kind == OpKind::kLinear) c.mtp_weight_gradient += b * 0.5;
      continue;
    }
    if (op.layer < 0) {
      const bool first = op.kind == OpKind::kEmbedding || op.name.rfind("embed", 0) == 0;
      (first ? c.first_forward : c.last_forward) += f;
      (first ? c.first_backward : c.last_backward) += b;
      if (!first && op.kind == OpKind::kLinear) c.last_weight_gradient += b * 0.5;
      continue;
    }
    if (attention_core(op)) {
      c.core_forward += f;
      c.core_backward += b;
    }
    // (FP8: Transformer Engine's casts and transposes around the layer's linear layers.)
    Seconds cast_f(0.0), cast_b(0.0);
    int cast_kf = 0, cast_kb = 0;
    if (model.fp8_gemms && raw.kind == OpKind::kLinear && raw.dtype == DataType::kFp8) {
      fp8_casts(raw, op, plan, model.dtype, static_cast<double>(plan.micro_batch * model.seq), compute, cast_f, cast_b, cast_kf,
                cast_kb);
      if (pieces > 1) {
        const Seconds launch = compute.efficiency().launch;
        cast_f += launch * static_cast<double>((pieces - 1) * cast_kf);
        cast_b += launch * static_cast<double>((pieces - 1) * cast_kb);
        cast_kf *= pieces, cast_kb *= pieces;
      }
      c.fp8_cast_forward += cast_f;
      c.fp8_cast_backward += cast_b;
      c.fp8_linears += 1;
    }
    HalfLayer& half = in_mlp ? c.mlp : c.attention;
    Issued& n = in_mlp ? mlp : attention;
    const int fwd = (f.value() > 0.0 ? kernels : 0) + cast_kf;
    half.forward += f + cast_f;
    half.backward += b + cast_b;
    n.forward += fwd;
    n.backward += b.value() > 0.0 ? kernels : 0;
    n.backward_single += cast_kb;
    const bool recomputed = plan.recompute == Recompute::kFull || (modules != 0 && (modules & recompute_module(op)) != 0);
    if (recomputed) {
      half.recompute += f + cast_f;
      n.recompute += fwd;
    }
    if (op.kind == OpKind::kLinear && split_of(op) == Split::kColumns) half.weight_gradient += b * 0.5;  // QKV, fc1, gate/up
    if (op.kind == OpKind::kLinear && !in_experts(op)) {
      // (tp_comm_overlap: the pieces its places run the GEMM in.)
      const TpCommOverlap& ub = plan.tp_comm_overlap;
      const auto pieces = [&](int site) {
        if (!ub.on) return 1;
        return ub.site[site].method == UbMethod::kPipeline ? ub.site[site].num_splits
               : ub.site[site].method == UbMethod::kRingExchange ? plan.tp : 1;
      };
      if (split_of(op) == Split::kColumns) {
        half.column_gemm += f;
        half.column_pieces += in_pieces(op, Pass::kForward, pieces(in_mlp ? kFc1Fprop : kQkvFprop), compute, f);
      }
      if (split_of(op) == Split::kRows) {
        half.row_gemm += f, half.row_dgrad += b * 0.5;
        half.row_pieces += in_pieces(op, Pass::kForward, pieces(in_mlp ? kFc2Fprop : kProjFprop), compute, f);
        half.row_dgrad_pieces += in_pieces(op, Pass::kBackward, pieces(in_mlp ? kFc2Dgrad : kProjDgrad), compute, b) * 0.5;
      }
    }
    if (op.kind == OpKind::kLinear) half.weight_gradients += b * 0.5;
    if (in_mlp && model.experts > 0 && (!dispatched || in_experts(op))) {
      HalfLayer& part = dispatched ? c.experts : c.moe_pre;
      part.forward += f + cast_f;
      part.backward += b + cast_b;
      if (recomputed) part.recompute += f + cast_f;
    }
    if (ends_with(op.name, ".dispatch")) {
      dispatched = true;
      dispatched_bytes = op.cost.fwd_bytes / 2.0;  // (its rows read and written)
      // Megatron-Core's all-to-all dispatcher under expert parallelism with more than one
      // expert per rank: the rows a rank receives come ordered by source rank, then
      // expert, and are sorted into expert order before the experts and back after them
      // (sort_chunks_by_idxs), a copy of the rank's dispatched rows each way in the
      // forward and each way again in the backward (the copies' gradients). DeepEP's
      // dispatch hands them over grouped by expert; with ep 1 nothing is exchanged.
      if (plan.dispatcher == TokenDispatcher::kAllToAll && plan.ep > 1 && model.experts / plan.ep > 1) {
        // (Every row read and written, each pass.)
        among_experts(memory_kernel(op, op.cost.fwd_bytes, Pass::kForward, compute) * 2.0,
                      memory_kernel(op, op.cost.fwd_bytes, Pass::kBackward, compute) * 2.0, 2, 2, 0, recomputed);
      }
    }
    if (sequential && in_experts(op) && !sequential_buffers) {
      // Megatron-Core 0.9's SequentialMLP (megatron/core/transformer/moe/experts.py): each
      // expert's output is copied into a zeroed buffer of all the rank's rows
      // (`output_local[start:end] = output`: one fill, one copy per expert). In the
      // backward PyTorch undoes each copy out of place (CopySlices: the whole incoming
      // gradient copied, the expert's rows cloned, and for every expert after the first,
      // whose buffer already held an earlier expert's rows, those rows zeroed: a fill and
      // a copy of them), and each expert's input gradient is a zeroed buffer of all the
      // rows with its own copied in (the slice's backward), the experts' buffers then
      // summed into one (an add of two buffers per expert after the first).
      sequential_buffers = true;
      const double rows = dispatched_bytes, k = local_experts;
      const auto moved = [&](double bytes, double kernels) {  // kernels moving `bytes` between them
        return kernels > 0.0 ? memory_kernel(op, bytes / kernels, Pass::kForward, compute) * kernels : Seconds(0.0);
      };
      const Seconds sf = moved(rows, 1) + moved(2.0 * rows, k);
      const Seconds undo = moved(2.0 * k * rows, k) + moved(2.0 * rows, k) + moved(rows * (k - 1) / k, k - 1) +
                           moved(2.0 * rows * (k - 1) / k, k - 1);
      const Seconds slices = moved(k * rows, k) + moved(2.0 * rows, k) + moved(3.0 * rows * (k - 1), k - 1);
      among_experts(sf, undo + slices, 1 + local_experts, 0, (4 * local_experts - 2) + (3 * local_experts - 1), recomputed);
    }
    if (op.kind == OpKind::kLinear && in_experts(op)) c.expert_params += op.cost.params;
    c.layer_params += op.cost.params;
    if (ends_with(op.name, ".residual1")) in_mlp = true;
  }
  // A half layer's kernels run back to back while the host issues them ahead; when they
  // are shorter than the host needs to issue them, the host sets the pace.
  const HalfLayer raw_mlp = c.mlp;
  for (auto [half, n] : {std::pair{&c.attention, attention}, std::pair{&c.mlp, mlp}}) {
    half->forward = compute.dispatch_bound(half->forward, n.forward, 0);
    half->backward = compute.dispatch_bound(half->backward, n.backward_single, n.backward);
    half->recompute = compute.dispatch_bound(half->recompute, n.recompute, 0);
    half->weight_gradient = std::min(half->weight_gradient, half->backward);
    half->weight_gradients = std::min(half->weight_gradients, half->backward);
  }
  // The MLP's parts keep their shares of it when the host sets its pace.
  const auto scale = [](Seconds part, Seconds whole, Seconds raw) {
    return raw.value() > 0.0 ? part * (whole.value() / raw.value()) : Seconds(0.0);
  };
  for (HalfLayer* part : {&c.moe_pre, &c.experts}) {
    part->forward = scale(part->forward, c.mlp.forward, raw_mlp.forward);
    part->backward = scale(part->backward, c.mlp.backward, raw_mlp.backward);
    part->recompute = scale(part->recompute, c.mlp.recompute, raw_mlp.recompute);
  }
  const double act = static_cast<double>(plan.micro_batch) * static_cast<double>(model.seq) *
                     static_cast<double>(model.hidden) * data_type_bytes(model.dtype);
  c.tp_bytes = act;
  c.p2p_bytes = act / plan.tp;  // Megatron's scatter-gather: each tp rank sends its 1/t
  if (model.experts > 0) {
    const double elements = static_cast<double>(one.experts * one.expert_rows(plan.micro_batch)) *
                            static_cast<double>(model.hidden);
    // (Megatron-Core runs experts with tp only under sequence parallelism; without it
    // ddlsim keeps every tp rank's whole buffer and the MLP's dense collective.)
    const bool split = plan.tp > 1 && plan.sequence_parallel && plan.ep > 1 && plan.dispatcher == TokenDispatcher::kAllToAll;
    c.a2a_bytes = elements * data_type_bytes(model.dtype) / (split ? plan.tp : 1);
    c.a2a_dispatch_bytes = plan.fp8_dispatch ? elements * kFp8DispatchBytes : c.a2a_bytes;
    if (split) c.moe_tp_share = elements * data_type_bytes(model.dtype) / act;
  }
  if (model.context_parallel > 1) {
    // Each rank's keys and values: its kv_heads / kv_ways(tp) groups of keys (qk head
    // size) and values (head size) for each of its tokens.
    const double groups = static_cast<double>(model.kv_heads / model.kv_ways(plan.tp));
    c.cp_kv_bytes = static_cast<double>(plan.micro_batch) * static_cast<double>(model.seq) * groups *
                    static_cast<double>(model.qk_head_dim() + model.head_dim()) * data_type_bytes(model.dtype);
  }
  c.first_params = embedding_parameters(model, plan);
  c.last_params = final_norm_parameters(model) + output_layer_parameters(model, plan);
  c.mtp_params = mtp_input_parameters(model, plan);
  if (model.mixed_layers()) {
    ParallelPlan dense_plan = plan;
    dense_plan.ep = 1;
    const StageCosts d = stage_costs(model.dense_layer_model(), dense_plan, compute);
    c.dense_mlp = d.mlp;
    c.dense_layer_params = d.layer_params;
  }
  return c;
}

namespace {
// The accelerators of a context ring (context_ring's ranks, without the group's domains).
std::vector<NodeId> ring_nodes(const NetworkFabric& fabric, const ParallelPlan& plan, int replica, int stage, int tp_rank) {
  std::vector<NodeId> ranks;
  for (int r = 0; r < plan.cp_folded; ++r) {
    ranks.push_back(fabric.cluster().accelerators()[mesh_rank(plan, replica * plan.cp_folded + r, stage, tp_rank)]);
  }
  return ranks;
}
}  // namespace

CollectiveGroup context_ring(NetworkFabric& fabric, const ParallelPlan& plan, int replica, int stage, int tp_rank) {
  return CollectiveGroup::of(fabric, ring_nodes(fabric, plan, replica, stage, tp_rank));
}

void add_context_ring(StageCosts& c, const TransformerConfig& model, const ParallelPlan& plan, NetworkFabric& fabric) {
  const int cp = static_cast<int>(model.context_parallel);
  if (cp <= 1 || plan.cp_folded != cp) return;
  double forward = 0.0, backward = 0.0;
  for (int i = 0; i < plan.pp; ++i) {
    CollectiveGroup g = context_ring(fabric, plan, 0, i, 0);
    // Every replica's ring of every tp rank runs at the same time.
    for (int rep = 0; rep < plan.dp / cp; ++rep) {
      for (int k = 0; k < plan.tp; ++k) {
        if (rep > 0 || k > 0) g.siblings.push_back(ring_nodes(fabric, plan, rep, i, k));
      }
    }
    for (const auto& [bytes, slowest] : {std::pair{c.cp_ring_bytes(cp, false), &forward}, std::pair{c.cp_ring_bytes(cp, true), &backward}}) {
      const CollectiveSpec spec = chosen_spec(fabric, g, CollectiveOp::kAllGather, bytes);
      *slowest = std::max(*slowest, analytical_collective_time(fabric, g, spec));
    }
  }
  const double covered = static_cast<double>(cp - 1) / cp;
  c.ring_forward = Seconds(std::max(0.0, forward - covered * c.core_forward.value()));
  c.ring_backward = Seconds(std::max(0.0, backward - covered * c.core_backward.value()));
  c.attention.forward += c.ring_forward;
  c.attention.backward += c.ring_backward;
  if (plan.recompute == Recompute::kFull || (selective_modules(plan) & kRecomputeCoreAttn) != 0) {
    c.attention.recompute += c.ring_forward;
  }
}

double recomputed_linear_flops_per_token(const TransformerConfig& model, const ParallelPlan& plan) {
  const unsigned modules = selective_modules(plan);
  if (modules == 0) return 0.0;
  // One layer of each form, one sequence: its recomputed linear layers' forward FLOPs.
  const auto per_layer = [&](TransformerConfig one) {
    one.layers = 1;
    one.dense_layers.clear();
    one.mtp_layers = 0;
    double flops = 0.0;
    const OperatorGraph g = build_transformer(one, 1);
    for (const Operator& op : g.ops()) {
      if (op.layer < 0 || op.kind != OpKind::kLinear || (recompute_module(op) & modules) == 0) continue;
      const GemmShape& g = op.gemm;  // 2 m n k per product, as model FLOPs count them (no bias adds)
      flops += 2.0 * static_cast<double>(std::max<std::int64_t>(g.batch, 1)) * static_cast<double>(g.m) *
               static_cast<double>(g.n) * static_cast<double>(g.k);
    }
    return flops / static_cast<double>(model.seq);
  };
  // (Multi-token prediction layers recompute as the model's layers do.)
  const double mtp = static_cast<double>(model.mtp_layers);
  const double all = static_cast<double>(model.layers) + mtp;
  const double primary = model.experts > 0 ? static_cast<double>(model.moe_layers_in(0, model.layers)) + (model.mtp_dense() ? 0.0 : mtp)
                                           : all;
  double flops = primary * per_layer(model);
  if (primary < all) flops += (all - primary) * per_layer(model.dense_layer_model());
  return flops;
}

double optimizer_bytes(double gradient_bytes, DataType weights) {
  constexpr double kNorm = kFp32Bytes;                          // read the fp32 gradient
  constexpr double kAdam = 7 * kFp32Bytes;                      // read 4 tensors, write 3
  if (weights == DataType::kFp32) return kNorm + kAdam;
  const double to_main = gradient_bytes < kFp32Bytes ? gradient_bytes + kFp32Bytes : 0.0;
  const double unscale = weights == DataType::kFp16 ? 2 * kFp32Bytes : 0.0;
  constexpr double to_model = kFp32Bytes + kGradientBytes;     // read fp32, write 16-bit
  return to_main + unscale + kNorm + kAdam + to_model;
}

Seconds optimizer_step_time(double params, const ComputeModel& compute, double gradient_bytes, DataType weights) {
  Operator opt{OpKind::kAdd, "optimizer", -1, {}, 0, {}, DataType::kFp32, {}};
  opt.cost.fwd_bytes = params * optimizer_bytes(gradient_bytes, weights);
  return compute.time(opt, Pass::kForward);
}

double grad_accumulation_bytes(const ParallelPlan& p, DataType weights) {
  if (p.grad_accumulation != GradAccumulation::kFused && weights == DataType::kFp32) return 3 * kFp32Bytes;
  switch (p.grad_accumulation) {
    case GradAccumulation::kFused: return 0.0;
    case GradAccumulation::kAdd: return p.grad_reduce_fp32 ? kGradientBytes + 2 * kFp32Bytes : 3 * kGradientBytes;
    case GradAccumulation::kFp32: return kGradientBytes + 4 * kFp32Bytes;
  }
  return 0.0;
}

CollectiveSpec dispatch_spec(NetworkFabric& fabric, const CollectiveGroup& group, const TransformerConfig& model,
                             const ParallelPlan& plan, double bytes) {
  if (plan.dispatcher == TokenDispatcher::kAllToAll || model.experts <= 0) {
    return chosen_spec(fabric, group, CollectiveOp::kAllToAll, bytes);
  }
  // (A token reaches at most as many GPUs or servers as it has experts: at most 1 but
  // for rounding.)
  const auto share = [&](std::size_t parts) {
    return std::min(1.0, experts_spread(model, static_cast<std::int64_t>(parts)) / static_cast<double>(model.experts_per_token));
  };
  const double per_gpu = share(group.ranks.size());
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllToAll;
  spec.bytes = bytes;
  spec.channels = 1;  // (as the selector gives an algorithm without channels)
  if (unsupported_reason(group, CollectiveOp::kAllToAll, CollectiveAlgorithm::kHierarchical).empty()) {
    spec.algorithm = CollectiveAlgorithm::kHierarchical;
    spec.across = share(group.by_domain().size());
    spec.within = per_gpu;
  } else {
    spec.algorithm = CollectiveAlgorithm::kDirect;
    spec.bytes = bytes * per_gpu;
  }
  spec.low_latency = choose_protocol(fabric, group, spec);  // once, not at each pricing and lowering
  return spec;
}

Seconds grad_accumulation_time(double params, const ParallelPlan& p, DataType weights, const ComputeModel& compute) {
  if (p.grad_accumulation == GradAccumulation::kFused || params <= 0.0) return Seconds(0.0);
  Operator acc{OpKind::kAdd, "gradient accumulation", -1, {}, 0, {}, DataType::kFp32, {}};
  acc.cost.fwd_bytes = params * grad_accumulation_bytes(p, weights);
  return compute.time(acc, Pass::kForward);
}

double amax_all_reduce_time(const ParallelPlan& plan, NetworkFabric& fabric, int stage, double bytes) {
  // (A context_folded plan's dp counts its cp ranks, replica 0's the first cp_folded.)
  const int replicas = plan.tp_only_amax ? plan.cp_folded : plan.dp;
  if (replicas * plan.tp < 2 || bytes <= 0.0) return 0.0;
  std::vector<NodeId> nodes;
  for (int d = 0; d < replicas; ++d) {
    for (int k = 0; k < plan.tp; ++k) nodes.push_back(fabric.cluster().accelerators()[mesh_rank(plan, d, stage, k)]);
  }
  const CollectiveGroup g = CollectiveGroup::of(fabric, nodes);
  return analytical_collective_time(fabric, g, chosen_spec(fabric, g, CollectiveOp::kAllReduce, bytes));
}

UbHalf ub_half(const HalfLayer& h, bool mlp, const ParallelPlan& plan, bool fp8_gemms, double ar, const ComputeModel& device) {
  const TpCommOverlap& o = plan.tp_comm_overlap;
  const int sms = device.device().sms;
  const double slowdown = device.efficiency().overlap_slowdown;
  const auto piece = [&](int site, double gemm) {
    UbPiece u;
    u.share = 0.5 * (fp8_gemms && ub_fp8_moves(o.site[site], site) ? 0.5 : 1.0);  // an all-gather or reduce-scatter: half an all-reduce
    const UbTimes t = ub_overlap_times(o.site[site], gemm, u.share * ar, plan.tp, sms, slowdown);
    u.gemm = t.gemm, u.comm = u.share * ar, u.tail = t.tail;
    return u;
  };
  // (Each GEMM as the overlap runs it, in pieces; the rest of the half without the whole.
  // The column-parallel linear's input gradient and weight gradient have equal FLOPs:
  // weight_gradient each.)
  const double column = h.column_gemm.value(), row = h.row_gemm.value(), wgrad = h.weight_gradient.value();
  UbHalf u;
  u.gather = piece(mlp ? kFc1Fprop : kQkvFprop, h.column_pieces.value());
  u.scatter = piece(mlp ? kFc2Fprop : kProjFprop, h.row_pieces.value());
  u.forward_rest = std::max(0.0, h.forward.value() - column - row);
  u.dgrad_gather = piece(mlp ? kFc2Dgrad : kProjDgrad, h.row_dgrad_pieces.value());
  u.input_gather = piece(mlp ? kFc1Dgrad : kQkvDgrad, wgrad);
  u.wgrad_scatter = piece(mlp ? kFc1Wgrad : kQkvWgrad, wgrad);
  u.backward_rest = std::max(0.0, h.backward.value() - h.row_dgrad.value() - 2.0 * wgrad);
  return u;
}

}  // namespace ddlsim
