#include "workloads/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "support/strings.hpp"

namespace ddlsim {

TransformerConfig gpt_config(std::string name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                             std::int64_t seq, std::int64_t vocab) {
  TransformerConfig c;
  c.name = std::move(name);
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kv_heads = heads;
  c.ffn = 4 * hidden;
  c.seq = seq;
  c.positions = seq;  // the learned table's rows: a shorter training sequence keeps them
  c.vocab = vocab;
  return c;
}

TransformerConfig llama_config(std::string name, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                               std::int64_t kv_heads, std::int64_t ffn, std::int64_t seq, std::int64_t vocab) {
  TransformerConfig c;
  c.name = std::move(name);
  c.family = TransformerConfig::Family::kLlama;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.ffn = ffn;
  c.seq = seq;
  c.vocab = vocab;
  c.tied_embedding = false;
  c.qkv_bias = false;
  c.proj_bias = false;
  c.mlp_bias = false;
  c.learned_positions = false;
  c.embedding_dropout = false;
  c.attention_dropout = false;
  c.residual_dropout = false;
  c.flash_attention = true;
  return c;
}

namespace {
// log C(n, r) (r within 0..n): by its product where r or n - r is small (to about r
// roundings), else by lgamma.
double log_choose(double n, double r) {
  const double s = std::min(r, n - r);
  if (s <= 64) {
    double v = 0.0;
    for (double i = 0; i < s; ++i) v += std::log((n - i) / (i + 1));
    return v;
  }
  return std::lgamma(n + 1) - std::lgamma(r + 1) - std::lgamma(n - r + 1);
}
}  // namespace

double experts_spread(const TransformerConfig& c, std::int64_t parts) {
  if (c.experts <= 0) return 0.0;
  if (parts < 1 || c.experts % parts != 0) {
    throw std::invalid_argument("experts_spread: " + std::to_string(parts) + " parts do not divide the experts");
  }
  const std::int64_t groups = c.expert_groups > 0 ? c.expert_groups : 1;
  const std::int64_t chosen = c.expert_groups > 0 ? c.groups_per_token : 1;
  const std::int64_t per_group = c.experts / groups, per_part = c.experts / parts;
  const double k = static_cast<double>(c.experts_per_token);
  const double eligible = static_cast<double>(chosen * per_group);  // the experts a token picks among
  const double all_choices = log_choose(static_cast<double>(groups), static_cast<double>(chosen));
  // The chance that none of a token's experts is among `x` of the eligible ones.
  const auto misses = [&](std::int64_t x) {
    const double left = eligible - static_cast<double>(x);
    return left < k ? 0.0 : std::exp(log_choose(left, k) - log_choose(eligible, k));
  };
  double spread = 0.0;
  for (std::int64_t j = 0; j < parts; ++j) {
    // The groups the part overlaps: `whole` of them inside it, and at most one partial
    // group at either end (with `head` and `tail` of its experts in the part).
    const std::int64_t lo = j * per_part, hi = lo + per_part;
    const std::int64_t first = lo / per_group, last = (hi - 1) / per_group;
    std::int64_t head = 0, tail = 0, whole = 0;
    for (std::int64_t g = first; g <= last; ++g) {
      const std::int64_t overlap = std::min(hi, (g + 1) * per_group) - std::max(lo, g * per_group);
      if (overlap == per_group) {
        ++whole;
      } else if (g == first) {
        head = overlap;
      } else {
        tail = overlap;
      }
    }
    const std::int64_t partial = (head > 0) + (tail > 0), near = whole + partial;
    // Over which of the near groups the token chose (each set of one size alike): the
    // chance its experts miss the part's share of them.
    double miss = 0.0;
    for (int h = 0; h <= (head > 0); ++h) {
      for (int e = 0; e <= (tail > 0); ++e) {
        for (std::int64_t w = 0; w <= whole; ++w) {
          const std::int64_t taken = w + h + e;
          if (taken > chosen || chosen - taken > groups - near) continue;
          const double sets = log_choose(static_cast<double>(whole), static_cast<double>(w)) +
                              log_choose(static_cast<double>(groups - near), static_cast<double>(chosen - taken)) - all_choices;
          miss += std::exp(sets) * misses(w * per_group + h * head + e * tail);
        }
      }
    }
    spread += 1.0 - miss;
  }
  return spread;
}

std::string transformer_problem(const TransformerConfig& c) {
  const std::pair<const char*, std::int64_t> sizes[] = {{"layers", c.layers}, {"hidden", c.hidden}, {"heads", c.heads},
                                                        {"kv_heads", c.kv_heads}, {"ffn", c.ffn}, {"seq", c.seq},
                                                        {"vocab", c.vocab}};
  for (const auto& [field, v] : sizes) {
    if (v <= 0) return std::string(field) + " must be positive, got " + std::to_string(v);
  }
  // Beyond any real model; also keeps the graph and its arithmetic finite.
  const std::pair<const char*, std::int64_t> limits[] = {{"layers", 100'000}, {"hidden", 1'000'000}, {"heads", 1'000'000},
                                                         {"ffn", 10'000'000}, {"seq", 10'000'000},
                                                         {"vocab", 100'000'000}};
  for (const auto& [field, limit] : limits) {
    for (const auto& [f, v] : sizes) {
      if (std::string_view(f) == field && v > limit) {
        return std::string(field) + " must be at most " + std::to_string(limit) + ", got " + std::to_string(v);
      }
    }
  }
  if (c.head_size < 0 || c.head_size > 100'000) {
    return "head_size must be 1 to 100000 (or 0: hidden / heads), got " + std::to_string(c.head_size);
  }
  if (c.q_lora_rank < 0 || c.q_lora_rank > 1'000'000 || c.kv_lora_rank < 0 || c.kv_lora_rank > 1'000'000) {
    return "q_lora_rank and kv_lora_rank must be 0 to 1000000, got " + std::to_string(c.q_lora_rank) + " and " +
           std::to_string(c.kv_lora_rank);
  }
  const std::pair<const char*, std::int64_t> mla_dims[] = {
      {"qk_nope_dim", c.qk_nope_dim}, {"qk_rope_dim", c.qk_rope_dim}, {"v_head_dim", c.v_head_dim}};
  for (const auto& [field, v] : mla_dims) {
    if (v < 0 || v > 100'000) return std::string(field) + " must be 0 to 100000, got " + std::to_string(v);
  }
  if (!c.mla() && (c.q_lora_rank > 0 || c.qk_nope_dim > 0 || c.qk_rope_dim > 0 || c.v_head_dim > 0)) {
    return "q_lora_rank, qk_nope_dim, qk_rope_dim and v_head_dim need multi-head latent attention (kv_lora_rank > 0)";
  }
  if (c.mla()) {
    if (c.qk_nope_dim == 0 || c.v_head_dim == 0) {
      return "multi-head latent attention needs qk_nope_dim and v_head_dim of at least 1, got " + std::to_string(c.qk_nope_dim) +
             " and " + std::to_string(c.v_head_dim);
    }
    if (c.kv_heads != c.heads) {
      return "multi-head latent attention has a key and value per head: kv_heads (" + std::to_string(c.kv_heads) +
             ") must equal heads (" + std::to_string(c.heads) + ")";
    }
    if (c.head_size != 0) return "multi-head latent attention sizes its heads by qk_nope_dim, qk_rope_dim and v_head_dim, not head_size";
    if (c.qk_norm) return "qk_norm is not modelled with multi-head latent attention";
  }
  if (!c.mla() && c.head_size == 0 && c.hidden % c.heads != 0) {
    return "heads (" + std::to_string(c.heads) + ") must divide hidden (" + std::to_string(c.hidden) + ")";
  }
  if (c.squared_relu && c.family != TransformerConfig::Family::kGpt) {
    return "squared_relu replaces the GPT family's GeLU; a Llama-family MLP is gated (SwiGLU)";
  }
  if (c.experts < 0 || c.experts == 1 || c.experts > 100'000) {
    return "experts must be 0 (a dense MLP) or 2 to 100000, got " + std::to_string(c.experts);
  }
  if (c.experts == 0 && c.experts_per_token != 0) {
    return "experts_per_token (" + std::to_string(c.experts_per_token) + ") needs experts (a mixture-of-experts MLP)";
  }
  if (c.experts > 0 && (c.experts_per_token < 1 || c.experts_per_token > c.experts)) {
    return "experts_per_token must be 1 to experts (" + std::to_string(c.experts) + "), got " + std::to_string(c.experts_per_token);
  }
  if (c.expert_groups != 0 || c.groups_per_token != 0) {
    if (c.experts == 0) return "expert_groups needs experts (a mixture-of-experts MLP)";
    if (c.expert_groups < 1 || c.experts % c.expert_groups != 0) {
      return "expert_groups must divide experts (" + std::to_string(c.experts) + "), got " + std::to_string(c.expert_groups);
    }
    if (c.groups_per_token < 1 || c.groups_per_token > c.expert_groups) {
      return "groups_per_token must be 1 to expert_groups (" + std::to_string(c.expert_groups) + "), got " +
             std::to_string(c.groups_per_token);
    }
    if (c.experts_per_token > c.groups_per_token * (c.experts / c.expert_groups)) {
      return "experts_per_token (" + std::to_string(c.experts_per_token) + ") must be at most the experts of groups_per_token groups (" +
             std::to_string(c.groups_per_token * (c.experts / c.expert_groups)) + ")";
    }
  }
  if (c.shared_ffn < 0 || c.shared_ffn > 10'000'000) {
    return "shared_ffn must be 0 (no shared expert) to 10000000, got " + std::to_string(c.shared_ffn);
  }
  if (c.experts == 0 && (c.shared_ffn > 0 || c.shared_gate)) return "a shared expert (shared_ffn) needs experts";
  if (c.shared_gate && c.shared_ffn == 0) return "shared_gate needs a shared expert (shared_ffn)";
  if (c.dense_ffn < 0 || c.dense_ffn > 10'000'000) {
    return "dense_ffn must be 0 (ffn) to 10000000, got " + std::to_string(c.dense_ffn);
  }
  if (c.experts == 0 && (c.dense_ffn > 0 || !c.dense_layers.empty())) {
    return "dense layers among experts (dense_layers, dense_ffn) need experts";
  }
  if (static_cast<std::int64_t>(c.dense_layers.size()) > c.layers) {
    return "dense_layers has " + std::to_string(c.dense_layers.size()) + " flags for " + std::to_string(c.layers) + " layers";
  }
  if (c.experts > 0 && c.moe_layers_in(0, c.layers) == 0) {
    return "every layer's MLP is dense (dense_layers): a dense model has no experts";
  }
  if (c.mtp_layers < 0 || c.mtp_layers > 16) {
    return "mtp_layers must be 0 (no multi-token prediction) to 16, got " + std::to_string(c.mtp_layers);
  }
  if (c.heads % c.kv_heads != 0) {
    return "kv_heads (" + std::to_string(c.kv_heads) + ") must divide heads (" + std::to_string(c.heads) + ")";
  }
  return {};
}

std::string transformer_batch_problem(const TransformerConfig& c, std::int64_t batch) {
  if (batch <= 0 || batch > 1'000'000) return "batch: expected 1 to 1000000, got " + std::to_string(batch);
  const double b = static_cast<double>(batch), seq = static_cast<double>(c.seq);
  const double scores = b * static_cast<double>(c.heads) * seq * seq;
  if (scores > 1e18) return printf_string("batch: batch x heads x seq^2 = %.3g, beyond the 1e18 ddlsim models", scores);
  const double widest = b * seq *
                        std::max({static_cast<double>(c.hidden), 2.0 * static_cast<double>(c.ffn),
                                  2.0 * static_cast<double>(c.dense_ffn), static_cast<double>(c.vocab)});
  if (widest > 1e18) {
    return printf_string(c.dense_ffn > 0 ? "batch: batch x seq x max(hidden, 2 ffn, 2 dense_ffn, vocab) = %.3g, beyond the 1e18 ddlsim models"
                                         : "batch: batch x seq x max(hidden, 2 ffn, vocab) = %.3g, beyond the 1e18 ddlsim models",
                         widest);
  }
  // The experts' rows: each token once per expert it goes to, hidden wide (dispatched)
  // and 2 ffn wide (inside the experts).
  const double expert_widest = b * seq * static_cast<double>(c.experts_per_token) * std::max(1.0, c.expert_load) *
                               std::max(static_cast<double>(c.hidden), 2.0 * static_cast<double>(c.ffn));
  // The attention's projections: Q, K and V's columns (multi-head latent attention: the
  // query's or the keys' and values' up projection, or a latent, the widest).
  const double a = static_cast<double>(c.heads);
  const double projected =
      c.mla() ? std::max({a * static_cast<double>(std::max(c.qk_head_dim(), c.qk_nope_dim + c.head_dim())),
                          static_cast<double>(c.q_lora_rank), static_cast<double>(c.kv_lora_rank + c.qk_rope_dim)})
              : static_cast<double>(c.attention_width()) + 2.0 * static_cast<double>(c.kv_heads * c.head_dim());
  if (b * seq * projected > 1e18) {
    return printf_string("batch: batch x seq x the attention's projected columns = %.3g, beyond the 1e18 ddlsim models",
                         b * seq * projected);
  }
  if (expert_widest > 1e18) {
    return printf_string(c.expert_load > 1.0 ? "batch: batch x seq x experts_per_token x the plan's expert load x max(hidden, "
                                               "2 ffn) = %.3g, beyond the 1e18 ddlsim models"
                                             : "batch: batch x seq x experts_per_token x max(hidden, 2 ffn) = %.3g, beyond the "
                                               "1e18 ddlsim models",
                         expert_widest);
  }
  return {};
}

bool megatron_fused_softmax(const TransformerConfig& c, std::int64_t micro_batch, int tp) {
  if (tp < 1) return true;  // no plan: nothing to price
  if (c.flash_attention || data_type_bytes(c.dtype) != 2.0) return false;
  const std::int64_t sq = c.seq, sk = c.seq, batches = micro_batch * (c.heads / tp);
  if (sk <= 16 || sk > 4096 || sq % 4 != 0 || sk % 4 != 0 || batches % 4 != 0) return false;
  // The causal kernel's batches per block: 128 threads, one warp (up to 32 lanes) per row,
  // two rows per warp for keys up to 128 long.
  std::int64_t pow2 = 1;
  while (pow2 < sk) pow2 *= 2;
  const std::int64_t warp = std::min<std::int64_t>(pow2, 32), per_warp = pow2 <= 128 ? 2 : 1;
  return batches % (128 / warp * per_warp) == 0;
}

std::int64_t TransformerConfig::expert_rows(std::int64_t batch) const {
  if (experts <= 0) return 0;
  if (expert_load == 1.0) return (batch * seq * experts_per_token + experts - 1) / experts;
  return static_cast<std::int64_t>(
      std::ceil(static_cast<double>(batch * seq * experts_per_token) * expert_load / static_cast<double>(experts)));
}

OperatorGraph build_transformer(const TransformerConfig& c, std::int64_t batch) {
  if (std::string why = transformer_problem(c); !why.empty()) throw std::invalid_argument(c.name + ": " + why);
  if (batch <= 0) throw std::invalid_argument(c.name + ": batch must be positive");
  const bool gpt = c.family == TransformerConfig::Family::kGpt;
  const std::int64_t b = batch, s = c.seq, h = c.hidden, a = c.heads, g = c.kv_heads, d = c.head_dim();
  const std::int64_t w = c.attention_width();  // Q's columns: h unless the heads are sized otherwise
  OperatorGraph G(c.name);
  const std::uint32_t tokens = G.input("tokens", {b, s}, DataType::kInt64);
  std::uint32_t x = G.embedding("embed", tokens, c.vocab, h, c.dtype);
  if (c.learned_positions) {
    const std::uint32_t pos = G.input("positions", {b, s}, DataType::kInt64);
    x = G.add("embed.add", x, G.embedding("embed.positions", pos, c.position_rows(), h, c.dtype));
  }
  if (c.embedding_norm) x = G.layer_norm("embed.norm", x);
  if (c.embedding_dropout) x = G.dropout("embed.dropout", x);

  // A norm of the model's kind (GPT: layer norm; else RMS norm).
  const auto norm = [&](const std::string& name, std::uint32_t in) { return gpt ? G.layer_norm(name, in) : G.rms_norm(name, in); };
  // One transformer layer on x (its operators' names prefixed by L), its MLP a mixture
  // of experts when `moe`.
  const auto layer = [&](const std::string& L, std::uint32_t x, bool moe) {
    // Attention block.
    const std::uint32_t n1 = norm(L + (gpt ? "ln1" : "norm1"), x);
    // The layer's linear layers, in fp8 under Transformer Engine's recipe.
    const bool fp8 = c.fp8_gemms;
    const auto linear = [&](const std::string& name, std::uint32_t in, std::int64_t n, bool bias) {
      return G.linear(name, in, n, bias, false, fp8);
    };
    std::uint32_t q, k, v;
    if (c.mla()) {
      const std::int64_t dq = c.qk_head_dim(), dn = c.qk_nope_dim, dr = c.qk_rope_dim;
      const std::uint32_t q_in =
          c.q_lora_rank > 0 ? norm(L + "q_latent_norm", linear(L + "q_down", n1, c.q_lora_rank, c.qkv_bias)) : n1;
      q = G.view(L + "q", linear(L + (c.q_lora_rank > 0 ? "q_up" : "q_proj"), q_in, a * dq, false), {b, a, s, dq});
      const std::uint32_t down = linear(L + "kv_down", n1, c.kv_lora_rank + dr, c.qkv_bias);
      const auto latent = dr > 0 ? G.split(L + "kv_down", down, {c.kv_lora_rank, dr}) : std::vector<std::uint32_t>{down};
      const std::uint32_t kv = linear(L + "kv_up", norm(L + "kv_latent_norm", latent[0]), a * (dn + d), false);
      const auto kv_parts = G.split(L + "kv_up", kv, {a * dn, a * d});
      k = G.view(L + "k_nope", kv_parts[0], {b, a, s, dn});
      // Each head's key: its own part and the rotary part the heads share, joined.
      if (dr > 0) k = G.concat(L + "k_concat", {k, G.view(L + "k_rope", latent[1], {b, 1, s, dr})});
      v = G.view(L + "v", kv_parts[1], {b, a, s, d});
    } else {
      const std::uint32_t qkv = linear(L + "qkv", n1, w + 2 * g * d, c.qkv_bias);
      const auto parts = G.split(L + "qkv", qkv, {w, g * d, g * d});
      q = G.view(L + "q", parts[0], {b, a, s, d});
      k = G.view(L + "k", parts[1], {b, g, s, d});
      if (c.qk_norm) {
        q = G.rms_norm(L + "q_norm", q);
        k = G.rms_norm(L + "k_norm", k);
      }
      v = G.view(L + "v", parts[2], {b, g, s, d});
    }
    std::uint32_t ctx;
    if (c.flash_attention) {
      ctx = G.flash_attention(L + "attention", q, k, v, true, c.context_parallel);
    } else {
      std::uint32_t p = G.softmax(L + "attention.softmax", G.matmul(L + "attention.scores", q, k, true));
      if (c.attention_dropout) p = G.dropout(L + "attention.dropout", p);
      ctx = G.matmul(L + "attention.context", p, v, false);
    }
    std::uint32_t o = linear(L + "proj", G.view(L + "context", ctx, {b, s, w}), h, c.proj_bias);
    if (c.residual_dropout) o = G.dropout(L + "proj.dropout", o);
    x = G.add(L + "residual1", x, o);
    // MLP block: on a norm of the sum, or with parallel layers on the attention's norm
    // of the layer input (its output then joins the sum, residual2).
    const std::uint32_t n2 = c.parallel_layers ? n1 : norm(L + (gpt ? "ln2" : "norm2"), x);
    // An MLP of the model's form on `in` (names prefixed by `p`), its linear layers
    // grouped (one weight per expert) or plain.
    const auto mlp = [&](const std::string& p, std::uint32_t in, std::int64_t f, bool grouped) {
      const auto lin = [&](const std::string& name, std::uint32_t v, std::int64_t n) {
        return grouped ? G.grouped_linear(name, v, n, c.mlp_bias, fp8) : linear(name, v, n, c.mlp_bias);
      };
      if (gpt) {
        const std::uint32_t up = lin(p + "fc1", in, f);
        return lin(p + "fc2", c.squared_relu ? G.squared_relu(p + "squared_relu", up) : G.gelu(p + "gelu", up), h);
      }
      const auto gu = G.split(p + "gate_up", lin(p + "gate_up", in, 2 * f), {f, f});
      return lin(p + "down", G.swiglu(p + "swiglu", gu[0], gu[1]), h);
    };
    std::uint32_t m;
    if (moe) {
      const std::int64_t E = c.experts, rows = c.expert_rows(b);
      G.softmax(L + "router.softmax", G.linear(L + "router", n2, E, false));
      const std::uint32_t in = G.permute(L + "experts.dispatch", n2, {E, rows, h}, false);
      m = G.permute(L + "experts.combine", mlp(L + "experts.", in, c.ffn, true), {b, s, h}, true);
      if (c.shared_ffn > 0) {
        const std::uint32_t shared = mlp(L + "shared.", n2, c.shared_ffn, false);
        // The gate's sigmoid and its product with the shared output are one elementwise
        // pass over b s values and b s h, folded into the sum below (not priced apart).
        if (c.shared_gate) G.linear(L + "shared_gate", n2, 1, false);
        m = G.add(L + "experts.shared_sum", m, shared);
      }
    } else {
      m = mlp(L, n2, c.dense_mlp_ffn(), false);
    }
    if (c.residual_dropout) m = G.dropout(L + "mlp.dropout", m);
    return G.add(L + "residual2", x, m);
  };
  for (std::int64_t l = 0; l < c.layers; ++l) {
    G.set_layer(static_cast<int>(l));
    x = layer("layer" + std::to_string(l) + ".", x, c.moe_layer(l));
  }
  G.set_layer(-1);
  const std::uint32_t logits = G.linear("output", norm("final_norm", x), c.vocab, false, c.tied_embedding);
  G.cross_entropy("loss", logits);
  // Multi-token prediction: each depth on the one before (the model's hidden state
  // before its final norm first), with the model's embedding and output weights.
  for (std::int64_t k = 0; k < c.mtp_layers; ++k) {
    const std::string P = "mtp" + std::to_string(k) + ".";
    G.set_layer(-1);
    const std::uint32_t e = norm(P + "enorm", G.embedding(P + "embed", tokens, c.vocab, h, c.dtype, true));
    const std::uint32_t joined = G.concat(P + "concat", {e, norm(P + "hnorm", x)});
    const std::uint32_t in = G.linear(P + "eh_proj", joined, h, false);
    G.set_layer(static_cast<int>(c.layers + k));
    x = layer(P + "layer.", in, c.moe_layer(c.layers - 1));
    G.set_layer(-1);
    G.cross_entropy(P + "loss", G.linear(P + "output", norm(P + "final_norm", x), c.vocab, false, true));
  }
  G.set_layer(-1);
  return G;
}

}  // namespace ddlsim
