#include "topology/builders.hpp"

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

}  // namespace

std::vector<NodeId> add_nvswitch_node(Cluster& c, const Catalog& catalog, const std::string& prefix,
                                      std::string_view accelerator, int gpus, std::string_view link) {
  positive(gpus, "GPUs per node");
  const AcceleratorSpec& acc = catalog.accelerator(accelerator);
  const LinkSpec& l = catalog.link(link.empty() ? std::string_view(acc.scale_up) : link);
  const NodeId sw = c.add_node(NodeKind::kSwitch, prefix + ".nvswitch", "nvswitch");
  std::vector<NodeId> out;
  for (int g = 0; g < gpus; ++g) {
    const NodeId gpu = c.add_node(NodeKind::kAccelerator, prefix + ".gpu" + std::to_string(g), acc.id);
    join(c, gpu, sw, l);
    out.push_back(gpu);
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
  std::vector<NodeId> out;
  for (int g = 0; g < gpus; ++g) {
    const NodeId gpu = c.add_node(NodeKind::kAccelerator, prefix + ".gpu" + std::to_string(g), acc.id);
    join(c, gpu, sw, l);
    out.push_back(gpu);
  }
  return out;
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
  return chips;
}

void add_fat_tree(Cluster& c, const Catalog& catalog, const std::string& prefix, const std::vector<NodeId>& endpoints,
                  int per_leaf, double oversubscription, std::string_view edge_link, std::string_view fabric_link) {
  positive(per_leaf, "endpoints per leaf");
  if (!(oversubscription >= 1.0) || !std::isfinite(oversubscription)) {
    throw GraphError("fat tree oversubscription must be >= 1, got " + std::to_string(oversubscription));
  }
  if (endpoints.empty()) throw GraphError("a fat tree needs endpoints");
  const LinkSpec& edge = catalog.link(edge_link);
  const LinkSpec& fabric = catalog.link(fabric_link);
  const std::size_t leaves = (endpoints.size() + static_cast<std::size_t>(per_leaf) - 1) / static_cast<std::size_t>(per_leaf);
  const auto spines = static_cast<std::size_t>(std::ceil(per_leaf / oversubscription - 1e-9));
  std::vector<NodeId> spine(spines);
  for (std::size_t s = 0; s < spines; ++s) spine[s] = c.add_node(NodeKind::kSwitch, prefix + ".spine" + std::to_string(s), "spine");
  for (std::size_t f = 0; f < leaves; ++f) {
    const NodeId leaf = c.add_node(NodeKind::kSwitch, prefix + ".leaf" + std::to_string(f), "leaf");
    for (std::size_t e = f * static_cast<std::size_t>(per_leaf);
         e < std::min(endpoints.size(), (f + 1) * static_cast<std::size_t>(per_leaf)); ++e) {
      join(c, endpoints[e], leaf, edge);
    }
    for (std::size_t s = 0; s < spines; ++s) join(c, leaf, spine[s], fabric);
  }
}

}  // namespace ddlsim
