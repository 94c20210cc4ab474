#include "cli/collective_support.hpp"

#include <set>
#include <string>

#include "sim/collectives.hpp"
#include "sim/core/engine.hpp"
#include "sim/flow_network.hpp"
#include "sim/network_fabric.hpp"
#include "support/input_error.hpp"

namespace ddlsim {

double parse_size(const std::string& option, const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string suffix = text.substr(digits);
  double unit = 0;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "K" || suffix == "KiB") unit = 1024.0;
  else if (suffix == "M" || suffix == "MiB") unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") unit = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB") unit = 1024.0 * 1024 * 1024 * 1024;
  if (digits == 0 || digits > 12 || unit == 0) {
    throw InputError(option + ": expected a size like 8, 64K, 1M or 8G, got '" + text + "'");
  }
  const double bytes = std::stod(text.substr(0, digits)) * unit;
  if (bytes < 1 || bytes > kMaxCollectiveBytes) {
    throw InputError(option + ": " + text + " is outside 1 B to 1T (1 TiB)");
  }
  return bytes;
}

std::vector<std::size_t> parse_ranks(const std::string& text, std::size_t accelerators) {
  std::vector<std::size_t> ranks;
  if (text == "all") {
    for (std::size_t i = 0; i < accelerators; ++i) ranks.push_back(i);
    return ranks;
  }
  const auto bad = [&](const std::string& why) {
    return InputError("--ranks: " + why + " in '" + text + "' (expected 'all' or a list like 0-7,16,18)");
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t dash = part.find('-');
    const auto number = [&](const std::string& s) {
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) throw bad("'" + part + "' is not a rank or a range");
      return static_cast<std::size_t>(std::stoul(s));
    };
    const std::size_t lo = number(part.substr(0, dash));
    const std::size_t hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw bad("the range '" + part + "' runs backwards");
    if (hi >= accelerators) throw bad("rank " + std::to_string(hi) + " does not exist (the cluster has " + std::to_string(accelerators) + " accelerators)");
    for (std::size_t r = lo; r <= hi; ++r) ranks.push_back(r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::set<std::size_t> seen;
  for (std::size_t r : ranks) {
    if (!seen.insert(r).second) throw bad("rank " + std::to_string(r) + " is given twice");
  }
  return ranks;
}

std::string direct_size_problem(const CollectiveGroup& group, const CollectiveSpec& spec, NetworkModelKind network,
                                const std::string& op_text) {
  const bool hierarchical = spec.algorithm == CollectiveAlgorithm::kHierarchical && spec.op == CollectiveOp::kAllToAll;
  if (spec.algorithm != CollectiveAlgorithm::kDirect && !hierarchical) return "";
  if (spec.op == CollectiveOp::kBroadcast || spec.op == CollectiveOp::kReduce || spec.op == CollectiveOp::kSendRecv) return "";
  const auto p = static_cast<std::uint64_t>(group.ranks.size());
  std::uint64_t pairs = p * (p - 1);
  if (hierarchical && unsupported_reason(group, spec.op, spec.algorithm).empty()) {
    // Its transfers in one piece: a pair within each rail across the domains, then
    // within each domain (each pair sends its pieces in turn, on one route).
    CollectiveSpec one = spec;
    one.chunks = 1;
    one.low_latency = false;  // (pairs only: not the low-latency rate's wait)
    pairs = collective_transfer_count(group, one);
  }
  const bool flow = network == NetworkModelKind::kFlow;
  const std::uint64_t limit = flow ? kMaxDirectFlowPairs : kMaxDirectPairs;
  if (pairs <= limit) return "";
  return std::string(hierarchical ? "the hierarchical " : "the direct ") + op_text + " over " + std::to_string(p) + " ranks sends between " + std::to_string(pairs) +
         " pairs of ranks, more than the " + (flow ? "flow model's limit of " : "limit of ") + std::to_string(limit) +
         (flow ? " in flight at once (about 1.7 KB of memory each); use --network analytical or fewer --ranks"
               : " routes kept (about 100 B of memory each); use fewer --ranks");
}

double collective_seconds(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec,
                          NetworkModelKind network, const std::string& op_text, ReplayEngine& engine) {
  if (std::string why = direct_size_problem(group, spec, network, op_text); !why.empty()) throw TooLargeError(why);
  if (network == NetworkModelKind::kAnalytical) return analytical_collective_time(fabric, group, spec);
  const std::uint64_t transfers = collective_transfer_count(group, spec);
  if (transfers > kMaxCollectiveTransfers) {
    throw InputError("the " + std::string(algorithm_name(spec.algorithm)) + " " + op_text + " over " +
                     std::to_string(group.ranks.size()) + " ranks needs " + std::to_string(transfers) +
                     " transfers, more than the flow model's limit of " + std::to_string(kMaxCollectiveTransfers) +
                     "; use --network analytical, fewer --chunks or --channels" +
                     (spec.streamed ? std::string() : std::string(", or --rings streamed")));
  }
  TaskGraph g;
  lower_collective(g, ResourceId(0), group, spec);
  FlowNetwork net("network", fabric);
  ResourceModel* models[] = {&net};
  return engine.run(g, models).makespan.value();
}

}  // namespace ddlsim
