// SBP: how a tensor lies on a device mesh, after OneFlow (Yuan et al., "OneFlow:
// Redesign the Distributed Deep Learning Framework from Scratch", 2021) and AutoDDL.
//
// Along each dimension of an n-D device mesh a tensor is either split along one of its
// axes, S(i) (each device of that mesh dimension holds 1/size of it), broadcast, B (each
// holds all of it), or a partial sum, P (each holds a tensor of the full shape, and the
// true value is their sum). An n-D SBP is one of these per mesh dimension.
//
// Signatures. An operator is valid under a choice of input and output SBPs when, mesh
// dimension by mesh dimension, it computes the right thing from what each device holds.
// For C(m, n) = A(m, k) x B(k, n) each dimension must follow one of
//     S(0) x B -> S(0),  B x S(1) -> S(1),  S(1) x S(0) -> P,  P x B -> P,  B x P -> P,
//     B x B -> B.
//
// Boxing. When a producer's SBP differs from what a consumer needs, the tensor is
// re-laid dimension by dimension, each change a collective among the devices along that
// mesh dimension (the others fixed), on the part of the tensor those devices share:
//     P -> B  all-reduce          P -> S  reduce-scatter      S -> B  all-gather
//     S(i) -> S(j)  all-to-all    B -> S, B -> P, S -> P  local (slice, or zero-fill)
// and a device sends, on a group of n holding a part of T bytes, 2(n-1)/n T, (n-1)/n T,
// (n-1)/n T, (n-1)/n^2 T and 0 bytes respectively (the busbw conventions of nccl-tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/network_fabric.hpp"

namespace ddlsim {

enum class SbpKind : std::uint8_t { kSplit, kBroadcast, kPartialSum };

struct Sbp {
  SbpKind kind = SbpKind::kBroadcast;
  int axis = 0;  // the tensor axis, for a split
  friend bool operator==(const Sbp& a, const Sbp& b) {
    return a.kind == b.kind && (a.kind != SbpKind::kSplit || a.axis == b.axis);
  }
};
inline Sbp S(int axis) { return Sbp{SbpKind::kSplit, axis}; }
inline const Sbp kB{SbpKind::kBroadcast, 0};
inline const Sbp kP{SbpKind::kPartialSum, 0};

using NdSbp = std::vector<Sbp>;  // one per mesh dimension

std::string to_string(const Sbp& s);    // "S(0)", "B", "P"
std::string to_string(const NdSbp& s);  // "[S(0), B]"

/// A device mesh: its dimension sizes (row-major, the last fastest) over accelerators.
struct DeviceMesh {
  std::vector<int> dims;
  std::vector<NodeId> devices;  // product(dims) of them, in mesh order
  [[nodiscard]] std::size_t size() const;
  /// The mesh of `dims` over the first product(dims) of `devices`; InputError when
  /// there are fewer.
  static DeviceMesh over(std::vector<int> dims, const std::vector<NodeId>& devices);
  /// The mesh positions along dimension `dim` through mesh position `index`.
  [[nodiscard]] std::vector<std::size_t> line_positions(std::size_t index, std::size_t dim) const;
  /// The devices at those positions.
  [[nodiscard]] std::vector<NodeId> line(std::size_t index, std::size_t dim) const;
  /// Every line along `dim`, as positions, each once (ordered by its first position).
  [[nodiscard]] std::vector<std::vector<std::size_t>> lines(std::size_t dim) const;
};

/// A matmul's SBPs: A(m, k) x B(k, n) -> C(m, n).
struct MatmulSignature {
  NdSbp a, b, c;
};

/// "[S(0), B] x [B, S(1)] -> [S(0), S(1)]": how scenarios and reports write a signature.
std::string to_string(const MatmulSignature& s);

/// Reads a signature written as to_string writes it (brackets may be left out on a 1-D
/// mesh: "S(0) x B -> S(0)"), with `mesh_dims` entries per tensor. Throws InputError
/// saying what is wrong (a malformed SBP, a wrong count, a combination no rule allows).
MatmulSignature parse_matmul_signature(const std::string& text, std::size_t mesh_dims);

/// Whether the signature computes C correctly (each mesh dimension one of the six rules).
bool valid_matmul(const MatmulSignature& sig);
/// Every valid signature on a mesh of `mesh_dims` dimensions (6^mesh_dims), in a fixed order.
std::vector<MatmulSignature> matmul_signatures(std::size_t mesh_dims);

/// The per-device shape of a tensor of logical `shape` under `sbp` on `mesh` (a split
/// axis divided by the mesh dimension's size; P and B keep the full extent).
std::vector<std::int64_t> local_shape(const std::vector<std::int64_t>& shape, const NdSbp& sbp, const DeviceMesh& mesh);

/// One collective of a boxing: along `mesh_dim`, `op` on a part of `bytes` (what the
/// group shares; nccl-tests' size convention), or local when `local`.
struct BoxingStep {
  std::size_t mesh_dim = 0;
  bool local = true;
  CollectiveOp op = CollectiveOp::kAllReduce;
  double bytes = 0;
  double sent_per_device = 0;  // bytes each device of the group sends
};

/// The steps that turn a tensor of `tensor_bytes` (logical) from `from` into `to`, one
/// per mesh dimension that changes (two where several dimensions go P -> B: a
/// hierarchical all-reduce), those that cut the tensor first and those that make it
/// whole last (see sbp.cpp). Throws InputError for SBPs of a size other than the mesh's.
std::vector<BoxingStep> boxing_steps(const NdSbp& from, const NdSbp& to, double tensor_bytes, const DeviceMesh& mesh);

/// Bytes one device sends in the whole boxing.
double boxing_bytes_per_device(const NdSbp& from, const NdSbp& to, double tensor_bytes, const DeviceMesh& mesh);

/// One line of devices along mesh dimension `dim` for each way lines lie over the
/// scale-up domains (which members share a server: the pattern of their domains in
/// order), line 0's first. On a homogeneous cluster lines of one pattern cost alike, so
/// the slowest of these is the slowest line (up to wiring inside a server, e.g. a
/// DGX-1's hybrid cube-mesh).
std::vector<std::vector<NodeId>> distinct_lines(const DeviceMesh& mesh, std::size_t dim, const NetworkFabric& fabric);
/// distinct_lines as collective groups.
std::vector<CollectiveGroup> distinct_line_groups(const DeviceMesh& mesh, std::size_t dim, NetworkFabric& fabric);
/// The collective an SBP plan runs for `op` on `bytes` over `group`: the chosen
/// algorithm, streamed (as the replay lowers it and the estimates price it).
CollectiveSpec line_spec(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes);
/// The analytical time of the chosen algorithm for `op` on `bytes`, on the slowest of
/// `lines` (every line runs it at once; the step waits for the last).
double slowest_line_time(NetworkFabric& fabric, const std::vector<CollectiveGroup>& lines, CollectiveOp op, double bytes);

/// The boxing's time on the real topology: each step's collective at its analytical
/// time on the slowest of distinct_lines along its dimension (every line runs it at
/// once; the step waits for the last), steps one after another.
double boxing_time(const NdSbp& from, const NdSbp& to, double tensor_bytes, const DeviceMesh& mesh, NetworkFabric& fabric);

}  // namespace ddlsim
