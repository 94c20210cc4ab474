#include "strategies/plan.hpp"

#include <algorithm>

#include "support/strings.hpp"

namespace ddlsim {

std::int64_t fitting_microbatch_group(int pp, std::int64_t micro_batches) {
  std::int64_t g = pp;
  while (g < micro_batches && micro_batches % g != 0 && micro_batches % g < pp) ++g;
  return g;
}

double routed_load(const TransformerConfig& m, const ParallelPlan& p) {
  if (m.experts <= 0) return 1.0;
  if (p.pad_to_capacity && p.capacity_factor > 0.0) return p.capacity_factor;
  double load = 1.0;
  if (p.ep > 1) {
    const double k = static_cast<double>(m.experts_per_token);
    const double most = p.ep * std::min(k, static_cast<double>(m.experts / p.ep)) / k;
    load = std::min(m.moe_imbalance, most);
  }
  return p.capacity_factor > 0.0 ? std::min(load, p.capacity_factor) : load;
}

TransformerConfig routed_model(const TransformerConfig& model, const ParallelPlan& plan) {
  TransformerConfig m = model;
  m.expert_load = routed_load(model, plan);
  return m;
}

std::string plan_problem(const ParallelPlan& p, const TransformerConfig& m, std::size_t devices) {
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  if (p.dp < 1 || p.tp < 1 || p.pp < 1) return "dp, tp and pp must be at least 1";
  if (p.cp < 1) return "cp must be at least 1";
  if (p.cp > 1) {
    // Megatron-Core splits each sequence into 2 cp chunks (load balancing for causal
    // attention) and runs context parallelism through Transformer Engine's fused
    // attention.
    if (m.seq % (2 * static_cast<std::int64_t>(p.cp)) != 0) {
      return "cp (" + n(p.cp) + ") needs the sequence (" + n(m.seq) + ") to split into 2 x cp = " + n(2 * p.cp) +
             " equal chunks";
    }
    if (!m.flash_attention) return "cp > 1 needs flash attention (workload attention \"flash\"): context parallelism runs in its kernels";
    if (m.mla()) return "cp > 1 is not modelled with multi-head latent attention";
    if (m.mtp_layers > 0) return "cp > 1 is not modelled with multi-token prediction";
  }
  if (p.virtual_stages < 1) return "virtual_stages must be at least 1";
  if (p.ep < 1) return "ep must be at least 1";
  if (p.ep > 1) {
    if (m.experts == 0) return "ep (" + n(p.ep) + ") needs a mixture-of-experts model (experts), this one is dense";
    if (m.experts % p.ep != 0) return "ep (" + n(p.ep) + ") must divide the experts (" + n(m.experts) + ")";
    // Megatron-Core (0.7 to 0.9, NeMo 24.x) forms each expert-parallel group of ep
    // consecutive ranks of the dp x cp ones (cp inside dp), so with context parallelism
    // an expert's tokens come from both; its gradients go over the dp x cp / ep others.
    if ((p.dp * p.cp) % p.ep != 0) {
      return p.cp > 1 ? "ep (" + n(p.ep) + ") must divide dp x cp (" + n(p.dp) + " x " + n(p.cp) +
                            "): expert parallelism splits the data- and context-parallel ranks"
                      : "ep (" + n(p.ep) + ") must divide dp (" + n(p.dp) + "): expert parallelism splits data-parallel ranks";
    }
    if (p.dp_mode == DataParallelMode::kZero2 || p.dp_mode == DataParallelMode::kZero3) {
      return "ep > 1 is modelled with zero 0 or 1 only (ZeRO-2/3 would shard expert states over dp / ep)";
    }
    if (p.schedule == PipelineSchedule::kZeroBubbleH1) return "ep > 1 is not modelled with the zero-bubble schedule";
    if (m.parallel_layers) return "ep > 1 is not modelled with parallel attention and MLP layers";
    if (p.overlap_ep_comm && p.schedule == PipelineSchedule::kGPipe) {
      return "overlap_ep_comm pairs each forward with a backward: it needs the 1f1b or interleaved schedule, not gpipe";
    }
  }
  if (m.experts == 0) {
    if (p.dispatcher != TokenDispatcher::kAllToAll) return "moe_dispatcher \"deepep\" needs a mixture-of-experts model (experts), this one is dense";
    if (p.overlap_ep_comm) return "overlap_ep_comm needs a mixture-of-experts model (experts), this one is dense";
  }
  if (p.tp_only_amax && !m.fp8_gemms) {
    return "tp_only_amax_red needs FP8 GEMMs (workload gemm_dtype \"fp8\"): it chooses the ranks that reduce their amaxes";
  }
  if (p.fp8_params) {
    if (!m.fp8_gemms) return "fp8_params needs FP8 GEMMs (workload gemm_dtype \"fp8\"): it keeps their weights in FP8";
    if (p.master_remainders) {
      return "master_weights \"remainders\" completes bf16 weights to fp32; with fp8_params the weights are FP8 (leave master_weights \"fp32\")";
    }
  }
  if (p.master_remainders && m.dtype != DataType::kBf16) {
    return std::string("master_weights \"remainders\" needs a bf16 model (the remainders complete bf16 weights to fp32), this one is ") +
           std::string(data_type_name(m.dtype));
  }
  if (p.fp8_dispatch) {
    if (m.experts == 0) return "fp8_dispatch needs a mixture-of-experts model (experts), this one is dense";
    if (p.dispatcher != TokenDispatcher::kDeepEp) return "fp8_dispatch needs moe_dispatcher \"deepep\" (DeepEP's kernels dispatch FP8)";
    if (!m.fp8_gemms) return "fp8_dispatch needs FP8 GEMMs (workload gemm_dtype \"fp8\"): the experts take the FP8 tokens as they come";
  }
  if (!p.grouped_gemm && m.experts == 0) return "moe_grouped_gemm needs a mixture-of-experts model (experts), this one is dense";
  if (p.capacity_factor != 0.0 || p.pad_to_capacity) {
    if (m.experts == 0) {
      return std::string(p.capacity_factor != 0.0 ? "moe_capacity_factor" : "moe_pad_to_capacity") +
             " needs a mixture-of-experts model (experts), this one is dense";
    }
    const double most = static_cast<double>(m.experts) / static_cast<double>(m.experts_per_token);
    if (!(p.capacity_factor > 0.0 && p.capacity_factor <= most)) {
      return p.pad_to_capacity && p.capacity_factor == 0.0
                 ? "moe_pad_to_capacity needs moe_capacity_factor (the capacity to pad to)"
                 : printf_string("moe_capacity_factor must be above 0 and at most experts / experts_per_token (%g: an "
                                 "expert taking every token), got %g",
                                 most, p.capacity_factor);
    }
    if (p.pad_to_capacity && p.ep > 1 && p.dispatcher == TokenDispatcher::kDeepEp) {
      return "moe_pad_to_capacity is not modelled with moe_dispatcher \"deepep\" (Megatron-Core's flex dispatcher does not pad "
             "to capacity)";
    }
  }
  if (p.micro_batch < 1 || p.global_batch < 1) return "global_batch and micro_batch must be at least 1";
  const auto count = [&](MeshAxis a) { return std::count(p.order.begin(), p.order.end(), a); };
  if (count(MeshAxis::kTp) != 1 || count(MeshAxis::kPp) != 1 || count(MeshAxis::kDp) != 1 || count(MeshAxis::kCp) > 1 ||
      p.order.size() != 3 + static_cast<std::size_t>(count(MeshAxis::kCp))) {
    return "order must name each of tp, pp and dp once (and cp at most once)";
  }
  const std::uint64_t total = static_cast<std::uint64_t>(p.dp) * p.cp * p.tp * p.pp;
  if (total > devices) {
    return std::string(p.cp > 1 ? "dp x cp x tp x pp = " : "dp x tp x pp = ") + n(static_cast<std::int64_t>(total)) +
           " devices, but the cluster has " + n(static_cast<std::int64_t>(devices));
  }
  if (m.heads % p.tp != 0) return "tp (" + n(p.tp) + ") must divide the attention heads (" + n(m.heads) + ")";
  if (m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
    return "tp (" + n(p.tp) + ") and the key-value heads (" + n(m.kv_heads) + ") must divide one another";
  }
  if (m.ffn % p.tp != 0) return "tp (" + n(p.tp) + ") must divide the FFN size (" + n(m.ffn) + ")";
  if (m.mixed_layers() && m.dense_mlp_ffn() % p.tp != 0) {
    return "tp (" + n(p.tp) + ") must divide the dense layers' FFN size (" + n(m.dense_mlp_ffn()) + ")";
  }
  if (m.shared_ffn % p.tp != 0) return "tp (" + n(p.tp) + ") must divide the shared expert's FFN size (" + n(m.shared_ffn) + ")";
  if (p.sequence_parallel && p.tp == 1) return "sequence parallelism needs tp > 1";
  if (p.overlap_param_gather && p.dp_mode != DataParallelMode::kZero1) {
    return "overlap_param_gather applies to zero 1 (Megatron-Core's distributed optimizer: the all-gather of the updated weights)";
  }
  // (Megatron-Core asserts it too: the gathers go by the gradient buckets.)
  if (p.overlap_param_gather && !p.overlap_grad_reduce) return "overlap_param_gather needs overlap_grad_reduce (its buckets)";
  if (p.tp_comm_overlap.on) {
    // (TE's userbuffers overlap all-gathers and reduce-scatters: sequence parallelism's.)
    if (!p.sequence_parallel) return "tp_comm_overlap needs sequence parallelism (sequence_parallel, tp > 1)";
    if (p.overlap_tp_backward) return "tp_comm_overlap already overlaps the backward's collectives: leave out overlap_tp_backward";
    if (m.parallel_layers) return "tp_comm_overlap is not modelled for parallel attention and MLP branches (parallel_layers)";
    if (m.kv_lora_rank > 0) return "tp_comm_overlap is not modelled for multi-head latent attention";
    if (p.schedule == PipelineSchedule::kZeroBubbleH1) return "tp_comm_overlap is not modelled with the zero-bubble schedule";
  }
  if (p.shard < 0) return "shard must be at least 1 (or 0: every data-parallel rank)";
  if (p.shard > 0 && p.dp_mode != DataParallelMode::kZero3) return "shard applies to ZeRO-3 (zero 3) only";
  if (p.shard > 0 && p.dp % p.shard != 0) {
    return "shard (" + n(p.shard) + ") must divide dp (" + n(p.dp) + ")";
  }
  if (p.recompute_layers < 0) return "recompute_layers must be at least 1 (or 0: every layer)";
  if (p.recompute_layers > 0 && p.recompute != Recompute::kFull) {
    return "recompute_layers needs full recomputation (recompute \"full\")";
  }
  if (m.fp8_gemms && p.dp_mode == DataParallelMode::kZero3) {
    return "fp8 GEMMs (workload gemm_dtype) under ZeRO-3 are not modelled (zero 0, 1 or 2)";
  }
  if (p.recompute_modules != kDefaultRecomputeModules && p.recompute != Recompute::kSelective) {
    return "recompute_modules needs selective recomputation (recompute \"selective\")";
  }
  if (const unsigned rm = selective_modules(p); rm != 0) {
    if (rm & kRecomputeMlaUpProj && !m.mla()) return "recompute_modules: mla_up_proj needs multi-head latent attention";
    if (rm & kRecomputeMoeAct && m.experts == 0) return "recompute_modules: moe_act needs a mixture of experts";
    if (rm & kRecomputeSharedExperts && m.shared_ffn == 0) {
      return "recompute_modules: shared_experts needs a mixture of experts with a shared expert";
    }
    if (rm & kRecomputeMlp && m.experts > 0 && !m.mixed_layers()) {
      return "recompute_modules: mlp recomputes dense MLPs, and every layer of this model is a mixture of experts";
    }
  }
  if (p.recompute_layers > m.layers) {
    return "recompute_layers (" + n(p.recompute_layers) + ") exceeds the layers (" + n(m.layers) + ")";
  }
  // Sequence parallelism: Megatron splits the sequence (tp dividing it), XLA's GSPMD
  // (PaLM on TPUs) the hidden dimension of the same activations; ddlsim prices both as
  // 1/tp of each, and needs tp to divide one of them (it divides the hidden size
  // whenever the heads do, unless the model sizes its heads apart from it).
  if (p.sequence_parallel && m.seq % p.tp != 0 && m.hidden % p.tp != 0) {
    return "sequence parallelism needs tp (" + n(p.tp) + ") to divide the sequence (" + n(m.seq) +
           ") or the hidden size (" + n(m.hidden) + ")";
  }
  if (p.global_batch % (static_cast<std::int64_t>(p.dp) * p.micro_batch) != 0) {
    return "the global batch (" + n(p.global_batch) + ") must be divisible by dp x micro_batch (" +
           n(static_cast<std::int64_t>(p.dp) * p.micro_batch) + ")";
  }
  if (p.schedule != PipelineSchedule::kInterleaved1F1B && p.virtual_stages != 1) {
    return "virtual_stages applies to the interleaved schedule only";
  }
  if (p.schedule == PipelineSchedule::kZeroBubbleH1 && p.dp_mode == DataParallelMode::kZero3 && p.dp > 1) {
    return "the zero-bubble schedule is not modelled with ZeRO-3 (use zero 0, 1 or 2, or another schedule)";
  }
  // Interleaving needs stages to interleave and chunks to interleave them with: with one
  // chunk per device its warm-up, 2 (pp - i - 1), keeps twice 1F1B's activations for
  // 1F1B's step (Megatron-LM refuses it too).
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && p.pp < 2) return "the interleaved schedule needs pp of at least 2";
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && p.virtual_stages < 2) {
    return "the interleaved schedule needs virtual_stages of at least 2 (1 is the 1f1b schedule)";
  }
  if (p.align_param_gather && !p.overlap_param_gather) return "align_param_gather needs overlap_param_gather (the gathers it dispatches)";
  if (p.align_param_gather && p.schedule != PipelineSchedule::kInterleaved1F1B) {
    return "align_param_gather needs the interleaved schedule (it dispatches the gathers a model chunk at a time)";
  }
  const bool interleaved = p.schedule == PipelineSchedule::kInterleaved1F1B;
  const std::int64_t chunks = static_cast<std::int64_t>(p.pp) * (interleaved ? p.virtual_stages : 1);
  if (!p.stage_layers.empty()) {
    if (static_cast<std::int64_t>(p.stage_layers.size()) != chunks) {
      return "the layer partition has " + n(static_cast<std::int64_t>(p.stage_layers.size())) +
             (interleaved ? " entries, pp x virtual_stages is " + n(chunks) + " (one per model chunk, in model order)"
                          : " stages, pp is " + n(p.pp));
    }
    // The first and last chunks may hold none: only the embedding, or only the output
    // layer and loss (and multi-token prediction), as Megatron-Core's pipeline layouts
    // allow ("E|t...", "...|mL").
    std::int64_t sum = 0;
    for (std::size_t c = 0; c < p.stage_layers.size(); ++c) {
      const int l = p.stage_layers[c];
      const bool edge = chunks > 1 && (c == 0 || c + 1 == p.stage_layers.size());
      if (l < 0 || (l == 0 && !edge)) {
        return std::string(interleaved ? "every model chunk" : "every pipeline stage") +
               " needs at least one layer, except the first and the last (none: only the embedding, or only the output "
               "layer and loss)";
      }
      sum += l;
    }
    if (sum != m.layers) return "the layer partition adds up to " + n(sum) + " layers, the model has " + n(m.layers);
  } else if (interleaved && m.layers < chunks) {
    return "pp x virtual_stages (" + n(chunks) + ") exceeds the layers (" + n(m.layers) + ")";
  } else if (m.layers < p.pp) {
    return "pp (" + n(p.pp) + ") exceeds the layers (" + n(m.layers) + ")";
  }
  if (p.microbatch_group < 0) return "microbatch_group must be at least 1 (or 0: pp)";
  if (p.microbatch_group > 0 && p.schedule != PipelineSchedule::kInterleaved1F1B) {
    return "microbatch_group applies to the interleaved schedule only";
  }
  if (p.schedule == PipelineSchedule::kInterleaved1F1B) {
    // Megatron-Core's rules for its micro-batch groups: pp <= g <= m, and a last group
    // of none or at least pp (a shorter one would wait on the pipeline's fill).
    const std::int64_t mbs = p.micro_batches(), g = p.group_size();
    if (mbs < p.pp) {
      return "the interleaved schedule needs at least pp (" + n(p.pp) + ") micro-batches per step, has " + n(mbs);
    }
    if (g < p.pp || g > mbs) {
      return "microbatch_group (" + n(g) + ") must lie between pp (" + n(p.pp) + ") and the micro-batches per step (" +
             n(mbs) + ")";
    }
    if (mbs % g != 0 && mbs % g < p.pp) {
      const std::int64_t fits = fitting_microbatch_group(p.pp, mbs);
      return "the " + n(mbs) + " micro-batches per step in groups of " + n(g) +
             (p.microbatch_group > 0 ? " (microbatch_group)" : " (pp, microbatch_group's default)") + " leave a last group of " + n(mbs % g) + ", fewer than pp (" + n(p.pp) +
             "): make them a multiple of the group, or set microbatch_group to e.g. " + n(fits);
    }
  }
  return {};
}

std::vector<LayerRange> chunk_layer_ranges(const ParallelPlan& p, const TransformerConfig& m) {
  const int chunks = p.schedule == PipelineSchedule::kInterleaved1F1B ? p.pp * p.virtual_stages : p.pp;
  std::vector<int> counts = p.stage_layers;
  if (counts.empty()) {  // balanced: the first layers % chunks chunks get one more
    counts.assign(static_cast<std::size_t>(chunks), static_cast<int>(m.layers / chunks));
    for (std::int64_t i = 0; i < m.layers % chunks; ++i) ++counts[static_cast<std::size_t>(i)];
  }
  std::vector<LayerRange> out;
  std::int64_t first = 0;
  for (int n : counts) {
    out.push_back({first, n});
    first += n;
  }
  return out;
}

std::vector<int> stage_layer_counts(const ParallelPlan& p, const TransformerConfig& m) {
  std::vector<int> out(static_cast<std::size_t>(p.pp), 0);
  const std::vector<LayerRange> chunks = chunk_layer_ranges(p, m);
  for (std::size_t s = 0; s < chunks.size(); ++s) out[s % static_cast<std::size_t>(p.pp)] += chunks[s].count;
  return out;
}

int plan_recomputed_layers(const ParallelPlan& p, const TransformerConfig& m) {
  int out = 0;
  for (const LayerRange& c : chunk_layer_ranges(p, m)) out += recomputed_layers(p, c.count);
  return out;
}

LayerKinds layer_kinds(const ParallelPlan& p, const TransformerConfig& m, const std::vector<LayerRange>& chunks) {
  LayerKinds k;
  for (const LayerRange& c : chunks) {
    const int recomputed = recomputed_layers(p, c.count);
    const int primary = m.experts > 0 ? static_cast<int>(m.moe_layers_in(c.first, c.count)) : c.count;
    const int primary_recomputed = m.experts > 0 ? static_cast<int>(m.moe_layers_in(c.first, recomputed)) : recomputed;
    k.primary += primary;
    k.dense += c.count - primary;
    k.primary_recomputed += primary_recomputed;
    k.dense_recomputed += recomputed - primary_recomputed;
  }
  return k;
}

std::uint32_t mesh_rank(const ParallelPlan& p, int d, int i, int k) {
  const auto cp = static_cast<std::uint32_t>(p.cp_folded);
  const auto c = static_cast<std::uint32_t>(d) % cp, dp = static_cast<std::uint32_t>(p.dp) / cp;
  const std::uint32_t replica = static_cast<std::uint32_t>(d) / cp;
  const bool placed = std::find(p.order.begin(), p.order.end(), MeshAxis::kCp) != p.order.end();
  std::uint32_t r = 0;
  for (auto a = p.order.rbegin(); a != p.order.rend(); ++a) {
    switch (*a) {
      case MeshAxis::kTp: r = r * static_cast<std::uint32_t>(p.tp) + static_cast<std::uint32_t>(k); break;
      case MeshAxis::kPp: r = r * static_cast<std::uint32_t>(p.pp) + static_cast<std::uint32_t>(i); break;
      case MeshAxis::kDp:
        r = r * dp + replica;
        if (!placed) r = r * cp + c;  // cp just inside dp
        break;
      case MeshAxis::kCp: r = r * cp + c; break;
    }
  }
  return r;
}

ParallelPlan context_folded(const ParallelPlan& plan) {
  if (plan.cp == 1) return plan;
  ParallelPlan p = plan;
  p.cp_folded = plan.cp;
  p.dp = plan.dp * plan.cp;
  p.global_batch = plan.global_batch * plan.cp;
  if (plan.shard > 0) p.shard = plan.shard * plan.cp;
  p.cp = 1;
  return p;
}

TransformerConfig context_share(const TransformerConfig& model, const ParallelPlan& plan) {
  if (plan.cp == 1) return model;
  TransformerConfig m = model;
  m.positions = model.position_rows();  // (0 without a learned table)
  m.seq = model.seq / plan.cp;
  m.context_parallel = plan.cp;
  return m;
}

std::string mesh_text(const ParallelPlan& p) {
  return "dp " + std::to_string(p.dp) + (p.cp > 1 ? " x cp " + std::to_string(p.cp) : "") + " x tp " + std::to_string(p.tp) +
         " x pp " + std::to_string(p.pp);
}

std::string recompute_module_names(unsigned modules) {
  std::string s;
  for (const auto& [name, bit] : kRecomputeModuleNames) {
    if (modules & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  }
  return s;
}

}  // namespace ddlsim
