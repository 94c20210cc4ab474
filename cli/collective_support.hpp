// What `ddlsim collective` and the nccl suite of `ddlsim validate` share: nccl-tests'
// sizes and rank lists, and the time of one collective on a network model.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/network.hpp"

namespace ddlsim {

class NetworkFabric;
class ReplayEngine;
struct CollectiveGroup;
struct CollectiveSpec;

inline constexpr double kMaxCollectiveBytes = 1024.0 * 1024 * 1024 * 1024;  // 1 TiB
inline constexpr std::uint64_t kMaxCollectiveTransfers = 200'000'000;      // about 13 GB of task graph
// A direct algorithm between every pair of p ranks (all-to-all, and all-gather,
// reduce-scatter and all-reduce when named) keeps a route for each of the p(p - 1) pairs
// (about 120 B each: 4,096 ranks, 1.9 GB and 27 s on the analytical model) and, on the
// flow model, has them all in flight at once with their candidate routes (about 1.7 KB
// each: 1,024 ranks, 1.8 GB and 34 s). Past these counts of pairs it is refused up front.
inline constexpr std::uint64_t kMaxDirectPairs = std::uint64_t{1} << 24;
inline constexpr std::uint64_t kMaxDirectFlowPairs = std::uint64_t{1} << 20;

/// A size like 8, 64K, 1M or 8G (powers of 1024), 1 B to 1 TiB. Throws InputError
/// naming `option`.
double parse_size(const std::string& option, const std::string& text);

/// 'all' or a list like 0-7,16,18 of ranks below `accelerators`, none twice. Throws
/// InputError naming --ranks.
std::vector<std::size_t> parse_ranks(const std::string& text, std::size_t accelerators);

/// Why `spec` (the direct algorithm, or the hierarchical all-to-all) over `group` would outgrow memory on `network`
/// (kMaxDirectPairs, kMaxDirectFlowPairs), naming `op_text`; "" when it would not, or
/// when its sends do not join every pair.
std::string direct_size_problem(const CollectiveGroup& group, const CollectiveSpec& spec, NetworkModelKind network,
                                const std::string& op_text);

/// Seconds the collective takes alone on the fabric: its analytical time, or the replay
/// of its transfers on the flow model (refused past kMaxCollectiveTransfers, and as
/// direct_size_problem says; `op_text`
/// names the operation in that error).
double collective_seconds(NetworkFabric& fabric, const CollectiveGroup& group, const CollectiveSpec& spec,
                          NetworkModelKind network, const std::string& op_text, ReplayEngine& engine);

}  // namespace ddlsim
