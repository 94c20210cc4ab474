#include "topology/builders.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/errors.hpp"

namespace ddlsim {
namespace {

void positive(int v, const char* what) {
  if (v <= 0) throw GraphError(std::string(what) + " must be positive, got " + std::to_string(v));
}

LinkId join(Cluster& c, NodeId a, NodeId b, const LinkSpec& l) {
  return c.connect(a, b, l.bandwidth, l.latency, l.id);
}

// `gpus` accelerators "<prefix>.gpu<i>", each joined to the switch sw by link l.
std::vector<NodeId> gpus_on_switch(Cluster& c, const std::string& prefix, const AcceleratorSpec& acc, int gpus,
                                   NodeId sw, const LinkSpec& l) {
  std::vector<NodeId> out;
  for (int g = 0; g < gpus; ++g) {
    const NodeId gpu = c.add_node(NodeKind::kAccelerator, prefix + ".gpu" + std::to_string(g), acc.id);
    join(c, gpu, sw, l);
    out.push_back(gpu);
  }
  return out;
}

// Uplink cables a leaf needs so that its uplink bandwidth is its downlink bandwidth
// (`down` endpoints on `edge`) divided by the oversubscription: at least one.
std::size_t uplink_cables(std::size_t down, const LinkSpec& edge, const LinkSpec& fabric, double oversubscription) {
  const double need = static_cast<double>(down) * edge.bandwidth.value() / (oversubscription * fabric.bandwidth.value());
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(need - 1e-9)));
}

// Spines: one per uplink cable, or at most max_spines (0: no limit) with several
// parallel cables from each leaf to each spine.
std::size_t uplinks(std::size_t down, const LinkSpec& edge, const LinkSpec& fabric, double oversubscription,
                    std::size_t max_spines) {
  const std::size_t cables = uplink_cables(down, edge, fabric, oversubscription);
  return max_spines == 0 ? cables : std::min(cables, max_spines);
}

std::size_t parallel_links(std::size_t down, const LinkSpec& edge, const LinkSpec& fabric, double oversubscription,
                           std::size_t spines) {
  const std::size_t cables = uplink_cables(down, edge, fabric, oversubscription);
  return (cables + spines - 1) / spines;
}

}  // namespace

std::vector<NodeId> add_nvswitch_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                      std::string_view accelerator, int gpus, std::string_view link) {
  positive(gpus, "GPUs per node");
  const AcceleratorSpec& acc = catalog.accelerator(accelerator);
  LinkSpec l = catalog.link(link.empty() ? std::string_view(acc.scale_up) : link);
  l.bandwidth = l.bandwidth * static_cast<double>(acc.scale_up_links);  // all of a GPU's links to the fabric
  const NodeId sw = c.add_node(NodeKind::kSwitch, prefix + ".nvswitch", "nvswitch");
  return gpus_on_switch(c, prefix, acc, gpus, sw, l);
}

std::vector<NodeId> add_full_mesh_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                       std::string_view accelerator, int gpus) {
  positive(gpus, "GPUs per node");
  const AcceleratorSpec& acc = catalog.accelerator(accelerator);
  if (acc.scale_up_links < gpus - 1) {
    throw GraphError(acc.id + " has " + std::to_string(acc.scale_up_links) + " scale-up links, too few to join each of " +
                     std::to_string(gpus) + " GPUs to its " + std::to_string(gpus - 1) + " peers directly");
  }
  const LinkSpec& l = catalog.link(acc.scale_up);
  std::vector<NodeId> out;
  for (int g = 0; g < gpus; ++g) out.push_back(c.add_node(NodeKind::kAccelerator, prefix + ".gpu" + std::to_string(g), acc.id));
  for (std::size_t a = 0; a < out.size(); ++a) {
    for (std::size_t b = a + 1; b < out.size(); ++b) join(c, out[a], out[b], l);
  }
  return out;
}

std::vector<NodeId> add_dgx1_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                  std::vector<NodeId>* nics) {
  const AcceleratorSpec& acc = catalog.accelerator("v100-32gb");
  const LinkSpec& nv = catalog.link("nvlink2");
  const LinkSpec& pcie = catalog.link("pcie3");
  const LinkSpec& edr = catalog.link("ib-edr");
  std::vector<NodeId> gpus;
  for (int g = 0; g < 8; ++g) gpus.push_back(c.add_node(NodeKind::kAccelerator, prefix + ".gpu" + std::to_string(g), acc.id));
  struct Pair {
    int a, b, links;
  };
  constexpr Pair kNvlinks[] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {1, 2, 2}, {1, 3, 1}, {2, 3, 2},
                               {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2},
                               {0, 4, 2}, {1, 5, 2}, {2, 6, 1}, {3, 7, 1}};
  for (const Pair& p : kNvlinks) {
    c.connect(gpus[static_cast<std::size_t>(p.a)], gpus[static_cast<std::size_t>(p.b)], nv.bandwidth * p.links,
              nv.latency, nv.id);
  }
  for (int s = 0; s < 4; ++s) {
    const NodeId sw = c.add_node(NodeKind::kSwitch, prefix + ".pcie" + std::to_string(s), "pcie-switch");
    join(c, gpus[static_cast<std::size_t>(2 * s)], sw, pcie);
    join(c, gpus[static_cast<std::size_t>(2 * s + 1)], sw, pcie);
    const NodeId nic = c.add_node(NodeKind::kNic, prefix + ".nic" + std::to_string(s), edr.id);
    join(c, nic, sw, pcie);
    if (nics) nics->push_back(nic);
  }
  return gpus;
}

std::vector<NodeId> add_shared_nics(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                    const std::vector<NodeId>& gpus, int nics, std::string_view pcie,
                                    std::string_view nic) {
  positive(nics, "NICs per server");
  if (gpus.size() % static_cast<std::size_t>(nics) != 0) {
    throw GraphError(std::to_string(nics) + " NICs cannot be shared evenly by " + std::to_string(gpus.size()) + " GPUs");
  }
  const LinkSpec& l = catalog.link(pcie);
  const LinkSpec& n = catalog.link(nic);
  const std::size_t per = gpus.size() / static_cast<std::size_t>(nics);
  std::vector<NodeId> out;
  for (std::size_t j = 0; j < static_cast<std::size_t>(nics); ++j) {
    const NodeId sw = c.add_node(NodeKind::kSwitch, prefix + ".pcie" + std::to_string(j), "pcie-switch");
    for (std::size_t g = j * per; g < (j + 1) * per; ++g) join(c, gpus[g], sw, l);
    const NodeId card = c.add_node(NodeKind::kNic, prefix + ".nic" + std::to_string(j), n.id);
    join(c, card, sw, l);
    out.push_back(card);
  }
  return out;
}

std::vector<NodeId> add_pcie_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                  std::string_view accelerator, int gpus, std::string_view pcie) {
  positive(gpus, "GPUs per node");
  const AcceleratorSpec& acc = catalog.accelerator(accelerator);
  const LinkSpec& l = catalog.link(pcie);
  const NodeId sw = c.add_node(NodeKind::kSwitch, prefix + ".pcie", "pcie-switch");
  const NodeId host = c.add_node(NodeKind::kHost, prefix + ".host", "host");
  join(c, host, sw, l);
  return gpus_on_switch(c, prefix, acc, gpus, sw, l);
}

std::vector<NodeId> add_torus(Cluster& c, const Catalog& catalog, const std::string& prefix,
                              std::string_view accelerator, const std::vector<int>& dims, const std::vector<bool>& wrap,
                              std::string_view link) {
  if (dims.empty() || wrap.size() != dims.size()) throw GraphError("a torus needs one wrap flag per dimension");
  std::size_t total = 1;
  for (int k : dims) {
    positive(k, "torus dimension size");
    total *= static_cast<std::size_t>(k);
    if (total > (1u << 24)) throw GraphError("a torus of more than 2^24 chips");
  }
  const AcceleratorSpec& acc = catalog.accelerator(accelerator);
  const LinkSpec& l = catalog.link(link);
  const std::size_t n = dims.size();
  std::vector<NodeId> chips(total);
  std::vector<int> coord(n, 0);
  for (std::size_t i = 0; i < total; ++i) {
    // coord of index i, last dimension fastest
    std::size_t rest = i;
    for (std::size_t d = n; d-- > 0;) {
      coord[d] = static_cast<int>(rest % static_cast<std::size_t>(dims[d]));
      rest /= static_cast<std::size_t>(dims[d]);
    }
    std::string name = prefix + "(";
    for (std::size_t d = 0; d < n; ++d) name += (d ? "," : "") + std::to_string(coord[d]);
    chips[i] = c.add_node(NodeKind::kAccelerator, name + ")", acc.id);
  }
  // Strides of the row-major layout.
  std::vector<std::size_t> stride(n, 1);
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * static_cast<std::size_t>(dims[d + 1]);
  for (std::size_t i = 0; i < total; ++i) {
    for (std::size_t d = 0; d < n; ++d) {
      const int k = dims[d];
      const int x = static_cast<int>((i / stride[d]) % static_cast<std::size_t>(k));
      if (x + 1 < k) {
        join(c, chips[i], chips[i + stride[d]], l);
      } else if (wrap[d] && k > 2) {
        join(c, chips[i], chips[i - static_cast<std::size_t>(k - 1) * stride[d]], l);
      }
    }
  }
  c.add_torus_shape(TorusShape{chips, dims, wrap});
  return chips;
}

void add_pods_over_dcn(Cluster& c, const Catalog& catalog, const std::string& prefix,
                       const std::vector<std::vector<NodeId>>& pods, std::string_view dcn_link) {
  const LinkSpec& dcn = catalog.link(dcn_link);
  const LinkSpec& pcie = catalog.link("pcie4");
  const NodeId sw = c.add_node(NodeKind::kSwitch, prefix + ".dcn", "dcn");
  for (std::size_t p = 0; p < pods.size(); ++p) {
    for (std::size_t i = 0; i < pods[p].size(); i += 4) {
      const NodeId host = c.add_node(NodeKind::kHost, prefix + ".pod" + std::to_string(p) + ".host" + std::to_string(i / 4), "host");
      for (std::size_t k = i; k < std::min(pods[p].size(), i + 4); ++k) join(c, pods[p][k], host, pcie);
      join(c, host, sw, dcn);
    }
  }
}

std::vector<NodeId> add_leaf_spine(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                   const std::vector<std::vector<NodeId>>& groups, double oversubscription,
                                   std::string_view edge_link, std::string_view fabric_link, std::size_t max_spines) {
  if (!(oversubscription >= 1.0) || !std::isfinite(oversubscription)) {
    throw GraphError("fat tree oversubscription must be >= 1, got " + std::to_string(oversubscription));
  }
  if (groups.empty()) throw GraphError("a fat tree needs endpoints");
  std::size_t widest = 0;
  for (const auto& g : groups) widest = std::max(widest, g.size());
  if (widest == 0) throw GraphError("a fat tree needs endpoints");
  const LinkSpec& edge = catalog.link(edge_link);
  const LinkSpec& fabric = catalog.link(fabric_link);
  const std::size_t spines = uplinks(widest, edge, fabric, oversubscription, max_spines);
  const std::size_t per_spine = parallel_links(widest, edge, fabric, oversubscription, spines);
  std::vector<NodeId> spine(spines);
  for (std::size_t s = 0; s < spines; ++s) {
    spine[s] = c.add_node(NodeKind::kSwitch, prefix + ".spine" + std::to_string(s), "spine");
  }
  std::vector<NodeId> leaves;
  for (std::size_t f = 0; f < groups.size(); ++f) {
    const NodeId leaf = c.add_node(NodeKind::kSwitch, prefix + ".leaf" + std::to_string(f), "leaf");
    for (NodeId e : groups[f]) join(c, e, leaf, edge);
    for (std::size_t s = 0; s < spines; ++s) {
      for (std::size_t k = 0; k < per_spine; ++k) join(c, leaf, spine[s], fabric);
    }
    leaves.push_back(leaf);
  }
  return leaves;
}

void add_fat_tree(Cluster& c, const Catalog& catalog, const std::string& prefix, const std::vector<NodeId>& endpoints,
                  int per_leaf, double oversubscription, std::string_view edge_link, std::string_view fabric_link) {
  positive(per_leaf, "endpoints per leaf");
  std::vector<std::vector<NodeId>> groups;
  for (std::size_t e = 0; e < endpoints.size(); ++e) {
    if (e % static_cast<std::size_t>(per_leaf) == 0) groups.emplace_back();
    groups.back().push_back(endpoints[e]);
  }
  add_leaf_spine(c, catalog, prefix, groups, oversubscription, edge_link, fabric_link);
}

std::vector<NodeId> add_rail_optimized(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                       const std::vector<std::vector<NodeId>>& nodes, int servers_per_leaf,
                                       double oversubscription, std::string_view edge_link,
                                       std::string_view fabric_link, std::size_t max_spines) {
  positive(servers_per_leaf, "servers per leaf");
  if (nodes.empty() || nodes.front().empty()) throw GraphError("a rail-optimized fabric needs servers");
  const std::size_t rails = nodes.front().size();
  for (const auto& n : nodes) {
    if (n.size() != rails) throw GraphError("a rail-optimized fabric needs servers of one size");
  }
  // Leaf order: rail by rail, so the names read "<prefix>.leaf<k>" with k = rail * per_rail + j.
  std::vector<std::vector<NodeId>> groups;
  const std::size_t per_leaf = static_cast<std::size_t>(servers_per_leaf);
  for (std::size_t r = 0; r < rails; ++r) {
    for (std::size_t s = 0; s < nodes.size(); ++s) {
      if (s % per_leaf == 0) groups.emplace_back();
      groups.back().push_back(nodes[s][r]);
    }
  }
  return add_leaf_spine(c, catalog, prefix, groups, oversubscription, edge_link, fabric_link, max_spines);
}

std::vector<NodeId> add_three_level(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                    const std::vector<std::vector<NodeId>>& groups, int leaves_per_pod,
                                    double pod_oversubscription, double core_oversubscription,
                                    std::string_view edge_link, std::string_view fabric_link) {
  positive(leaves_per_pod, "leaves per pod");
  for (double o : {pod_oversubscription, core_oversubscription}) {
    if (!(o >= 1.0) || !std::isfinite(o)) throw GraphError("fat tree oversubscription must be >= 1, got " + std::to_string(o));
  }
  std::size_t widest = 0;
  for (const auto& g : groups) widest = std::max(widest, g.size());
  if (widest == 0) throw GraphError("a fat tree needs endpoints");
  const LinkSpec& edge = catalog.link(edge_link);
  const LinkSpec& fabric = catalog.link(fabric_link);
  const std::size_t per_pod = static_cast<std::size_t>(leaves_per_pod);
  const std::size_t pods = (groups.size() + per_pod - 1) / per_pod;
  const std::size_t spines = uplink_cables(widest, edge, fabric, pod_oversubscription);
  // A spine has one downlink per leaf of its pod; cores only when there are pods to join.
  const std::size_t cores = pods > 1 ? uplink_cables(std::min(per_pod, groups.size()), fabric, fabric, core_oversubscription) : 0;
  std::vector<std::vector<NodeId>> core(spines);  // core[j][c]: plane j
  for (std::size_t j = 0; j < spines; ++j) {
    for (std::size_t k = 0; k < cores; ++k) {
      core[j].push_back(c.add_node(NodeKind::kSwitch, prefix + ".core" + std::to_string(j) + "." + std::to_string(k), "core"));
    }
  }
  std::vector<NodeId> leaves;
  for (std::size_t p = 0; p < pods; ++p) {
    std::vector<NodeId> spine(spines);
    for (std::size_t j = 0; j < spines; ++j) {
      spine[j] = c.add_node(NodeKind::kSwitch, prefix + ".pod" + std::to_string(p) + ".spine" + std::to_string(j), "spine");
      for (NodeId k : core[j]) join(c, spine[j], k, fabric);
    }
    for (std::size_t f = p * per_pod; f < std::min(groups.size(), (p + 1) * per_pod); ++f) {
      const NodeId leaf = c.add_node(NodeKind::kSwitch, prefix + ".leaf" + std::to_string(f), "leaf");
      for (NodeId e : groups[f]) join(c, e, leaf, edge);
      for (NodeId s : spine) join(c, leaf, s, fabric);
      leaves.push_back(leaf);
    }
  }
  return leaves;
}

}  // namespace ddlsim
