// Workload accounting against published figures: each expectation is stated (closed form
// or paper figure) before it is computed.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <nlohmann/json.hpp>
#include <array>
#include <bit>
#include <tuple>

#include "support/input_error.hpp"
#include "workloads/cnn.hpp"
#include "workloads/hf_config.hpp"
#include "workloads/presets.hpp"
#include "workloads/transformer.hpp"

using namespace ddlsim;
using ddlsim::test::Approx;

namespace {
double macs_forward(const OperatorGraph& g) {
  double m = 0;
  for (const Operator& op : g.ops()) {
    if (op.kind == OpKind::kConv2d || op.kind == OpKind::kLinear) {
      m += static_cast<double>(op.gemm.batch * op.gemm.m) * static_cast<double>(op.gemm.n * op.gemm.k);
    }
  }
  return m;
}
}  // namespace

TEST_CASE("GPT parameters: 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), plus the final layer norm") {
  // Megatron's count (Narayanan et al. 2021) for GPT-3 175B: l 96, h 12288, s 2048,
  // V 51200; it omits the final layer norm's 2h, which the model has.
  const double l = 96, h = 12288, s = 2048, V = 51200;
  const double expected = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h;
  const OperatorGraph g = build_transformer(gpt_config("gpt3-175b", 96, 12288, 96, 2048, 51200), 1);
  CHECK(g.totals().params == Approx(expected).epsilon(1e-12));
  CHECK(g.totals().params == Approx(175e9).epsilon(0.01));
}

TEST_CASE("Llama 3 405B has about 405 billion parameters") {
  // Meta's figure for 126 layers, hidden 16384, FFN 53248, 128 heads, 8 KV heads,
  // vocab 128256 (untied embedding): 405B, within 1%.
  const OperatorGraph g = build_transformer(llama_config("llama3-405b", 126, 16384, 128, 8, 53248, 8192, 128256), 1);
  CHECK(g.totals().params == Approx(405e9).epsilon(0.01));
}

TEST_CASE("training FLOPs per token: 6N + 12 l h s") {
  // Narayanan et al.: a GPT's forward and backward cost 6 FLOPs per matmul parameter per
  // token (N = 12 l h^2 + V h, the output layer included) plus 12 l h s for attention's
  // two s x s matmuls. Norms, softmax and GeLU add well under 1%.
  const double l = 24, h = 2048, s = 2048, V = 51200, b = 4;
  const OperatorGraph g = build_transformer(gpt_config("gpt-1.3b", 24, 2048, 16, 2048, 51200), 4);
  const double per_token = (g.totals().fwd_flops + g.totals().bwd_flops) / (b * s);
  const double N = 12 * l * h * h + V * h;
  CHECK(per_token == Approx(6 * N + 12 * l * h * s).epsilon(0.01));
  CHECK(per_token > 6 * N + 12 * l * h * s);  // the small extras only add
}

TEST_CASE("activation bytes per layer without recomputation: s b h (34 + 5 a s / h)") {
  // Korthikanti et al. 2022, 16-bit activations with 1-byte dropout masks, for every
  // layer of a GPT with plain attention.
  const double s = 1024, b = 2, h = 1024, a = 16;
  const OperatorGraph g = build_transformer(gpt_config("gpt-small", 4, 1024, 16, 1024, 50000), 2);
  std::vector<double> per_layer(4, 0.0);
  for (const Operator& op : g.ops()) {
    if (op.layer >= 0) per_layer[op.layer] += op.cost.saved_bytes;
  }
  for (double bytes : per_layer) CHECK(bytes == Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-12));
}

TEST_CASE("VGG-16: 138M parameters and 15.5 GMACs per 224x224 image") {
  // Simonyan and Zisserman; torchvision lists 138,357,544 parameters and 15.47 GFLOPs
  // (multiply-adds) for one image.
  const OperatorGraph g = build_vgg(16, 1);
  CHECK(g.totals().params == 138357544.0);
  CHECK(macs_forward(g) == Approx(15.5e9).epsilon(0.01));
  // VGG-19: 143,667,240 parameters (torchvision).
  CHECK(build_vgg(19, 1).totals().params == 143667240.0);
}

TEST_CASE("ResNet-50: 25.6M parameters and 4.1 GMACs per 224x224 image") {
  // He et al.; torchvision lists 25,557,032 parameters (batch-norm scale and shift
  // included) and 4.09 GFLOPs (multiply-adds).
  const OperatorGraph g = build_resnet50(1);
  CHECK(g.totals().params == 25557032.0);
  CHECK(macs_forward(g) == Approx(4.1e9).epsilon(0.01));
}

TEST_CASE("an MLP's parameters and FLOPs are its layers'") {
  // 784-512-10 with biases: 784*512 + 512 + 512*10 + 10 parameters; forward 2 b (784*512
  // + 512*10) FLOPs in the matmuls plus the biases and the ReLU.
  const OperatorGraph g = build_mlp({784, 512, 10}, 32);
  CHECK(g.totals().params == 784.0 * 512 + 512 + 512 * 10 + 10);
  double matmul = 0;
  for (const Operator& op : g.ops()) {
    if (op.kind == OpKind::kLinear) matmul += op.cost.fwd_flops;
  }
  CHECK(matmul == 2.0 * 32 * (784 * 512 + 512 * 10) + 32.0 * (512 + 10));
}

TEST_CASE("flash attention keeps far fewer bytes than plain attention and costs more backward FLOPs") {
  // Plain attention keeps 5 a s^2 b bytes of scores per layer; the fused kernel keeps
  // Q, K, V, the output and a log-sum-exp, and recomputes the scores in backward.
  TransformerConfig plain = gpt_config("g", 2, 1024, 16, 2048, 1000);
  TransformerConfig fused = plain;
  fused.flash_attention = true;
  const OpCost p = build_transformer(plain, 1).totals(), f = build_transformer(fused, 1).totals();
  CHECK(f.saved_bytes < p.saved_bytes / 2);
  CHECK(f.bwd_flops / f.fwd_flops > p.bwd_flops / p.fwd_flops * 0.99);
}

TEST_CASE("impossible transformer shapes are named") {
  CHECK(transformer_problem(gpt_config("g", 2, 1000, 16, 128, 100)) == "heads (16) must divide hidden (1000)");
  CHECK(transformer_problem(llama_config("l", 2, 1024, 16, 5, 4096, 128, 100)) == "kv_heads (5) must divide heads (16)");
  CHECK(transformer_problem(gpt_config("g", 0, 1024, 16, 128, 100)) == "layers must be positive, got 0");
}

// --- HuggingFace configs and presets ---

namespace {
// Meta-Llama-3-8B's config.json as published on the HuggingFace hub.
const char* kLlama3_8b = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

std::string what(const nlohmann::json& doc, std::optional<std::int64_t> seq = std::nullopt) {
  try {
    read_hf_config(doc, "config.json", seq);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a HuggingFace Llama 3 8B config builds the same model as the preset") {
  // Expected: 8,030,261,248 parameters (Meta's 8.03B), the preset's figure.
  const TransformerConfig c = read_hf_config(nlohmann::json::parse(kLlama3_8b), "config.json");
  const double params = build_transformer(c, 1).totals().params;
  CHECK(params == 8030261248.0);
  CHECK(params == build_workload_preset("llama3-8b", WorkloadOptions{}).totals().params);
}

TEST_CASE("HuggingFace GPT-2, Mistral and Qwen2 configs") {
  // GPT-2 small: 124,439,808 parameters (HuggingFace's count, tied embedding).
  const auto gpt2 = nlohmann::json::parse(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257, "n_inner": null, "activation_function": "gelu_new",
    "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-05})");
  CHECK(build_transformer(read_hf_config(gpt2, "gpt2.json"), 1).totals().params == 124439808.0);
  CHECK(build_workload_preset("gpt2", WorkloadOptions{}).totals().params == 124439808.0);
  // Training on shorter sequences keeps the whole 1024 x 768 position table.
  WorkloadOptions short_seq;
  short_seq.seq = 128;
  CHECK(build_workload_preset("gpt2", short_seq).totals().params == 124439808.0);
  CHECK(build_transformer(read_hf_config(gpt2, "gpt2.json", 128), 1).totals().params == 124439808.0);
  // Mistral 7B v0.1: 7,241,732,096 parameters; its 4096-token sliding window is refused
  // for longer sequences and accepted up to it.
  const auto mistral = nlohmann::json::parse(R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "max_position_embeddings": 32768,
    "sliding_window": 4096, "vocab_size": 32000, "hidden_act": "silu", "tie_word_embeddings": false})");
  CHECK(what(mistral) ==
        "config.json: sliding_window: attention over a window of 4096 tokens, shorter than the sequence of 32768, is not modelled");
  CHECK(build_transformer(read_hf_config(mistral, "m.json", 4096), 1).totals().params == 7241732096.0);
  // Without the key, transformers' MistralConfig default window (4096) applies; null
  // means none.
  auto no_key = mistral;
  no_key.erase("sliding_window");
  CHECK(what(no_key) == "config.json: sliding_window: attention over a window of 4096 tokens (MistralConfig's default, "
                        "the key being absent), shorter than the sequence of 32768, is not modelled");
  auto none = mistral;
  none["sliding_window"] = nullptr;
  CHECK(what(none).empty());
  // Qwen2 0.5B: Q, K, V biases and a tied embedding: 494,032,768 parameters.
  const auto qwen = nlohmann::json::parse(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "max_position_embeddings": 32768,
    "vocab_size": 151936, "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 32768,
    "max_window_layers": 24})");
  CHECK(build_transformer(read_hf_config(qwen, "q.json", 4096), 1).totals().params == 494032768.0);
}

TEST_CASE("HuggingFace head_dim: heads sized apart from the hidden size") {
  // Mistral NeMo 12B (Mistral-Nemo-Base-2407): 40 layers of hidden 5120 with 32 query
  // heads and 8 key-value heads of 128 (Q is 4096 wide, not 5120), FFN 14336, vocabulary
  // 131072, untied: per layer 2 x 5120 x 4096 (Q, output) + 2 x 5120 x 1024 (K, V) +
  // 3 x 5120 x 14336 + 2 x 5120 (norms) = 272,640,000; with both embeddings and the
  // final norm 12,247,782,400 parameters (the hub's 12.2B).
  const auto nemo = nlohmann::json::parse(R"({"model_type": "mistral", "hidden_size": 5120, "head_dim": 128,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
    "max_position_embeddings": 1024000, "sliding_window": null, "vocab_size": 131072, "hidden_act": "silu",
    "tie_word_embeddings": false})");
  const TransformerConfig c = read_hf_config(nemo, "nemo.json", 4096);
  CHECK(c.head_dim() == 128);
  CHECK(c.attention_width() == 4096);
  CHECK(build_transformer(c, 1).totals().params == 12247782400.0);
  // A head_dim equal to hidden / heads (Llama 3 8B's 128) changes nothing.
  auto llama = nlohmann::json::parse(kLlama3_8b);
  llama["head_dim"] = 128;
  CHECK(build_transformer(read_hf_config(llama, "config.json"), 1).totals().params == 8030261248.0);
  // The attention's own FLOPs scale with the heads' width (b s^2 x heads x head_dim):
  // heads of 128 cost 4096 / 5120 = 0.8 of heads of 160 (which fill the hidden size).
  const auto attention_flops = [](const TransformerConfig& m) {
    const OperatorGraph g = build_transformer(m, 1);
    for (const Operator& op : g.ops()) {
      if (op.name == "layer0.attention") return op.cost.fwd_flops;
    }
    return 0.0;
  };
  TransformerConfig wide = c;
  wide.head_size = 160;
  CHECK(attention_flops(c) > 0);
  CHECK(attention_flops(c) / attention_flops(wide) == Approx(0.8));
}

namespace {
// The dropout operators of the model at batch 1: {embedding, attention, residual}.
std::array<int, 3> dropouts(const TransformerConfig& c) {
  std::array<int, 3> n{0, 0, 0};
  const OperatorGraph g = build_transformer(c, 1);
  for (const Operator& op : g.ops()) {
    if (op.kind != OpKind::kDropout) continue;
    ++n[op.name == "embed.dropout" ? 0 : op.name.ends_with("attention.dropout") ? 1 : 2];
  }
  return n;
}
}  // namespace

TEST_CASE("HuggingFace dropout probabilities: a dropout of 0 is left out") {
  // Expected: GPT2Config's defaults (0.1 each) give the embedding, attention and the two
  // residual dropouts; each pdrop of 0 removes its operators (12 layers: 12 attention,
  // 24 residual); Llama's attention_dropout (default 0) adds the attention one, which
  // under flash attention is inside the kernel (no operator, no mask).
  auto gpt2 = nlohmann::json::parse(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_positions": 1024, "vocab_size": 50257})");
  CHECK(dropouts(read_hf_config(gpt2, "gpt2.json")) == std::array<int, 3>{1, 12, 24});
  gpt2["attn_pdrop"] = 0.0;
  CHECK(dropouts(read_hf_config(gpt2, "gpt2.json")) == std::array<int, 3>{1, 0, 24});
  gpt2["resid_pdrop"] = 0;
  gpt2["embd_pdrop"] = 0.0;
  CHECK(dropouts(read_hf_config(gpt2, "gpt2.json")) == std::array<int, 3>{0, 0, 0});
  gpt2["resid_pdrop"] = 1.5;
  CHECK(what(gpt2) == "config.json: resid_pdrop: expected a number from 0 to 1, got 1.5");
  auto llama = nlohmann::json::parse(kLlama3_8b);
  TransformerConfig c = read_hf_config(llama, "config.json");
  CHECK_FALSE(c.attention_dropout);
  llama["attention_dropout"] = 0.1;
  c = read_hf_config(llama, "config.json");
  CHECK(c.attention_dropout);
  CHECK(dropouts(c) == std::array<int, 3>{0, 0, 0});
  c.flash_attention = false;
  c.layers = 2;
  CHECK(dropouts(c) == std::array<int, 3>{0, 2, 0});
}

TEST_CASE("the workload option dropout turns every dropout of a transformer preset on or off") {
  // Expected: GPT-3 175B without dropout has its three dropout flags off, and GPT-2
  // built so has no dropout operator; Llama 3 8B with dropout gains the embedding's,
  // the attention's (plain attention: an operator) and the residual ones; a CNN preset
  // refuses the option.
  WorkloadOptions off;
  off.dropout = false;
  const TransformerConfig gpt = with_options(*transformer_preset("gpt3-175b"), off);
  CHECK_FALSE(gpt.embedding_dropout);
  CHECK_FALSE(gpt.attention_dropout);
  CHECK_FALSE(gpt.residual_dropout);
  off.seq = 256;
  CHECK(dropouts(with_options(*transformer_preset("gpt2"), off)) == std::array<int, 3>{0, 0, 0});
  WorkloadOptions on;
  on.dropout = true;
  on.flash_attention = false;
  TransformerConfig llama = with_options(*transformer_preset("llama3-8b"), on);
  llama.layers = 2;
  // The embedding's, and per layer the attention's, the projection's and the MLP's.
  CHECK(dropouts(llama) == std::array<int, 3>{1, 2, 4});
  WorkloadOptions cnn;
  cnn.dropout = false;
  cnn.spelled = "workload.";
  CHECK_THROWS_WITH_AS(build_workload_preset("vgg16", cnn), "workload.dropout: vgg16 is not a transformer", InputError);
}

TEST_CASE("HuggingFace Qwen3: heads of 128 and a norm over each query and key head") {
  // Qwen3-8B: 36 layers of hidden 4096, 32 query and 8 key-value heads of 128, FFN 12288,
  // vocabulary 151936, untied, no attention biases. Per layer 2 x 4096 x 4096 (Q,
  // output) + 2 x 4096 x 1024 (K, V) + 3 x 4096 x 12288 + 2 x 4096 (norms) + 2 x 128
  // (the query and key norms' scales) = 192,946,432; with both embeddings and the final
  // norm 8,190,735,360 parameters (the hub's 8.2B).
  const auto qwen3 = nlohmann::json::parse(R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36, "num_attention_heads": 32,
    "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
  const TransformerConfig c = read_hf_config(qwen3, "qwen3.json", 4096);
  CHECK(c.qk_norm);
  CHECK_FALSE(c.qkv_bias);
  CHECK(build_transformer(c, 1).totals().params == 8190735360.0);
  // Expert fields on a dense model type are refused by name.
  auto moe = qwen3;
  moe["num_experts"] = 128;
  CHECK(what(moe) == "config.json: num_experts: mixture-of-experts layers are modelled for model_type mixtral, qwen2_moe, qwen3_moe, glm4_moe, deepseek_v3 and kimi_k2, not qwen3");
}

TEST_CASE("HuggingFace Qwen3-MoE and Mixtral: every layer's MLP a mixture of experts") {
  // Qwen3-30B-A3B's config.json: 48 layers, hidden 2048, 32 query heads and 4 key-value
  // heads of 128, 128 experts of 768 (moe_intermediate_size; intermediate_size is for
  // dense layers, of which it has none), 8 per token, vocab 151936, untied embedding.
  // Expected, per layer: Q and output projection 2 x 2048 x 4096, K and V 2 x 512 x 2048,
  // the query and key norms 2 x 128, two norms 2 x 2048, the router 2048 x 128, the
  // experts 128 x 3 x 2048 x 768: 623,120,640; with both embeddings (151936 x 2048 each)
  // and the final norm, 30,532,122,624 parameters: the model's published 30.5B.
  const auto doc = nlohmann::json::parse(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "norm_topk_prob": true, "router_aux_loss_coef": 0.001, "output_router_logits": false,
    "max_position_embeddings": 40960, "vocab_size": 151936, "tie_word_embeddings": false, "hidden_act": "silu",
    "attention_bias": false, "rope_theta": 1000000.0, "sliding_window": null, "use_sliding_window": false})");
  const TransformerConfig q = read_hf_config(doc, "qwen3-moe.json", 4096);
  CHECK(q.experts == 128);
  CHECK(q.experts_per_token == 8);
  CHECK(q.ffn == 768);
  CHECK(q.qk_norm);
  CHECK(build_transformer(q, 1).totals().params == 30532122624.0);
  CHECK(q.dense_layers.empty());
  // Dense layers among the experts' (Qwen2MoeDecoderLayer): layer l is a mixture of
  // experts when l + 1 is a multiple of decoder_sparse_step and l is not in
  // mlp_only_layers, else a dense MLP of intermediate_size (6144): 3 x 2048 x 6144 =
  // 37,748,736 parameters in place of the router's and experts' 604,241,920. With
  // mlp_only_layers [0, 1]: 30,532,122,624 - 2 x 566,493,184 = 29,399,136,256.
  auto some = doc;
  some["mlp_only_layers"] = {0, 1};
  const TransformerConfig two = read_hf_config(some, "qwen3-moe.json", 4096);
  CHECK(two.dense_ffn == 6144);
  CHECK(!two.moe_layer(0));
  CHECK(!two.moe_layer(1));
  CHECK(two.moe_layers_in(0, 48) == 46);
  CHECK(build_transformer(two, 1).totals().params == 29399136256.0);
  // decoder_sparse_step 2: layers 1, 3, ..., 47 mixtures of experts, the others dense.
  some = doc;
  some["decoder_sparse_step"] = 2;
  const TransformerConfig half = read_hf_config(some, "qwen3-moe.json", 4096);
  CHECK(half.moe_layers_in(0, 48) == 24);
  CHECK((!half.moe_layer(0) && half.moe_layer(1) && !half.moe_layer(46) && half.moe_layer(47)));
  some["decoder_sparse_step"] = 49;
  CHECK(what(some) == "config.json: decoder_sparse_step: leaves no mixture-of-experts layer among the 48 layers");
  some = doc;
  some["mlp_only_layers"] = nullptr;  // none, as Qwen2MoeConfig takes it
  CHECK(read_hf_config(some, "qwen3-moe.json", 4096).dense_layers.empty());
  some = doc;
  some["mlp_only_layers"] = {48};
  CHECK(what(some) == "config.json: mlp_only_layers.0: expected a layer index from 0 to 47, got 48");
  some = doc;
  some["num_experts_per_tok"] = 129;
  CHECK(what(some) == "config.json: experts_per_token must be 1 to experts (128), got 129");
  // Qwen1.5-MoE-A2.7B (model_type qwen2_moe): 24 layers, hidden 2048, 16 heads with Q,
  // K, V biases, 60 experts of 1408, 4 per token, and a gated shared expert of 5632.
  // Expected per layer: attention 4 x 2048^2 + 3 x 2048, two norms 2 x 2048, the router
  // 2048 x 60, the experts 60 x 3 x 2048 x 1408, the shared expert 3 x 2048 x 5632 and
  // its gate 2048: 570,560,512; with both embeddings (151936 x 2048) and the final norm,
  // 14,315,784,192 (published: 14.3B).
  const auto qwen2 = nlohmann::json::parse(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "norm_topk_prob": false, "max_position_embeddings": 8192, "vocab_size": 151936,
    "tie_word_embeddings": false, "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21,
    "router_aux_loss_coef": 0.001, "output_router_logits": false, "hidden_act": "silu"})");
  const TransformerConfig q2 = read_hf_config(qwen2, "qwen2-moe.json", 4096);
  CHECK(q2.shared_ffn == 5632);
  CHECK(q2.shared_gate);
  CHECK(q2.qkv_bias);
  CHECK(build_transformer(q2, 1).totals().params == 14315784192.0);
  // Mixtral 8x7B's config.json gives the preset's model, 46,702,792,704 parameters (its
  // published count), 8 experts of 14336, 2 per token.
  const auto mixtral = nlohmann::json::parse(R"({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "num_local_experts": 8,
    "num_experts_per_tok": 2, "max_position_embeddings": 32768, "vocab_size": 32000, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null, "tie_word_embeddings": false,
    "hidden_act": "silu", "output_router_logits": false})");
  const TransformerConfig m = read_hf_config(mixtral, "mixtral.json", 4096);
  const TransformerConfig preset = *transformer_preset("mixtral-8x7b");
  CHECK(m.experts == preset.experts);
  CHECK(m.experts_per_token == preset.experts_per_token);
  CHECK(build_transformer(m, 1).totals().params == 46702792704.0);
  CHECK(build_transformer(preset, 1).totals().params == 46702792704.0);
}

TEST_CASE("HuggingFace GLM-4.5: dense first layers, a shared expert, biases on Q, K and V only") {
  // GLM-4.5-Air's config.json (zai-org): 46 layers of hidden 4096, 96 query and 8
  // key-value heads of 128 with Q, K, V biases (attention_bias; the output projection has
  // none in Glm4MoeAttention), the first first_k_dense_replace = 1 layer a dense MLP of
  // 10944, the others 128 routed experts of 1408 (8 per token) beside one shared expert
  // of 1408, untied vocabulary 151552. Expected per layer: attention 4096 x 12288 +
  // 12288 (Q) + 2 x (4096 x 1024 + 1024) (K, V) + 12288 x 4096 (output) and two norms
  // 2 x 4096: 109,074,432; an expert layer adds 128 x 3 x 4096 x 1408 + 4096 x 128
  // (router) + 3 x 4096 x 1408 (shared): 2,341,492,736 in all; the dense one 3 x 4096 x
  // 10944: 243,554,304. With both embeddings and the final norm: 106,852,245,504, the
  // published 106B. Its multi-token prediction depth (num_nextn_predict_layers 1) adds
  // a projection 2 x 4096 x 4096, three norms 3 x 4096 and an expert layer (the last
  // layer's kind): 109,227,304,960 with it.
  const auto doc = nlohmann::json::parse(R"({"architectures": ["Glm4MoeForCausalLM"], "attention_bias": true,
    "attention_dropout": 0.0, "eos_token_id": [151329, 151336, 151338], "first_k_dense_replace": 1, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 10944,
    "max_position_embeddings": 131072, "model_type": "glm4_moe", "moe_intermediate_size": 1408, "n_group": 1,
    "n_routed_experts": 128, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 96,
    "num_experts_per_tok": 8, "num_hidden_layers": 46, "num_key_value_heads": 8, "num_nextn_predict_layers": 1,
    "pad_token_id": 151329, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "rope_theta": 1000000, "routed_scaling_factor": 1.0, "tie_word_embeddings": false, "topk_group": 1,
    "torch_dtype": "bfloat16", "transformers_version": "4.54.1", "use_cache": true, "use_qk_norm": false,
    "vocab_size": 151552})");
  const TransformerConfig g = read_hf_config(doc, "glm-4.5-air.json", 4096);
  CHECK(g.experts == 128);
  CHECK(g.experts_per_token == 8);
  CHECK(g.ffn == 1408);
  CHECK(g.dense_ffn == 10944);
  CHECK(g.shared_ffn == 1408);
  CHECK_FALSE(g.shared_gate);
  CHECK(g.qkv_bias);
  CHECK_FALSE(g.proj_bias);
  CHECK_FALSE(g.qk_norm);
  CHECK(!g.moe_layer(0));
  CHECK(g.moe_layers_in(0, 46) == 45);
  CHECK(g.mtp_layers == 1);
  const OperatorGraph graph = build_transformer(g, 1);
  CHECK(graph.totals().params == 109227304960.0);
  TransformerConfig main_model = g;
  main_model.mtp_layers = 0;
  CHECK(build_transformer(main_model, 1).totals().params == 106852245504.0);
  double layer0 = 0, layer1 = 0;
  for (const Operator& op : graph.ops()) {
    if (op.layer == 0) layer0 += op.cost.params;
    if (op.layer == 1) layer1 += op.cost.params;
  }
  CHECK(layer0 == 243554304.0);
  CHECK(layer1 == 2341492736.0);
  // Counts that are not whole, and dense layers everywhere, are refused by name.
  auto bad = doc;
  bad["first_k_dense_replace"] = 1.5;
  CHECK(what(bad) == "config.json: first_k_dense_replace: expected a whole number from 0 to 46, got 1.5");
  bad["first_k_dense_replace"] = 46;
  CHECK(what(bad) == "config.json: first_k_dense_replace: leaves no mixture-of-experts layer among the 46 layers");
  bad["first_k_dense_replace"] = 47;
  CHECK(what(bad) == "config.json: first_k_dense_replace: expected a whole number from 0 to 46, got 47");
  bad = doc;
  bad.erase("first_k_dense_replace");  // Glm4MoeConfig's default, 1
  CHECK(read_hf_config(bad, "g.json", 4096).moe_layers_in(0, 46) == 45);
  bad["num_hidden_layers"] = 1;
  CHECK(what(bad) == "config.json: first_k_dense_replace (absent: Glm4MoeConfig's default, 1): leaves no mixture-of-experts layer among the 1 layer");
  bad = doc;
  bad["n_shared_experts"] = nullptr;  // transformers fails on it (None x an int)
  CHECK(what(bad) == "config.json: n_shared_experts: expected a whole number from 0 to 1000, got null");
  bad["n_shared_experts"] = 0;
  CHECK(read_hf_config(bad, "g.json", 4096).shared_ffn == 0);
  // An absurd layer count is refused before a flag per layer is made.
  bad = doc;
  bad["num_hidden_layers"] = 1e15;
  CHECK(what(bad) == "config.json: layers must be at most 100000, got 1000000000000000");
  bad = doc;
  bad["use_qk_norm"] = true;
  CHECK(read_hf_config(bad, "g.json", 4096).qk_norm);
}

namespace {
// DeepSeek-V3's config.json (deepseek-ai/DeepSeek-V3), its quantization_config and
// rope_scaling shortened to the keys' presence.
constexpr const char* kDeepSeekV3 = R"({"architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
  "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
  "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "quantization_config": {"quant_method": "fp8"}, "rms_norm_eps": 1e-06,
  "rope_scaling": {"type": "yarn", "factor": 40}, "rope_theta": 10000, "routed_scaling_factor": 2.5,
  "scoring_func": "sigmoid", "seq_aux": true, "tie_word_embeddings": false, "topk_group": 4,
  "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 129280})";

// Parameters of each layer of graph `g`.
std::vector<double> layer_params(const OperatorGraph& g, std::int64_t layers) {
  std::vector<double> out(static_cast<std::size_t>(layers), 0.0);
  for (const Operator& op : g.ops()) {
    if (op.layer >= 0 && op.layer < layers) out[static_cast<std::size_t>(op.layer)] += op.cost.params;  // (not MTP layers)
  }
  return out;
}
}  // namespace

TEST_CASE("HuggingFace DeepSeek-V3 and Kimi K2: multi-head latent attention, dense first layers, a shared expert") {
  // Expected, DeepSeek-V3 (hidden 7168, 128 heads, 61 layers): attention per layer
  // q_down 7168 x 1536 + its norm 1536 + q_up 1536 x 128 x (128 + 64) + kv_down 7168 x
  // (512 + 64) + its norm 512 + kv_up 512 x 128 x (128 + 128) + output 128 x 128 x 7168
  // + two norms 2 x 7168 = 187,121,664; the first 3 layers a dense MLP of 3 x 7168 x
  // 18432 = 396,361,728 (583,483,392 in all); the other 58 a router 7168 x 256, 256
  // experts and one shared expert of 3 x 7168 x 2048 each (11,507,286,016 in all);
  // embedding and output 129280 x 7168 each, final norm 7168: 671,026,404,352, the
  // published 671B (the router's per-expert score bias, 256 a layer, is not counted).
  // Its multi-token prediction depth adds 2 x 7168 x 7168 + 3 x 7168 and an expert
  // layer: 682,636,472,320 (the published 685B counts the module's own copies of the
  // embedding and output layer too, 2 x 129280 x 7168 more; here they are shared).
  const auto doc = nlohmann::json::parse(kDeepSeekV3);
  const TransformerConfig d = read_hf_config(doc, "deepseek-v3.json", 4096);
  CHECK(d.mla());
  CHECK(d.q_lora_rank == 1536);
  CHECK(d.kv_lora_rank == 512);
  CHECK(d.qk_head_dim() == 192);
  CHECK(d.head_dim() == 128);
  CHECK(d.kv_heads == 128);
  CHECK(d.experts == 256);
  CHECK(d.ffn == 2048);
  CHECK(d.dense_ffn == 18432);
  CHECK(d.shared_ffn == 2048);
  CHECK_FALSE(d.shared_gate);
  CHECK_FALSE(d.qkv_bias);
  CHECK_FALSE(d.proj_bias);
  CHECK(d.moe_layers_in(0, 61) == 58);
  CHECK_FALSE(d.moe_layer(2));
  CHECK(d.moe_layer(3));
  CHECK(d.mtp_layers == 1);
  const OperatorGraph graph = build_transformer(d, 1);
  CHECK(graph.totals().params == 682636472320.0);
  TransformerConfig main_model = d;
  main_model.mtp_layers = 0;
  CHECK(build_transformer(main_model, 1).totals().params == 671026404352.0);
  const std::vector<double> per_layer = layer_params(graph, 61);
  CHECK(per_layer[0] == 583483392.0);
  CHECK(per_layer[60] == 11507286016.0);
  // The attention's FLOPs: per head, scores over 192 and context over 128; a causal
  // flash kernel 2 x s^2 x (192 + 128) / 2 per head and sequence forward, and backward
  // 2 x s^2 x (3 x 192 + 2 x 128) / 2 (scores recomputed, gradients of Q, K and the
  // probabilities over 192, of V and through V over 128). Each head's key is joined
  // once: 128 + 64 from 128 per head and 64 shared, read and written.
  int flash = 0, concat = 0;
  for (const Operator& op : graph.ops()) {
    if (op.kind == OpKind::kFlashAttention && op.layer == 0) {
      ++flash;
      CHECK(op.cost.fwd_flops == 2.0 * 128 * 4096.0 * 4096.0 * (192 + 128) * 0.5);
      CHECK(op.cost.bwd_flops == Approx(2.0 * 128 * 4096.0 * 4096.0 * (3 * 192 + 2 * 128) * 0.5).epsilon(1e-15));
    }
    if (op.kind == OpKind::kConcat && op.layer == 0) {
      ++concat;
      CHECK(op.cost.fwd_bytes == 2.0 * (4096.0 * 128 * 128 + 4096.0 * 64 + 4096.0 * 128 * 192));
    }
  }
  CHECK(flash == 1);
  CHECK(concat == 1);
  // Kimi K2 (moonshotai/Kimi-K2-Instruct, model_type kimi_k2, DeepSeek-V3's model): 64 heads, 384
  // experts, one dense layer, vocabulary 163840. Expected: attention 101,138,432 a layer
  // (q_up 1536 x 64 x 192, kv_up 512 x 64 x 256, output 8192 x 7168, the rest as above);
  // the dense layer 497,500,160; an expert layer 101,138,432 + 7168 x 384 + 385 x 3 x
  // 7168 x 2048 = 17,059,364,864; with 2 x 163840 x 7168 and 7168: 1,026,408,209,408,
  // the published 1T.
  auto kimi = doc;
  kimi["model_type"] = "kimi_k2";
  kimi["num_attention_heads"] = 64;
  kimi["num_key_value_heads"] = 64;
  kimi["n_routed_experts"] = 384;
  kimi["first_k_dense_replace"] = 1;
  kimi["n_group"] = 1;
  kimi["topk_group"] = 1;
  kimi["vocab_size"] = 163840;
  kimi["routed_scaling_factor"] = 2.827;
  kimi["num_nextn_predict_layers"] = 0;
  const TransformerConfig k = read_hf_config(kimi, "kimi-k2.json", 4096);
  const OperatorGraph kg = build_transformer(k, 1);
  CHECK(kg.totals().params == 1026408209408.0);
  CHECK(layer_params(kg, 61)[1] == 17059364864.0);
  // No query latent (q_lora_rank null, DeepSeek-V2-Lite's form): the query projected
  // from the norm's output, 7168 x 128 x 192 in place of the latent's 11,010,048 + 1536
  // + 37,748,736.
  auto direct = doc;
  direct["q_lora_rank"] = nullptr;
  const OperatorGraph dg = build_transformer(read_hf_config(direct, "v.json", 4096), 1);
  CHECK(layer_params(dg, 61)[0] == 583483392.0 - (11010048.0 + 1536 + 37748736) + 7168.0 * 128 * 192);
  // moe_layer_freq 2 (DeepSeek's modelling code): layers 4, 6, ..., 60 past the 3 dense ones.
  auto every_other = doc;
  every_other["moe_layer_freq"] = 2;
  CHECK(read_hf_config(every_other, "v.json", 4096).moe_layers_in(0, 61) == 29);
  // Errors name the field.
  auto bad = doc;
  bad.erase("q_lora_rank");
  CHECK(what(bad) == "config.json: q_lora_rank: missing (a required field; null: no query latent)");
  bad = doc;
  bad.erase("qk_rope_head_dim");
  CHECK(what(bad) == "config.json: qk_rope_head_dim: missing (a required field)");
  bad = doc;
  bad["kv_lora_rank"] = 2000000;
  CHECK(what(bad) == "config.json: kv_lora_rank: must be at most 1000000, got 2000000");
  bad["kv_lora_rank"] = 0;
  CHECK(what(bad) == "config.json: kv_lora_rank: expected a positive integer, got 0");
  bad = doc;
  bad["num_nextn_predict_layers"] = 17;
  CHECK(what(bad) == "config.json: num_nextn_predict_layers: expected a whole number from 0 to 16, got 17");
  bad = doc;
  bad["moe_layer_freq"] = 100;
  CHECK(what(bad) == "config.json: moe_layer_freq: leaves no mixture-of-experts layer among layers 3 to 60 (a layer past "
                     "first_k_dense_replace is one when its index is a multiple of it)");
  bad = doc;
  bad.erase("first_k_dense_replace");  // DeepseekV3Config's default, 3
  CHECK(read_hf_config(bad, "v.json", 4096).moe_layers_in(0, 61) == 58);
  bad["num_hidden_layers"] = 3;
  CHECK(what(bad) == "config.json: first_k_dense_replace (absent: DeepseekV3Config's default, 3): leaves no mixture-of-experts layer among the 3 layers");
}

namespace {
// experts_spread by enumeration: every choice of groups_per_token groups alike, then
// every set of experts_per_token of their experts alike; the mean count of parts hit.
double spread_by_enumeration(const TransformerConfig& c, std::int64_t parts) {
  const std::int64_t groups = c.expert_groups > 0 ? c.expert_groups : 1, chosen = c.expert_groups > 0 ? c.groups_per_token : 1;
  const std::int64_t per_group = c.experts / groups, per_part = c.experts / parts;
  double sum = 0.0, cases = 0.0;
  for (std::uint32_t gs = 0; gs < (1u << groups); ++gs) {
    if (std::popcount(gs) != chosen) continue;
    std::vector<std::int64_t> eligible;
    for (std::int64_t e = 0; e < c.experts; ++e) {
      if (gs >> (e / per_group) & 1u) eligible.push_back(e);
    }
    const auto n = static_cast<std::uint32_t>(eligible.size());
    double hits = 0.0, sets = 0.0;
    for (std::uint32_t es = 0; es < (1u << n); ++es) {
      if (std::popcount(es) != c.experts_per_token) continue;
      std::uint64_t touched = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        if (es >> i & 1u) touched |= 1ull << (eligible[i] / per_part);
      }
      hits += std::popcount(touched);
      sets += 1.0;
    }
    sum += hits / sets;
    cases += 1.0;
  }
  return sum / cases;
}
}  // namespace

TEST_CASE("group-limited routing: the expected parts a token's experts reach, against enumeration and closed forms") {
  // Expected: with E experts in equal parts of E/P in order and k experts per token
  // chosen alike among all, a part is missed with chance C(E - E/P, k) / C(E, k), so
  // the spread is P (1 - that). DeepSeek-V3 (256 experts, 8 per token, 8 groups of 32,
  // 4 per token) on 8 servers of 32 experts: a server is one group, taken with chance
  // 1/2, and then hit unless all 8 experts fall in the other 96 of the 128 eligible:
  // 4 (1 - C(96, 8) / C(128, 8)) = 3.629; on 64 GPUs of 4 experts: 32 (1 - C(124, 8) /
  // C(128, 8)) = 7.359; without the groups on 8 servers: 8 (1 - C(224, 8) / C(256, 8))
  // = 5.295. One part, or one expert per token: 1. Small models, parts and groups that
  // do not divide one another included, agree with enumerating every choice.
  const auto choose = [](double n, double r) {
    double v = 1.0;
    for (int i = 0; i < r; ++i) v = v * (n - i) / (i + 1);
    return v;
  };
  TransformerConfig d;
  d.experts = 256, d.experts_per_token = 8, d.expert_groups = 8, d.groups_per_token = 4;
  CHECK(experts_spread(d, 8) == Approx(4 * (1 - choose(96, 8) / choose(128, 8))).epsilon(1e-9));
  CHECK(experts_spread(d, 64) == Approx(32 * (1 - choose(124, 8) / choose(128, 8))).epsilon(1e-9));
  CHECK(experts_spread(d, 1) == Approx(1.0).epsilon(1e-9));
  TransformerConfig any = d;
  any.expert_groups = any.groups_per_token = 0;
  CHECK(experts_spread(any, 8) == Approx(8 * (1 - choose(224, 8) / choose(256, 8))).epsilon(1e-9));
  any.experts_per_token = 1;
  CHECK(experts_spread(any, 64) == Approx(1.0).epsilon(1e-9));
  const std::tuple<int, int, int, int, int> small[] = {
      // experts, per token, groups, groups per token, parts
      {12, 2, 3, 1, 2}, {12, 3, 3, 2, 2}, {12, 2, 4, 2, 3}, {12, 4, 6, 3, 4}, {16, 3, 4, 2, 8}, {16, 2, 2, 1, 8},
      {12, 2, 0, 0, 3}, {16, 5, 8, 4, 2}};
  const TransformerConfig base = read_hf_config(nlohmann::json::parse(kDeepSeekV3), "v3.json", 4096);
  for (const auto& [e, k, g, m, parts] : small) {
    TransformerConfig c = base;
    c.experts = e, c.experts_per_token = k, c.expert_groups = g, c.groups_per_token = m;
    INFO("experts " << e << ", k " << k << ", groups " << g << " choose " << m << ", parts " << parts);
    REQUIRE(transformer_problem(c).empty());
    CHECK(experts_spread(c, parts) == Approx(spread_by_enumeration(c, parts)).epsilon(1e-9));
  }
  // The routing's limits, by name.
  const auto doc = nlohmann::json::parse(kDeepSeekV3);
  const TransformerConfig r = read_hf_config(doc, "v3.json", 4096);
  TransformerConfig bad = r;
  bad.expert_groups = 7;
  CHECK(transformer_problem(bad) == "expert_groups must divide experts (256), got 7");
  bad = r, bad.groups_per_token = 9;
  CHECK(transformer_problem(bad) == "groups_per_token must be 1 to expert_groups (8), got 9");
  bad = r, bad.groups_per_token = 0;
  CHECK(transformer_problem(bad) == "groups_per_token must be 1 to expert_groups (8), got 0");
  bad = r, bad.experts_per_token = 40, bad.groups_per_token = 1;
  CHECK(transformer_problem(bad) == "experts_per_token (40) must be at most the experts of groups_per_token groups (32)");
  // From a HuggingFace config: n_group and topk_group, absent DeepseekV3Config's 8 and 4.
  CHECK(r.expert_groups == 8);
  CHECK(r.groups_per_token == 4);
  auto absent = doc;
  absent.erase("n_group");
  absent.erase("topk_group");
  CHECK(read_hf_config(absent, "v3.json", 4096).expert_groups == 8);
  auto wrong = doc;
  wrong["n_group"] = 7;
  CHECK_THROWS_WITH_AS(read_hf_config(wrong, "v3.json", 4096), "v3.json: n_group: 7 groups do not divide the 256 routed experts",
                       InputError);
  wrong = doc, wrong["topk_group"] = 9;
  CHECK_THROWS_WITH_AS(read_hf_config(wrong, "v3.json", 4096), "v3.json: topk_group: must be at most n_group (8), got 9",
                       InputError);
  wrong = doc, wrong["topk_group"] = 1, wrong["num_experts_per_tok"] = 33;
  CHECK_THROWS_WITH_AS(read_hf_config(wrong, "v3.json", 4096),
                       "v3.json: num_experts_per_tok: 33 experts do not fit in topk_group (1) groups of 32", InputError);
}

TEST_CASE("HuggingFace nemotron: Nemotron-4 15B's shape builds the preset's model") {
  // Expected: a NemotronConfig with the 15B's sizes (transformers' field names; relu2,
  // half-rotary heads, untied embeddings) gives the nemotron4-15b preset's operators and
  // parameters exactly: the GPT block with a squared ReLU. Another activation is refused.
  const auto doc = nlohmann::json::parse(R"({"architectures": ["NemotronForCausalLM"], "model_type": "nemotron",
    "hidden_act": "relu2", "hidden_size": 6144, "intermediate_size": 24576, "num_hidden_layers": 32,
    "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 4096,
    "vocab_size": 256000, "norm_eps": 1e-05, "partial_rotary_factor": 0.5, "rope_theta": 10000,
    "attention_bias": false, "mlp_bias": false, "attention_dropout": 0.0, "tie_word_embeddings": false,
    "initializer_range": 0.0134, "torch_dtype": "bfloat16", "bos_token_id": 2, "eos_token_id": 3})");
  const OperatorGraph hf = build_transformer(read_hf_config(doc, "config.json"), 1);
  const OperatorGraph preset = build_workload_preset("nemotron4-15b", {});
  CHECK(hf.totals().params == preset.totals().params);
  CHECK(hf.totals().fwd_flops == preset.totals().fwd_flops);
  REQUIRE(hf.ops().size() == preset.ops().size());
  for (std::size_t i = 0; i < hf.ops().size(); ++i) CHECK(hf.ops()[i].kind == preset.ops()[i].kind);
  auto silu = doc;
  silu["hidden_act"] = "silu";
  CHECK(what(silu) == "config.json: hidden_act: expected one of \"relu2\", got \"silu\"");
}

TEST_CASE("HuggingFace fields ddlsim cannot model are refused by name") {
  auto doc = nlohmann::json::parse(kLlama3_8b);
  doc["num_local_experts"] = 8;
  CHECK(what(doc) == "config.json: num_local_experts: mixture-of-experts layers are modelled for model_type mixtral, qwen2_moe, qwen3_moe, glm4_moe, deepseek_v3 and kimi_k2, not llama");
  doc = nlohmann::json::parse(kLlama3_8b);
  doc["hidden_act"] = "gelu";
  CHECK(what(doc) == "config.json: hidden_act: expected one of \"silu\", got \"gelu\"");
  doc = nlohmann::json::parse(kLlama3_8b);
  doc["head_dim"] = 0;
  CHECK(what(doc) == "config.json: head_dim: expected a positive integer, got 0");
  doc = nlohmann::json::parse(kLlama3_8b);
  doc["hiden_size"] = 1;
  CHECK(what(doc) == "config.json: hiden_size: unknown key (did you mean 'hidden_size'?)");
  doc = nlohmann::json::parse(kLlama3_8b);
  doc["model_type"] = "falcon";
  CHECK(what(doc).rfind("config.json: model_type: expected one of \"llama\", \"mistral\", \"mixtral\", \"qwen2\", \"qwen2_moe\", \"qwen3\", \"qwen3_moe\", \"glm4_moe\", \"deepseek_v3\", \"kimi_k2\", \"nemotron\", \"gpt2\", got \"falcon\"", 0) == 0);
  doc = nlohmann::json::parse(kLlama3_8b);
  doc["num_key_value_heads"] = 5;
  CHECK(what(doc) == "config.json: kv_heads (5) must divide heads (32)");
  CHECK(what(nlohmann::json::parse(kLlama3_8b), 0) == "seq: expected 1 to 10000000, got 0");
}

TEST_CASE("workload presets: published sizes") {
  // Llama 2 7B 6.74B, Llama 3 70B 70.6B, Megatron's 1T configuration 1.008T (Narayanan et
  // al. Table 1), each within 1%; an unknown name gets a suggestion.
  CHECK(build_workload_preset("llama2-7b", {}).totals().params == Approx(6.74e9).epsilon(0.01));
  CHECK(build_workload_preset("llama3-70b", {}).totals().params == Approx(70.6e9).epsilon(0.01));
  CHECK(build_workload_preset("megatron-1t", {}).totals().params == Approx(1.008e12).epsilon(0.01));
  // Korthikanti et al. 2022's 22B (48 layers, hidden 6144, vocabulary 51200, sequence
  // 2048): 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)) = 22.07B, within 0.1%.
  CHECK(build_workload_preset("megatron-22b", {}).totals().params == Approx(22.07e9).epsilon(0.001));
  // PaLM 540B (Chowdhery et al. 2022, Table 1: 540.35B): 118 parallel layers of hidden
  // 18432 with 48 query heads of 256 (Q 12288 wide) and one key-value head, SwiGLU FFN
  // 73728, shared 256k embedding; within 0.1%.
  CHECK(build_workload_preset("palm-540b", {}).totals().params == Approx(540.35e9).epsilon(0.001));
  // BLOOM 176B (bigscience/bloom's model card): 176,247,271,424 parameters exactly, with
  // its 250,880-row embedding and the layer norm after it.
  CHECK(build_workload_preset("bloom-176b", {}).totals().params == 176247271424.0);
  try {
    build_workload_preset("llama3-8", {});
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).rfind("unknown workload preset 'llama3-8' (did you mean 'llama3-8b'?)", 0) == 0);
  }
}

TEST_CASE("Nemotron-4: a GPT block with a squared-ReLU MLP, 8 key-value heads, no biases, untied embeddings") {
  // Per layer: Q and the output projection h^2 each, K and V 2 x 8 x (h / heads) x h, the
  // MLP 2 x h x 4h, two layer norms 2h each; the model adds untied input and output
  // embeddings (2 V h, V = 256000) and a final norm (2h). The reports: 15B has 3.2B
  // embedding and 12.5B other parameters, 340B 9.4B and 331.6B.
  const auto expected = [](double l, double h, double heads) {
    const double layer = 2 * h * h + 2 * 8 * (h / heads) * h + 8 * h * h + 4 * h;
    return l * layer + 2 * 256000 * h + 2 * h;
  };
  const OperatorGraph small = build_workload_preset("nemotron4-15b", {});
  CHECK(small.totals().params == expected(32, 6144, 48));
  CHECK(small.totals().params == Approx(3.2e9 + 12.5e9).epsilon(0.01));
  const OperatorGraph big = build_workload_preset("nemotron4-340b", {});
  CHECK(big.totals().params == expected(96, 18432, 96));
  CHECK(big.totals().params == Approx(9.4e9 + 331.6e9).epsilon(0.001));
  // Each MLP's activation is one squared-ReLU kernel on the b s 4h first-layer output
  // (2 FLOPs an element: the max and the product), keeping its input; no GeLU anywhere.
  int squared = 0;
  for (const Operator& op : small.ops()) {
    CHECK(op.kind != OpKind::kGelu);
    if (op.kind != OpKind::kSquaredRelu) continue;
    ++squared;
    CHECK(op.name.ends_with(".squared_relu"));
    CHECK(op.cost.fwd_flops == 2.0 * 4096 * 4 * 6144);
    CHECK(op.cost.saved_bytes == 2.0 * 4096 * 4 * 6144);  // bf16 input
  }
  CHECK(squared == 32);
  CHECK(op_kind_name(OpKind::kSquaredRelu) == "squared_relu");
  // The Llama family's MLP is gated: a squared ReLU there is refused by name.
  TransformerConfig llama = llama_config("l", 2, 64, 4, 4, 128, 16, 100);
  llama.squared_relu = true;
  CHECK(transformer_problem(llama) == "squared_relu replaces the GPT family's GeLU; a Llama-family MLP is gated (SwiGLU)");
}

TEST_CASE("cross-entropy moves what Megatron-LM's vocab-parallel cross-entropy moves") {
  // Expected, per logit: forward, the fp32 upcast of 16-bit logits (read 2, write 4), the
  // max (read 4), subtracting it (read 4, write 4), exp (read 4, write 4), the sum (read
  // 4) and the division (read 4, write 4): 38 bytes, plus 12 per row (label, loss, max);
  // backward, scaling the softmax (read 4, write 4) and the upcast's backward (read 4,
  // write 2): 14 bytes; kept for backward, the fp32 softmax: 4 bytes. fp32 logits skip
  // the upcast (32 and 8 bytes).
  const double rows = 8 * 1024, vocab = 50304, e = rows * vocab;
  for (const auto& [dtype, fwd, bwd] : {std::tuple{DataType::kBf16, 38.0, 14.0}, std::tuple{DataType::kFp32, 32.0, 8.0}}) {
    OperatorGraph g;
    const std::uint32_t logits = g.input("logits", {8, 1024, 50304}, dtype);
    g.cross_entropy("loss", logits);
    const OpCost& c = g.ops().back().cost;
    CHECK(c.fwd_bytes == e * fwd + rows * 12.0);
    CHECK(c.bwd_bytes == e * bwd);
    CHECK(c.saved_bytes == e * 4.0);
  }
}
