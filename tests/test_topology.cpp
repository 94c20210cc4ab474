#include <doctest/doctest.h>

#include "approx.hpp"

#include <cstdlib>
#include <set>
#include <nlohmann/json.hpp>

#include "sim/core/errors.hpp"
#include "sim/network_fabric.hpp"
#include "topology/builders.hpp"
#include "topology/explicit.hpp"
#include "topology/presets.hpp"
#include "support/input_error.hpp"
#include "topology/stats.hpp"
#include "topology/routing.hpp"

using namespace ddlsim;
using ddlsim::test::Approx;

namespace {
std::size_t degree(const Cluster& c, NodeId n) { return c.out_links(n).size(); }
}  // namespace

TEST_CASE("an NVSwitch node: every GPU one hop from the switch, two from every other GPU") {
  // Expected: 8 A100s + 1 switch = 9 nodes, 8 cables = 16 directed links, each GPU of
  // degree 1 at NVLink 3's 300 GB/s; any GPU pair is 2 hops through the switch.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  const auto gpus = add_nvswitch_node(c, cat, "n0", "a100-80gb", 8);
  CHECK(c.node_count() == 9);
  CHECK(c.link_count() == 16);
  CHECK(c.accelerators().size() == 8);
  ShortestPathRouter r(c);
  for (NodeId g : gpus) CHECK(degree(c, g) == 1);
  const auto& path = r.route(gpus[0], gpus[7]);
  REQUIRE(path.size() == 2);
  CHECK(c.link(path[0]).bandwidth.value() == Approx(300e9));
  CHECK(c.node(c.link(path[0]).to).name == "n0.nvswitch");
  CHECK(c.link(path[1]).to == gpus[7]);
  c.validate();
}

TEST_CASE("a PCIe node joins GPUs and host through one switch") {
  // Expected: 4 GPUs + switch + host = 6 nodes, 5 cables = 10 directed links, PCIe 4's
  // 31.5 GB/s on each.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  const auto gpus = add_pcie_node(c, cat, "box", "v100-32gb", 4, "pcie4");
  CHECK(c.node_count() == 6);
  CHECK(c.link_count() == 10);
  CHECK(c.link(c.out_links(gpus[0])[0]).bandwidth.value() == Approx(31.5e9));
}

TEST_CASE("torus and mesh shapes: link counts and degrees") {
  // Expected: a 4x4x4 torus has 64 chips of degree 6 and 64 x 6 / 2 = 192 cables; the
  // 4x4x4 mesh (no wraparound) has 3 x 16 x 3 = 144 cables and corner degree 3; in a 2x4
  // torus the size-2 dimension gets one link per pair: 4 + 8 = 12 cables.
  const Catalog cat = Catalog::builtin();
  Cluster t;
  const auto chips = add_torus(t, cat, "t", "tpu-v4", {4, 4, 4}, {true, true, true}, "ici-v4");
  CHECK(chips.size() == 64);
  CHECK(t.link_count() == 2 * 192);
  for (NodeId n : chips) CHECK(degree(t, n) == 6);
  CHECK(t.node(chips[1]).name == "t(0,0,1)");
  Cluster m;
  const auto mesh = add_torus(m, cat, "m", "tpu-v4", {4, 4, 4}, {false, false, false}, "ici-v4");
  CHECK(m.link_count() == 2 * 144);
  CHECK(degree(m, mesh[0]) == 3);
  Cluster small;
  add_torus(small, cat, "s", "tpu-v4", {2, 4}, {true, true}, "ici-v4");
  CHECK(small.link_count() == 2 * 12);
}

TEST_CASE("shortest routes on a torus take sum over dimensions of min(d, k - d) hops") {
  // Expected: in a 4x6x3 torus, from every chip of the first row to every chip, the hop
  // count equals sum_d min(|dx_d|, k_d - |dx_d|); in the same mesh without wraparound,
  // sum_d |dx_d|.
  const Catalog cat = Catalog::builtin();
  const std::vector<int> k = {4, 6, 3};
  for (bool wrap : {true, false}) {
    Cluster c;
    const auto chips = add_torus(c, cat, "t", "tpu-v4", k, {wrap, wrap, wrap}, "ici-v4");
    ShortestPathRouter r(c);
    auto coords = [&](std::size_t i) {
      return std::vector<int>{static_cast<int>(i / 18), static_cast<int>(i / 3 % 6), static_cast<int>(i % 3)};
    };
    for (std::size_t s = 0; s < 3; ++s) {
      for (std::size_t d = 0; d < chips.size(); ++d) {
        const auto a = coords(s), b = coords(d);
        std::size_t expected = 0;
        for (std::size_t x = 0; x < 3; ++x) {
          const int diff = std::abs(a[x] - b[x]);
          expected += static_cast<std::size_t>(wrap ? std::min(diff, k[x] - diff) : diff);
        }
        INFO("wrap=" << wrap << " from " << s << " to " << d);
        CHECK(r.route(chips[s], chips[d]).size() == expected);
      }
    }
  }
}

TEST_CASE("a two-level fat tree over four NVSwitch nodes") {
  // Expected: 4 nodes x 8 H100 with one NIC link each to a leaf (8 per leaf): 4 leaves;
  // at oversubscription 1 each leaf has 8 uplinks, so 8 spines. Cables: 4 x 8 NVLink +
  // 32 NDR edge + 4 x 8 fabric = 96. GPU 0 of node 0 reaches GPU 0 of node 1 in 4 hops
  // (gpu, leaf, spine, leaf, gpu); at oversubscription 2 there are 4 spines.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  std::vector<NodeId> gpus;
  for (int n = 0; n < 4; ++n) {
    const auto node = add_nvswitch_node(c, cat, "node" + std::to_string(n), "h100-sxm", 8);
    gpus.insert(gpus.end(), node.begin(), node.end());
  }
  add_fat_tree(c, cat, "ib", gpus, 8, 1.0, "ib-ndr", "ib-ndr");
  CHECK(c.link_count() == 2 * 96);
  CHECK(c.find("ib.spine7").has_value());
  CHECK_FALSE(c.find("ib.spine8").has_value());
  ShortestPathRouter r(c);
  CHECK(r.route(gpus[0], gpus[8]).size() == 4);
  CHECK(r.route(gpus[0], gpus[1]).size() == 2);  // through the NVSwitch, not the leaf
  c.validate();
  Cluster half;
  std::vector<NodeId> g2 = add_nvswitch_node(half, cat, "n", "h100-sxm", 8);
  add_fat_tree(half, cat, "ib", g2, 8, 2.0, "ib-ndr", "ib-ndr");
  CHECK(half.find("ib.spine3").has_value());
  CHECK_FALSE(half.find("ib.spine4").has_value());
}

TEST_CASE("link targets match the links, both directions of every cable") {
  // Expected: link_targets()[l] is link(l).to for every directed link, and a cable's two
  // directions lead to each other's ends (links 2k and 2k + 1).
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.nodes = 3;
  const Cluster c = build_preset(cat, "dgx1-v100", o);
  REQUIRE(c.link_targets().size() == c.link_count());
  for (std::uint32_t l = 0; l < c.link_count(); ++l) {
    CHECK(c.link_targets()[l] == c.link(LinkId(l)).to);
    CHECK(c.link_targets()[l ^ 1u] == c.link(LinkId(l)).from);
  }
}

TEST_CASE("routes are cached") {
  // Expected: a repeated look-up returns the same stored path; each distinct pair is
  // stored once.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  const auto chips = add_torus(c, cat, "t", "tpu-v4", {8, 8}, {true, true}, "ici-v4");
  ShortestPathRouter r(c);
  const auto* first = &r.route(chips[0], chips[27]);
  CHECK(&r.route(chips[0], chips[27]) == first);
  r.route(chips[0], chips[5]);
  CHECK(r.cached_routes() == 2);
}

TEST_CASE("bad topologies are errors naming the element") {
  // Expected: duplicate names, a link to itself, zero bandwidth, and accelerators with
  // no path between them are GraphErrors naming the nodes.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  const auto a = c.add_node(NodeKind::kAccelerator, "gpu0", "h100-sxm");
  const auto b = c.add_node(NodeKind::kAccelerator, "gpu1", "h100-sxm");
  CHECK_THROWS_WITH_AS(c.add_node(NodeKind::kSwitch, "gpu0"), "two cluster nodes are named 'gpu0'", GraphError);
  CHECK_THROWS_WITH_AS(c.connect(a, a, BytesPerSecond(1e9), Seconds(0), "x"), "link x joins 'gpu0' to itself",
                       GraphError);
  CHECK_THROWS_WITH_AS(c.connect(a, b, BytesPerSecond(0), Seconds(0), "x"),
                       "link x between 'gpu0' and 'gpu1' needs a positive bandwidth", GraphError);
  CHECK_THROWS_WITH_AS(c.validate(), "accelerator 'gpu1' cannot reach 'gpu0': no path of links joins them", GraphError);
  ShortestPathRouter r(c);
  CHECK_THROWS_WITH_AS(r.route(a, b), "no route from 'gpu0' to 'gpu1'", GraphError);
  CHECK_THROWS_WITH_AS(add_torus(c, cat, "t", "tpu-v4", {4, 0}, {true, true}, "ici-v4"),
                       "torus dimension size must be positive, got 0", GraphError);
  CHECK_THROWS_WITH_AS(add_nvswitch_node(c, cat, "n", "h100", 8),
                       doctest::Contains("unknown accelerator 'h100' (did you mean 'h100-sxm'?)"), std::exception);
}

TEST_CASE("a rail-optimized fabric puts GPU i of every server on rail i") {
  // Expected: 4 servers x 8 GPUs with 4 servers per leaf: 8 leaves (one per rail), each
  // with 4 uplinks (full bisection), so 4 spines; GPU 3 of server 0 reaches GPU 3 of
  // server 2 in 2 hops through its rail leaf; GPU 3 to GPU 4 of another server takes 4.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  std::vector<std::vector<NodeId>> servers;
  for (int s = 0; s < 4; ++s) servers.push_back(add_nvswitch_node(c, cat, "s" + std::to_string(s), "h100-sxm", 8));
  const auto leaves = add_rail_optimized(c, cat, "ib", servers, 4, 1.0, "ib-ndr", "ib-ndr");
  CHECK(leaves.size() == 8);
  CHECK(c.find("ib.spine3").has_value());
  CHECK_FALSE(c.find("ib.spine4").has_value());
  ShortestPathRouter r(c);
  const auto& path = r.route(servers[0][3], servers[2][3]);
  REQUIRE(path.size() == 2);
  CHECK(c.link(path[0]).to == leaves[3]);
  CHECK(r.route(servers[0][3], servers[1][4]).size() == 4);
}

namespace {
PresetOptions with_nodes(int n) {
  PresetOptions o;
  o.nodes = n;
  return o;
}
}  // namespace

TEST_CASE("presets build the reference machines") {
  // Expected counts (builders as documented):
  // dgx-h100, 4 servers: 32 GPUs, 4 NVSwitches, 8 rail leaves, 4 spines = 48 nodes;
  //   cables 32 NVLink + 32 NDR edge + 8 x 4 fabric = 96.
  // llama3-roce, 4 servers: 2 racks of 16 GPUs in one pod, 16 spines and no cores (one
  //   pod); nodes 32 + 4 + 2 + 16 = 54; cables 32 + 32 + 2 x 16 = 96.
  // tpu-v4-pod: 16^3 = 4096 chips, 3 x 4096 = 12288 cables; a 2x2x4 slice is a mesh:
  //   8 + 8 + 12 = 28 cables. gb200-nvl72: 72 GPUs + 1 switch.
  const Catalog cat = Catalog::builtin();
  const Cluster h = build_preset(cat, "dgx-h100", with_nodes(4));
  CHECK(h.accelerators().size() == 32);
  CHECK(h.node_count() == 48);
  CHECK(h.link_count() == 2 * 96);
  h.validate();
  const Cluster l = build_preset(cat, "llama3-roce", with_nodes(4));
  CHECK(l.node_count() == 54);
  CHECK(l.link_count() == 2 * 96);
  // A DGX H100 SuperPOD of 4 SUs (128 servers, 1024 GPUs): 32 rail leaves under 16
  // spines, 2 cables from each leaf to each spine (hardware.md).
  const TopologyStats pod = topology_stats(build_preset(cat, "dgx-h100", with_nodes(128)));
  CHECK(pod.nodes_by_kind.at("switch") == 128 + 32 + 16);
  CHECK(pod.links_by_kind.at("ib-ndr").cables == 1024 + 32 * 16 * 2);
  CHECK(pod.bisection_gbytes_per_s == Approx(512 * 50.0));
  CHECK(l.link(l.out_links(l.accelerators()[0]).back()).kind == "eth-400g");
  const Cluster t = build_preset(cat, "tpu-v4-pod", {});
  CHECK(t.accelerators().size() == 4096);
  CHECK(t.link_count() == 2 * 12288);
  PresetOptions slice;
  slice.dims = std::vector<int>{2, 2, 4};
  const Cluster s = build_preset(cat, "tpu-v4-pod", slice);
  CHECK(s.link_count() == 2 * 28);
  const Cluster g = build_preset(cat, "gb200-nvl72", {});
  CHECK(g.accelerators().size() == 72);
  CHECK(g.node_count() == 73);
  PresetOptions ndr = with_nodes(2);
  ndr.nic = "ib-ndr";
  const Cluster a = build_preset(cat, "dgx-a100", ndr);
  CHECK(a.link(a.out_links(a.accelerators()[0]).back()).kind == "ib-ndr");
}

TEST_CASE("an MI300X platform: every GPU wired to its 7 peers, one NDR NIC each") {
  // Expected for 2 servers: 16 MI300X; in each server 8 x 7 / 2 = 28 xGMI cables of 64
  // GB/s per direction (every GPU one hop from every other), so 56 in all; one NDR NIC
  // per GPU on its rail's leaf (16 edge cables), 8 rail leaves of 2 servers each needing
  // 2 x 50 GB/s of uplinks: 2 cables each to 2 spines (16 more): 32 NDR cables, 10
  // switches. Injection per GPU: 7 x 64 + 50 = 498 GB/s.
  const Catalog cat = Catalog::builtin();
  const Cluster c = build_preset(cat, "mi300x-platform", with_nodes(2));
  c.validate();
  CHECK(c.accelerators().size() == 16);
  const TopologyStats st = topology_stats(c);
  CHECK(st.links_by_kind.at("xgmi-mi300x").cables == 56);
  CHECK(st.links_by_kind.at("ib-ndr").cables == 32);
  CHECK(st.nodes_by_kind.at("switch") == 10);
  const auto gpus = c.accelerators();
  ShortestPathRouter r(c);
  for (std::size_t a = 0; a < 8; ++a) {
    CHECK(degree(c, gpus[a]) == 8);
    for (std::size_t b = 0; b < 8; ++b) {
      if (a != b) CHECK(r.route(gpus[a], gpus[b]).size() == 1);
    }
  }
  CHECK(c.link(c.out_links(gpus[0]).front()).bandwidth.value() == Approx(64e9));
  // NICs shared over PCIe as on the dgx presets; an accelerator without a link per peer
  // cannot make the mesh.
  PresetOptions four = with_nodes(2);
  four.nics_per_node = 4;
  CHECK(build_preset(cat, "mi300x-platform", four).accelerators().size() == 16);
  PresetOptions a100 = with_nodes(1);
  a100.accelerator = "a100-80gb";
  CHECK(build_preset(cat, "mi300x-platform", a100).accelerators().size() == 8);  // 12 NVLinks: enough for 7 peers
  PresetOptions v100 = with_nodes(1);
  v100.accelerator = "v100-32gb";
  CHECK_THROWS_WITH_AS(build_preset(cat, "mi300x-platform", v100),
                       doctest::Contains("accelerator: v100-32gb has 6 scale-up links; this preset's mesh joins each"),
                       std::exception);
}

TEST_CASE("preset errors name the problem") {
  const Catalog cat = Catalog::builtin();
  CHECK_THROWS_WITH_AS(build_preset(cat, "dgx-h10", {}), doctest::Contains("unknown preset 'dgx-h10' (did you mean 'dgx-h100'?)"),
                       std::exception);
  CHECK_THROWS_WITH_AS(build_preset(cat, "tpu-v4-pod", with_nodes(2)),
                       "nodes: TPU presets take a shape (dims, e.g. 4x4x8), not a server count", std::exception);
  // A TPU v4 or v5p chip has six ICI links, a 3D torus; v3's four, a 2D one.
  PresetOptions flat;
  flat.dims = std::vector<int>{4, 4};
  CHECK_THROWS_WITH_AS(build_preset(cat, "tpu-v4-pod", flat),
                       "dims: TPU v4 is a 3D torus; give three sizes, like 4x4x8 (a flat slice as 4x4x1), got 4x4", std::exception);
  flat.dims = std::vector<int>{4, 4, 1};
  CHECK(build_preset(cat, "tpu-v5p-pod", flat).accelerators().size() == 16);
  CHECK_THROWS_WITH_AS(build_preset(cat, "tpu-v3-pod", flat), "dims: TPU v3 is a 2D torus; give two sizes, like 16x32, got 4x4x1",
                       std::exception);
  CHECK_THROWS_WITH_AS(build_preset(cat, "dgx-h100", with_nodes(0)), "nodes: expected 1 to 4096, got 0", std::exception);
  PresetOptions three = with_nodes(2);
  three.nics_per_node = 3;
  CHECK_THROWS_WITH_AS(build_preset(cat, "dgx-a100", three),
                       "nics_per_node: expected 1, 2, 4 or 8 (NICs shared evenly by the 8 GPUs), got 3", std::exception);
  three.nics_per_node = 2;
  CHECK_THROWS_WITH_AS(build_preset(cat, "dgx1-v100", three), doctest::Contains("nics_per_node: dgx1-v100 has its 4 NICs"),
                       std::exception);
  CHECK_THROWS_WITH_AS(build_preset(cat, "llama3-roce", three), doctest::Contains("nics_per_node: llama3-roce"), std::exception);
  // A preset's own count is accepted (a sweep over presets may set it).
  three.nics_per_node = 4;
  CHECK(build_preset(cat, "dgx1-v100", three).accelerators().size() == 16);
  three.nics_per_node = 8;
  CHECK(build_preset(cat, "llama3-roce", three).accelerators().size() == 16);
}

TEST_CASE("DGX servers with fewer NICs than GPUs share each NIC behind a PCIe switch") {
  // Expected, 2 x DGX A100 with 4 NICs per node: per node 8 GPUs, 1 NVSwitch, 4 PCIe
  // switches, 4 NICs; PCIe 4 cables 2 x (8 GPUs + 4 NICs) = 24; HDR edge cables 2 x 4 = 8,
  // each of the 4 rail leaves with 2 uplinks (full bisection over 2 servers) = 8 more;
  // bisection 4 x 25 GB/s = 100 GB/s, half of a node per GPU's 200. GPU 0 to GPU 1 of one
  // node: two hops either way (NVSwitch, or the PCIe switch they share); the fabric takes
  // NVLink for every candidate route. GPU 0 to GPU 0 of the other node: GPU, PCIe switch,
  // NIC, leaf and back, 6 hops. 8 NICs per node builds what the default builds.
  const Catalog cat = Catalog::builtin();
  PresetOptions o = with_nodes(2);
  o.nics_per_node = 4;
  const Cluster c = build_preset(cat, "dgx-a100", o);
  c.validate();
  const TopologyStats st = topology_stats(c);
  CHECK(st.nodes_by_kind.at("accelerator") == 16);
  CHECK(st.nodes_by_kind.at("nic") == 8);
  CHECK(st.links_by_kind.at("pcie4").cables == 24);
  CHECK(st.links_by_kind.at("ib-hdr").cables == 16);
  CHECK(st.bisection_gbytes_per_s == Approx(100.0));
  const auto g = c.accelerators();
  NetworkFabric f(c, cat);
  const auto& inside = f.routes(g[0], g[1]);
  for (const auto& route : inside) {
    REQUIRE(route.size() == 2);
    for (LinkId l : route) CHECK(c.link(l).kind == "nvlink3");
  }
  CHECK(f.first_route(g[0], g[1]).size() == 2);
  CHECK(c.link(f.first_route(g[0], g[1]).front()).kind == "nvlink3");
  CHECK(f.first_route(g[0], g[8]).size() == 6);
  PresetOptions eight = with_nodes(2);
  eight.nics_per_node = 8;
  const Cluster a = build_preset(cat, "dgx-a100", eight), b = build_preset(cat, "dgx-a100", with_nodes(2));
  CHECK(a.node_count() == b.node_count());
  CHECK(a.link_count() == b.link_count());
}

TEST_CASE("inside a scale-up domain NVLink wins ties, but no longer NVLink detour is taken") {
  // Expected: four GPUs in an NVLink chain g0-g1-g2-g3, and a PCIe switch joining g0, g2
  // and g3. g0 to g2: two hops either way, the route takes NVLink (through g1). g0 to g3:
  // three NVLink hops against two through the switch, the route takes the switch.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  std::vector<NodeId> g;
  for (int i = 0; i < 4; ++i) g.push_back(c.add_node(NodeKind::kAccelerator, "g" + std::to_string(i), "a100-80gb"));
  for (int i = 0; i + 1 < 4; ++i) c.connect(g[i], g[i + 1], BytesPerSecond(300e9), Seconds(1e-6), "nvlink3");
  const NodeId sw = c.add_node(NodeKind::kSwitch, "sw", "pcie-switch");
  for (int i : {0, 2, 3}) c.connect(g[i], sw, BytesPerSecond(31.5e9), Seconds(1e-6), "pcie4");
  NetworkFabric f(c, cat);
  for (const auto& route : f.routes(g[0], g[2])) {
    REQUIRE(route.size() == 2);
    CHECK(c.link(route[0]).kind == "nvlink3");
    CHECK(c.link(route[1]).kind == "nvlink3");
  }
  const auto& direct = f.first_route(g[0], g[3]);
  REQUIRE(direct.size() == 2);
  CHECK(c.link(direct[0]).kind == "pcie4");
}

TEST_CASE("topology stats against closed forms") {
  // Expected: a k-ary n-torus cut in half across its first dimension loses 2 k^(n-1)
  // cables (k^(n-1) without wraparound): for 4x4x4 at 45 GB/s, 2 x 16 x 45 = 1440 GB/s
  // (720 as a mesh). Its diameter is n floor(k/2) = 6 hops (n (k-1) = 9 as a mesh).
  // Four DGX H100 have full bisection: 16 GPUs x 50 GB/s = 800 GB/s between the halves,
  // each GPU injects 450 + 50 = 500 GB/s, and the farthest GPUs are 4 hops apart.
  const Catalog cat = Catalog::builtin();
  for (bool wrap : {true, false}) {
    Cluster c;
    add_torus(c, cat, "t", "tpu-v4", {4, 4, 4}, {wrap, wrap, wrap}, "ici-v4");
    const TopologyStats s = topology_stats(c);
    CHECK(s.bisection_gbytes_per_s == Approx(wrap ? 1440.0 : 720.0));
    // The maximum flow between the halves agrees with the closed form.
    const auto chips = c.accelerators();
    const std::vector<NodeId> low(chips.begin(), chips.begin() + 32), high(chips.begin() + 32, chips.end());
    CHECK(c.max_flow(low, high).value() / 1e9 == Approx(wrap ? 1440.0 : 720.0));
    CHECK(s.diameter_hops == (wrap ? 6u : 9u));
    CHECK(s.diameter_exact);
    CHECK(s.links_by_kind.at("ici-v4").cables == (wrap ? 192u : 144u));
  }
  // The smallest halving of a 4x4x8 torus cuts its longest dimension: 2 x 4 x 4 cables
  // x 45 GB/s = 1440 GB/s (the rank-order halving, across dimension 0, gives 2880).
  PresetOptions slice;
  slice.dims = std::vector<int>{4, 4, 8};
  const Cluster long_torus = build_preset(cat, "tpu-v4-pod", slice);
  const TopologyStats lt = topology_stats(long_torus);
  CHECK(lt.bisection_gbytes_per_s == Approx(1440.0));
  CHECK(lt.bisection_cut == "torus dimension 2 (closed form)");
  REQUIRE(long_torus.tori().size() == 1);
  TorusRouter dor(long_torus, long_torus.tori()[0]);
  CHECK(dor.route(long_torus.accelerators()[0], long_torus.accelerators().back()).size() == 3);
  // A leaf/spine of 16 endpoints, 8 per leaf, at 2:1: each leaf has 4 uplinks, so the
  // halves exchange 4 x 50 = 200 GB/s = (N/2) x 50 / 2, and the leaves report 2:1.
  {
    Cluster f;
    std::vector<NodeId> e;
    for (int i = 0; i < 16; ++i) e.push_back(f.add_node(NodeKind::kAccelerator, "a" + std::to_string(i), "h100-sxm"));
    add_fat_tree(f, cat, "f", e, 8, 2.0, "ib-ndr", "ib-ndr");
    const TopologyStats fs = topology_stats(f);
    CHECK(fs.bisection_gbytes_per_s == Approx(200.0));
    CHECK(fs.oversubscription.at("leaf") == Approx(2.0));
  }
  // Llama 3's pods: 192 leaves per pod under 16 spines, 28 cores per plane: each spine has
  // 192 links down and 28 up, 192/28 = 6.9:1 (the paper's 1:7); leaves 1:1. 400 servers
  // = 200 racks, two pods.
  {
    const TopologyStats ls = topology_stats(build_preset(cat, "llama3-roce", with_nodes(400)));
    CHECK(ls.oversubscription.at("leaf") == Approx(1.0));
    CHECK(ls.oversubscription.at("spine") == Approx(192.0 / 28.0));
  }
  const TopologyStats h = topology_stats(build_preset(cat, "dgx-h100", with_nodes(4)));
  CHECK(h.bisection_gbytes_per_s == Approx(800.0));
  CHECK(h.injection_min_gbytes_per_s == Approx(500.0));
  CHECK(h.injection_max_gbytes_per_s == Approx(500.0));
  CHECK(h.diameter_hops == 4);
  CHECK(h.nodes_by_kind.at("accelerator") == 32);
  CHECK(h.nodes_by_kind.at("switch") == 16);
  CHECK(h.accelerators_by_model.at("h100-sxm") == 32);
  CHECK(h.links_by_kind.at("ib-ndr").cables == 64);
}

TEST_CASE("explicit topologies: a JSON round trip gives the same cluster") {
  // Expected: a preset written in the explicit format and read back has the same nodes,
  // links (bit for bit, even a latency of 0.6 us that decimal scaling would perturb) and
  // stats, and writes the same bytes again.
  const Catalog cat = Catalog::builtin();
  {
    const Cluster h = build_preset(cat, "dgx-h100", with_nodes(2));
    const Cluster back = read_explicit_topology(nlohmann::json::parse(write_explicit_topology(h)), cat, "h.json");
    for (std::uint32_t l = 0; l < h.link_count(); ++l) {
      CHECK(back.link(LinkId(l)).latency == h.link(LinkId(l)).latency);
      CHECK(back.link(LinkId(l)).bandwidth == h.link(LinkId(l)).bandwidth);
    }
  }
  const Cluster a = build_preset(cat, "llama3-roce", with_nodes(4));
  const std::string text = write_explicit_topology(a);
  const Cluster b = read_explicit_topology(nlohmann::json::parse(text), cat, "t.json");
  CHECK(b.node_count() == a.node_count());
  CHECK(b.link_count() == a.link_count());
  CHECK(write_explicit_topology(b) == text);
  const auto sa = topology_stats(a), sb = topology_stats(b);
  CHECK(sb.bisection_gbytes_per_s == Approx(sa.bisection_gbytes_per_s));
  CHECK(sb.diameter_hops == sa.diameter_hops);
  // DGX H100 servers sharing 2 NICs each (PCIe 5 switches, NIC nodes) survive it too.
  PresetOptions shared = with_nodes(2);
  shared.nics_per_node = 2;
  const Cluster n = build_preset(cat, "dgx-h100", shared);
  const std::string ntext = write_explicit_topology(n);
  const Cluster nb = read_explicit_topology(nlohmann::json::parse(ntext), cat, "n.json");
  CHECK(write_explicit_topology(nb) == ntext);
  CHECK(topology_stats(nb).links_by_kind.at("pcie5").cables == 2 * (8 + 2));
  CHECK(topology_stats(nb).bisection_gbytes_per_s == Approx(2 * 50.0));
}

TEST_CASE("explicit topologies keep the tori, so routing and bisection survive a round trip") {
  // Expected: a 4x4x8 v4 slice written and read back still has its torus: the bisection
  // across dimension 2 (1440 GB/s, closed form) and 3-hop dimension-order corner routes.
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.dims = std::vector<int>{4, 4, 8};
  const Cluster a = build_preset(cat, "tpu-v4-pod", o);
  const Cluster b = read_explicit_topology(nlohmann::json::parse(write_explicit_topology(a)), cat, "t.json");
  REQUIRE(b.tori().size() == 1);
  const TopologyStats s = topology_stats(b);
  CHECK(s.bisection_gbytes_per_s == Approx(1440.0));
  CHECK(s.bisection_cut == "torus dimension 2 (closed form)");
  CHECK(write_explicit_topology(b) == write_explicit_topology(a));
  CHECK_THROWS_WITH_AS(read_explicit_topology(nlohmann::json::parse(R"({"nodes": [{"name": "g0", "kind": "accelerator",
      "model": "tpu-v4"}], "links": [], "tori": [{"dims": [2], "wrap": [false], "chips": ["g0"]}]})"), cat, "t.json"),
      "t.json: tori.0.chips: expected 2 chip names (the product of dims), got 1", std::exception);
  // A torus whose chips and links disagree is refused with the field named (the router
  // would otherwise step along a link that is not there): a line of 4 declared a ring
  // (no wrap-around link), a ring listed out of order, a chip listed twice, no dims.
  const std::string nodes = R"("nodes": [{"name": "c0", "kind": "accelerator", "model": "tpu-v4"},
      {"name": "c1", "kind": "accelerator", "model": "tpu-v4"}, {"name": "c2", "kind": "accelerator", "model": "tpu-v4"},
      {"name": "c3", "kind": "accelerator", "model": "tpu-v4"}])";
  const std::string line = R"("links": [{"a": "c0", "b": "c1", "gbytes_per_s": 10}, {"a": "c1", "b": "c2", "gbytes_per_s": 10},
      {"a": "c2", "b": "c3", "gbytes_per_s": 10}])";
  const std::string ring = R"("links": [{"a": "c0", "b": "c1", "gbytes_per_s": 10}, {"a": "c1", "b": "c2", "gbytes_per_s": 10},
      {"a": "c2", "b": "c3", "gbytes_per_s": 10}, {"a": "c3", "b": "c0", "gbytes_per_s": 10}])";
  auto read = [&](const std::string& links, const std::string& torus) {
    return read_explicit_topology(nlohmann::json::parse("{" + nodes + ", " + links + ", \"tori\": [" + torus + "]}"), cat, "t.json");
  };
  CHECK(read(ring, R"({"dims": [4], "wrap": [true], "chips": ["c0", "c1", "c2", "c3"]})").tori().size() == 1);
  CHECK(read(line, R"({"dims": [4], "wrap": [false], "chips": ["c0", "c1", "c2", "c3"]})").tori().size() == 1);
  CHECK_THROWS_WITH_AS(read(line, R"({"dims": [4], "wrap": [true], "chips": ["c0", "c1", "c2", "c3"]})"),
                       doctest::Contains("t.json: tori.0: chips 'c3' and 'c0' are neighbours along dimension 0 (its wrap-around)"),
                       InputError);
  CHECK_THROWS_WITH_AS(read(ring, R"({"dims": [4], "wrap": [true], "chips": ["c0", "c2", "c1", "c3"]})"),
                       doctest::Contains("t.json: tori.0: chips 'c0' and 'c2'"), InputError);
  CHECK_THROWS_WITH_AS(read(ring, R"({"dims": [4], "wrap": [true], "chips": ["c0", "c1", "c1", "c3"]})"),
                       "t.json: tori.0.chips.2: 'c1' is listed in a torus already", InputError);
  CHECK_THROWS_WITH_AS(read(ring, R"({"dims": [], "wrap": [], "chips": []})"), "t.json: tori.0.dims: expected at least one dimension",
                       InputError);
}

TEST_CASE("explicit topologies: links from the catalog or given, asymmetric links") {
  // Expected: a cable of 18 nvlink4 links gets 18 x 25 = 450 GB/s and the catalog's nvlink4
  // latency (1.7 us); a given link keeps its
  // 100 GB/s forward and 50 GB/s back.
  const Catalog cat = Catalog::builtin();
  const Cluster c = read_explicit_topology(nlohmann::json::parse(R"({
    "nodes": [{"name": "g0", "kind": "accelerator", "model": "h100-sxm"},
              {"name": "g1", "kind": "accelerator", "model": "h100-sxm"},
              {"name": "sw", "kind": "switch", "model": "nvswitch"}],
    "links": [{"a": "g0", "b": "sw", "link": "nvlink4", "count": 18},
              {"a": "g1", "b": "sw", "gbytes_per_s": 100, "reverse_gbytes_per_s": 50, "latency_us": 2}]})"),
                                           cat, "t.json");
  CHECK(c.link(LinkId(0)).bandwidth.value() == Approx(450e9));
  CHECK(c.link(LinkId(0)).latency.value() == Approx(1.7e-6));
  CHECK(c.link(LinkId(0)).latency.value() == Approx(cat.link("nvlink4").latency.value()));
  CHECK(c.link(LinkId(2)).bandwidth.value() == Approx(100e9));
  CHECK(c.link(LinkId(3)).bandwidth.value() == Approx(50e9));
  CHECK(c.link(LinkId(2)).kind == "custom");
  // The bisection is the weaker direction: g1 sends at 100 GB/s but receives at 50.
  CHECK(topology_stats(c).bisection_gbytes_per_s == Approx(50.0));
}

TEST_CASE("explicit topologies: errors name the element") {
  // Expected: the exact message for each mistake, prefixed with the file name.
  const Catalog cat = Catalog::builtin();
  auto bad = [&](const char* text, const char* message) {
    INFO(text);
    CHECK_THROWS_WITH_AS(read_explicit_topology(nlohmann::json::parse(text), cat, "t.json"), message, std::exception);
  };
  const std::string two = R"("nodes": [{"name": "g0", "kind": "accelerator", "model": "h100-sxm"},
                                       {"name": "g1", "kind": "accelerator", "model": "h100-sxm"}])";
  bad(("{" + two + R"(, "links": [{"a": "g0", "b": "g2", "link": "nvlink4"}]})").c_str(),
      "t.json: links.0.b: no node named 'g2' (did you mean 'g0'?)");
  bad(("{" + two + R"(, "links": []})").c_str(), "t.json: accelerator 'g1' cannot reach 'g0': no path of links joins them");
  bad(("{" + two + R"(, "links": [{"a": "g0", "b": "g0", "link": "nvlink4"}]})").c_str(), "t.json: links.0: joins 'g0' to itself");
  bad(("{" + two + R"(, "links": [{"a": "g0", "b": "g1"}]})").c_str(), "t.json: links.0.gbytes_per_s: missing (a required field)");
  bad(("{" + two + R"(, "links": [{"a": "g0", "b": "g1", "gbytes_per_s": 0}]})").c_str(),
      "t.json: links.0.gbytes_per_s: expected a number from 1e-06 to 1e+06, got 0");
  bad(R"({"nodes": [{"name": "g0", "kind": "accelerator", "model": "h100-sxm"},
                    {"name": "g0", "kind": "switch"}], "links": []})",
      "t.json: nodes.1.name: 'g0' is already the name of nodes.0");
  bad(R"({"nodes": [{"name": "g0", "kind": "accelerator", "model": "h10"}], "links": []})",
      "t.json: nodes.0.model: unknown accelerator 'h10' (did you mean 'h100-sxm'?); the catalog has: a100-40gb, a100-80gb, "
      "b200, h100-sxm, h200, mi300x, p100, tpu-v3, tpu-v4, tpu-v5p, v100-32gb");
  bad(R"({"nodes": [{"name": "g0", "kind": "gpu"}], "links": []})",
      "t.json: nodes.0.kind: expected one of \"accelerator\", \"host\", \"nic\", \"switch\", got \"gpu\"");
  // A link's kind picks its catalog efficiency: a misspelt one silently ran at line rate.
  bad(("{" + two + R"(, "links": [{"a": "g0", "b": "g1", "gbytes_per_s": 25, "kind": "ib-hrd"}]})").c_str(),
      "t.json: links.0.kind: unknown link kind 'ib-hrd' (did you mean 'ib-hdr'?); a kind names a catalog link (its "
      "efficiency applies) or is \"custom\"");
  // A catalog link is its own kind: another beside it was silently taken.
  bad(("{" + two + R"(, "links": [{"a": "g0", "b": "g1", "link": "ib-ndr", "kind": "nvlink4"}]})").c_str(),
      "t.json: links.0.kind: 'nvlink4' beside link 'ib-ndr': a catalog link is of its own kind; give one of the two");
}

TEST_CASE("dimension-order routing on a torus") {
  // Expected: in a 4x4 torus from (0,0) to (2,3), dimension 0 first: a tie (2 hops either
  // way) goes the positive way through (1,0) and (2,0), then one hop the short way round
  // to (2,3). For every pair of a 4x6x3 torus and mesh the DOR hop count equals the
  // minimum-hop count.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  const auto chips = add_torus(c, cat, "t", "tpu-v4", {4, 4}, {true, true}, "ici-v4");
  TorusRouter r(c, chips, {4, 4}, {true, true});
  const auto& path = r.route(chips[0], chips[2 * 4 + 3]);
  REQUIRE(path.size() == 3);
  CHECK(c.node(c.link(path[0]).to).name == "t(1,0)");
  CHECK(c.node(c.link(path[1]).to).name == "t(2,0)");
  CHECK(c.node(c.link(path[2]).to).name == "t(2,3)");
  for (bool wrap : {true, false}) {
    Cluster t;
    const std::vector<bool> w(3, wrap);
    const auto all = add_torus(t, cat, "t", "tpu-v4", {4, 6, 3}, w, "ici-v4");
    TorusRouter dor(t, all, {4, 6, 3}, w);
    ShortestPathRouter bfs(t);
    for (std::size_t s = 0; s < all.size(); s += 7) {
      for (std::size_t d = 0; d < all.size(); ++d) {
        const auto& p = dor.route(all[s], all[d]);
        CHECK(p.size() == bfs.route(all[s], all[d]).size());
        // the path is connected and ends at the destination
        NodeId at = all[s];
        for (LinkId l : p) {
          CHECK(t.link(l).from == at);
          at = t.link(l).to;
        }
        CHECK(at == all[d]);
      }
    }
  }
}

TEST_CASE("equal-cost paths in fat trees") {
  // Expected: 16 accelerators, 8 per leaf, full bisection (8 spines): accelerators under
  // different leaves have 8 minimum-hop paths (one per spine), under one leaf 1. In four
  // DGX H100, GPU 0 of node 0 to GPU 1 of node 1 (4 hops) has 6: 4 over the spines of
  // rail 0 to rail 1, one through node 0's NVSwitch then rail 1, one through rail 0 then
  // node 1's NVSwitch. A limit caps the set.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  std::vector<NodeId> acc;
  for (int i = 0; i < 16; ++i) acc.push_back(c.add_node(NodeKind::kAccelerator, "a" + std::to_string(i), "h100-sxm"));
  add_fat_tree(c, cat, "f", acc, 8, 1.0, "ib-ndr", "ib-ndr");
  CHECK(shortest_paths(c, acc[0], acc[9]).size() == 8);
  CHECK(shortest_paths(c, acc[0], acc[5]).size() == 1);
  CHECK(shortest_paths(c, acc[0], acc[9], 3).size() == 3);
  CHECK(shortest_paths(c, acc[0], acc[0]).size() == 1);
  const Cluster h = build_preset(cat, "dgx-h100", with_nodes(4));
  const auto g = h.accelerators();
  const auto paths = shortest_paths(h, g[0], g[9]);
  CHECK(paths.size() == 6);
  for (const auto& p : paths) CHECK(p.size() == 4);
  CHECK(shortest_paths(h, g[0], g[9]) == paths);  // deterministic
}

TEST_CASE("a DGX-1 hybrid cube-mesh") {
  // Expected: 24 NVLinks of 25 GB/s as 16 cables (8 doubled), so every V100 has 6 x 25 =
  // 150 GB/s of NVLink (shared/hardware.md); GPU 0 and GPU 5 are not neighbours (2 hops);
  // between the quads {0..3} and {4..7} the cross cables carry 50 + 50 + 25 + 25 = 150
  // GB/s. Two servers joined over their 4 EDR NICs each.
  const Catalog cat = Catalog::builtin();
  Cluster c;
  std::vector<NodeId> nics;
  const auto g = add_dgx1_node(c, cat, "d", &nics);
  CHECK(nics.size() == 4);
  CHECK(topology_stats(c).links_by_kind.at("nvlink2").cables == 16);
  for (NodeId gpu : g) {
    double nvlink = 0;
    for (LinkId l : c.out_links(gpu)) {
      if (c.link(l).kind == "nvlink2") nvlink += c.link(l).bandwidth.value();
    }
    CHECK(nvlink == Approx(150e9));
  }
  ShortestPathRouter r(c);
  CHECK(r.route(g[0], g[5]).size() == 2);
  CHECK(r.route(g[0], g[4]).size() == 1);
  const std::vector<NodeId> low(g.begin(), g.begin() + 4), high(g.begin() + 4, g.end());
  CHECK(c.max_flow(low, high).value() == Approx(150e9));
  const Cluster two = build_preset(cat, "dgx1-v100", with_nodes(2));
  two.validate();
  CHECK(two.accelerators().size() == 16);
  CHECK(topology_stats(two).links_by_kind.at("ib-edr").cables == 8 + 4 * 2);
}

TEST_CASE("TPU pods joined over the data-centre network") {
  // Expected: two 4x4x4 v4 slices: 128 chips, 32 hosts (4 chips each) with one 25 GB/s DCN
  // link each to one switch; chips of different pods are 4 hops apart at most through the
  // network (chip, host, DCN switch, host, chip) and the pods exchange at most 16 x 25 =
  // 400 GB/s: the bisection, across the DCN.
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.dims = std::vector<int>{4, 4, 4};
  o.pods = 2;
  const Cluster c = build_preset(cat, "tpu-v4-pod", o);
  c.validate();
  CHECK(c.accelerators().size() == 128);
  const TopologyStats s = topology_stats(c);
  CHECK(s.nodes_by_kind.at("host") == 32);
  CHECK(s.links_by_kind.at("dcn-tpu-host").cables == 32);
  CHECK(s.bisection_gbytes_per_s == Approx(400.0));
  ShortestPathRouter r(c);
  CHECK(r.route(c.accelerators()[0], c.accelerators()[64]).size() == 4);
  PresetOptions bad;
  bad.pods = 2;
  CHECK_THROWS_WITH_AS(build_preset(cat, "dgx-h100", bad), "pods: only TPU presets are made of pods (GPU presets take a server count)",
                       std::exception);
}

TEST_CASE("a Selene-like DGX A100 SuperPOD beyond one scalable unit") {
  // Expected: 40 servers = 2 units of 20: 16 rail leaves, 20 spines per unit (40), and 20
  // core planes of 8 cores (160); full bisection: the units exchange 160 GPUs x 25 GB/s
  // = 4000 GB/s; leaf and spine both 1:1.
  const Catalog cat = Catalog::builtin();
  const Cluster c = build_preset(cat, "dgx-a100", with_nodes(40));
  c.validate();
  const TopologyStats s = topology_stats(c);
  CHECK(c.accelerators().size() == 320);
  CHECK(s.nodes_by_kind.at("switch") == 40 + 16 + 40 + 160);  // NVSwitches, leaves, spines, cores
  CHECK(s.bisection_gbytes_per_s == Approx(4000.0));
  CHECK(s.oversubscription.at("leaf") == Approx(1.0));
  CHECK(s.oversubscription.at("spine") == Approx(1.0));
}

TEST_CASE("routes inside a TPU pod stay on the chips' own links") {
  // Expected: with two 8x8x8 pods joined over the DCN, a route between chips of one pod
  // uses only ICI links (dimension order: 4 + 4 + 4 = 12 hops from corner to centre),
  // although the path through hosts and the DCN switch has 4 hops; between pods the route
  // crosses the DCN.
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.dims = std::vector<int>{8, 8, 8};
  o.pods = 2;
  const Cluster c = build_preset(cat, "tpu-v4-pod", o);
  ShortestPathRouter r(c);
  const auto chips = c.accelerators();
  const auto& inside = r.route(chips[0], chips[4 * 64 + 4 * 8 + 4]);
  CHECK(inside.size() == 12);
  for (LinkId l : inside) CHECK(c.link(l).kind == "ici-v4");
  const auto& across = r.route(chips[0], chips[512]);
  bool dcn = false;
  for (LinkId l : across) dcn = dcn || c.link(l).kind == "dcn-tpu-host";
  CHECK(dcn);
}

TEST_CASE("spread shortest paths leave through different spines") {
  // Expected: two leaves joined by four spines: from a host on leaf A to one on leaf B,
  // asking for 8 paths gives the 4 distinct minimum-hop paths (4 hops each), one per spine.
  Cluster c;
  const NodeId a = c.add_node(NodeKind::kAccelerator, "a"), b = c.add_node(NodeKind::kAccelerator, "b");
  const NodeId la = c.add_node(NodeKind::kSwitch, "la"), lb = c.add_node(NodeKind::kSwitch, "lb");
  c.connect(a, la, BytesPerSecond(1e9), Seconds(0.0), "x");
  c.connect(b, lb, BytesPerSecond(1e9), Seconds(0.0), "x");
  for (int s = 0; s < 4; ++s) {
    const NodeId sp = c.add_node(NodeKind::kSwitch, "s" + std::to_string(s));
    c.connect(la, sp, BytesPerSecond(1e9), Seconds(0.0), "x");
    c.connect(lb, sp, BytesPerSecond(1e9), Seconds(0.0), "x");
  }
  PathScratch scratch;
  const auto paths = spread_shortest_paths(c, a, b, 8, scratch);
  REQUIRE(paths.size() == 4);
  std::set<std::uint32_t> spines;
  for (const auto& p : paths) {
    CHECK(p.size() == 4);
    spines.insert(c.link(p[1]).to.value);
  }
  CHECK(spines.size() == 4);
  CHECK(spread_shortest_paths(c, a, b, 8, scratch) == paths);  // deterministic, scratch reusable
}

TEST_CASE("walks from many sources share one table of next hops to their destination") {
  // Expected: spread_paths over one NextHopTable kept across every source of a
  // destination (then cleared and refilled for the next one) finds, in order, the walks
  // that a fresh search per pair finds: a node's next hops depend on the node and on
  // how much of the walk's leading run is left, not on where the walk began. Checked on
  // DGX H100 servers with NVLink as the leading links (a walk rides NVLink first to the
  // GPU on its destination's rail), widened candidate sets and single first walks, and
  // on two pods of DGX A100 with a switch as a destination, and on DGX-1 servers (NVLink
  // cube-mesh: a GPU is the source of some walks and passed on NVLink by others).
  const Catalog cat = Catalog::builtin();
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    PresetOptions o;
    o.nodes = k == 0 ? 40 : (k == 1 ? 24 : 8);
    const Cluster c = build_preset(cat, k == 0 ? "dgx-h100" : (k == 1 ? "dgx-a100" : "dgx1-v100"), o);
    std::vector<bool> lead(c.link_count(), false);
    for (std::size_t l = 0; l < c.link_count(); ++l) lead[l] = c.link(LinkId(static_cast<std::uint32_t>(l))).kind.starts_with("nvlink");
    const auto& acc = c.accelerators();
    std::vector<std::uint32_t> dist;
    NextHopTable table(c, dist, nullptr, &lead);
    PathScratch scratch;
    std::size_t compared = 0;
    for (const NodeId dst : {acc[3], acc[acc.size() - 1], acc[9], NodeId(static_cast<std::uint32_t>(c.node_count() - 1))}) {
      distances_from(c, dst, dist);
      table.clear();
      for (std::size_t i = 0; i < acc.size(); i += (k == 2 ? 1 : 3)) {
        const NodeId src = acc[i];
        if (src == dst) continue;
        for (const std::size_t count : {std::size_t{1}, NetworkFabric::kMaxCandidates}) {
          const std::size_t widen = count == 1 ? 0 : 2 * NetworkFabric::kMaxCandidates;
          std::vector<LinkId> shared, alone;
          const std::size_t n = spread_paths(table, src, dst, count, shared, widen);
          const std::size_t m = spread_shortest_paths(c, src, dst, count, scratch, alone, nullptr, widen, &lead);
          CHECK(n == m);
          CHECK(shared == alone);
          ++compared;
        }
      }
    }
    CHECK(compared > 50);
  }
  // A node reached with the run spent has more next hops than the same node as a source:
  // s -> x unflagged, then x -> y (flagged) or x -> z, each on to d. A walk from s
  // (no run: its first link is not flagged) may leave x by either; walks from x must
  // take the flagged link first. Expected: 2 walks from s, 1 from x, in either order.
  Cluster c;
  const NodeId s = c.add_node(NodeKind::kAccelerator, "s"), x = c.add_node(NodeKind::kAccelerator, "x"),
               y = c.add_node(NodeKind::kSwitch, "y"), z = c.add_node(NodeKind::kSwitch, "z"),
               d = c.add_node(NodeKind::kAccelerator, "d");
  c.connect(s, x, BytesPerSecond(1e9), Seconds(0.0), "pcie");
  c.connect(x, y, BytesPerSecond(1e9), Seconds(0.0), "nvlink");
  c.connect(x, z, BytesPerSecond(1e9), Seconds(0.0), "pcie");
  c.connect(y, d, BytesPerSecond(1e9), Seconds(0.0), "pcie");
  c.connect(z, d, BytesPerSecond(1e9), Seconds(0.0), "pcie");
  std::vector<bool> lead(c.link_count(), false);
  for (std::size_t l = 0; l < c.link_count(); ++l) lead[l] = c.link(LinkId(static_cast<std::uint32_t>(l))).kind == "nvlink";
  std::vector<std::uint32_t> dist;
  distances_from(c, d, dist);
  for (const bool s_first : {true, false}) {
    CAPTURE(s_first);
    NextHopTable table(c, dist, nullptr, &lead);
    std::vector<LinkId> from_s, from_x;
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == s_first) {
        CHECK(spread_paths(table, s, d, 4, from_s) == 2);
      } else {
        CHECK(spread_paths(table, x, d, 4, from_x) == 1);
      }
    }
    REQUIRE(from_x.size() == 2);
    CHECK(c.link(from_x[0]).to == y);
  }
}

TEST_CASE("path searches meet in the middle and find what a full search from dst finds") {
  // Expected: the bidirectional distance search gives exactly the paths of the plain
  // rule applied to full breadth-first distances to dst (re-implemented here from the
  // documented rule: at hop d of walk j take next hop (j + (salt >> (d mod 32)) + d) mod
  // n among the links that bring dst one hop closer), for pairs of accelerators and
  // switches on a multi-pod DGX A100 fabric, DGX H100 SuperPODs of one and two pods and
  // Llama 3's RoCE Clos, including src == dst; and shortest_paths returns paths of that
  // length.
  const Catalog cat = Catalog::builtin();
  std::vector<Cluster> clusters;
  PresetOptions o;
  o.nodes = 48;
  clusters.push_back(build_preset(cat, "dgx-a100", o));
  o.nodes = 40;
  clusters.push_back(build_preset(cat, "dgx-h100", o));
  o.nodes = 16;
  clusters.push_back(build_preset(cat, "llama3-roce", o));
  o.nodes = 160;  // two pods under core switches: paths between them meet at every core
  clusters.push_back(build_preset(cat, "dgx-h100", o));
  for (const Cluster& c : clusters) {
    PathScratch scratch;
    std::uint64_t x = 12345;
    for (int trial = 0; trial < 60; ++trial) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const NodeId src(static_cast<std::uint32_t>((x >> 33) % c.node_count()));
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const NodeId dst = trial == 0 ? src : NodeId(static_cast<std::uint32_t>((x >> 33) % c.node_count()));
      // Reference: full distances to dst.
      std::vector<std::uint32_t> dist(c.node_count(), ~0u);
      std::vector<NodeId> queue{dst};
      dist[dst.value] = 0;
      for (std::size_t h = 0; h < queue.size(); ++h) {
        for (LinkId l : c.out_links(queue[h])) {
          const NodeId v = c.link(l).to;
          if (dist[v.value] == ~0u) {
            dist[v.value] = dist[queue[h].value] + 1;
            queue.push_back(v);
          }
        }
      }
      std::vector<std::vector<LinkId>> expected;
      const std::uint64_t salt = (std::uint64_t{src.value} * 0x9E3779B97F4A7C15ull) ^ (dst.value * 0xC2B2AE3D27D4EB4Full);
      for (std::size_t j = 0; j < 16; ++j) {
        std::vector<LinkId> path;
        NodeId at = src;
        for (std::uint32_t d = 0; at != dst; ++d) {
          std::vector<LinkId> next;
          for (LinkId l : c.out_links(at)) {
            if (dist[c.link(l).to.value] + 1 == dist[at.value]) next.push_back(l);
          }
          path.push_back(next[(j + (salt >> (d % 32)) + d) % next.size()]);
          at = c.link(path.back()).to;
        }
        if (std::find(expected.begin(), expected.end(), path) == expected.end()) expected.push_back(path);
      }
      INFO(c.node(src).name, " -> ", c.node(dst).name);
      CHECK(spread_shortest_paths(c, src, dst, 16, scratch) == expected);
      for (const auto& p : shortest_paths(c, src, dst, 4)) CHECK(p.size() == dist[src.value]);
    }
  }
}
