// The collective operations and algorithms by name, and the policy a run sets for its
// collectives (the counterpart of NCCL_ALGO and NCCL_MIN/MAX_NCHANNELS): small enough
// for the network fabric to carry, so that every collective priced or replayed on it
// follows the same policy (sim/collectives.hpp prices and lowers them).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>

namespace ddlsim {

enum class CollectiveOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };
enum class CollectiveAlgorithm { kRing, kTree, kHalvingDoubling, kDirect, kHierarchical, kTorus };

inline constexpr CollectiveOp kCollectiveOps[] = {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter,
                                                  CollectiveOp::kAllGather, CollectiveOp::kBroadcast,
                                                  CollectiveOp::kReduce,    CollectiveOp::kAllToAll,
                                                  CollectiveOp::kSendRecv};
inline constexpr CollectiveAlgorithm kCollectiveAlgorithms[] = {
    CollectiveAlgorithm::kRing,   CollectiveAlgorithm::kTree,         CollectiveAlgorithm::kHalvingDoubling,
    CollectiveAlgorithm::kDirect, CollectiveAlgorithm::kHierarchical, CollectiveAlgorithm::kTorus};

/// What a run asks of its collectives. Per operation an algorithm, or none for the
/// selector's choice (choose_algorithm); a collective whose group the algorithm cannot
/// serve (a hierarchical all-reduce inside one server, halving-doubling over 6 ranks)
/// is left to the selector. `channels` > 0: rings and trees run with that many channels,
/// and the selector prices them so.
struct CollectivePolicy {
  std::array<std::optional<CollectiveAlgorithm>, std::size(kCollectiveOps)> algorithm{};  // by CollectiveOp value
  int channels = 0;

  [[nodiscard]] std::optional<CollectiveAlgorithm> of(CollectiveOp op) const {
    return algorithm[static_cast<std::size_t>(op)];
  }
  [[nodiscard]] bool automatic() const {
    for (const auto& a : algorithm) {
      if (a) return false;
    }
    return channels == 0;
  }
};

/// Collectives of a step that share where they run (`dim`: "tp", the tensor-parallel
/// all-reduces; "pp", the pipeline's sends (send-recv over 2 ranks, direct); "dp", the
/// data-parallel and ZeRO ones; "copies", sums of a split tied
/// embedding's or replicated key-value groups' gradients), their operation, the
/// algorithm and channels they ran with, and their group size: how many ran in the whole
/// step (all replicas and stages; a sequence-parallel all-gather or reduce-scatter is
/// half of the all-reduce they pair into) and their bytes summed (each one's payload per rank).
struct CollectiveUse {
  std::string dim;
  CollectiveOp op = CollectiveOp::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  int channels = 0;
  std::size_t ranks = 0;
  double count = 0;
  double bytes = 0;
};

}  // namespace ddlsim
