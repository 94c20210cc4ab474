#include "strategies/sbp.hpp"

#include <algorithm>
#include <functional>

#include "support/input_error.hpp"

namespace ddlsim {
namespace {

// The six rules of a matmul along one mesh dimension: A, B, C.
const MatmulSignature& rule(std::size_t r) {
  static const MatmulSignature rules[] = {
      {{S(0)}, {kB}, {S(0)}}, {{kB}, {S(1)}, {S(1)}}, {{S(1)}, {S(0)}, {kP}},
      {{kP}, {kB}, {kP}},     {{kB}, {kP}, {kP}},     {{kB}, {kB}, {kB}},
  };
  return rules[r];
}
constexpr std::size_t kRules = 6;

}  // namespace

std::string to_string(const Sbp& s) {
  switch (s.kind) {
    case SbpKind::kSplit: return "S(" + std::to_string(s.axis) + ")";
    case SbpKind::kBroadcast: return "B";
    case SbpKind::kPartialSum: return "P";
  }
  return "?";
}

std::string to_string(const NdSbp& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + to_string(s[i]);
  return out + "]";
}

std::string to_string(const MatmulSignature& s) {
  return to_string(s.a) + " x " + to_string(s.b) + " -> " + to_string(s.c);
}

namespace {

std::string trimmed(const std::string& t) {
  const auto b = t.find_first_not_of(' ');
  if (b == std::string::npos) return {};
  return t.substr(b, t.find_last_not_of(' ') - b + 1);
}

Sbp parse_sbp(const std::string& t) {
  if (t == "B") return kB;
  if (t == "P") return kP;
  if (t == "S(0)") return S(0);
  if (t == "S(1)") return S(1);
  throw InputError("'" + t + "' is not an SBP of a matrix (S(0), S(1), B or P)");
}

NdSbp parse_nd_sbp(std::string t, std::size_t mesh_dims) {
  t = trimmed(t);
  if (!t.empty() && t.front() == '[') {
    if (t.back() != ']') throw InputError("'" + t + "' opens a bracket it does not close");
    t = t.substr(1, t.size() - 2);
  }
  NdSbp out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = t.find(',', start);
    out.push_back(parse_sbp(trimmed(t.substr(start, comma == std::string::npos ? std::string::npos : comma - start))));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() != mesh_dims) {
    throw InputError("'" + t + "' has " + std::to_string(out.size()) + " SBPs; the mesh has " +
                     std::to_string(mesh_dims) + " dimensions");
  }
  return out;
}

}  // namespace

MatmulSignature parse_matmul_signature(const std::string& text, std::size_t mesh_dims) {
  const std::size_t x = text.find(" x ");
  const std::size_t arrow = text.find("->");
  if (x == std::string::npos || arrow == std::string::npos || arrow < x) {
    throw InputError("'" + text + "' is not a matmul signature; write it as A x B -> C, e.g. \"[S(0), B] x [B, S(1)] -> [S(0), S(1)]\"");
  }
  MatmulSignature sig{parse_nd_sbp(text.substr(0, x), mesh_dims), parse_nd_sbp(text.substr(x + 3, arrow - x - 3), mesh_dims),
                      parse_nd_sbp(text.substr(arrow + 2), mesh_dims)};
  if (!valid_matmul(sig)) {
    throw InputError("'" + text + "' computes no matmul: along each mesh dimension A x B -> C must be one of S(0) x B -> S(0), "
                     "B x S(1) -> S(1), S(1) x S(0) -> P, P x B -> P, B x P -> P, B x B -> B");
  }
  return sig;
}

std::size_t DeviceMesh::size() const {
  std::size_t n = 1;
  for (int d : dims) n *= static_cast<std::size_t>(d);
  return n;
}

DeviceMesh DeviceMesh::over(std::vector<int> dims, const std::vector<NodeId>& devices) {
  DeviceMesh m;
  m.dims = std::move(dims);
  if (m.size() > devices.size()) {
    throw InputError("a mesh of " + std::to_string(m.size()) + " devices over " + std::to_string(devices.size()));
  }
  m.devices.assign(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(m.size()));
  return m;
}

std::vector<std::size_t> DeviceMesh::line_positions(std::size_t index, std::size_t dim) const {
  std::size_t stride = 1;
  for (std::size_t d = dim + 1; d < dims.size(); ++d) stride *= static_cast<std::size_t>(dims[d]);
  const std::size_t base = index - ((index / stride) % static_cast<std::size_t>(dims[dim])) * stride;
  std::vector<std::size_t> out;
  for (int c = 0; c < dims[dim]; ++c) out.push_back(base + static_cast<std::size_t>(c) * stride);
  return out;
}

std::vector<NodeId> DeviceMesh::line(std::size_t index, std::size_t dim) const {
  std::vector<NodeId> out;
  for (std::size_t p : line_positions(index, dim)) out.push_back(devices[p]);
  return out;
}

std::vector<std::vector<std::size_t>> DeviceMesh::lines(std::size_t dim) const {
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t index = 0; index < size(); ++index) {
    std::vector<std::size_t> l = line_positions(index, dim);
    if (l.front() == index) out.push_back(std::move(l));  // each line once, from its first position
  }
  return out;
}

bool valid_matmul(const MatmulSignature& sig) {
  if (sig.a.size() != sig.b.size() || sig.a.size() != sig.c.size()) return false;
  for (std::size_t d = 0; d < sig.a.size(); ++d) {
    bool ok = false;
    for (std::size_t r = 0; r < kRules && !ok; ++r) {
      const MatmulSignature& x = rule(r);
      ok = sig.a[d] == x.a[0] && sig.b[d] == x.b[0] && sig.c[d] == x.c[0];
    }
    if (!ok) return false;
  }
  return true;
}

std::vector<MatmulSignature> matmul_signatures(std::size_t mesh_dims) {
  std::vector<MatmulSignature> out;
  MatmulSignature cur;
  std::function<void(std::size_t)> build = [&](std::size_t d) {
    if (d == mesh_dims) {
      out.push_back(cur);
      return;
    }
    for (std::size_t r = 0; r < kRules; ++r) {
      cur.a.push_back(rule(r).a[0]);
      cur.b.push_back(rule(r).b[0]);
      cur.c.push_back(rule(r).c[0]);
      build(d + 1);
      cur.a.pop_back();
      cur.b.pop_back();
      cur.c.pop_back();
    }
  };
  build(0);
  return out;
}

std::vector<std::int64_t> local_shape(const std::vector<std::int64_t>& shape, const NdSbp& sbp, const DeviceMesh& mesh) {
  std::vector<std::int64_t> out = shape;
  for (std::size_t d = 0; d < sbp.size() && d < mesh.dims.size(); ++d) {
    if (sbp[d].kind != SbpKind::kSplit) continue;
    const auto axis = static_cast<std::size_t>(sbp[d].axis);
    if (axis >= out.size()) throw InputError("SBP " + to_string(sbp) + " splits axis " + std::to_string(axis) +
                                             " of a tensor with " + std::to_string(shape.size()) + " axes");
    out[axis] = (out[axis] + mesh.dims[d] - 1) / mesh.dims[d];
  }
  return out;
}

std::vector<BoxingStep> boxing_steps(const NdSbp& from, const NdSbp& to, double tensor_bytes, const DeviceMesh& mesh) {
  if (from.size() != mesh.dims.size() || to.size() != mesh.dims.size()) {
    throw InputError("boxing " + to_string(from) + " -> " + to_string(to) + ": the mesh has " +
                     std::to_string(mesh.dims.size()) + " dimensions");
  }
  // The order of the per-dimension moves decides the bytes each one moves: a dimension
  // re-laid while another splits the tensor works on that split's part. So the moves
  // that cut the tensor go first and those that make it whole again last:
  //   1. B -> S, B -> P (local);
  //   2. P -> S reduce-scatters, the last mesh dimension first (the innermost, usually
  //      the fast one, on the largest part);
  //   3. S(i) -> S(j) all-to-alls and P -> B all-reduces (neither cuts nor joins);
  //   4. S -> B all-gathers, the first dimension first (on the smallest part);
  //   5. S -> P (local: zeros beside the local part), after which the tensor is whole.
  // Of several P -> B dimensions only the first all-reduces; the others reduce-scatter
  // (step 2) before it and all-gather (step 4) after it, a hierarchical all-reduce that
  // sends 2 (n-1)/n of the part over each dimension as a flat one over the product would,
  // where dimension-by-dimension all-reduces of the whole would send more. Every move's
  // dual (gradient_sbp of both ends: S -> B and P -> S, P -> B and itself, all-to-all
  // and itself, local and local) lands in the mirrored place, so the backward re-layout
  // moves the same parts as the forward (tested).
  struct Move {
    int phase;
    std::size_t dim;
    Sbp to;
  };
  std::vector<Move> moves;
  bool first_all_reduce = true;
  for (std::size_t d = 0; d < from.size(); ++d) {
    if (from[d] == to[d]) continue;
    const SbpKind a = from[d].kind, b = to[d].kind;
    if (a == SbpKind::kBroadcast) moves.push_back({1, d, to[d]});
    else if (a == SbpKind::kPartialSum && b == SbpKind::kSplit) moves.push_back({2, d, to[d]});
    else if (a == SbpKind::kSplit && b == SbpKind::kSplit) moves.push_back({3, d, to[d]});
    else if (a == SbpKind::kPartialSum && b == SbpKind::kBroadcast) {
      if (first_all_reduce || mesh.dims[d] < 2) {
        moves.push_back({3, d, to[d]});
        first_all_reduce = first_all_reduce && mesh.dims[d] < 2;
      } else {
        moves.push_back({2, d, S(0)});
        moves.push_back({4, d, to[d]});
      }
    } else if (a == SbpKind::kSplit && b == SbpKind::kBroadcast) moves.push_back({4, d, to[d]});
    else moves.push_back({5, d, to[d]});  // S -> P
  }
  std::stable_sort(moves.begin(), moves.end(), [](const Move& x, const Move& y) {
    if (x.phase != y.phase) return x.phase < y.phase;
    return x.phase == 2 ? x.dim > y.dim : x.dim < y.dim;
  });
  std::vector<BoxingStep> out;
  NdSbp cur = from;
  for (const Move& mv : moves) {
    const std::size_t d = mv.dim;
    // The part the devices along d share: the tensor over the other dimensions' splits.
    double part = tensor_bytes;
    for (std::size_t e = 0; e < cur.size(); ++e) {
      if (e != d && cur[e].kind == SbpKind::kSplit) part /= mesh.dims[e];
    }
    const double n = mesh.dims[d];
    BoxingStep step;
    step.mesh_dim = d;
    step.bytes = part;
    const SbpKind a = cur[d].kind, b = mv.to.kind;
    step.local = !(a == SbpKind::kPartialSum || (a == SbpKind::kSplit && b != SbpKind::kPartialSum));
    if (a == SbpKind::kPartialSum && b == SbpKind::kBroadcast) {
      step.op = CollectiveOp::kAllReduce;
      step.sent_per_device = 2 * (n - 1) / n * part;
    } else if (a == SbpKind::kPartialSum && b == SbpKind::kSplit) {
      step.op = CollectiveOp::kReduceScatter;
      step.sent_per_device = (n - 1) / n * part;
    } else if (a == SbpKind::kSplit && b == SbpKind::kBroadcast) {
      step.op = CollectiveOp::kAllGather;
      step.sent_per_device = (n - 1) / n * part;
    } else if (a == SbpKind::kSplit && b == SbpKind::kSplit) {
      step.op = CollectiveOp::kAllToAll;
      step.bytes = part / n;  // each device's buffer (nccl-tests' all-to-all size)
      step.sent_per_device = (n - 1) / n * step.bytes;
    }
    if (n < 2) {
      step.local = true;
      step.sent_per_device = 0;
    }
    out.push_back(step);
    cur[d] = mv.to;
  }
  return out;
}

double boxing_bytes_per_device(const NdSbp& from, const NdSbp& to, double tensor_bytes, const DeviceMesh& mesh) {
  double sent = 0;
  for (const BoxingStep& s : boxing_steps(from, to, tensor_bytes, mesh)) sent += s.sent_per_device;
  return sent;
}

std::vector<std::vector<NodeId>> distinct_lines(const DeviceMesh& mesh, std::size_t dim, const NetworkFabric& fabric) {
  const auto& domain = fabric.domain_of_node();
  std::vector<std::vector<std::uint32_t>> seen;
  std::vector<std::vector<NodeId>> out;
  for (const std::vector<std::size_t>& positions : mesh.lines(dim)) {
    // The line's pattern: each member's scale-up domain numbered by first appearance.
    std::vector<std::uint32_t> pattern, firsts;
    std::vector<NodeId> nodes;
    for (std::size_t p : positions) {
      const NodeId n = mesh.devices[p];
      nodes.push_back(n);
      const std::uint32_t d = n.value < domain.size() ? domain[n.value] : n.value;
      const auto it = std::find(firsts.begin(), firsts.end(), d);
      pattern.push_back(static_cast<std::uint32_t>(it - firsts.begin()));
      if (it == firsts.end()) firsts.push_back(d);
    }
    if (std::find(seen.begin(), seen.end(), pattern) != seen.end()) continue;
    seen.push_back(std::move(pattern));
    out.push_back(std::move(nodes));
  }
  return out;
}

std::vector<CollectiveGroup> distinct_line_groups(const DeviceMesh& mesh, std::size_t dim, NetworkFabric& fabric) {
  std::vector<CollectiveGroup> out;
  for (const std::vector<NodeId>& line : distinct_lines(mesh, dim, fabric)) out.push_back(CollectiveGroup::of(fabric, line));
  return out;
}

CollectiveSpec line_spec(NetworkFabric& fabric, const CollectiveGroup& group, CollectiveOp op, double bytes) {
  CollectiveSpec spec = chosen_spec(fabric, group, op, bytes);
  spec.streamed = true;
  return spec;
}

double slowest_line_time(NetworkFabric& fabric, const std::vector<CollectiveGroup>& lines, CollectiveOp op, double bytes) {
  double slowest = 0;
  for (const CollectiveGroup& g : lines) {
    slowest = std::max(slowest, analytical_collective_time(fabric, g, line_spec(fabric, g, op, bytes)));
  }
  return slowest;
}

double boxing_time(const NdSbp& from, const NdSbp& to, double tensor_bytes, const DeviceMesh& mesh, NetworkFabric& fabric) {
  double t = 0;
  for (const BoxingStep& s : boxing_steps(from, to, tensor_bytes, mesh)) {
    if (!s.local) t += slowest_line_time(fabric, distinct_line_groups(mesh, s.mesh_dim, fabric), s.op, s.bytes);
  }
  return t;
}

}  // namespace ddlsim
