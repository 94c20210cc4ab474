#include "workloads/model_workload.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "workloads/hf_config.hpp"

namespace ddlsim {

ModelWorkload read_model_workload(JsonObject& w, const std::string& base_dir) {
  ModelWorkload out;
  if (w.has("model") == w.has("hf_config")) {
    throw InputError(w.has("model") ? w.field_path("hf_config") + ": give either model or hf_config, not both"
                                    : w.field_path("model") + ": missing (a workload preset name, or give hf_config)");
  }
  if (w.has("model")) {
    const std::string name = w.string("model");
    std::vector<std::string> names;
    for (const auto& p : workload_preset_list()) names.push_back(p.name);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      throw InputError(w.field_path("model") + ": unknown model '" + name + "'" + did_you_mean(name, names) +
                       " (see 'ddlsim workload --list'; \"synthetic\" takes the synthetic model's fields)");
    }
    out.preset = name;
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
  out.options.spelled = w.field_path("");
  if (w.has("dtype")) {
    out.options.dtype = parse_float_type(w.choice("dtype", kFloatTypeNames));
  }
  if (w.has("attention")) out.options.flash_attention = w.choice("attention", {"plain", "flash"}) == "flash";
  if (w.has("parallel_layers")) out.options.parallel_layers = w.boolean("parallel_layers");
  if (w.has("dropout")) out.options.dropout = w.boolean("dropout");
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
  const auto [c, rest] = read_hf_workload(w);
  return build_transformer_with(c, rest);
}

std::optional<TransformerConfig> model_workload_transformer(const ModelWorkload& w) {
  if (w.preset) {
    const auto t = transformer_preset(*w.preset);
    if (!t) return std::nullopt;
    return with_options(*t, w.options);
  }
  const auto [c, rest] = read_hf_workload(w);
  return with_options(c, rest);
}

}  // namespace ddlsim
