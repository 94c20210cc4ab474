// Named workloads: published model configurations.
//
//   gpt3-175b              GPT-3 (Brown et al. 2020): 96 layers, hidden 12288, 96 heads, seq 2048
//   megatron-1.7b ... -1t  the GPT configurations of Narayanan et al. 2021 (Table 1), seq 2048,
//                          vocab 51200: 1.7b 3.6b 7.5b 18b 39b 76b 145b 310b 530b 1t
//   gpt2, gpt2-medium, gpt2-large, gpt2-xl   OpenAI's GPT-2 (HuggingFace configs)
//   llama2-7b, -13b, -70b  Llama 2 (Touvron et al. 2023), seq 4096
//   llama3-8b, -70b, -405b Llama 3 (Meta 2024), seq 8192
//   vgg16, vgg19, resnet50 ImageNet CNNs at 224x224
//   mlp-mnist              784-1024-1024-10
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/operator_graph.hpp"
#include "workloads/transformer.hpp"

namespace ddlsim {

struct WorkloadPresetInfo {
  std::string name;
  std::string summary;
};
std::vector<WorkloadPresetInfo> workload_preset_list();

/// The transformer configuration of a transformer preset; nullopt for CNN/MLP presets;
/// InputError with a suggestion for an unknown name.
std::optional<TransformerConfig> transformer_preset(std::string_view name);

/// What a user may change of a named or HuggingFace model.
struct WorkloadOptions {
  std::int64_t batch = 1;                 // samples (sequences) per step
  std::optional<std::int64_t> seq;        // transformers: tokens per sequence
  std::optional<DataType> dtype;          // default: bf16 for transformers, fp32 for CNNs/MLPs
  std::optional<DataType> gemm_dtype;     // transformers: fp8 for FP8 training's linear layers; default: dtype
  std::optional<bool> flash_attention;    // transformers: fused (true) or plain attention
  std::optional<bool> parallel_layers;    // transformers: attention and MLP side by side (true) or in series
  std::optional<bool> dropout;            // transformers: every dropout (embedding, attention, residual) on or off
  std::optional<std::int64_t> mtp_layers; // transformers: multi-token prediction depths; default: the model's (0, or
                                          // a HuggingFace config's num_nextn_predict_layers)
  std::optional<double> moe_imbalance;   // mixtures of experts: the busiest expert-parallel rank's rows over the
                                          // balanced count (TransformerConfig::moe_imbalance); default 1
  std::string spelled;                    // how errors spell the options: "--" (command line), "workload." (a scenario)
};

/// Builds any preset with the options. Throws InputError for an unknown name or a bad size.
OperatorGraph build_workload_preset(std::string_view name, const WorkloadOptions& options);
/// The configuration with the options' sequence length, dtype and attention applied and
/// checked (the batch is not part of a configuration). Throws InputError.
TransformerConfig with_options(TransformerConfig c, const WorkloadOptions& options);
/// Builds a transformer configuration with the options applied and checked.
OperatorGraph build_transformer_with(TransformerConfig c, const WorkloadOptions& options);

}  // namespace ddlsim
