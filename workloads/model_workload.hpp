// A scenario's workload when it names a real model rather than the synthetic one:
//
//   "workload": {"model": "llama3-8b", "batch": 8, "seq": 4096, "dtype": "bf16",
//                "attention": "flash"}
//   "workload": {"hf_config": "path/to/config.json", "batch": 8, "seq": 4096}
//   "workload": {"hf_config": {"model_type": "gpt2", "n_layer": 48, ...}}
//   "workload": {"model": "gpt", "layers": 40, "hidden": 5120, "heads": 40, "vocab": 51200,
//                "seq": 2048}
//
// model: a workload preset (ddlsim workload --list); hf_config: a HuggingFace config.json,
// relative to the scenario file's folder, or the file's content written in place (a
// scenario that needs no other file, and whose model --set and --vary can change field
// by field: workload.hf_config.n_layer=...). batch: samples per step (default 1); seq,
// dtype, attention: as `ddlsim workload`'s options (defaults: the model's);
// parallel_layers: true runs each layer's attention and MLP side by side on one norm
// (PaLM, GPT-J, GPT-NeoX), false in series (default: the model's; PaLM's preset: true).
// model "gpt" or "llama" is a family whose shape the workload gives: layers, hidden,
// heads, vocab and seq (required), ffn (gpt: default 4 x hidden; llama: required) and,
// for llama, kv_heads (default heads): Megatron's GPT (layer norm, GeLU, biases, learned
// positions) or Llama (RMS norm, SwiGLU, grouped-query attention), as the presets of
// that family are built. global_batch (training scenarios): the sequences per step of
// every strategy that does not give its own.
#pragma once

#include <optional>
#include <string>

#include "workloads/operator_graph.hpp"
#include "workloads/presets.hpp"
#include "workloads/transformer.hpp"

namespace ddlsim {

class JsonObject;

struct ModelWorkload {
  std::optional<std::string> preset;
  std::optional<std::string> hf_config;  // path as resolved against the scenario's folder
  WorkloadOptions options;
  std::optional<std::string> hf_config_text;  // or the config itself, as JSON text
  std::optional<TransformerConfig> shape;      // or a family ("gpt", "llama") with its shape
  std::optional<std::int64_t> global_batch;    // training scenarios: the strategies' default
};

/// Reads the object; `base_dir` is the scenario file's folder ("" for the current one).
/// Throws InputError naming the JSON path.
ModelWorkload read_model_workload(JsonObject& workload, const std::string& base_dir);

/// Builds the model (reading the HuggingFace file if one is named). Throws InputError.
OperatorGraph build_model_workload(const ModelWorkload& w);

/// The transformer configuration the workload names, its options applied (everything
/// but the batch); nullopt when it names a CNN or MLP preset. Throws InputError.
std::optional<TransformerConfig> model_workload_transformer(const ModelWorkload& w);

}  // namespace ddlsim
