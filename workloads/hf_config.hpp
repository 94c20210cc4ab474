// Reading a HuggingFace `config.json` into a transformer configuration.
//
// Supported model types: llama, mistral, qwen2, qwen3 (RMS norm, SwiGLU, grouped-query
// attention, rotary positions; Qwen3 with an RMS norm over each query and key head),
// the mixtures of experts mixtral, qwen2_moe, qwen3_moe, glm4_moe and deepseek_v3 (or
// kimi_k2; multi-head latent attention) (all but mixtral with dense MLPs in some layers
// where the file says so: mlp_only_layers, decoder_sparse_step, first_k_dense_replace,
// moe_layer_freq), nemotron (Nemotron-4, Minitron: layer norm, a squared-ReLU MLP,
// grouped-query attention, rotary positions) and gpt2 (layer norm, GeLU, learned
// positions, tied embedding). Every field of the file is either used, known not to
// change the cost of a training step (token ids, epsilons, rope settings, dtype, router
// scoring, ...), or refused by name: features ddlsim cannot model (expert fields on a
// dense model type, sliding-window attention shorter than the sequence, activations
// other than the family's) and fields it does not know at all, so that nothing is
// silently ignored. A head_dim other than hidden_size / heads is modelled
// (TransformerConfig::head_size).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "workloads/transformer.hpp"

namespace ddlsim {

/// `seq`: the training sequence length (default: the model's maximum positions).
/// Throws InputError naming `source` and the field, or `seq_field` (how the caller's
/// input spells the sequence length: --seq, workload.seq) for a bad `seq`.
TransformerConfig read_hf_config(const nlohmann::json& doc, const std::string& source,
                                 std::optional<std::int64_t> seq = std::nullopt, const std::string& seq_field = "seq");

}  // namespace ddlsim
