// A scenario: the cluster, the workload and the strategies to compare, read from JSON
// and validated up front. Every field, its unit and its default are documented in
// README.md ("Scenario format").
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/network.hpp"
#include "strategies/data_parallel.hpp"
#include "topology/uniform_cluster.hpp"
#include "workloads/synthetic_model.hpp"

namespace ddlsim {

class Catalog;
class ComputeModel;
class Cluster;
class JsonObject;

struct Scenario {
  std::string name;
  std::string description;
  UniformCluster cluster;
  SyntheticModel workload;
  std::vector<DataParallelPlan> strategies;
  NetworkModelKind network = NetworkModelKind::kFlow;  // "simulation": {"network": ...}
  std::optional<CollectiveAlgorithm> collective_algorithm;  // nullopt: "auto"
};

/// Reads the JSON text of a scenario (named `source` in errors), applies the `--set`
/// overrides in order, and returns the resulting document. Throws InputError.
nlohmann::json scenario_document(const std::string& text, const std::string& source,
                                 const std::vector<std::string>& sets);

/// A preset-cluster scenario's "catalog": an object that adds entries to the hardware
/// catalog or patches fields of existing ones (the format of `--catalog FILE`), or the
/// name of such a file, relative to `base_dir` unless absolute. Merges it into
/// `catalog`; without the key nothing changes. Throws InputError naming the field.
void merge_scenario_catalog(const nlohmann::json& doc, const std::string& base_dir, Catalog& catalog);

/// A training scenario's "calibration": a compute calibration object (the format of
/// 'ddlsim workload --calibration FILE') or the name of such a file, relative to
/// `base_dir` unless absolute. Calibrates `model` with it; without the key nothing
/// changes. Throws InputError naming the field.
void calibrate_scenario_compute(const nlohmann::json& doc, const std::string& base_dir, ComputeModel& model);

/// Whether a scenario's cluster is a graph to build: it names a preset or an explicit
/// topology file.
bool names_cluster_graph(const nlohmann::json& doc);

/// A scenario's cluster graph: {"preset": NAME, ...its options} (read_preset_cluster) or
/// {"file": NAME}, an explicit topology file (as 'ddlsim topology FILE' reads it)
/// relative to `base_dir` unless absolute. Sets `title` to what reports call it:
/// "PRESET", "PRESET, N nodes" (N as read: 4.0 is 4) or the file's name as given.
/// Throws InputError naming the field.
Cluster read_scenario_cluster(JsonObject& cluster, const Catalog& catalog, const std::string& base_dir,
                              std::string& title);

/// Validates a scenario document. Throws InputError naming the JSON path of the first
/// problem.
Scenario read_scenario(const nlohmann::json& doc);

}  // namespace ddlsim
