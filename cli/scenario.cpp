#include "cli/scenario.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/collectives.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"
#include "workloads/presets.hpp"
#include "support/json_reader.hpp"
#include "support/json_set.hpp"
#include "sim/compute_model.hpp"
#include "topology/catalog.hpp"
#include "topology/cluster.hpp"
#include "topology/explicit.hpp"
#include "topology/presets.hpp"

namespace ddlsim {

nlohmann::json scenario_document(const std::string& text, const std::string& source,
                                 const std::vector<std::string>& sets) {
  nlohmann::json doc = parse_json(text, source);
  for (const auto& s : sets) apply_set(doc, s);
  return doc;
}

namespace {

// A file a scenario names: relative to the scenario's folder unless absolute.
std::string scenario_relative(const std::string& base_dir, const std::string& name) {
  const std::filesystem::path p(name);
  return p.is_absolute() || base_dir.empty() ? name : (std::filesystem::path(base_dir) / p).string();
}

// A scenario's `key`: JSON written in place (an object), or the name of a file of it,
// relative to `base_dir` unless absolute; `apply` takes it and the name its errors
// should start with. Errors name the field: "key: FILE: ..." for a file,
// "key.a.b: ..." for a field in place. `what` says what an object holds.
void apply_scenario_part(const nlohmann::json& doc, const std::string& key, const std::string& base_dir,
                         const std::string& what,
                         const std::function<void(const nlohmann::json&, const std::string&)>& apply) {
  if (!doc.is_object() || !doc.contains(key)) return;
  const nlohmann::json& part = doc.at(key);
  if (part.is_string()) {
    const std::string path = scenario_relative(base_dir, part.get<std::string>());
    try {
      apply(parse_json(read_input_file(path, "file"), path), path);
    } catch (const InputError& e) {
      throw InputError(key + ": " + e.what());
    }
    return;
  }
  if (!part.is_object()) {
    throw InputError(key + ": expected " + what + ", or the name of such a JSON file, got " + part.type_name());
  }
  try {
    apply(part, key);
  } catch (const InputError& e) {
    // "key: a.b: ..." names the field as key.a.b.
    std::string message = e.what();
    const std::string head = key + ": ";
    if (message.rfind(head, 0) == 0 && message.find(": ", head.size()) != std::string::npos) {
      message = key + "." + message.substr(head.size());
    }
    throw InputError(message);
  }
}

}  // namespace

void merge_scenario_catalog(const nlohmann::json& doc, const std::string& base_dir, Catalog& catalog) {
  apply_scenario_part(doc, "catalog", base_dir, "an object of \"accelerators\" and \"links\" to add or patch",
                      [&](const nlohmann::json& patch, const std::string& source) { catalog.merge(patch, source); });
}

void calibrate_scenario_compute(const nlohmann::json& doc, const std::string& base_dir, ComputeModel& model) {
  apply_scenario_part(doc, "calibration", base_dir, "a calibration object (\"device\", \"gemm\", ...)",
                      [&](const nlohmann::json& file, const std::string& source) { model.calibrate(file, source); });
}

bool names_cluster_graph(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("cluster") || !doc["cluster"].is_object()) return false;
  const nlohmann::json& c = doc["cluster"];
  return c.contains("preset") || c.contains("file");
}

Cluster read_scenario_cluster(JsonObject& cluster, const Catalog& catalog, const std::string& base_dir,
                              std::string& title) {
  if (!cluster.has("file")) {
    Cluster c = read_preset_cluster(cluster, catalog);
    const nlohmann::json& raw = cluster.raw();
    title = raw.at("preset").get<std::string>();
    if (raw.contains("nodes")) {
      const auto nodes = static_cast<long long>(raw.at("nodes").get<double>());
      title += ", " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
    }
    return c;
  }
  const std::string name = cluster.string("file");
  if (name.empty()) throw InputError(cluster.field_path("file") + ": expected a file name, got \"\"");
  for (const auto& item : cluster.raw().items()) {
    if (item.key() == "file") continue;
    if (item.key() == "preset") {
      throw InputError(cluster.path() + ": give either \"preset\" or \"file\" (an explicit topology), not both");
    }
    throw InputError(cluster.field_path(item.key()) + ": applies to presets, not to a topology file");
  }
  const std::string path = scenario_relative(base_dir, name);
  try {
    const nlohmann::json doc = parse_json(read_input_file(path, "topology"), path);
    if (doc.is_object() && doc.contains("cluster")) {
      throw InputError(path + ": a scenario, not a topology (\"nodes\" and \"links\"); name its preset instead");
    }
    Cluster c = read_explicit_topology(doc, catalog, path);
    title = name;
    return c;
  } catch (const InputError& e) {
    throw InputError(cluster.field_path("file") + ": " + e.what());
  }
}

Scenario read_scenario(const nlohmann::json& doc) {
  JsonObject root(doc, "");
  Scenario s;
  s.name = root.name("name");
  s.description = root.string_or("description", "");

  JsonObject cluster = root.object("cluster");
  if (cluster.has("preset")) {
    throw InputError("cluster.preset: ddlsim run replays the uniform cluster only, until strategies for real "
                     "models land; 'ddlsim topology SCENARIO.json' describes a preset cluster and 'ddlsim "
                     "collective --file SCENARIO.json' times its collectives");
  }
  if (!cluster.has("devices")) {
    std::string keys;
    for (const auto& item : doc.at("cluster").items()) keys += (keys.empty() ? "" : ", ") + ("'" + item.key() + "'");
    throw InputError("cluster: expected \"preset\" (a built-in cluster, as in {\"preset\": \"dgx-a100\", \"nodes\": 4}; "
                     "'ddlsim topology --list' lists them), \"file\" (an explicit topology) or \"devices\" and the other fields of a "
                     "uniform cluster, got " +
                     (keys.empty() ? std::string("{}") : "only " + keys));
  }
  if (root.has("catalog")) {
    throw InputError("catalog: patches the hardware catalog that preset clusters are built from; a uniform cluster "
                     "gives its figures itself (cluster.device_tflops, ...)");
  }
  s.cluster = read_uniform_cluster(cluster);

  JsonObject workload = root.object("workload");
  const nlohmann::json& w = doc.at("workload");
  const bool named = w.contains("model") && w["model"].is_string();
  std::vector<std::string> models{"synthetic"};
  for (const auto& p : workload_preset_list()) models.push_back(p.name);
  const bool real = w.contains("hf_config") || (named && (w["model"] == "gpt" || w["model"] == "llama")) ||
                    (named && w["model"] != "synthetic" &&
                     std::find(models.begin(), models.end(), w["model"].get<std::string>()) != models.end());
  if (real) {
    throw InputError("workload.model: a uniform cluster (cluster.devices, ...) runs the synthetic model only; to train "
                     "a real model, name a cluster preset (\"cluster\": {\"preset\": \"dgx-a100\", \"nodes\": 4})");
  }
  if (named && w["model"] != "synthetic") {
    const std::string m = w["model"].get<std::string>();
    throw InputError("workload.model: unknown model '" + m + "'" + did_you_mean(m, models) +
                     " (\"synthetic\" or a preset of 'ddlsim workload --list')");
  }
  workload.choice("model", {"synthetic"});
  s.workload = read_synthetic_model(workload);

  JsonArray strategies = root.array("strategies");
  std::map<std::string, std::size_t> names;  // name -> index, for the duplicate check
  if (strategies.size() == 0) throw InputError("strategies: expected at least one strategy, got []");
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    JsonObject st = strategies.object(i);
    DataParallelPlan plan = read_data_parallel_plan(st, s.workload.layers);
    if (const auto [it, fresh] = names.emplace(plan.name, i); !fresh) {
      throw InputError(st.field_path("name") + ": \"" + plan.name + "\" is already the name of strategies." +
                       std::to_string(it->second));
    }
    // Refuse sizes that would exhaust memory before trying: a replayed task costs about
    // 70 bytes (graph, engine, models; 12 more with --trace), so this keeps a replay
    // within about 4 GB.
    constexpr std::uint64_t kMaxTasks = 50'000'000;
    constexpr double kBytesPerTask = 70.0;  // measured by bench/replay_bench: 60-74
    const std::uint64_t tasks = data_parallel_task_count(s.workload, s.cluster, plan);
    if (tasks > kMaxTasks) {
      char gb[32];
      std::snprintf(gb, sizeof gb, "%.3g", static_cast<double>(tasks) * kBytesPerTask / 1e9);
      throw InputError(st.path() + ": this plan would replay " + std::to_string(tasks) + " tasks (about " + gb +
                       " GB of memory), more than the limit of " + std::to_string(kMaxTasks) +
                       " tasks (3.5 GB); reduce cluster.devices or workload.layers");
    }
    s.strategies.push_back(std::move(plan));
  }
  root.known("simulation");
  if (root.has("simulation")) {
    JsonObject simulation = root.object("simulation");
    simulation.known("network");
    simulation.known("collective_algorithm");
    if (simulation.has("network")) s.network = *parse_network_model(simulation.choice("network", {"flow", "analytical"}));
    if (simulation.has("collective_algorithm")) {
      s.collective_algorithm = parse_algorithm(simulation.choice("collective_algorithm", algorithm_choices()));
    }
    simulation.finish();
  }
  root.finish();
  return s;
}

}  // namespace ddlsim
