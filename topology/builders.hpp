// Builders: parameterised pieces of real machines, composed into one Cluster.
//
// Each add_* function adds its nodes and links to a cluster and returns the accelerators
// it added (in rank order), so pieces compose: build nodes, then join their NICs with a
// fabric. Bandwidths and latencies come from the catalog's link entries.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/catalog.hpp"
#include "topology/cluster.hpp"

namespace ddlsim {

/// One server whose `gpus` accelerators reach each other through an NVSwitch fabric at
/// their full scale-up bandwidth (DGX A100 / H100 / B200-like): modelled as one switch
/// node "<prefix>.nvswitch" with one cable per GPU carrying all of its scale_up_links
/// links (`link`, or the accelerator's catalog scale_up when empty): 18 x 25 = 450 GB/s
/// for an H100. GPUs are named "<prefix>.gpu<i>".
std::vector<NodeId> add_nvswitch_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                      std::string_view accelerator, int gpus, std::string_view link = {});

/// One server whose `gpus` accelerators are wired to one another directly, one link of
/// the accelerator's scale_up kind between every two of them (AMD's MI300X platform:
/// eight GPUs, each with one xGMI link of 64 GB/s per direction to each of its 7 peers).
/// Two GPUs exchange data at one link's bandwidth; a collective over all of them can use
/// every link at once. The accelerator needs scale_up_links of at least gpus - 1.
/// GPUs are named "<prefix>.gpu<i>".
std::vector<NodeId> add_full_mesh_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                       std::string_view accelerator, int gpus);
/// A DGX-1 with V100s: eight GPUs in NVLink 2's hybrid cube-mesh (two fully connected
/// quads, 0-3 and 4-7, joined 0-4, 1-5, 2-6, 3-7; 24 NVLinks, six per GPU) where the
/// pairs 0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6 and 6-7 have two links (one cable of twice
/// the bandwidth). The shape is the white paper's; the doubled pairs are those nvidia-smi
/// topo -m reports on a DGX-1V (the white paper does not list them). Each pair of GPUs
/// (0-1, 2-3, 4-5, 6-7) shares a PCIe 3 switch with one EDR NIC ("<prefix>.nic<j>",
/// returned in `nics` when given).
std::vector<NodeId> add_dgx1_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                  std::vector<NodeId>* nics = nullptr);

/// NICs shared by a server's GPUs: `nics` PCIe switches ("<prefix>.pcie<j>"), each
/// joining 8 / nics consecutive GPUs of `gpus` and one NIC ("<prefix>.nic<j>", model
/// `nic`) on `pcie` links, as a DGX-1 pairs its GPUs with its 4 NICs. Returns the NICs,
/// for a fabric to join. `nics` must divide the number of GPUs.
std::vector<NodeId> add_shared_nics(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                    const std::vector<NodeId>& gpus, int nics, std::string_view pcie,
                                    std::string_view nic);

/// One server whose accelerators share a PCIe switch ("<prefix>.pcie") with the host
/// ("<prefix>.host"): every GPU-to-GPU transfer crosses the switch on `pcie` links.
std::vector<NodeId> add_pcie_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                  std::string_view accelerator, int gpus, std::string_view pcie);

/// A k1 x k2 (x k3 ...) grid of accelerators, each linked to its neighbour in every
/// dimension by `link`; with `wrap[d]` the last and first of dimension d are linked too
/// (a torus; a dimension of size 2 gets one link, not two). Chips are named
/// "<prefix>(x,y,z)" and returned in row-major order (last dimension fastest).
std::vector<NodeId> add_torus(Cluster& c, const Catalog& catalog, const std::string& prefix,
                              std::string_view accelerator, const std::vector<int>& dims,
                              const std::vector<bool>& wrap, std::string_view link);

/// Joins TPU pods (each a torus of chips, from add_torus) over the data-centre network:
/// every 4 consecutive chips of a pod share a host ("<prefix>.pod<p>.host<h>", PCIe 4
/// to each chip), and every host has one `dcn_link` to a shared DCN switch
/// ("<prefix>.dcn"). Traffic between pods crosses host, DCN switch and host.
void add_pods_over_dcn(Cluster& c, const Catalog& catalog, const std::string& prefix,
                       const std::vector<std::vector<NodeId>>& pods, std::string_view dcn_link);

/// A two-level fat tree (leaf/spine Clos) over `endpoints` (accelerators or NICs): every
/// `per_leaf` consecutive endpoints hang off one leaf switch by `edge_link`; each leaf has
/// uplinks on `fabric_link` carrying its downlink bandwidth over the oversubscription, one
/// to each spine.
/// Oversubscription 1 is full bisection bandwidth. Switches are "<prefix>.leaf<i>" and
/// "<prefix>.spine<j>".
void add_fat_tree(Cluster& c, const Catalog& catalog, const std::string& prefix, const std::vector<NodeId>& endpoints,
                  int per_leaf, double oversubscription, std::string_view edge_link, std::string_view fabric_link);

/// The same leaf/spine fabric with the leaves' endpoints given explicitly: leaf i serves
/// groups[i]. Every leaf gets enough uplink cables that its uplink bandwidth is its
/// downlink bandwidth (largest group x edge link) over the oversubscription, one to each
/// spine; with max_spines > 0 and more cables than that, max_spines spines each get
/// several parallel cables from every leaf (a SuperPOD: 32 uplinks over 16 spines).
/// Returns the leaf switches.
std::vector<NodeId> add_leaf_spine(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                   const std::vector<std::vector<NodeId>>& groups, double oversubscription,
                                   std::string_view edge_link, std::string_view fabric_link,
                                   std::size_t max_spines = 0);

/// A three-level Clos (leaf / spine / core): leaf i serves groups[i]; every
/// `leaves_per_pod` consecutive leaves form a pod with its own spines (one per leaf
/// uplink cable, sized by bandwidth as in add_leaf_spine); with more than one pod, spine
/// j of every pod links to each core of plane j, and a plane has enough cores that a
/// spine's uplinks carry its downlink bandwidth over core_oversubscription. One pod has
/// no cores. Names: "<prefix>.pod<p>.spine<j>", "<prefix>.core<j>.<c>".
std::vector<NodeId> add_three_level(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                    const std::vector<std::vector<NodeId>>& groups, int leaves_per_pod,
                                    double pod_oversubscription, double core_oversubscription,
                                    std::string_view edge_link, std::string_view fabric_link);

/// Rail-optimized leaf/spine fabric over servers (nodes[s] = the GPUs or NICs of server
/// s, all of one size G): GPU i of every server hangs off a leaf of rail i, up to
/// `servers_per_leaf` servers per leaf, and all leaves share
/// the spines. Leaf k is rail k / ceil(servers / servers_per_leaf). Traffic between GPUs of one
/// rank in different servers of one leaf stays on its rail leaf.
std::vector<NodeId> add_rail_optimized(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                       const std::vector<std::vector<NodeId>>& nodes, int servers_per_leaf,
                                       double oversubscription, std::string_view edge_link,
                                       std::string_view fabric_link, std::size_t max_spines = 0);

}  // namespace ddlsim
