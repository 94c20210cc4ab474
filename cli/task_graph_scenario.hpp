// A task graph the user writes (or converts from a trace), replayed on a preset cluster:
//
//   {"name": "my-step", "description": "...",
//    "cluster": {"preset": "dgx-a100", "nodes": 2},
//    "simulation": {"network": "flow"},
//    "tasks": [
//      {"name": "fwd0", "kind": "compute", "device": 0, "seconds": 0.002},
//      {"name": "send", "kind": "transfer", "from": 0, "to": 8, "bytes": 1048576, "after": ["fwd0"]},
//      {"name": "sync", "kind": "collective", "op": "all-reduce", "ranks": "0-15",
//       "bytes": 1e8, "algorithm": "ring", "after": ["send"]},
//      {"name": "done", "kind": "marker", "after": ["sync"]}]}
//
// Compute tasks run one at a time per device, in the order they become ready (FIFO);
// transfers and collectives (lowered to their transfers, as `ddlsim collective` does)
// run on the network model. `after` lists the tasks that must finish first. Every field,
// unit and check is in README.md ("Custom task graphs").
#pragma once

#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

namespace ddlsim {

/// Whether the document is a custom task graph (it has "tasks").
bool is_task_graph_scenario(const nlohmann::json& doc);

struct TaskGraphRunOptions {
  bool json = false;
  std::optional<std::string> network;  // "flow" or "analytical", overriding simulation.network
  std::optional<std::string> trace;    // Chrome trace of the replay
  std::string base_dir;                // the scenario's folder: a "catalog" file's name is relative to it
};

/// Validates the whole graph first (InputError naming the JSON path of the first
/// problem: an unknown key, a bad value, a name used twice, an `after` naming no task,
/// dependencies that form a cycle), then replays it and prints the report.
void run_task_graph_scenario(const nlohmann::json& doc, const TaskGraphRunOptions& options, std::ostream& out);

}  // namespace ddlsim
