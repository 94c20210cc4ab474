#include "workloads/model_workload.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string_view>
#include <nlohmann/json.hpp>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "workloads/hf_config.hpp"

namespace ddlsim {
namespace {

constexpr const char* kShapeKeys[] = {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "experts_per_token"};

// A family's shape from the workload's fields (the sequence from its "seq").
TransformerConfig read_shape(JsonObject& w, const std::string& family, const std::optional<std::int64_t>& seq) {
  const std::int64_t layers = w.positive_int("layers"), hidden = w.positive_int("hidden"), heads = w.positive_int("heads");
  const std::int64_t vocab = w.positive_int("vocab");
  if (family == "gpt" && w.has("kv_heads")) {
    throw InputError(w.field_path("kv_heads") + ": only with model \"llama\" (a gpt has one key and value head per head)");
  }
  const std::int64_t kv_heads = w.positive_int_or("kv_heads", heads);
  // (A hidden too large to quadruple is refused below, as beyond the models' limits.)
  const std::int64_t gpt_ffn = hidden <= std::numeric_limits<std::int64_t>::max() / 4 ? 4 * hidden : hidden;
  const std::int64_t ffn = family == "gpt" ? w.positive_int_or("ffn", gpt_ffn) : w.positive_int("ffn");
  if (!seq) {
    w.known("seq");
    w.finish();  // a misspelt key ("seq_len") is named first
    throw InputError(w.field_path("seq") + ": missing (a \"" + family + "\" model's sequence length, in tokens)");
  }
  TransformerConfig c = family == "gpt" ? gpt_config("gpt", layers, hidden, heads, *seq, vocab)
                                        : llama_config("llama", layers, hidden, heads, kv_heads, ffn, *seq, vocab);
  c.ffn = ffn;
  // A llama-shaped mixture of experts (Mixtral's and Grok-1's layout): every layer's MLP
  // is `experts` gated MLPs of ffn each, experts_per_token of them for each token.
  if (family == "gpt" && (w.has("experts") || w.has("experts_per_token"))) {
    throw InputError(w.field_path(w.has("experts") ? "experts" : "experts_per_token") +
                     ": only with model \"llama\" (its mixture-of-experts layers are gated MLPs)");
  }
  if (w.has("experts") != w.has("experts_per_token")) {
    throw InputError(w.field_path(w.has("experts") ? "experts_per_token" : "experts") + ": missing (give both experts and experts_per_token)");
  }
  if (w.has("experts")) {
    c.experts = w.positive_int("experts");
    c.experts_per_token = w.positive_int("experts_per_token");
    if (c.experts < 2) throw InputError(w.field_path("experts") + ": expected 2 or more, got " + std::to_string(c.experts));
    if (c.experts_per_token > c.experts) {
      throw InputError(w.field_path("experts_per_token") + ": expected 1 to experts (" + std::to_string(c.experts) + "), got " +
                       std::to_string(c.experts_per_token));
    }
  }
  if (std::string why = transformer_problem(c); !why.empty()) throw InputError(w.path() + ": " + why);
  return c;
}

}  // namespace

ModelWorkload read_model_workload(JsonObject& w, const std::string& base_dir) {
  ModelWorkload out;
  if (w.has("model") == w.has("hf_config")) {
    throw InputError(w.has("model") ? w.field_path("hf_config") + ": give either model or hf_config, not both"
                                    : w.field_path("model") + ": missing (a workload preset name, or give hf_config)");
  }
  const bool family = w.has("model") && (w.value("model") == "gpt" || w.value("model") == "llama");
  if (w.has("model") && !family) {
    const std::string name = w.string("model");
    std::vector<std::string> names{"gpt", "llama"};
    for (const auto& p : workload_preset_list()) names.push_back(p.name);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      throw InputError(w.field_path("model") + ": unknown model '" + name + "'" + did_you_mean(name, names) +
                       " (see 'ddlsim workload --list'; \"synthetic\" takes the synthetic model's fields; \"gpt\" and "
                       "\"llama\" take a shape: layers, hidden, heads, ...)");
    }
    out.preset = name;
  } else if (family) {
    // Its shape is read below, once the sequence length is known.
  } else if (const nlohmann::json& v = w.value("hf_config"); v.is_object()) {
    out.hf_config_text = v.dump();
  } else {
    if (!v.is_string()) {
      throw InputError(w.field_path("hf_config") + ": expected a file name or a config object, got " + shown(v));
    }
    const std::string path = v.get<std::string>();
    if (path.empty()) throw InputError(w.field_path("hf_config") + ": expected a file name, got \"\"");
    const std::filesystem::path p(path);
    out.hf_config = p.is_absolute() || base_dir.empty() ? path : (std::filesystem::path(base_dir) / p).string();
  }
  out.options.batch = w.positive_int_or("batch", 1);
  if (out.options.batch > 1'000'000) {
    throw InputError(w.field_path("batch") + ": at most 1000000, got " + std::to_string(out.options.batch));
  }
  if (w.has("seq")) out.options.seq = w.positive_int("seq");
  if (w.has("global_batch")) {
    out.global_batch = w.positive_int("global_batch");
    if (*out.global_batch > 100'000'000) {
      throw InputError(w.field_path("global_batch") + ": at most 100000000, got " + std::to_string(*out.global_batch));
    }
  }
  out.options.spelled = w.field_path("");
  if (w.has("dtype")) {
    out.options.dtype = parse_float_type(w.choice("dtype", kFloatTypeNames));
  }
  if (w.has("gemm_dtype")) out.options.gemm_dtype = parse_float_type(w.choice("gemm_dtype", kFloatTypeNames));
  if (w.has("attention")) out.options.flash_attention = w.choice("attention", {"plain", "flash"}) == "flash";
  if (w.has("parallel_layers")) out.options.parallel_layers = w.boolean("parallel_layers");
  if (w.has("dropout")) out.options.dropout = w.boolean("dropout");
  if (w.has("mtp_layers")) {
    const nlohmann::json& v = w.value("mtp_layers");
    const double depths = v.is_number() ? v.get<double>() : -1.0;
    if (!(depths >= 0.0 && depths <= 16.0) || depths != std::floor(depths)) {
      throw InputError(w.field_path("mtp_layers") + ": expected a whole number of multi-token prediction depths from 0 to 16, got " +
                       shown(v));
    }
    out.options.mtp_layers = static_cast<std::int64_t>(depths);
  }
  if (w.has("moe_imbalance")) out.options.moe_imbalance = w.number("moe_imbalance", 1.0, std::numeric_limits<double>::infinity());
  if (family) {
    const std::string name = w.string("model");
    out.shape = read_shape(w, name, out.options.seq);
  } else {
    for (const char* key : kShapeKeys) {
      if (w.has(key)) {
        const bool moe_key = std::string_view(key).rfind("experts", 0) == 0;
        throw InputError(w.field_path(key) + (moe_key ? ": only with model \"llama\" (a " : ": only with model \"gpt\" or \"llama\" (a ") +
                         (out.preset ? "preset" : "HuggingFace config") + " has its shape)");
      }
    }
  }
  w.finish();
  return out;
}

namespace {
// The HuggingFace file, read with the sequence length (read_hf_config checks it against
// the model), and the options other than the sequence length.
std::pair<TransformerConfig, WorkloadOptions> read_hf_workload(const ModelWorkload& w) {
  WorkloadOptions rest = w.options;
  rest.seq.reset();
  if (w.hf_config_text) {
    const std::string source = "workload.hf_config";
    return {read_hf_config(nlohmann::json::parse(*w.hf_config_text), source, w.options.seq, w.options.spelled + "seq"), rest};
  }
  const std::string& path = *w.hf_config;
  return {read_hf_config(parse_json(read_input_file(path, "HuggingFace config"), path), path, w.options.seq, w.options.spelled + "seq"), rest};
}
}  // namespace

OperatorGraph build_model_workload(const ModelWorkload& w) {
  if (w.preset) return build_workload_preset(*w.preset, w.options);
  if (w.shape) return build_transformer_with(*w.shape, w.options);
  const auto [c, rest] = read_hf_workload(w);
  return build_transformer_with(c, rest);
}

std::optional<TransformerConfig> model_workload_transformer(const ModelWorkload& w) {
  if (w.preset) {
    const auto t = transformer_preset(*w.preset);
    if (!t) return std::nullopt;
    return with_options(*t, w.options);
  }
  if (w.shape) return with_options(*w.shape, w.options);
  const auto [c, rest] = read_hf_workload(w);
  return with_options(c, rest);
}

}  // namespace ddlsim
