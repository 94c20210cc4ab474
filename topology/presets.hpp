// Presets: the reference machines of shared/hardware.md, built from the builders.
//
//   dgx1-v100    8 x V100 in NVLink 2's hybrid cube-mesh, 4 EDR NICs behind PCIe switches;
//                servers joined rail-optimized over their NICs, 32 per leaf
//   dgx-a100     8 x A100 80GB per server on NVSwitch (NVLink 3), one HDR NIC per GPU;
//                up to 20 servers (a SuperPOD scalable unit) one leaf per rail under
//                shared spines; beyond, Selene-like: each unit a pod with its own spines,
//                the pods joined by cores, full bisection throughout
//   dgx-h100     8 x H100 on NVSwitch (NVLink 4), one NDR NIC per GPU; rail-optimized,
//                32 servers per leaf (a SuperPOD SU); up to 4 SUs (1024 GPUs) under 16
//                spines, each leaf with 2 cables to every spine; beyond, pods of 4 SUs
//                joined by cores; full bisection
//   dgx-b200     8 x B200 on NVSwitch (NVLink 5), one NDR NIC per GPU; as dgx-h100
//   mi300x-platform  AMD Instinct MI300X platform: 8 x MI300X per server, each joined to
//                its 7 peers by one xGMI link (64 GB/s per direction; AMD's datasheet), one
//                NDR NIC per GPU (Azure's ND MI300X v5: 8 x 400 Gb/s InfiniBand);
//                fabric as dgx-h100
//   llama3-roce  Meta's Llama 3 cluster: 8 x H100 per server, 400 GbE RoCE per GPU,
//                16 GPUs per rack switch, 192 racks per pod at full bisection, pods
//                joined with 1:7 oversubscription
//   gb200-nvl72  72 B200 in one NVLink 5 domain (one rack)
//   single-gpu-ethernet  servers of one GPU each (default V100 32GB) with one NIC each
//                (default 25 GbE over TCP), 32 servers per leaf switch, full bisection:
//                cloud instances, or Piz Daint-like nodes with a slow network
//   tpu-v3-pod   TPU v3 2D torus, 32 x 32 by default
//   tpu-v4-pod   TPU v4 3D torus, 16 x 16 x 16 by default (4x4x4 cubes)
//   tpu-v5p-pod  TPU v5p 3D torus, 16 x 20 x 28 by default
// TPU slices wrap around only when every dimension is a multiple of 4 (made of full
// cubes); smaller slices are meshes. With pods > 1, that many slices are joined over the
// data-centre network (4 chips per host, one 25 GB/s DCN link per host), as PaLM's two
// TPU v4 pods were.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/catalog.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

struct PresetOptions {
  std::optional<int> nodes;                // servers (GPU presets); default 1
  std::optional<std::string> accelerator;  // catalog id replacing the preset's accelerator
  std::optional<std::string> nic;          // catalog link id replacing the scale-out link
  /// dgx-* and mi300x-platform presets: scale-out NICs per server (1, 2, 4 or 8; default 8, one per GPU).
  /// Fewer NICs are each shared by 8 / n GPUs through a PCIe switch.
  std::optional<int> nics_per_node;
  std::optional<std::vector<int>> dims;    // TPU slice shape
  std::optional<int> pods;                 // TPU presets: pods (slices) joined over the DCN; default 1
};

struct PresetInfo {
  std::string name;
  std::string summary;
};

std::vector<PresetInfo> preset_list();

class JsonObject;

/// Reads a scenario's "cluster" object naming a preset: {"preset": NAME, "nodes": N,
/// "dims": [A, B, C], "pods": N, "accelerator": ID, "nic": ID, "nics_per_node": N} (all
/// but preset optional)
/// and builds it. Throws InputError naming the JSON path.
Cluster read_preset_cluster(JsonObject& cluster, const Catalog& catalog);

/// Builds a preset; throws InputError for an unknown name (with a suggestion) or an
/// option the preset does not take, its message beginning with the option's key
/// ("nodes: ...", "nics_per_node: ...").
Cluster build_preset(const Catalog& catalog, std::string_view name, const PresetOptions& options);

/// A build_preset message with its leading option key as the caller's input spells it
/// (`spell("nics_per_node")`: "cluster.nics_per_node", "--nics-per-node"), or after
/// "`whole`: " (if not empty) when it names no option.
std::string spelled_preset_error(std::string_view message, const std::function<std::string(std::string_view)>& spell,
                                 std::string_view whole);

}  // namespace ddlsim
