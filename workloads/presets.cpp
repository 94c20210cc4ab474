#include "workloads/presets.hpp"

#include <functional>

#include "support/input_error.hpp"
#include "support/strings.hpp"
#include "workloads/cnn.hpp"

namespace ddlsim {
namespace {

struct Entry {
  const char* name;
  const char* summary;
  std::function<TransformerConfig()> transformer;  // empty for CNNs and MLPs
};

TransformerConfig megatron(const char* name, std::int64_t layers, std::int64_t hidden, std::int64_t heads) {
  return gpt_config(name, layers, hidden, heads, 2048, 51200);
}

TransformerConfig gpt2(const char* name, std::int64_t layers, std::int64_t hidden, std::int64_t heads) {
  TransformerConfig c = gpt_config(name, layers, hidden, heads, 1024, 50257);
  return c;
}

// Nemotron-4 (NVIDIA's technical reports for the 15B and 340B models, and NeMo's
// configurations of them): a GPT-style block (layer norm, a non-gated MLP of 4 x hidden)
// with a squared-ReLU activation, 8 key-value heads, rotary positions, no biases, no
// dropout, untied input and output embeddings of a 256,000-entry vocabulary. 15B:
// 15,628,775,424 parameters (3.1B of them embeddings; the report: 3.2B + 12.5B); 340B:
// 341,029,195,776 (9.4B; the report: 9.4B + 331.6B).
TransformerConfig nemotron4(const char* name, std::int64_t layers, std::int64_t hidden, std::int64_t heads) {
  TransformerConfig c = gpt_config(name, layers, hidden, heads, 4096, 256000);
  c.kv_heads = 8;
  c.squared_relu = true;
  c.tied_embedding = false;
  c.qkv_bias = c.proj_bias = c.mlp_bias = false;
  c.learned_positions = false;
  c.embedding_dropout = c.attention_dropout = c.residual_dropout = false;
  c.flash_attention = true;
  return c;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"gpt3-175b", "GPT-3 175B: 96 layers, hidden 12288, 96 heads, seq 2048, vocab 51200",
       [] { return gpt_config("gpt3-175b", 96, 12288, 96, 2048, 51200); }},
      {"megatron-1.7b", "Narayanan et al. 2021: 24 layers, hidden 2304, 24 heads", [] { return megatron("megatron-1.7b", 24, 2304, 24); }},
      {"megatron-3.6b", "Narayanan et al. 2021: 30 layers, hidden 3072, 32 heads", [] { return megatron("megatron-3.6b", 30, 3072, 32); }},
      {"megatron-7.5b", "Narayanan et al. 2021: 36 layers, hidden 4096, 32 heads", [] { return megatron("megatron-7.5b", 36, 4096, 32); }},
      {"megatron-18b", "Narayanan et al. 2021: 40 layers, hidden 6144, 48 heads", [] { return megatron("megatron-18b", 40, 6144, 48); }},
      {"megatron-22b", "Korthikanti et al. 2022: 48 layers, hidden 6144, 64 heads", [] { return megatron("megatron-22b", 48, 6144, 64); }},
      {"megatron-39b", "Narayanan et al. 2021: 48 layers, hidden 8192, 64 heads", [] { return megatron("megatron-39b", 48, 8192, 64); }},
      {"megatron-76b", "Narayanan et al. 2021: 60 layers, hidden 10240, 80 heads", [] { return megatron("megatron-76b", 60, 10240, 80); }},
      {"megatron-145b", "Narayanan et al. 2021: 80 layers, hidden 12288, 96 heads", [] { return megatron("megatron-145b", 80, 12288, 96); }},
      {"megatron-310b", "Narayanan et al. 2021: 96 layers, hidden 16384, 128 heads", [] { return megatron("megatron-310b", 96, 16384, 128); }},
      {"megatron-530b", "Narayanan et al. 2021: 105 layers, hidden 20480, 128 heads", [] { return megatron("megatron-530b", 105, 20480, 128); }},
      {"megatron-1t", "Narayanan et al. 2021: 128 layers, hidden 25600, 160 heads", [] { return megatron("megatron-1t", 128, 25600, 160); }},
      {"gpt2", "GPT-2 124M: 12 layers, hidden 768, 12 heads, seq 1024, vocab 50257", [] { return gpt2("gpt2", 12, 768, 12); }},
      {"gpt2-medium", "GPT-2 355M: 24 layers, hidden 1024, 16 heads", [] { return gpt2("gpt2-medium", 24, 1024, 16); }},
      {"gpt2-large", "GPT-2 774M: 36 layers, hidden 1280, 20 heads", [] { return gpt2("gpt2-large", 36, 1280, 20); }},
      {"gpt2-xl", "GPT-2 1.5B: 48 layers, hidden 1600, 25 heads", [] { return gpt2("gpt2-xl", 48, 1600, 25); }},
      {"llama2-7b", "Llama 2 7B: 32 layers, hidden 4096, 32 heads, FFN 11008, seq 4096, vocab 32000",
       [] { return llama_config("llama2-7b", 32, 4096, 32, 32, 11008, 4096, 32000); }},
      {"llama2-13b", "Llama 2 13B: 40 layers, hidden 5120, 40 heads, FFN 13824",
       [] { return llama_config("llama2-13b", 40, 5120, 40, 40, 13824, 4096, 32000); }},
      {"llama2-70b", "Llama 2 70B: 80 layers, hidden 8192, 64 heads (8 KV), FFN 28672",
       [] { return llama_config("llama2-70b", 80, 8192, 64, 8, 28672, 4096, 32000); }},
      {"llama3-8b", "Llama 3 8B: 32 layers, hidden 4096, 32 heads (8 KV), FFN 14336, seq 8192, vocab 128256",
       [] { return llama_config("llama3-8b", 32, 4096, 32, 8, 14336, 8192, 128256); }},
      {"llama3-70b", "Llama 3 70B: 80 layers, hidden 8192, 64 heads (8 KV), FFN 28672",
       [] { return llama_config("llama3-70b", 80, 8192, 64, 8, 28672, 8192, 128256); }},
      {"llama3-405b", "Llama 3 405B: 126 layers, hidden 16384, 128 heads (8 KV), FFN 53248",
       [] { return llama_config("llama3-405b", 126, 16384, 128, 8, 53248, 8192, 128256); }},
      {"mixtral-8x7b", "Mixtral 8x7B: 32 layers, hidden 4096, 32 heads (8 KV), 8 experts of FFN 14336, 2 per token, seq 4096, vocab 32000",
       [] {
         // Its config.json (mistralai/Mixtral-8x7B-v0.1); 46,702,792,704 parameters. The
         // training sequence is not published: 4096 here (the model takes 32768).
         TransformerConfig c = llama_config("mixtral-8x7b", 32, 4096, 32, 8, 14336, 4096, 32000);
         c.experts = 8;
         c.experts_per_token = 2;
         return c;
       }},
      {"grok-1", "Grok-1 314B: 64 layers, hidden 6144, 48 heads (8 KV), 8 experts of gated FFN 32768, 2 per token, seq 8192, vocab 131072",
       [] {
         // xAI's released configuration (github xai-org/grok-1, run.py: emb_size 48 x 128,
         // widening_factor 8 -> FFN 8 x 6144 x 2/3 = 32768, key_size 128, num_q_heads 48,
         // num_kv_heads 8, num_layers 64, num_experts 8, num_selected_experts 2,
         // vocab_size 128 x 1024, sequence_len 8192); NeMo's recipe (NVIDIA
         // dgxc-benchmarking grok1_314b.yaml) has the same layers with a gated GELU, priced
         // here as the SwiGLU's same-sized element-wise kernel, and Llama 3's tokenizer
         // (128,256 entries). 316,489,340,928 parameters.
         TransformerConfig c = llama_config("grok-1", 64, 6144, 48, 8, 32768, 8192, 131072);
         c.experts = 8;
         c.experts_per_token = 2;
         return c;
       }},
      {"bloom-176b", "BLOOM 176B: 70 layers, hidden 14336, 112 heads, seq 2048, vocab 250880, ALiBi (no position table), a norm after the embedding",
       [] {
         // The embedding's 250,880 rows (its config.json's vocab_size: the tokenizer's
         // 250,680 padded), and its word_embeddings_layernorm: 176,247,271,424 parameters.
         TransformerConfig c = gpt_config("bloom-176b", 70, 14336, 112, 2048, 250880);
         c.learned_positions = false;  // ALiBi biases the attention scores instead
         c.embedding_norm = true;
         return c;
       }},
      {"opt-175b", "OPT-175B: 96 layers, hidden 12288, 96 heads, seq 2048, vocab 50272",
       [] { return gpt_config("opt-175b", 96, 12288, 96, 2048, 50272); }},
      {"palm-540b", "PaLM 540B: 118 layers, hidden 18432, 48 heads of 256 (multi-query), SwiGLU FFN 4 x hidden, parallel layers, seq 2048, vocab 256000",
       [] {
         TransformerConfig c = llama_config("palm-540b", 118, 18432, 48, 1, 73728, 2048, 256000);
         c.head_size = 256;  // the paper's Table 1: 48 heads of 256, narrower than the hidden size
         c.tied_embedding = true;  // PaLM shares the input and output embeddings
         c.parallel_layers = true;  // attention and MLP side by side (the paper's "parallel layers")
         return c;
       }},
      {"nemotron4-15b", "Nemotron-4 15B: 32 layers, hidden 6144, 48 heads (8 KV), squared-ReLU FFN 24576, seq 4096, vocab 256000",
       [] { return nemotron4("nemotron4-15b", 32, 6144, 48); }},
      {"nemotron4-340b", "Nemotron-4 340B: 96 layers, hidden 18432, 96 heads (8 KV), squared-ReLU FFN 73728, seq 4096, vocab 256000",
       [] { return nemotron4("nemotron4-340b", 96, 18432, 96); }},
      {"vgg16", "VGG-16 at 224x224, fp32", nullptr},
      {"vgg19", "VGG-19 at 224x224, fp32", nullptr},
      {"resnet50", "ResNet-50 (torchvision v1.5) at 224x224, fp32", nullptr},
      {"mlp-mnist", "MLP 784-1024-1024-10, fp32", nullptr},
  };
  return e;
}

const Entry& find(std::string_view name) {
  for (const Entry& e : entries()) {
    if (e.name == name) return e;
  }
  std::vector<std::string> names;
  for (const Entry& e : entries()) names.emplace_back(e.name);
  throw InputError("unknown workload preset '" + std::string(name) + "'" + did_you_mean(name, names) +
                   " (see 'ddlsim workload --list')");
}

}  // namespace

std::vector<WorkloadPresetInfo> workload_preset_list() {
  std::vector<WorkloadPresetInfo> out;
  for (const Entry& e : entries()) out.push_back({e.name, e.summary});
  return out;
}

std::optional<TransformerConfig> transformer_preset(std::string_view name) {
  const Entry& e = find(name);
  if (!e.transformer) return std::nullopt;
  return e.transformer();
}

TransformerConfig with_options(TransformerConfig c, const WorkloadOptions& o) {
  if (o.seq) {
    if (*o.seq <= 0 || *o.seq > 10'000'000) {
      throw InputError(o.spelled + "seq: expected 1 to 10000000, got " + std::to_string(*o.seq));
    }
    if (c.learned_positions && *o.seq > c.position_rows()) {
      throw InputError(o.spelled + "seq: " + std::to_string(*o.seq) + " tokens exceed " + c.name + "'s " + std::to_string(c.position_rows()) +
                       " learned positions");
    }
    c.seq = *o.seq;
  }
  if (o.dtype) c.dtype = *o.dtype;
  if (o.gemm_dtype && *o.gemm_dtype != c.dtype) {
    // FP8 training: fp8 GEMMs in a 16-bit model (with dtype fp8 every GEMM is fp8 already).
    const std::string field = o.spelled + (o.spelled == "--" ? "gemm-dtype" : "gemm_dtype");
    if (*o.gemm_dtype != DataType::kFp8) {
      throw InputError(field + ": expected \"fp8\" (fp8 linear layers in a bf16 or fp16 model) or the dtype (" +
                       std::string(data_type_name(c.dtype)) + "), got \"" + std::string(data_type_name(*o.gemm_dtype)) + "\"");
    }
    if (c.dtype != DataType::kBf16 && c.dtype != DataType::kFp16) {
      throw InputError(field + ": fp8 GEMMs need a bf16 or fp16 model; the dtype is " + std::string(data_type_name(c.dtype)));
    }
    c.fp8_gemms = true;
  }
  if (o.flash_attention) c.flash_attention = *o.flash_attention;
  if (o.parallel_layers) c.parallel_layers = *o.parallel_layers;
  if (o.dropout) c.embedding_dropout = c.attention_dropout = c.residual_dropout = *o.dropout;
  if (o.mtp_layers) {
    if (*o.mtp_layers < 0 || *o.mtp_layers > 16) {
      throw InputError(o.spelled + "mtp_layers: expected 0 (no multi-token prediction) to 16, got " + std::to_string(*o.mtp_layers));
    }
    c.mtp_layers = *o.mtp_layers;
  }
  if (o.moe_imbalance) {
    const std::string field = o.spelled + "moe_imbalance";
    if (c.experts == 0) throw InputError(field + ": needs a mixture-of-experts model (experts); " + c.name + " is dense");
    const double most = static_cast<double>(c.experts) / static_cast<double>(c.experts_per_token);
    if (!(*o.moe_imbalance >= 1.0 && *o.moe_imbalance <= most)) {
      throw InputError(field + printf_string(": expected 1 (balanced) to experts / experts_per_token (%g: one expert "
                                             "taking every token), got %g",
                                             most, *o.moe_imbalance));
    }
    c.moe_imbalance = *o.moe_imbalance;
  }
  if (std::string why = transformer_problem(c); !why.empty()) throw InputError(c.name + ": " + why);
  return c;
}

OperatorGraph build_transformer_with(TransformerConfig config, const WorkloadOptions& o) {
  if (o.batch <= 0 || o.batch > 1'000'000) throw InputError(o.spelled + "batch: expected 1 to 1000000, got " + std::to_string(o.batch));
  const TransformerConfig c = with_options(std::move(config), o);
  // Refuse shapes whose arithmetic would overflow or whose graph would not fit.
  if (std::string why = transformer_batch_problem(c, o.batch); !why.empty()) throw InputError(o.spelled + why);
  return build_transformer(c, o.batch);
}

OperatorGraph build_workload_preset(std::string_view name, const WorkloadOptions& o) {
  const Entry& e = find(name);
  if (e.transformer) return build_transformer_with(e.transformer(), o);
  if (o.batch <= 0 || o.batch > 1'000'000) throw InputError(o.spelled + "batch: expected 1 to 1000000, got " + std::to_string(o.batch));
  if (o.seq) throw InputError(o.spelled + "seq: " + std::string(name) + " is not a transformer");
  if (o.flash_attention) throw InputError(o.spelled + "attention: " + std::string(name) + " is not a transformer");
  if (o.parallel_layers) throw InputError(o.spelled + "parallel_layers: " + std::string(name) + " is not a transformer");
  if (o.dropout) throw InputError(o.spelled + "dropout: " + std::string(name) + " is not a transformer");
  if (o.mtp_layers) throw InputError(o.spelled + "mtp_layers: " + std::string(name) + " is not a transformer");
  if (o.moe_imbalance) throw InputError(o.spelled + "moe_imbalance: " + std::string(name) + " is not a transformer");
  if (o.gemm_dtype) {
    throw InputError(o.spelled + (o.spelled == "--" ? "gemm-dtype" : "gemm_dtype") + ": " + std::string(name) +
                     " is not a transformer (its dtype sets its GEMMs')");
  }
  const DataType dt = o.dtype.value_or(DataType::kFp32);
  if (name == "vgg16") return build_vgg(16, o.batch, dt);
  if (name == "vgg19") return build_vgg(19, o.batch, dt);
  if (name == "resnet50") return build_resnet50(o.batch, dt);
  return build_mlp({784, 1024, 1024, 10}, o.batch, dt);
}

}  // namespace ddlsim
