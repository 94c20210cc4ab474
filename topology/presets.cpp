#include "topology/presets.hpp"

#include <nlohmann/json.hpp>

#include "sim/core/errors.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "topology/builders.hpp"

namespace ddlsim {
namespace {

struct GpuPreset {
  const char* accelerator;
  const char* nic;
  const char* pcie;        // the server's PCIe switches (to NICs shared by several GPUs)
  int servers_per_leaf;    // a scalable unit: one leaf per rail
  int units_per_pod;       // units under one set of spines; beyond, leaf / spine / core
  std::size_t max_spines;  // spines of a pod (0: one per leaf uplink)
  bool mesh = false;       // GPUs wired to one another directly (xGMI), not through an NVSwitch
};

// The number of servers a GPU preset builds: nodes, default 1, at most `most`.
int server_count(const PresetOptions& o, int most) {
  const int nodes = o.nodes.value_or(1);
  if (nodes <= 0 || nodes > most) {
    throw InputError("nodes: expected 1 to " + std::to_string(most) + ", got " + std::to_string(nodes));
  }
  return nodes;
}

// GPU server presets take nodes, not the TPU options.
void no_tpu_options(const PresetOptions& o) {
  if (o.pods) throw InputError("pods: only TPU presets are made of pods (GPU presets take a server count)");
  if (o.dims) throw InputError("dims: only TPU presets have a shape (GPU presets take a server count)");
}

// Only the dgx-* and mi300x-platform presets let the NICs per server vary; the others
// take their own count (`own`; 0: none) and refuse any other.
void fixed_nics(const PresetOptions& o, std::string_view preset, std::string_view why, int own) {
  if (o.nics_per_node && *o.nics_per_node != own) {
    throw InputError("nics_per_node: " + std::string(preset) + " " + std::string(why) +
                     "; the dgx-a100, dgx-h100, dgx-b200 and mi300x-platform presets take it");
  }
}

Cluster dgx(const Catalog& catalog, const GpuPreset& p, const PresetOptions& o) {
  no_tpu_options(o);
  const int nodes = server_count(o, 4096);
  const std::string acc = o.accelerator.value_or(p.accelerator);
  if (p.mesh && catalog.accelerator(acc).scale_up_links < 7) {
    throw InputError("accelerator: " + acc + " has " + std::to_string(catalog.accelerator(acc).scale_up_links) +
                     " scale-up links; this preset's mesh joins each of a server's 8 GPUs to its 7 peers by one "
                     "link each");
  }
  const std::string nic = o.nic.value_or(p.nic);
  (void)catalog.link(nic);  // checked even when one server needs no network
  const int nics = o.nics_per_node.value_or(8);
  if (nics != 1 && nics != 2 && nics != 4 && nics != 8) {
    throw InputError("nics_per_node: expected 1, 2, 4 or 8 (NICs shared evenly by the 8 GPUs), got " + std::to_string(nics));
  }
  Cluster c;
  // What joins the fabric, per server: each GPU itself (its NIC is its link to the leaf),
  // or with fewer NICs each NIC, behind a PCIe switch shared by 8 / nics GPUs (as on a
  // DGX-1): their traffic to other servers shares that NIC.
  std::vector<std::vector<NodeId>> servers;
  for (int n = 0; n < nodes; ++n) {
    const std::string prefix = "node" + std::to_string(n);
    std::vector<NodeId> gpus =
        p.mesh ? add_full_mesh_node(c, catalog, prefix, acc, 8) : add_nvswitch_node(c, catalog, prefix, acc, 8);
    if (nics == 8) {
      servers.push_back(std::move(gpus));
      continue;
    }
    servers.push_back(add_shared_nics(c, catalog, prefix, gpus, nics, p.pcie, nic));
  }
  const int pod_servers = p.servers_per_leaf * p.units_per_pod;
  if (nodes > 1 && nodes <= pod_servers) {
    add_rail_optimized(c, catalog, "net", servers, p.servers_per_leaf, 1.0, nic, nic, p.max_spines);
  } else if (nodes > 1) {
    // Selene-like: each pod of units has one leaf per rail and unit, and its own spines;
    // the pods' spines meet at the cores, at full bisection.
    std::vector<std::vector<NodeId>> groups;
    const auto unit = static_cast<std::size_t>(p.servers_per_leaf);
    for (std::size_t first = 0; first < servers.size(); first += unit) {
      for (std::size_t rail = 0; rail < servers.front().size(); ++rail) {
        groups.emplace_back();
        for (std::size_t s = first; s < std::min(servers.size(), first + unit); ++s) groups.back().push_back(servers[s][rail]);
      }
    }
    add_three_level(c, catalog, "net", groups, static_cast<int>(servers.front().size()) * p.units_per_pod, 1.0, 1.0, nic, nic);
  }
  return c;
}

Cluster dgx1(const Catalog& catalog, const PresetOptions& o) {
  no_tpu_options(o);
  fixed_nics(o, "dgx1-v100", "has its 4 NICs, each shared by two GPUs", 4);
  const int nodes = server_count(o, 4096);
  if (o.accelerator) throw InputError("accelerator: dgx1-v100 takes no other accelerator (its NVLink mesh is V100's)");
  const std::string nic = o.nic.value_or("ib-edr");
  (void)catalog.link(nic);
  Cluster c;
  std::vector<std::vector<NodeId>> nics(static_cast<std::size_t>(nodes));
  for (int n = 0; n < nodes; ++n) add_dgx1_node(c, catalog, "node" + std::to_string(n), &nics[static_cast<std::size_t>(n)]);
  if (nodes > 1) add_rail_optimized(c, catalog, "net", nics, 32, 1.0, nic, nic);
  return c;
}

Cluster llama3(const Catalog& catalog, const PresetOptions& o) {
  no_tpu_options(o);
  fixed_nics(o, "llama3-roce", "has one NIC per GPU (8 per server)", 8);
  const int nodes = server_count(o, 3072);
  const std::string acc = o.accelerator.value_or("h100-sxm");
  const std::string nic = o.nic.value_or("eth-400g");
  (void)catalog.link(nic);
  Cluster c;
  std::vector<std::vector<NodeId>> racks;  // 2 servers = 16 GPUs per rack switch
  for (int n = 0; n < nodes; ++n) {
    const auto gpus = add_nvswitch_node(c, catalog, "node" + std::to_string(n), acc, 8);
    if (n % 2 == 0) racks.emplace_back();
    racks.back().insert(racks.back().end(), gpus.begin(), gpus.end());
  }
  if (nodes > 1) add_three_level(c, catalog, "net", racks, 192, 1.0, 7.0, nic, nic);
  return c;
}

// Servers of one GPU each (cloud instances, Piz Daint-like nodes), one NIC per server, on
// a leaf/spine fabric of 32 servers per leaf at full bisection.
Cluster single_gpu(const Catalog& catalog, const PresetOptions& o) {
  no_tpu_options(o);
  fixed_nics(o, "single-gpu-ethernet", "has one NIC per server", 1);
  const int nodes = server_count(o, 4096);
  const AcceleratorSpec& acc = catalog.accelerator(o.accelerator.value_or("v100-32gb"));
  const std::string nic = o.nic.value_or("eth-25g");
  (void)catalog.link(nic);
  Cluster c;
  std::vector<NodeId> gpus;
  for (int n = 0; n < nodes; ++n) {
    gpus.push_back(c.add_node(NodeKind::kAccelerator, "node" + std::to_string(n) + ".gpu0", acc.id));
  }
  if (nodes > 1) add_fat_tree(c, catalog, "net", gpus, 32, 1.0, nic, nic);
  return c;
}

// "4x4x8".
std::string shape_text(const std::vector<int>& dims) {
  std::string out;
  for (int d : dims) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

Cluster tpu(const Catalog& catalog, const char* chip, const char* link, std::vector<int> dims, const PresetOptions& o) {
  if (o.nodes) throw InputError("nodes: TPU presets take a shape (dims, e.g. 4x4x8), not a server count");
  if (o.nic) throw InputError("nic: TPU presets have no NIC to replace");
  fixed_nics(o, "a TPU preset", "has no NICs", 0);
  if (o.dims) dims = *o.dims;
  bool cubes = true;
  for (int d : dims) cubes = cubes && d % 4 == 0;
  const int pods = o.pods.value_or(1);
  if (pods <= 0 || pods > 64) throw InputError("pods: expected 1 to 64, got " + std::to_string(pods));
  std::size_t chips = static_cast<std::size_t>(pods);
  for (int d : dims) chips *= static_cast<std::size_t>(d);
  if (chips > (std::size_t{1} << 20)) {
    throw InputError("dims: " + std::to_string(chips) + " chips in all, more than the limit of 1048576");
  }
  Cluster c;
  if (pods == 1) {
    add_torus(c, catalog, "chip", o.accelerator.value_or(chip), dims, std::vector<bool>(dims.size(), cubes), link);
    return c;
  }
  std::vector<std::vector<NodeId>> slices;
  for (int p = 0; p < pods; ++p) {
    slices.push_back(add_torus(c, catalog, "pod" + std::to_string(p) + ".chip", o.accelerator.value_or(chip), dims,
                               std::vector<bool>(dims.size(), cubes), link));
  }
  add_pods_over_dcn(c, catalog, "net", slices, "dcn-tpu-host");
  return c;
}

}  // namespace

std::vector<PresetInfo> preset_list() {
  return {
      {"dgx1-v100", "DGX-1 servers (8 x V100 in NVLink 2's hybrid cube-mesh), 4 EDR NICs per server, rail-optimized"},
      {"dgx-a100", "DGX A100 servers (8 x A100 80GB, NVSwitch), HDR per GPU (or nics_per_node 1, 2, 4 shared over "
                   "PCIe), rail-optimized units of 20 servers; beyond one unit a Selene-like leaf/spine/core"},
      {"dgx-h100", "DGX H100 servers (8 x H100, NVSwitch), NDR per GPU (or nics_per_node 1, 2, 4 shared over PCIe), "
                   "rail-optimized, 32 servers per leaf"},
      {"dgx-b200", "DGX B200 servers (8 x B200, NVSwitch), NDR per GPU (or nics_per_node 1, 2, 4 shared over PCIe), "
                   "rail-optimized, 32 servers per leaf"},
      {"mi300x-platform", "AMD MI300X servers (8 x MI300X, each joined to its 7 peers by one xGMI link), NDR per "
                          "GPU (or nics_per_node 1, 2, 4 shared over PCIe), rail-optimized, 32 servers per leaf"},
      {"llama3-roce", "Meta Llama 3: 8 x H100 servers, 400 GbE RoCE per GPU, 3-level Clos, 1:7 between pods"},
      {"gb200-nvl72", "GB200 NVL72: 72 B200 in one NVLink 5 domain"},
      {"single-gpu-ethernet", "servers of one GPU each (default V100 32GB), one NIC each (default 25 GbE over TCP), "
                              "leaf/spine, 32 servers per leaf"},
      {"tpu-v3-pod", "TPU v3 2D torus (default 32x32)"},
      {"tpu-v4-pod", "TPU v4 3D torus (default 16x16x16, from 4x4x4 cubes)"},
      {"tpu-v5p-pod", "TPU v5p 3D torus (default 16x20x28)"},
  };
}

Cluster build_preset(const Catalog& catalog, std::string_view name, const PresetOptions& o) {
  if (name == "dgx1-v100") return dgx1(catalog, o);
  if (name == "dgx-a100") return dgx(catalog, {"a100-80gb", "ib-hdr", "pcie4", 20, 1, 0}, o);
  if (name == "dgx-h100") return dgx(catalog, {"h100-sxm", "ib-ndr", "pcie5", 32, 4, 16}, o);
  if (name == "dgx-b200") return dgx(catalog, {"b200", "ib-ndr", "pcie5", 32, 4, 16}, o);
  if (name == "mi300x-platform") return dgx(catalog, {"mi300x", "ib-ndr", "pcie5", 32, 4, 16, true}, o);
  if (name == "llama3-roce") return llama3(catalog, o);
  if (name == "single-gpu-ethernet") return single_gpu(catalog, o);
  if (name == "gb200-nvl72") {
    if (o.nodes && *o.nodes != 1) throw InputError("nodes: gb200-nvl72 is one NVL72 rack; joining racks is not modelled yet");
    if (o.dims) throw InputError("dims: gb200-nvl72 takes none (it is one NVL72 rack)");
    if (o.nic) throw InputError("nic: gb200-nvl72 takes none (its racks' scale-out is not modelled yet)");
    if (o.pods) throw InputError("pods: only TPU presets are made of pods");
    if (o.nics_per_node) throw InputError("nics_per_node: gb200-nvl72 takes none (its racks' scale-out is not modelled yet)");
    Cluster c;
    add_nvswitch_node(c, catalog, "nvl72", o.accelerator.value_or("b200"), 72);  // the accelerator's own NVLink
    return c;
  }
  if (name == "tpu-v3-pod") {
    if (o.dims && o.dims->size() != 2) {
      throw InputError("dims: TPU v3 is a 2D torus; give two sizes, like 16x32, got " + shape_text(*o.dims));
    }
    return tpu(catalog, "tpu-v3", "ici-v3", {32, 32}, o);
  }
  if (name == "tpu-v4-pod" || name == "tpu-v5p-pod") {
    // Six ICI links per chip: a 3D torus (a flat or thin slice has sizes of 1).
    const bool v4 = name == "tpu-v4-pod";
    if (o.dims && o.dims->size() != 3) {
      throw InputError(std::string("dims: TPU ") + (v4 ? "v4" : "v5p") +
                       " is a 3D torus; give three sizes, like 4x4x8 (a flat slice as 4x4x1), got " + shape_text(*o.dims));
    }
    return v4 ? tpu(catalog, "tpu-v4", "ici-v4", {16, 16, 16}, o) : tpu(catalog, "tpu-v5p", "ici-v5p", {16, 20, 28}, o);
  }
  std::vector<std::string> names;
  std::string list;
  for (const auto& p : preset_list()) {
    names.push_back(p.name);
    list += (list.empty() ? "" : ", ") + p.name;
  }
  throw InputError("unknown preset '" + std::string(name) + "'" + did_you_mean(name, names) + "; presets: " + list);
}

Cluster read_preset_cluster(JsonObject& cluster, const Catalog& catalog) {
  std::vector<std::string> names;
  for (const auto& p : preset_list()) names.push_back(p.name);
  const std::string name = cluster.choice("preset", names);
  PresetOptions o;
  // Range-checked here, before narrowing to int, so that the error shows the given value.
  auto count = [&](const char* key, std::int64_t most) {
    const std::int64_t v = cluster.positive_int(key);
    if (v > most) throw InputError(cluster.field_path(key) + ": expected 1 to " + std::to_string(most) + ", got " + std::to_string(v));
    return static_cast<int>(v);
  };
  if (cluster.has("nodes")) o.nodes = count("nodes", 4096);
  if (cluster.has("pods")) o.pods = count("pods", 64);
  cluster.known("dims");
  if (cluster.has("dims")) {
    JsonArray dims = cluster.array("dims");
    std::vector<int> d = dims.ints(1, 4096, "up to 4 sizes from 1 to 4096");
    if (d.empty()) throw InputError(dims.path() + ": expected at least one size, got []");
    if (d.size() > 4) throw InputError(dims.path() + ": expected up to 4 sizes from 1 to 4096, got " + std::to_string(d.size()));
    o.dims = d;
  }
  // A catalog id the catalog lacks is this field's mistake.
  auto catalog_id = [&](const char* key, bool link) {
    std::string id = cluster.string(key);
    try {
      if (link) (void)catalog.link(id);
      else (void)catalog.accelerator(id);
    } catch (const InputError& e) {
      throw InputError(cluster.field_path(key) + ": " + e.what());
    }
    return id;
  };
  if (cluster.has("accelerator")) o.accelerator = catalog_id("accelerator", false);
  if (cluster.has("nic")) o.nic = catalog_id("nic", true);
  if (cluster.has("nics_per_node")) {
    const std::int64_t v = cluster.positive_int("nics_per_node");
    if (v != 1 && v != 2 && v != 4 && v != 8) {
      throw InputError(cluster.field_path("nics_per_node") + ": expected 1, 2, 4 or 8 (NICs shared evenly by the 8 GPUs), got " +
                       std::to_string(v));
    }
    o.nics_per_node = static_cast<int>(v);
  }
  cluster.known("accelerator");
  cluster.known("nic");
  cluster.known("nics_per_node");
  cluster.known("nodes");
  cluster.known("pods");
  cluster.finish();
  try {
    Cluster c = build_preset(catalog, name, o);
    c.validate();
    return c;
  } catch (const InputError& e) {
    throw InputError(spelled_preset_error(e.what(), [&](std::string_view key) { return cluster.field_path(std::string(key)); },
                                          cluster.path()));
  } catch (const GraphError& e) {
    throw InputError(cluster.path() + ": " + e.what());
  }
}

std::string spelled_preset_error(std::string_view message, const std::function<std::string(std::string_view)>& spell,
                                 std::string_view whole) {
  for (std::string_view key : {"nodes", "pods", "dims", "accelerator", "nics_per_node", "nic"}) {
    if (message.size() > key.size() + 1 && message.substr(0, key.size()) == key && message.substr(key.size(), 2) == ": ") {
      return spell(key) + std::string(message.substr(key.size()));
    }
  }
  return whole.empty() ? std::string(message) : std::string(whole) + ": " + std::string(message);
}

}  // namespace ddlsim
