// AutoDDL-style search over SBP signatures for a chain of GEMMs (a whole transformer, CNN
// or MLP from its operator graph: chain_of): an analytical cost and memory per plan, and
// a coordinate descent over the layer roles' signatures and the mesh's shape (Chen et
// al., "AutoDDL: Automatic Distributed Deep Learning with Near-Optimal Bandwidth Cost",
// 2023). A plan runs the step in micro_batches passes (gradient accumulation) of the
// chain, which is one pass's.
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
//     broadcast while its activations are split or partial (S(0) x B, P x B), or the
//     layer is replicated (B x B -> B) and its output's gradient arrives as a partial
//     sum (the dual of B; not where the loss follows it), the weight gradient is a
//     partial sum and is all-reduced, on the weights' local bytes; so are its bias and
//     the norms after it (whole on every device) along each dimension where its
//     completed output is not broadcast, and after the backward of the embedding the
//     vocabulary table and position embeddings (sbp_embedding_syncs).
// Collectives are priced on the real topology (analytical times, one after another).
// A norm after a layer whose output stays split by columns needs its statistics (two
// fp32 values per row) all-reduced along those mesh dimensions, forward and backward.
// The optimizer step runs on each device's local parameters (sbp_memory; priced by
// strategies/stage_costs). The other operators (attention, norms, activations) run on
// the shards of the output they follow, their time the compute model's for that share.
// With micro-batches, compute and boxing count once per pass, the gradient
// synchronization and the optimizer once. It is the model the autoddl search uses;
// strategies/sbp_lowering replays the same steps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/compute_model.hpp"
#include "strategies/memory.hpp"
#include "strategies/sbp.hpp"

namespace ddlsim {

struct LinearLayer {
  std::string name;
  std::int64_t k = 0, n = 0;  // weights: k x n
  bool elementwise_after = true;  // an elementwise step (needing a complete input) follows
  std::int64_t rows = 0;          // its activations' rows when they differ from the chain's (0: the chain's m)
  std::string role{};             // layers of one role share a signature (every layer*.qkv); empty: its name
  double repeat = 1;              // how many layers this one stands for in the analytical cost (a chain cut short)
  double in_elements = 0;         // its input's elements when not rows x k (a convolution's, before im2col)
  double saved_bytes = 0;         // activation bytes the GEMM keeps for backward (whole tensor)
  std::vector<Operator> after{};  // the other operators up to the next GEMM (norms, attention, ...), whole
  bool tied = false;              // its weights are the embedding table's (counted there, SbpChain::embedding_params)
  bool normalizes = false;        // `after` holds a layer or RMS norm (statistics over the columns)
  std::int64_t column_groups = 0; // the output's columns come in this many groups a split must not cut (QKV: key-value heads); 0: any
  bool whole_samples = false;     // `after` mixes the rows of a sample (attention): rows may be split by samples only
  double own_params = 0;          // its bias and the parameters of the operators after it (norms): whole on every device
  [[nodiscard]] const std::string& role_name() const { return role.empty() ? name : role; }
};

struct SbpChain {
  std::int64_t m = 0;  // rows of the activations (batch x sequence; for a convolution batch x pixels)
  std::vector<LinearLayer> layers;
  DataType dtype = DataType::kBf16;  // of activations and weights
  std::int64_t batch = 0;            // samples in the step (0: unknown, no limit on row splits)
  std::vector<Operator> before{};    // operators before the first GEMM (embedding), on the loader's batch split
  double embedding_params = 0;       // laid out as the last layer's weights (a vocabulary-parallel embedding)
  double replicated_params = 0;      // norms and biases: whole on every device (all of them, for memory)
  double before_params = 0;          // of those, the operators' before the first layer (position embeddings)
};

/// The GEMM-like operators (linear layers, and convolutions as implicit GEMMs: rows =
/// batch x output pixels, k = input channels x kernel area, n = output channels) of an
/// operator graph in order, each followed by an elementwise step, with the graph's other
/// operators attached to the GEMM they follow (before the first: `before`); a layer's
/// role is its name without the "layer<i>." of a repeated block. `batch`: the graph's
/// samples (the row-split limit for attention).
SbpChain chain_of(const OperatorGraph& graph, std::int64_t batch = 0);

/// One signature per layer, on a mesh of `dims`; the step's samples in `micro_batches`
/// passes one after another (gradient accumulation), the chain being one pass's: each
/// pass computes and re-lays its activations, the gradients are synchronized in the last
/// pass's backward and the optimizer steps once.
struct SbpPlan {
  std::vector<int> dims;
  std::vector<MatmulSignature> layers;
  int micro_batches = 1;
};

/// Why the plan cannot run the chain ("" when it can): a signature count or mesh size
/// that does not match, layers of one role with different signatures, rows split
/// deeper than the samples before attention (sequence parallelism through attention
/// is not modelled), or columns split across a layer's column groups (heads).
std::string sbp_plan_problem(const SbpChain& chain, const SbpPlan& plan);

/// The roles of the chain in order of first appearance, and the layers of each.
std::vector<std::pair<std::string, std::vector<std::size_t>>> sbp_roles(const SbpChain& chain);

/// A plan's estimated step: compute (every micro-batch's forward and backward and the
/// optimizer step), activation re-layouts (on the compute's path), and the gradient
/// synchronization the step pays: gradient_sync_s, the part of all the layers'
/// synchronizations (gradient_sync_total_s) that outlasts the last micro-batch's
/// backward, beside which they run (each layer's as soon as its backward has produced it).
struct SbpCost {
  // compute_s includes what the gradient synchronizations hidden beside the last
  // backward cost it (the device's overlap_slowdown: interference), and gradient_sync_s
  // is what they outlast that slowed backward by.
  double compute_s = 0, boxing_s = 0, gradient_sync_s = 0;
  double gradient_sync_total_s = 0;
  [[nodiscard]] double total() const { return compute_s + boxing_s + gradient_sync_s; }
};

/// A gradient synchronization: `bytes` (whole tensor) re-laid from `from` to `to`.
struct SbpSync {
  NdSbp from, to;
  double bytes = 0;
};

/// One step of a plan in forward order: a re-layout of an activation (between layers,
/// or completing a partial sum; `backward`: its gradient is re-laid back too, the dual
/// collectives of the same bytes), or a layer (its forward and backward times, and the
/// synchronizations of its gradients, in order: its weights' (the weight gradient's
/// layout to the weights') and its own replicated parameters' (LinearLayer::own_params,
/// a partial sum along every dimension where its completed output is not broadcast).
struct SbpStage {
  enum class Kind { kBoxing, kLayer, kElementwise } kind = Kind::kBoxing;
  NdSbp from, to;
  double bytes = 0;
  bool backward = true;
  std::size_t layer = 0;
  double forward_s = 0, backward_s = 0;
  std::vector<SbpSync> syncs;
  double repeat = 1;
};

/// The synchronizations after the backward of the operators before the first layer: the
/// vocabulary embedding's gradient (laid out as the last layer's weights; the tokens
/// arrive split over every mesh dimension, so it is a partial sum along each dimension
/// where the table is broadcast, except where a tied output layer's synchronization
/// already sums it) and the other parameters there (position embeddings: every
/// dimension).
std::vector<SbpSync> sbp_embedding_syncs(const SbpChain& chain, const SbpPlan& plan);

/// (kElementwise: the operators after a layer, on its completed output's shards, with
/// their forward and backward times in forward_s, backward_s.) `repeat`: the layer's.
/// The plan's steps, as the cost below counts them (and the lowering replays them).
std::vector<SbpStage> sbp_schedule(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices,
                                   NetworkFabric& fabric, const ComputeModel& compute);

/// The cost above of `plan` over `devices` (as many as the mesh has), on the fabric;
/// each stage counted `repeat` times; infinite for a plan with a problem.
SbpCost sbp_cost(const SbpChain& chain, const SbpPlan& plan, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                 const ComputeModel& compute);

/// The forward and backward times of the operators before the first layer (embedding),
/// on the data loader's batch split over `dims`.
std::pair<double, double> sbp_before_times(const SbpChain& chain, const std::vector<int>& dims,
                                           const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                           const ComputeModel& compute);

/// Per device, in bytes: the plan's weights, gradients (the dtype's size each), optimizer
/// state (Adam: fp32 master weights and two moments for 16-bit weights, 12 bytes per
/// parameter; two moments for fp32, 8) and activations kept for backward, each tensor
/// at its local size (a split divides it; B and P keep it whole).
struct SbpMemory {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;
  double runtime = 0;  // the software stack's (RuntimeMemory over the plan's communicators)
  [[nodiscard]] double total() const { return weights + gradients + optimizer + activations + runtime; }
};
SbpMemory sbp_memory(const SbpChain& chain, const SbpPlan& plan, const RuntimeMemory& runtime = {});

/// The communicators a device of a mesh joins: one per dimension of more than one device.
int sbp_communicators(const std::vector<int>& dims);

/// Mesh shapes of n devices the searches try: (n), then (a, n / a) for every divisor
/// 2 <= a <= n / 2, then with max_dims 3 (a, b, n / ab) for all factors of 2 or more.
std::vector<std::vector<int>> sbp_mesh_shapes(std::size_t n, std::size_t max_dims = 2);

/// Data parallelism in SBP terms: every layer S(0) x B -> S(0) on every mesh dimension.
SbpPlan data_parallel_plan(const SbpChain& chain, std::vector<int> dims);
/// Megatron tensor parallelism over tp devices: roles alternate column (B x S(1) ->
/// S(1)) and row (S(1) x S(0) -> P) splits, starting with a column split (a GPT layer:
/// QKV and fc1 column, projection and fc2 row, the output layer column: vocabulary-parallel).
/// With dp > 1 the mesh is dp x tp, tp the inner (fastest) dimension, and every layer
/// is also S(0) x B -> S(0) on the outer one: data parallelism over tp-device groups.
SbpPlan megatron_plan(const SbpChain& chain, int tp, int dp = 1);

struct SbpSearchResult {
  SbpPlan plan;
  SbpCost cost;
  std::uint64_t evaluated = 0;  // plans whose cost was computed
  // (plans evaluated so far, the lowest cost of a plan within the memory limit so far) at
  // each new lowest: how the search converged.
  std::vector<std::pair<std::uint64_t, double>> convergence;
};

/// Collective prices a search memoizes (by the devices of a line and the bytes), which
/// later searches over the same devices and fabric may reuse.
struct SbpPriceCache;
std::shared_ptr<SbpPriceCache> make_sbp_price_cache();

struct AutoddlOptions {
  std::size_t max_dims = 3;  // mesh shapes of 1 to max_dims dimensions
  std::shared_ptr<SbpPriceCache> prices;  // shared with other searches on the same devices and fabric; null: its own
  double memory_bytes = 0;   // the accelerator's memory: plans over it (sbp_memory) lose to all that fit; 0: no limit
  RuntimeMemory runtime;     // counted against memory_bytes with the plan's memory
  int micro_batches = 1;     // the plans' (the chain is one micro-batch's)
};

/// Coordinate descent: for each mesh shape (every ordered factorization of the device
/// count into 1 to max_dims dimensions), start from data parallelism and repeatedly give
/// one role at a time (all its layers) the signature that lowers the total, until a
/// whole pass changes nothing; the best over shapes. A plan over the memory limit costs
/// 10^6 s plus a second per MB too many, so that the descent first makes plans fit.
/// Deterministic.
SbpSearchResult autoddl_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                               const ComputeModel& compute, const AutoddlOptions& options = {});

/// Calls `visit` with every plan of every 1-D and 2-D mesh shape (sbp_mesh_shapes), shape
/// by shape: 6^(dims x roles) of them per shape, for small cases only.
void for_each_sbp_plan(const SbpChain& chain, std::size_t devices, const std::function<void(const SbpPlan&)>& visit);

/// Every plan of every shape (small cases only: 36^layers per 2-D shape), the best.
SbpSearchResult exhaustive_sbp_search(const SbpChain& chain, const std::vector<NodeId>& devices, NetworkFabric& fabric,
                                      const ComputeModel& compute);

/// "[S(0), B] x [B, S(1)] -> [S(0), S(1)]" per role, one per line, with the mesh.
std::string describe_sbp_plan(const SbpChain& chain, const SbpPlan& plan);

}  // namespace ddlsim
