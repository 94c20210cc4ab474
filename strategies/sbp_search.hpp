// AutoDDL-style search over SBP signatures for a chain of linear layers (a transformer
// layer's QKV, output projection and MLP, or an MLP): an analytical cost per plan and a
// coordinate descent over the layers' signatures and the mesh's shape (Chen et al.,
// "AutoDDL: Automatic Distributed Deep Learning with Near-Optimal Bandwidth Cost", 2023).
//
// The chain. Layer i computes Y_i = X_i W_i (X: m x k_i activations, W: k_i x n_i
// weights, in the chain's dtype); X_0 arrives split by the batch over every mesh dimension (S(0), as
// a data loader gives it); between layers an elementwise step (GeLU, attention over
// heads) needs a complete, not partial-sum, input. A plan gives each layer a matmul
// signature (strategies/sbp.hpp), one of 6 per mesh dimension.
//
// The cost of one training step of the chain (forward and backward):
//   compute: per layer 3 x 2 m k n FLOPs (forward, and the two backward matmuls) over
//     the devices that share the work (mesh dimensions whose rule splits it: S(0) x B,
//     B x S(1), S(1) x S(0)), at the compute model's time for the local GEMM shape;
//   boxing: forward, Y_i's layout re-laid to what layer i+1 takes (through a complete
//     layout first when Y_i is a partial sum and an elementwise step follows), and
//     backward the same bytes back (the gradient of a tensor re-laid the other way
//     costs the same collectives in reverse);
//   gradient synchronization: along each mesh dimension where layer i's weights are
//     broadcast while its activations are split or partial (S(0) x B, P x B), the
//     weight gradient is a partial sum and is all-reduced, on the weights' local bytes.
// Collectives are priced on the real topology (analytical times, one after another).
// It is the model the search uses; replaying SBP plans is the next step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/compute_model.hpp"
#include "strategies/sbp.hpp"

namespace ddlsim {

struct LinearLayer {
  std::string name;
  std::int64_t k = 0, n = 0;  // weights: k x n
  bool elementwise_after = true;  // an elementwise step (needing a complete input) follows
  std::int64_t rows = 0;          // its activations' rows when they differ from the chain's (0: the chain's m)
};

struct SbpChain {
  std::int64_t m = 0;  // rows of the activations (batch x sequence; for a convolution batch x pixels)
  std::vector<LinearLayer> layers;
  DataType dtype = DataType::kBf16;  // of activations and weights
};

/// The GEMM-like operators (linear layers, and convolutions as implicit GEMMs: rows =
/// batch x output pixels, k = input channels x kernel area, n = output channels) of an
/// operator graph in order, each followed by an elementwise step; batched matmuls
/// (attention) are not chain layers.
SbpChain chain_of(const OperatorGraph& graph);

/// One signature per layer, on a mesh of `dims`.
struct SbpPlan {
  std::vector<int> dims;
  std::vector<MatmulSignature> layers;
};

struct SbpCost {
  double compute_s = 0, boxing_s = 0, gradient_sync_s = 0;
  [[nodiscard]] double total() const { return compute_s + boxing_s + gradient_sync_s; }
};

/// One step of a plan in forward order: a re-layout of an activation (between layers,
/// or completing a partial sum; `backward`: its gradient is re-laid back too, the dual
/// collectives of the same bytes), or a layer (its forward and backward times, and its
/// weight gradient's layout `grad`, to be brought to the weights' when they differ).
struct SbpStage {
  enum class Kind { kBoxing, kLayer } kind = Kind::kBoxing;
  NdSbp from, to;
  double bytes = 0;
  bool backward = true;
  std::size_t layer = 0;
  double forward_s = 0, backward_s = 0;
  NdSbp grad, weights;
  double weight_bytes = 0;
};

/// The plan's steps, as the cost below counts them (and the lowering replays them).
std::vector<SbpStage> sbp_schedule(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                                   NetworkFabric& fabric, const ComputeModel& compute);

/// The cost above of `plan` over `devices` (as many as the mesh has), on the fabric.
SbpCost sbp_cost(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                 const ComputeModel& compute);

/// Mesh shapes of n devices the searches try: (n), then (a, n / a) for every divisor
/// 2 <= a <= n / 2.
std::vector<std::vector<int>> sbp_mesh_shapes(std::size_t n);

/// Data parallelism in SBP terms: every layer S(0) x B -> S(0) on every mesh dimension.
SbpPlan data_parallel_plan(const SbpChain& chain, std::vector<int> dims);
/// Megatron tensor parallelism on a 1-D mesh: layers alternate column (B x S(1) ->
/// S(1)) and row (S(1) x S(0) -> P) splits, starting with a column split.
SbpPlan megatron_plan(const SbpChain& chain, int devices);

struct SbpSearchResult {
  SbpPlan plan;
  SbpCost cost;
  std::uint64_t evaluated = 0;  // plans whose cost was computed
};

/// Coordinate descent: for each mesh shape (every ordered factorization of the device
/// count into 1 or 2 dimensions), start from data parallelism and repeatedly give one
/// layer at a time the signature that lowers the total, until a whole pass changes
/// nothing; the best over shapes. Deterministic.
SbpSearchResult autoddl_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                               const ComputeModel& compute);

/// Calls `visit` with every plan of every mesh shape (sbp_mesh_shapes), shape by shape:
/// 6^(dims x layers) of them per shape, for small cases only.
void for_each_sbp_plan(const SbpChain& chain, std::size_t devices, const std::function<void(const SbpPlan&)>& visit);

/// Every plan of every shape (small cases only: 36^layers per 2-D shape), the best.
SbpSearchResult exhaustive_sbp_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                      const ComputeModel& compute);

/// "[S(0), B] x [B, S(1)] -> [S(0), S(1)]" per layer, one per line, with the mesh.
std::string describe_sbp_plan(const SbpChain& chain, const SbpPlan& plan);

}  // namespace ddlsim
