// An explicit topology read from JSON, for machines no builder describes.
//
//   {"nodes": [{"name": "gpu0", "kind": "accelerator", "model": "h100-sxm"},
//              {"name": "sw0", "kind": "switch", "model": "nvswitch"}],
//    "links": [{"a": "gpu0", "b": "sw0", "link": "nvlink4", "count": 18},
//              {"a": "gpu1", "b": "sw0", "gbytes_per_s": 100, "latency_us": 1.5,
//               "reverse_gbytes_per_s": 50, "kind": "custom"}]}
//
// An optional "tori" array records tori among the accelerators ({"dims": [4, 4],
// "wrap": [true, true], "chips": [names in row-major order]}), for dimension-order
// routing and the bisection cuts; --export writes it for clusters built with tori.
// Node kinds: accelerator (model: a catalog accelerator id), host, nic, switch (model:
// free text, the switch's role). A link names a catalog link ("link") for its bandwidth
// and latency (with "count": N for a cable bundling N such links, e.g. 18 NVLinks), or
// gives them itself (gbytes_per_s per direction, latency_us, optional
// reverse_gbytes_per_s for the b -> a direction, optional kind label); fields given next
// to "link" override the catalog's.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "topology/catalog.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

/// Reads and validates (every accelerator must reach every other) an explicit topology.
/// Throws InputError naming `source` and the JSON path of the first problem.
Cluster read_explicit_topology(const nlohmann::json& doc, const Catalog& catalog, const std::string& source);

/// The cluster in the explicit format (every link with its own bandwidth and latency, so
/// the file stands without the catalog); reading it back gives the same cluster.
std::string write_explicit_topology(const Cluster& c);

}  // namespace ddlsim
