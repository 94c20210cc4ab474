// SBP signatures, boxing and the communication volume of distributed matmul schemes,
// against their published forms.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "sim/collectives.hpp"
#include "sim/compute_model.hpp"
#include "strategies/sbp_lowering.hpp"
#include "strategies/sbp_mcmc.hpp"
#include "strategies/sbp_search.hpp"
#include "strategies/stage_costs.hpp"
#include "sim/core/engine.hpp"
#include "strategies/sbp.hpp"
#include "support/input_error.hpp"
#include "topology/presets.hpp"
#include "workloads/presets.hpp"
#include "workloads/transformer.hpp"

using namespace ddlsim;
using ddlsim::test::Approx;

namespace {
DeviceMesh mesh_of(std::vector<int> dims) {
  DeviceMesh m;
  m.dims = std::move(dims);
  for (std::size_t i = 0; i < m.size(); ++i) m.devices.push_back(NodeId(static_cast<std::uint32_t>(i)));
  return m;
}
}  // namespace

TEST_CASE("matmul signatures: the six rules per mesh dimension, and nothing else") {
  // Expected: S(0) x B -> S(0), B x S(1) -> S(1), S(1) x S(0) -> P, P x B -> P,
  // B x P -> P, B x B -> B are valid; a split of the same axis on both inputs, or a
  // k-split whose result is not a partial sum, is not; a 2-D mesh has 6^2 signatures.
  CHECK(valid_matmul({{S(0)}, {kB}, {S(0)}}));
  CHECK(valid_matmul({{kB}, {S(1)}, {S(1)}}));
  CHECK(valid_matmul({{S(1)}, {S(0)}, {kP}}));
  CHECK(valid_matmul({{kP}, {kB}, {kP}}));
  CHECK(valid_matmul({{kB}, {kP}, {kP}}));
  CHECK(valid_matmul({{kB}, {kB}, {kB}}));
  CHECK_FALSE(valid_matmul({{S(0)}, {S(0)}, {S(0)}}));
  CHECK_FALSE(valid_matmul({{S(1)}, {S(0)}, {kB}}));
  CHECK_FALSE(valid_matmul({{kP}, {kP}, {kP}}));
  CHECK(valid_matmul({{S(0), S(1)}, {kB, S(0)}, {S(0), kP}}));   // data x model split
  CHECK_FALSE(valid_matmul({{S(0), S(1)}, {kB, kB}, {S(0), kP}}));
  const auto all = matmul_signatures(2);
  CHECK(all.size() == 36);
  for (const auto& s : all) CHECK(valid_matmul(s));
  CHECK(to_string(all[2].a) == "[S(0), S(1)]");
}

TEST_CASE("local shapes divide split axes by their mesh dimension") {
  const DeviceMesh m = mesh_of({2, 4});
  CHECK(local_shape({64, 32}, {S(0), S(1)}, m) == std::vector<std::int64_t>{32, 8});
  CHECK(local_shape({64, 32}, {S(0), S(0)}, m) == std::vector<std::int64_t>{8, 32});
  CHECK(local_shape({64, 32}, {kP, kB}, m) == std::vector<std::int64_t>{64, 32});
  CHECK_THROWS_AS(local_shape({64}, {S(1), kB}, m), InputError);
}

TEST_CASE("boxing on one mesh dimension: the collective and the bytes each device sends") {
  // Expected on a group of n = 8 and a tensor of T bytes: P -> B all-reduce 2(n-1)/n T;
  // P -> S reduce-scatter and S -> B all-gather (n-1)/n T; S(0) -> S(1) all-to-all of
  // T/n per device, (n-1)/n of it sent; B -> S, B -> P, S -> P local.
  const DeviceMesh m = mesh_of({8});
  const double T = 1 << 20;
  auto one = [&](Sbp a, Sbp b) { return boxing_steps({a}, {b}, T, m); };
  CHECK(one(kP, kB).at(0).op == CollectiveOp::kAllReduce);
  CHECK(boxing_bytes_per_device({kP}, {kB}, T, m) == Approx(2.0 * 7 / 8 * T));
  CHECK(one(kP, S(0)).at(0).op == CollectiveOp::kReduceScatter);
  CHECK(boxing_bytes_per_device({kP}, {S(0)}, T, m) == Approx(7.0 / 8 * T));
  CHECK(one(S(1), kB).at(0).op == CollectiveOp::kAllGather);
  CHECK(boxing_bytes_per_device({S(1)}, {kB}, T, m) == Approx(7.0 / 8 * T));
  CHECK(one(S(0), S(1)).at(0).op == CollectiveOp::kAllToAll);
  CHECK(boxing_bytes_per_device({S(0)}, {S(1)}, T, m) == Approx(7.0 / 8 * T / 8));
  for (auto [a, b] : {std::pair{kB, S(0)}, std::pair{kB, kP}, std::pair{S(0), kP}}) {
    CHECK(one(a, b).at(0).local);
    CHECK(boxing_bytes_per_device({a}, {b}, T, m) == 0.0);
  }
  CHECK(boxing_steps({S(0)}, {S(0)}, T, m).empty());
}

TEST_CASE("boxing over several mesh dimensions cuts first and gathers last, and its dual mirrors it") {
  // Expected, T bytes:
  //  - [P, P] -> [B, B] on 2 x 8 (a 2-D data-parallel gradient): reduce-scatter over the
  //    8, all-reduce of T/8 over the 2, all-gather over the 8: 7/8 T + 1/8 T + 7/8 T =
  //    1.875 T per device, as a flat ring over 16 (2 x 15/16 T), not all-reduces of T
  //    over each (T + 1.75 T);
  //  - [P, P] -> [B, S(0)] and [P, P] -> [S(0), B] on 4 x 4 alike: reduce-scatter T
  //    (3/4 T), then all-reduce T/4 (3/8 T): 1.125 T;
  //  - [S(1), S(1)] -> [B, B] on 2 x 8: all-gather of T/8 over the 2 first (T/16), then
  //    of T over the 8 (7/8 T); the backward's dual [P, P] -> [S(1), S(1)] reduce-scatters
  //    the same parts in the mirrored order: T over the 8, then T/8 over the 2;
  //  - for every pair of layouts on 2 x 8 and 2 x 2 x 4, the dual re-layout (gradient_sbp
  //    of both ends, swapped) moves the same (dimension, part) collectives with
  //    all-gather and reduce-scatter swapped, so the backward costs what the forward does.
  const double T = 1 << 24;
  CHECK(boxing_bytes_per_device({kP, kP}, {kB, kB}, T, mesh_of({2, 8})) == Approx(1.875 * T));
  CHECK(boxing_bytes_per_device({kP, kP}, {kB, S(0)}, T, mesh_of({4, 4})) == Approx(1.125 * T));
  CHECK(boxing_bytes_per_device({kP, kP}, {S(0), kB}, T, mesh_of({4, 4})) == Approx(1.125 * T));
  const auto gather = boxing_steps({S(1), S(1)}, {kB, kB}, T, mesh_of({2, 8}));
  REQUIRE(gather.size() == 2);
  CHECK((gather[0].mesh_dim == 0 && gather[0].bytes == Approx(T / 8)));
  CHECK((gather[1].mesh_dim == 1 && gather[1].bytes == Approx(T)));
  const auto scatter = boxing_steps({kP, kP}, {S(1), S(1)}, T, mesh_of({2, 8}));
  REQUIRE(scatter.size() == 2);
  CHECK((scatter[0].mesh_dim == 1 && scatter[0].bytes == Approx(T) && scatter[0].op == CollectiveOp::kReduceScatter));
  CHECK((scatter[1].mesh_dim == 0 && scatter[1].bytes == Approx(T / 8)));
  const Sbp kinds[] = {S(0), S(1), kB, kP};
  for (const std::vector<int>& dims : {std::vector<int>{2, 8}, std::vector<int>{2, 2, 4}}) {
    const DeviceMesh m = mesh_of(dims);
    const std::size_t D = dims.size();
    std::size_t layouts = 1;
    for (std::size_t d = 0; d < D; ++d) layouts *= 4;
    auto layout = [&](std::size_t code) {
      NdSbp s;
      for (std::size_t d = 0; d < D; ++d, code /= 4) s.push_back(kinds[code % 4]);
      return s;
    };
    auto moves = [&](const NdSbp& a, const NdSbp& b, bool dual) {
      std::vector<std::tuple<std::size_t, int, double>> out;
      for (const BoxingStep& st : boxing_steps(a, b, T, m)) {
        if (st.local) continue;
        CollectiveOp op = st.op;
        if (dual && op == CollectiveOp::kAllGather) op = CollectiveOp::kReduceScatter;
        else if (dual && op == CollectiveOp::kReduceScatter) op = CollectiveOp::kAllGather;
        out.emplace_back(st.mesh_dim, static_cast<int>(op), st.bytes);
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    int mismatches = 0;
    for (std::size_t x = 0; x < layouts; ++x) {
      for (std::size_t y = 0; y < layouts; ++y) {
        const NdSbp a = layout(x), b = layout(y);
        if (moves(a, b, false) != moves(gradient_sbp(b), gradient_sbp(a), true)) ++mismatches;
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("2D, 2.5D and 3D matmul: per-device communication against their forms") {
  // C(n, n) = A(n, n) x B(n, n), fp32 (W = 4 n^2 bytes per matrix), P devices.
  // 2D (SUMMA) on q x q, q = sqrt(P): A [S(0), S(1)] -> [S(0), B] and B [S(0), S(1)] ->
  //   [B, S(1)], each an all-gather of a W/q block: 2 (q-1)/q W/q ~ 2 W / sqrt(P).
  // 3D on q x q x q, q = P^(1/3): A [S(0), S(0), S(1)] -> [S(0), B, S(1)], B [S(1), S(1),
  //   S(0)] -> [B, S(1), S(0)], C [S(0), S(1), P] -> [S(0), S(1), S(0)], each on a W/q^2
  //   part: 3 (q-1)/q W/q^2 ~ 3 W / P^(2/3).
  // 2.5D on s x s x c, s = sqrt(P/c): A and B gathered over s within each of the c layers
  //   (parts W/(s c)), C reduce-scattered over the c layers (part W/s^2):
  //   2 (s-1)/s W/(s c) + (c-1)/c W/s^2 ~ 2 W / sqrt(c P) + W c / P.
  const double n = 8192, W = 4 * n * n;
  for (int q : {4, 8}) {
    const DeviceMesh m = mesh_of({q, q});
    const double v = boxing_bytes_per_device({S(0), S(1)}, {S(0), kB}, W, m) +
                     boxing_bytes_per_device({S(0), S(1)}, {kB, S(1)}, W, m);
    CHECK(v == Approx(2.0 * (q - 1) / q * W / q));
    CHECK(v * std::sqrt(q * q) / W == Approx(2.0 * (q - 1) / q));  // ~ 2 W / sqrt(P)
  }
  for (int q : {2, 4}) {
    const DeviceMesh m = mesh_of({q, q, q});
    const double v = boxing_bytes_per_device({S(0), S(0), S(1)}, {S(0), kB, S(1)}, W, m) +
                     boxing_bytes_per_device({S(1), S(1), S(0)}, {kB, S(1), S(0)}, W, m) +
                     boxing_bytes_per_device({S(0), S(1), kP}, {S(0), S(1), S(0)}, W, m);
    CHECK(v == Approx(3.0 * (q - 1) / q * W / (q * q)));
    CHECK(v * std::pow(q * q * q, 2.0 / 3.0) / W == Approx(3.0 * (q - 1) / q));  // ~ 3 W / P^(2/3)
  }
  for (auto [s, c] : {std::pair{4, 2}, std::pair{8, 4}}) {
    const DeviceMesh m = mesh_of({s, s, c});
    const double v = boxing_bytes_per_device({S(0), S(1), S(1)}, {S(0), kB, S(1)}, W, m) +
                     boxing_bytes_per_device({S(0), S(1), S(0)}, {kB, S(1), S(0)}, W, m) +
                     boxing_bytes_per_device({S(0), S(1), kP}, {S(0), S(1), S(0)}, W, m);
    CHECK(v == Approx(2.0 * (s - 1) / s * W / (s * c) + (c - 1.0) / c * W / (s * s)));
  }
}

TEST_CASE("boxing is priced on the real topology") {
  // Expected: P -> B over the 8 GPUs of one DGX A100 takes exactly the analytical time
  // of the chosen all-reduce on them; along the slow dimension of a 2 x 8 mesh over two
  // servers (one GPU per server per group) it takes longer than along the fast one.
  const Catalog cat = Catalog::builtin();
  PresetOptions o;
  o.nodes = 2;
  const Cluster c = build_preset(cat, "dgx-a100", o);
  NetworkFabric f(c, cat);
  DeviceMesh m;
  m.dims = {2, 8};
  m.devices.assign(c.accelerators().begin(), c.accelerators().end());
  const double T = 64 << 20;
  const CollectiveGroup server = CollectiveGroup::of(f, m.line(0, 1));
  CHECK(boxing_time({kB, kP}, {kB, kB}, T, m, f) ==
        analytical_collective_time(f, server, chosen_spec(f, server, CollectiveOp::kAllReduce, T)));
  CHECK(boxing_time({kP, kB}, {kB, kB}, T, m, f) > boxing_time({kB, kP}, {kB, kB}, T, m, f));
  CHECK(boxing_time({kB, kB}, {S(0), kB}, T, m, f) == 0.0);
}

namespace {
struct SbpRig {
  Catalog cat = Catalog::builtin();
  Cluster cluster;
  std::unique_ptr<NetworkFabric> fabric;
  std::unique_ptr<ComputeModel> compute;
  std::vector<NodeId> devices;
  // `interference`: communication beside the compute slows it (the device's
  // overlap_slowdown); off, the cost model's flow shop is the replay exactly.
  SbpRig(const char* preset, int nodes, std::size_t n, bool interference = false) {
    PresetOptions o;
    o.nodes = nodes;
    cluster = build_preset(cat, preset, o);
    fabric = std::make_unique<NetworkFabric>(cluster, cat);
    const ComputeModel model(cat.accelerator(cluster.node(cluster.accelerators()[0]).model));
    compute = std::make_unique<ComputeModel>(interference ? model : model.without_interference());
    devices.assign(cluster.accelerators().begin(), cluster.accelerators().begin() + static_cast<std::ptrdiff_t>(n));
  }
};
// An MLP block h -> 4h -> h: GeLU after the first layer, the residual add after the second.
SbpChain mlp(std::int64_t m, std::int64_t h) {
  return SbpChain{m, {{"fc1", h, 4 * h, true}, {"fc2", 4 * h, h, true}}};
}
}  // namespace

TEST_CASE("SBP costs: data parallelism and Megatron in SBP terms") {
  // Expected on 8 GPUs of one DGX A100, an MLP h -> 4h -> h on m rows: data parallelism
  // moves no activations and all-reduces each weight's gradient (the full 2 k n bytes on
  // the 8 GPUs, s each) beside the backward: fc2's while fc1's backward (b1) runs, fc1's
  // after it, so the step pays max(s, 2s - b1) of the 2s; Megatron (column then row) keeps the weights sharded (no gradient
  // all-reduce), gathers the batch-split input once and completes the partial output
  // for the residual add the cheapest way, a reduce-scatter back to the batch split
  // (Megatron's sequence parallelism), forward and backward.
  SbpRig rig("dgx-a100", 1, 8);
  const SbpChain c = mlp(8192, 4096);
  const DeviceMesh mesh{{8}, rig.devices};
  const CollectiveGroup g = CollectiveGroup::of(*rig.fabric, rig.devices);
  auto ar = [&](double bytes) {
    return analytical_collective_time(*rig.fabric, g, chosen_spec(*rig.fabric, g, CollectiveOp::kAllReduce, bytes));
  };
  const SbpCost dp = sbp_cost(c, data_parallel_plan(c, {8}), rig.devices, *rig.fabric, *rig.compute);
  CHECK(dp.boxing_s == 0.0);
  const double s = ar(4096.0 * 16384 * 2);
  CHECK(dp.gradient_sync_total_s == Approx(2 * s).epsilon(1e-12));
  double b1 = 0;
  for (const SbpStage& st : sbp_schedule(c, data_parallel_plan(c, {8}), rig.devices, *rig.fabric, *rig.compute)) {
    if (st.kind == SbpStage::Kind::kLayer && st.layer == 0) b1 = st.backward_s;
  }
  REQUIRE(b1 > 0);
  CHECK(dp.gradient_sync_s == Approx(std::max(s, 2 * s - b1)).epsilon(1e-12));
  CHECK(dp.gradient_sync_s < dp.gradient_sync_total_s);
  const SbpCost mt = sbp_cost(c, megatron_plan(c, 8), rig.devices, *rig.fabric, *rig.compute);
  CHECK(mt.gradient_sync_s == 0.0);
  const double bytes = 8192.0 * 4096 * 2;
  const double gather = boxing_time({S(0)}, {kB}, bytes, mesh, *rig.fabric);
  const double scatter = analytical_collective_time(*rig.fabric, g, chosen_spec(*rig.fabric, g, CollectiveOp::kReduceScatter, bytes));
  CHECK(mt.boxing_s == Approx(gather + 2 * scatter).epsilon(1e-12));
  CHECK(scatter < ar(bytes));
  // The same FLOPs split 8 ways either way, within 20% (local GEMMs of different
  // shapes); besides them the compute holds the optimizer step, over all the weights
  // under data parallelism and an eighth of them (plus a launch) under Megatron's.
  const double dp_opt = optimizer_step_time(sbp_memory(c, data_parallel_plan(c, {8})).weights / 2, *rig.compute, kGradientBytes, c.dtype).value();
  const double mt_opt = optimizer_step_time(sbp_memory(c, megatron_plan(c, 8)).weights / 2, *rig.compute, kGradientBytes, c.dtype).value();
  CHECK(mt_opt < dp_opt / 7);
  CHECK(mt.compute_s - mt_opt == Approx(dp.compute_s - dp_opt).epsilon(0.2));
}

TEST_CASE("a boxing step is priced on its slowest line") {
  // Expected: on 3 DGX-1 servers (8 GPUs each) a 4 x 6 mesh's lines of 6 lie over the
  // servers three ways: GPUs 0-5 inside server 0, 6-11 across servers 0 and 1, 12-17
  // across 1 and 2. Every line runs the collective at once, so a step takes the slowest
  // line's time: more than line 0's, which stays on NVLink, and the estimate of a
  // tensor-parallel MLP over the 6 (data-parallel over the 4) equals its replay (each
  // line lowered, the step after the slowest; the two weight gradients' all-reduces in
  // turn on one stream, as the estimate's flow shop has them) to rounding. On the
  // aligned 3 x 8 mesh every line is one server.
  SbpRig rig("dgx1-v100", 3, 24);
  DeviceMesh mesh{{4, 6}, rig.devices};
  CHECK(distinct_lines(mesh, 1, *rig.fabric).size() == 3);
  CHECK(distinct_lines(DeviceMesh{{3, 8}, rig.devices}, 1, *rig.fabric).size() == 1);
  const double T = 64 << 20;
  const CollectiveGroup first = CollectiveGroup::of(*rig.fabric, mesh.line(0, 1));
  CHECK(boxing_time({kB, kP}, {kB, kB}, T, mesh, *rig.fabric) >
        analytical_collective_time(*rig.fabric, first, chosen_spec(*rig.fabric, first, CollectiveOp::kAllReduce, T)));
  SbpChain c = mlp(4096, 2048);
  c.dtype = DataType::kFp16;  // a V100 has no bf16
  const MatmulSignature column{{S(0), kB}, {kB, S(1)}, {S(0), S(1)}}, row{{S(0), S(1)}, {kB, S(0)}, {S(0), kP}};
  const SbpPlan plan{{4, 6}, {column, row}};
  const double est = sbp_cost(c, plan, rig.devices, *rig.fabric, *rig.compute).total();
  CHECK(replay_sbp_plan(c, plan, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical) ==
        Approx(est).epsilon(1e-9));
}

TEST_CASE("a replicated layer's weight gradient is all-reduced unless the loss follows it") {
  // Expected on 8 GPUs of a DGX A100: fc1 B x B -> B then fc2 S(0) x B -> S(0). fc2's
  // slice of fc1's output has the dual gradient, a partial sum (the zero-filled slice's
  // gradient on each device), so fc1's weight gradient X^T dY is one too and is
  // all-reduced like fc2's under data parallelism: the total synchronization is the two
  // weights' all-reduces, 2 x 4096 x 16384 x 2 bytes each, as for data parallelism.
  // With the layers the other way round (fc2 replicated and last) each device computes
  // the whole loss and its whole gradient: only fc1's gradient is all-reduced.
  SbpRig rig("dgx-a100", 1, 8);
  const SbpChain c = mlp(8192, 4096);
  const CollectiveGroup g = CollectiveGroup::of(*rig.fabric, rig.devices);
  const double s = analytical_collective_time(*rig.fabric, g,
                                              chosen_spec(*rig.fabric, g, CollectiveOp::kAllReduce, 4096.0 * 16384 * 2));
  const MatmulSignature dp{{S(0)}, {kB}, {S(0)}}, rep{{kB}, {kB}, {kB}};
  const SbpPlan first{{8}, {rep, dp}};
  CHECK(sbp_cost(c, first, rig.devices, *rig.fabric, *rig.compute).gradient_sync_total_s == Approx(2 * s).epsilon(1e-12));
  const SbpPlan last{{8}, {dp, rep}};
  CHECK(sbp_cost(c, last, rig.devices, *rig.fabric, *rig.compute).gradient_sync_total_s == Approx(s).epsilon(1e-12));
}

TEST_CASE("a partial sum is completed only into a layout the operators after it can run on") {
  // Expected on 16 GPUs of 2 DGX A100, a QKV layer (8 key-value groups, attention after
  // it: rows split by whole samples only) S(1) x S(0) -> P over a batch of 8 samples,
  // then a projection S(0) x B -> S(0): reduce-scattering the partial output into the
  // projection's S(0) would be cheapest, but splits 8 samples 16 ways before attention;
  // S(1) would cut 8 groups 16 ways. Only B remains: an all-reduce. With 16 samples the
  // row split is allowed and chosen.
  SbpRig rig("dgx-a100", 2, 16);
  for (const std::int64_t batch : {8, 16}) {
    CAPTURE(batch);
    SbpChain c{batch * 128, {{"qkv", 1024, 3072, true}, {"proj", 1024, 1024, true}}};
    c.batch = batch;
    c.layers[0].column_groups = 8;
    c.layers[0].whole_samples = true;
    const SbpPlan plan{{16}, {{{S(1)}, {S(0)}, {kP}}, {{S(0)}, {kB}, {S(0)}}}};
    CHECK(sbp_plan_problem(c, plan).empty());
    NdSbp completed;
    for (const SbpStage& st : sbp_schedule(c, plan, rig.devices, *rig.fabric, *rig.compute)) {
      if (st.kind == SbpStage::Kind::kBoxing && st.from == NdSbp{kP}) completed = st.to;
    }
    CHECK(completed == (batch == 8 ? NdSbp{kB} : NdSbp{S(0)}));
  }
}

TEST_CASE("data parallelism synchronizes every parameter's gradient once") {
  // Expected: a Llama-style model (untied output layer, RMS norms, no biases) and a GPT
  // (tied embedding, learned positions, biases, layer norms) under data parallelism on 8
  // GPUs of a DGX A100: the GEMMs' weights, the norms and biases after each layer, the
  // vocabulary embedding (its lookup's tokens split 8 ways; tied, the output layer's
  // all-reduce sums it) and the position embedding are each all-reduced once, so the
  // total synchronization is the sum of those all-reduces, and their parameters add up to
  // the model's. The replay, lowered the same way (the embedding's after its backward, the
  // step's last), takes what the estimate's flow shop says, to rounding.
  SbpRig rig("dgx-a100", 1, 8);
  const CollectiveGroup g = CollectiveGroup::of(*rig.fabric, rig.devices);
  auto ar = [&](double params) {
    return analytical_collective_time(*rig.fabric, g, chosen_spec(*rig.fabric, g, CollectiveOp::kAllReduce, params * 2));
  };
  for (const TransformerConfig& m : {llama_config("l", 2, 1024, 16, 4, 2816, 512, 1000), gpt_config("g", 2, 1024, 16, 512, 1000)}) {
    INFO(m.name);
    const OperatorGraph graph = build_transformer(m, 8);
    const SbpChain c = chain_of(graph, 8);
    double expected = 0, params = 0;
    for (const LinearLayer& l : c.layers) {
      const double w = l.tied ? 0.0 : static_cast<double>(l.k) * static_cast<double>(l.n);
      if (l.tied) expected += ar(static_cast<double>(l.k) * static_cast<double>(l.n));  // the table, summed here
      if (w > 0) expected += ar(w);
      if (l.own_params > 0) expected += ar(l.own_params);
      params += w + l.own_params;
    }
    if (!c.layers.back().tied) expected += ar(c.embedding_params);
    if (c.before_params > 0) expected += ar(c.before_params);
    params += c.embedding_params + c.before_params;
    CHECK(params == graph.totals().params);
    const SbpPlan dp = data_parallel_plan(c, {8});
    const SbpCost est = sbp_cost(c, dp, rig.devices, *rig.fabric, *rig.compute);
    CHECK(est.gradient_sync_total_s == Approx(expected).epsilon(1e-9));
    CHECK(replay_sbp_plan(c, dp, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical) ==
          Approx(est.total()).epsilon(1e-9));
  }
}

TEST_CASE("autoddl's coordinate descent finds the exhaustive optimum on small cases") {
  // Expected: for a two-layer MLP on 4 GPUs (meshes 4 and 2 x 2), in a regime where data
  // parallelism wins (many rows, small weights) and one where model parallelism does
  // (few rows, large weights), the descent's plan costs what the best of all 36^2 + 6^2
  // plans costs; it never does worse than data parallelism, and beats it clearly in
  // the second regime. On a four-layer chain over 8 GPUs it evaluates under 1% of the
  // 36^4 plans of one 2-D shape.
  SbpRig rig("dgx-a100", 1, 4);
  for (auto [m, h] : {std::pair<std::int64_t, std::int64_t>{65536, 512}, {256, 8192}}) {
    INFO("m ", m, " h ", h);
    const SbpChain c = mlp(m, h);
    const SbpSearchResult fast = autoddl_search(c, rig.devices, *rig.fabric, *rig.compute);
    const SbpSearchResult all = exhaustive_sbp_search(c, rig.devices, *rig.fabric, *rig.compute);
    CHECK(fast.cost.total() == Approx(all.cost.total()).epsilon(1e-9));
    const double dp = sbp_cost(c, data_parallel_plan(c, {4}), rig.devices, *rig.fabric, *rig.compute).total();
    CHECK(fast.cost.total() <= dp * (1 + 1e-12));
    if (m == 256) CHECK(fast.cost.total() < 0.5 * dp);
    CHECK(autoddl_search(c, rig.devices, *rig.fabric, *rig.compute).cost.total() == fast.cost.total());  // deterministic
  }
  SbpRig eight("dgx-a100", 1, 8);
  const SbpChain layer{2048, {{"qkv", 4096, 3 * 4096, true}, {"proj", 4096, 4096, true},
                              {"fc1", 4096, 4 * 4096, true}, {"fc2", 4 * 4096, 4096, true}}};
  const SbpSearchResult r = autoddl_search(layer, eight.devices, *eight.fabric, *eight.compute);
  CHECK(r.evaluated < 36.0 * 36 * 36 * 36 / 100);
  CHECK(r.cost.total() <= sbp_cost(layer, megatron_plan(layer, 8), eight.devices, *eight.fabric, *eight.compute).total());
}

TEST_CASE("SBP plans lowered to task graphs replay close to their analytical cost") {
  // Expected on 8 GPUs of a DGX A100, analytical network, for data parallelism,
  // Megatron and the autoddl plan of a small-batch MLP: the replay takes at least the
  // estimate less its gradient all-reduces (which the replay overlaps with the rest of
  // the backward) and at most the estimate plus 5% (backward re-layouts run the dual
  // collectives, e.g. a reduce-scatter for an all-gather, priced slightly apart); the
  // autoddl plan also replays faster than data parallelism; every device computes.
  SbpRig rig("dgx-a100", 1, 8);
  const SbpChain c = mlp(512, 8192);
  const SbpPlan plans[] = {data_parallel_plan(c, {8}), megatron_plan(c, 8),
                           autoddl_search(c, rig.devices, *rig.fabric, *rig.compute).plan};
  double replays[3];
  for (int i = 0; i < 3; ++i) {
    INFO(describe_sbp_plan(c, plans[i]));
    const SbpCost est = sbp_cost(c, plans[i], rig.devices, *rig.fabric, *rig.compute);
    LoweredSbpStep s = lower_sbp_chain(c, plans[i], rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical);
    CHECK(s.compute.size() == 8);
    replays[i] = replay_sbp_plan(c, plans[i], rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical);
    CHECK(replays[i] >= est.total() - est.gradient_sync_s - 1e-9);
    CHECK(replays[i] <= est.total() * 1.05);
  }
  CHECK(replays[2] < replays[0]);
  // Gradients: a broadcast tensor's is a partial sum and the other way round.
  CHECK(gradient_sbp({kB, S(1), kP}) == NdSbp{kP, S(1), kB});
}

TEST_CASE("mcmc with the replay as judge finds the exhaustive replay optimum on a small case") {
  // Expected: a two-layer MLP on 4 GPUs (shapes 4 and 2 x 2: 36^2 + 6^2 = 1,332 plans,
  // every one replayed by the exhaustive search): from data parallelism, 600 proposals
  // reach a plan whose replayed step equals the best of all, replaying fewer plans than
  // the exhaustive search; the same seed gives the same walk, another seed may not. The
  // optimum is Megatron's split written [S(1), S(1)] on the 2 x 2 mesh (its all-reduce
  // in two steps of 2 ranks), which the walk reaches by carrying the split it found on
  // 4 devices over to the other shape.
  SbpRig rig("dgx-a100", 1, 4);
  const SbpChain c = mlp(1024, 4096);
  const McmcResult all = exhaustive_replay_search(c, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical);
  CHECK(all.replayed == 1332);
  McmcOptions o;
  o.iterations = 600;
  o.seed = 7;
  const McmcResult a = mcmc_sbp_search(c, data_parallel_plan(c, {4}), rig.devices, *rig.fabric, *rig.compute, o);
  CHECK(a.step_s == Approx(all.step_s).epsilon(1e-12));
  CHECK(a.replayed < all.replayed);
  const McmcResult b = mcmc_sbp_search(c, data_parallel_plan(c, {4}), rig.devices, *rig.fabric, *rig.compute, o);
  CHECK(b.step_s == a.step_s);
  CHECK(b.replayed == a.replayed);
  CHECK(b.accepted == a.accepted);
  // And the analytical autoddl plan, replayed, is no better than that optimum.
  const SbpSearchResult d = autoddl_search(c, rig.devices, *rig.fabric, *rig.compute);
  CHECK(replay_sbp_plan(c, d.plan, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical) >= all.step_s - 1e-15);
}

TEST_CASE("VGG-16 as an SBP chain: autoddl keeps the convolutions data-parallel and splits the classifier") {
  // Expected: VGG-16's chain is its 13 convolutions and 3 fully connected layers, with
  // 138,344,128 weights (the published 138,357,544 parameters less 13,416 biases). On
  // 16 A100s (2 DGX) at batch 256 the analytical search keeps the weights of the ten
  // convolutions of stages 1-4 broadcast (data parallelism: their gradients are small
  // next to their compute) and splits the three fully connected layers' weights (124M
  // of the 138M), removing most of the gradient all-reduce, which is AutoDDL's point
  // about VGG; it costs less than data parallelism, and replays faster too. Stage 5's
  // three convolutions (14 x 14 maps) are a near tie: splitting their weights two ways
  // on an 8 x 2 mesh, for GEMMs twice as tall per device, replays within 0.1% of keeping
  // them broadcast, so the test does not fix that choice.
  SbpRig rig("dgx-a100", 2, 16);
  WorkloadOptions wo;
  wo.batch = 256;
  const SbpChain c = chain_of(build_workload_preset("vgg16", wo));
  REQUIRE(c.layers.size() == 16);
  double weights = 0;
  for (const LinearLayer& l : c.layers) weights += static_cast<double>(l.k) * static_cast<double>(l.n);
  CHECK(weights == 138344128.0);
  const SbpSearchResult r = autoddl_search(c, rig.devices, *rig.fabric, *rig.compute);
  const SbpPlan dp = data_parallel_plan(c, {16});
  const SbpCost dpc = sbp_cost(c, dp, rig.devices, *rig.fabric, *rig.compute);
  for (std::size_t i = 0; i < 16; ++i) {
    INFO(c.layers[i].name);
    const bool broadcast = std::all_of(r.plan.layers[i].b.begin(), r.plan.layers[i].b.end(),
                                       [](const Sbp& s) { return s.kind == SbpKind::kBroadcast; });
    if (i < 10 || i >= 13) CHECK(broadcast == (i < 10));
  }
  CHECK(r.cost.total() < dpc.total());
  CHECK(r.cost.gradient_sync_total_s < 0.5 * dpc.gradient_sync_total_s);
  CHECK(replay_sbp_plan(c, r.plan, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kFlow) <
        replay_sbp_plan(c, dp, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kFlow));
}

TEST_CASE("signatures read as written, and mistakes say what is wrong") {
  const MatmulSignature sig{{S(0), kB}, {kB, S(1)}, {S(0), S(1)}};
  CHECK(to_string(sig) == "[S(0), B] x [B, S(1)] -> [S(0), S(1)]");
  const MatmulSignature back = parse_matmul_signature(to_string(sig), 2);
  CHECK(to_string(back) == to_string(sig));
  CHECK(to_string(parse_matmul_signature("S(1) x S(0) -> P", 1)) == "[S(1)] x [S(0)] -> [P]");
  CHECK_THROWS_WITH_AS(parse_matmul_signature("[S(0)] x [B] -> [S(0)]", 2),
                       "'S(0)' has 1 SBPs; the mesh has 2 dimensions", InputError);
  CHECK_THROWS_WITH_AS(parse_matmul_signature("S(0) x B", 1),
                       "'S(0) x B' is not a matmul signature; write it as A x B -> C, e.g. \"[S(0), B] x [B, S(1)] -> [S(0), S(1)]\"",
                       InputError);
  CHECK_THROWS_AS(parse_matmul_signature("B x B -> P", 1), InputError);  // no rule gives it
  CHECK_THROWS_AS(parse_matmul_signature("S(3) x B -> S(3)", 1), InputError);
}

TEST_CASE("a whole transformer as an SBP chain: every GEMM by role, the rest attached, parameters and memory whole") {
  // Expected for GPT-2 (12 layers, hidden 768, vocabulary 50257, tied embedding) at batch
  // 4 x 1024: 4 GEMMs per layer and the output layer (49), roles layer*.qkv, .proj, .fc1,
  // .fc2 and output; the parameters sbp_memory counts under data parallelism (weights in
  // bf16: 2 bytes each) are the graph's 124,439,808; attention follows each QKV (its
  // rows may be split by samples only: 4 samples over a mesh of 8 rows cannot run); under
  // data parallelism on 8 devices the activations are the graph's saved bytes / 8, and
  // a Megatron split over 8 devices holds 1/8 of every GEMM's weights.
  WorkloadOptions wo;
  wo.batch = 4;
  const OperatorGraph g = build_workload_preset("gpt2", wo);
  const SbpChain c = chain_of(g, 4);
  REQUIRE(c.layers.size() == 49);
  const auto roles = sbp_roles(c);
  REQUIRE(roles.size() == 5);
  CHECK(roles[0].first == "layer*.qkv");
  CHECK(roles[0].second.size() == 12);
  CHECK(roles[4].first == "output");
  CHECK(c.layers[0].whole_samples);
  CHECK(c.layers.back().tied);
  const SbpPlan dp8 = data_parallel_plan(c, {8});
  CHECK(sbp_plan_problem(c, dp8).find("splits the rows 8 ways before attention") != std::string::npos);
  const SbpPlan dp4 = data_parallel_plan(c, {4});
  CHECK(sbp_plan_problem(c, dp4).empty());
  const SbpMemory m = sbp_memory(c, dp4);
  CHECK(m.weights == Approx(124439808.0 * 2).epsilon(1e-12));
  CHECK(m.optimizer == Approx(124439808.0 * 12).epsilon(1e-12));
  CHECK(m.activations == Approx(g.totals().saved_bytes / 4).epsilon(1e-9));
  const SbpMemory mt = sbp_memory(c, megatron_plan(c, 4));
  double gemm = 0;
  for (const LinearLayer& l : c.layers) gemm += l.tied ? 0.0 : static_cast<double>(l.k) * static_cast<double>(l.n);
  const double rest = 124439808.0 - gemm;  // embeddings, norms and biases
  CHECK(mt.weights == Approx((gemm / 4 + c.embedding_params / 4 + (rest - c.embedding_params)) * 2).epsilon(1e-12));
  // The software stack's memory: the context and one communicator per mesh dimension of
  // more than one device (none on a 1-device mesh), in the total.
  CHECK(m.runtime == 0);
  const RuntimeMemory rt{400.0 * 1024 * 1024, 688.0 * 1024 * 1024};
  CHECK(sbp_memory(c, dp4, rt).runtime == 1088.0 * 1024 * 1024);
  CHECK(sbp_memory(c, dp4, rt).total() == Approx(m.total() + 1088.0 * 1024 * 1024).epsilon(1e-12));
  CHECK(sbp_memory(c, megatron_plan(c, 2, 2), rt).runtime == (400.0 + 2 * 688.0) * 1024 * 1024);
  CHECK(sbp_memory(c, data_parallel_plan(c, {1}), rt).runtime == 400.0 * 1024 * 1024);
  // A plan must give every layer of a role the same signature.
  SbpPlan mixed = dp4;
  mixed.layers[4] = {{kB}, {S(1)}, {S(1)}};
  CHECK(sbp_plan_problem(c, mixed) == "layer1.qkv: a signature other than its role layer*.qkv's");
}

TEST_CASE("a folded SBP replay is the full replay on a symmetric mesh; micro-batches repeat the work") {
  // Expected on 2 DGX A100 (16 GPUs, analytical network), for data parallelism, Megatron
  // over 16 and a 2 x 8 data x tensor plan of GPT-2 at batch 8: the replay folded to device 0
  // (its collectives priced, slowest line) takes the full replay's time to 1e-9, from a
  // graph about 16 times smaller. With 2 micro-batches of 4 the analytical cost counts
  // twice the compute and re-layouts of one pass of 4, and one gradient synchronization.
  SbpRig rig("dgx-a100", 2, 16);
  WorkloadOptions wo;
  wo.batch = 8;
  const SbpChain c = chain_of(build_workload_preset("gpt2", wo), 8);
  SbpPlan tp = data_parallel_plan(c, {2, 8});
  for (const auto& [role, layers] : sbp_roles(c)) {
    const bool column = role == "layer*.qkv" || role == "layer*.fc1" || role == "output";
    for (std::size_t i : layers) {
      tp.layers[i] = column ? MatmulSignature{{S(0), kB}, {kB, S(1)}, {S(0), S(1)}} : MatmulSignature{{S(0), S(1)}, {kB, S(0)}, {S(0), kP}};
    }
  }
  // Megatron over 8 with data parallelism over 2 (search's sbp-megatron baseline) is
  // this plan, signature for signature.
  const SbpPlan mt2 = megatron_plan(c, 8, 2);
  CHECK(mt2.dims == tp.dims);
  for (std::size_t i = 0; i < c.layers.size(); ++i) CHECK(to_string(mt2.layers[i]) == to_string(tp.layers[i]));
  // Data parallelism over 8 on an 8 x 2 mesh, each replica's work duplicated on 2 devices
  // (16 row pieces would split the 8 samples' sequences, which attention refuses).
  SbpPlan dp;
  dp.dims = {8, 2};
  dp.layers.assign(c.layers.size(), MatmulSignature{{S(0), kB}, {kB, kB}, {S(0), kB}});
  for (const SbpPlan& plan : {dp, megatron_plan(c, 16), tp}) {
    INFO(describe_sbp_plan(c, plan));
    REQUIRE(sbp_plan_problem(c, plan).empty());
    auto run = [&](bool fold) {
      LoweredSbpStep s = lower_sbp_chain(c, plan, rig.devices, *rig.fabric, *rig.compute, NetworkModelKind::kAnalytical, fold);
      std::vector<ResourceModel*> ptrs;
      for (auto& r : s.resources) ptrs.push_back(r.get());
      return std::make_tuple(replay(s.graph, ptrs).makespan.value(), s.graph.size(), s.folded && s.fold_exact);
    };
    const auto [full, full_tasks, full_folded] = run(false);
    const auto [folded, folded_tasks, exact] = run(true);
    CHECK_FALSE(full_folded);
    CHECK(exact);
    CHECK(folded == Approx(full).epsilon(1e-9));
    CHECK(folded_tasks * 8 < full_tasks);
  }
  WorkloadOptions half = wo;
  half.batch = 4;
  const SbpChain c4 = chain_of(build_workload_preset("gpt2", half), 4);
  SbpPlan one = data_parallel_plan(c4, {4});
  SbpPlan two = one;
  two.micro_batches = 2;
  const SbpCost a = sbp_cost(c4, one, rig.devices, *rig.fabric, *rig.compute);
  const SbpCost b = sbp_cost(c4, two, rig.devices, *rig.fabric, *rig.compute);
  const double opt = optimizer_step_time(sbp_memory(c4, one).weights / 2, *rig.compute, kGradientBytes, c4.dtype).value();
  CHECK(b.compute_s - opt == Approx(2 * (a.compute_s - opt)).epsilon(1e-12));
  CHECK(b.gradient_sync_s == Approx(a.gradient_sync_s).epsilon(1e-12));
  // Mesh shapes: 16 devices in 1, 2 and 3 dimensions.
  CHECK(sbp_mesh_shapes(16, 2).size() == 4);  // 16, 2x8, 4x4, 8x2
  CHECK(sbp_mesh_shapes(16, 3).size() == 7);  // and 2x2x4, 2x4x2, 4x2x2
}

TEST_CASE("an all-to-all's analytical time under each protocol is affine in its bytes (the search prices it from two sizes each)") {
  // Expected: every pair's direct transfer costs its route's latency plus its bytes over
  // the busiest link's share, so t(b) = t(1 MB) + (t(2 MB) - t(1 MB)) (b - 1 MB) / 1 MB,
  // on a group inside one server and on one across servers, from 1.5 MB to 1 GB: the
  // bandwidth protocol's sizes. At 1 KB the low-latency protocol runs: the links' LL
  // latencies (and across servers the NICs' LL transport) replace theirs, and its rate
  // adds (n - 1)/n x 1 KB over the group's LL bus bandwidth: inside the server each pair
  // pays 2 x 0.447 us for NVLink 3's 2 x 1.7, 2.506 us less, and 7/8 KB at 87.7 GB/s,
  // 0.00998 us; across servers the slowest pairs, those between servers (an NVSwitch hop
  // to the rail of their destination, then the NICs), pay that and a transport of 7.45
  // us for the bandwidth protocol's 14: 2.506 + 6.55 = 9.056 us less, and 15/16 KB at the
  // NICs' 20 GB/s, 0.0469 us (an all-to-all's point-to-point transfers run on all the
  // channels at any size).
  SbpRig rig("dgx-a100", 2, 16);
  for (std::size_t n : {8u, 16u}) {
    INFO(n);
    const std::vector<NodeId> ranks(rig.devices.begin(), rig.devices.begin() + static_cast<std::ptrdiff_t>(n));
    const CollectiveGroup g = CollectiveGroup::of(*rig.fabric, ranks);
    auto t = [&](double b) { return analytical_collective_time(*rig.fabric, g, chosen_spec(*rig.fabric, g, CollectiveOp::kAllToAll, b)); };
    const double t1 = t(1e6), t2 = t(2e6);
    for (double b : {1.5e6, 3e7, 1e9}) CHECK(t(b) == Approx(t1 + (t2 - t1) * (b - 1e6) / 1e6).epsilon(1e-9));
    const double affine = t1 + (t2 - t1) * (1e3 - 1e6) / 1e6;
    if (n == 8) CHECK(t(1e3) == Approx(affine - 2 * (1.7 - 0.447) * 1e-6 + 7.0 / 8.0 * 1e3 / 87.7e9).epsilon(1e-6));
    if (n == 16) CHECK(t(1e3) == Approx(affine - (2 * (1.7 - 0.447) + (14.0 - 7.45)) * 1e-6 + 15.0 / 16.0 * 1e3 / 20e9).epsilon(1e-6));
  }
  // Between two B200s (NVLink 5, its LL rate 282 GB/s) the low-latency protocol still
  // wins at 1 MB (its 2 x 1.229 us of latency saved against 1/2 MB at 282 GB/s, 1.77 us)
  // and loses above: the time is the smaller of the two protocols' lines, each affine,
  // which is how the search prices it (choosing by the selector's estimate, which for a
  // direct all-to-all of two GPUs is its analytical time under either protocol).
  SbpRig b200("dgx-b200", 1, 2);
  const CollectiveGroup pair = CollectiveGroup::of(*b200.fabric, b200.devices);
  const auto at = [&](double b, std::optional<bool> ll) {
    CollectiveSpec spec = chosen_spec(*b200.fabric, pair, CollectiveOp::kAllToAll, b);
    if (ll) spec.low_latency = ll;
    return analytical_collective_time(*b200.fabric, pair, spec);
  };
  for (bool ll : {false, true}) {
    CHECK(collective_estimate(*b200.fabric, pair, CollectiveOp::kAllToAll, CollectiveAlgorithm::kDirect, 1e6, 1, 0, 1, 0, ll) ==
          Approx(at(1e6, ll)).epsilon(1e-9));
  }
  CHECK(chosen_spec(*b200.fabric, pair, CollectiveOp::kAllToAll, 1e6).low_latency == true);
  CHECK(chosen_spec(*b200.fabric, pair, CollectiveOp::kAllToAll, 1e9).low_latency == false);
  const auto line = [&](bool ll, double b) { return at(1e6, ll) + (at(2e6, ll) - at(1e6, ll)) * (b - 1e6) / 1e6; };
  for (double b : {1e3, 1e5, 1e6, 1.5e6, 3e7, 1e9}) {
    INFO(b);
    CHECK(at(b, std::nullopt) == Approx(std::min(line(false, b), line(true, b))).epsilon(1e-9));
  }
}

TEST_CASE("SBP plans: gradient synchronizations beside the backward slow it (interference)") {
  // Expected: a data-parallel plan of a small GPT on one DGX H100 all-reduces its layers'
  // gradients beside the backward of the layers before them. With the device's
  // overlap_slowdown (0.189) the replay is longer than without it, by at most hidden x
  // 0.189 / 1.189 (hidden: the synchronizations' time that the backward hid, from the
  // cost without it), and the cost model's estimate follows the replay to 1%: it charges
  // hidden x 0.189 / 1.189 to the compute and runs its flow shop again with every
  // backward stretched by as much, the synchronizations waiting for the slowed backward's
  // gradients. Sequences of 4,096 tokens, where the synchronizations outlast the backward
  // by little, and of 1,024, where they outlast it by 6% of the step and the slowed
  // backward delays them (taking the loss off what they outlast it by, as the estimate
  // did until the seventy-second session, missed 3.8% of the replay there).
  for (const auto& [tokens, tolerance] : {std::pair{4096, 0.01}, std::pair{1024, 0.01}}) {
    INFO(tokens, " tokens");
    SbpRig off("dgx-h100", 1, 8), on("dgx-h100", 1, 8, true);
    REQUIRE(on.compute->efficiency().overlap_slowdown == Approx(0.189));
    const OperatorGraph graph = build_transformer(gpt_config("g", 4, 1024, 16, tokens, 1000), 8);
    const SbpChain c = chain_of(graph, 8);
    const SbpPlan dp = data_parallel_plan(c, {8});
    const SbpCost base = sbp_cost(c, dp, off.devices, *off.fabric, *off.compute);
    const double hidden = base.gradient_sync_total_s - base.gradient_sync_s;
    REQUIRE(hidden > 0.0);
    const double t_off = replay_sbp_plan(c, dp, off.devices, *off.fabric, *off.compute, NetworkModelKind::kAnalytical);
    const double t_on = replay_sbp_plan(c, dp, on.devices, *on.fabric, *on.compute, NetworkModelKind::kAnalytical);
    const double e_on = sbp_cost(c, dp, on.devices, *on.fabric, *on.compute).total();
    MESSAGE("replay ", t_off, " -> ", t_on, " s, estimate ", e_on, " s, hidden ", hidden, " s");
    CHECK(t_on > t_off);
    CHECK(t_on - t_off <= hidden * 0.189 / 1.189 * (1 + 1e-9));
    CHECK(e_on == Approx(t_on).epsilon(tolerance));
    // Unfolded on the flow network, every device's stream is slowed alike.
    CHECK(replay_sbp_plan(c, dp, on.devices, *on.fabric, *on.compute, NetworkModelKind::kFlow) == Approx(t_on).epsilon(0.01));
  }
}
