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

/// Validates a scenario document. Throws InputError naming the JSON path of the first
/// problem.
Scenario read_scenario(const nlohmann::json& doc);

}  // namespace ddlsim
