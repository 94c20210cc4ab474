// The closed set of task kinds a task graph may hold.
//
// A task is one of:
//  - Compute:  occupies a stream resource for a fixed duration (the cost model outside
//              the core decides the duration; FLOPs are carried for reporting);
//  - Transfer: moves bytes from one endpoint to another through a channel resource, whose
//              model decides how long it takes (bandwidth sharing, latency, routing);
//  - Marker:   takes no time and no resource; joins or splits dependencies (a barrier);
//  - Allocate / Free: take no time; change the occupancy of a memory pool, which observers
//              follow to find high-water marks.
#pragma once

#include <string_view>
#include <variant>

#include <cstdint>

#include "sim/core/ids.hpp"
#include "sim/core/units.hpp"

namespace ddlsim {

struct Compute {
  ResourceId stream;
  Seconds duration;
  Flops flops;
};

struct Transfer {
  Transfer() = default;
  Transfer(ResourceId channel_, EndpointId src_, EndpointId dst_, Bytes bytes_, std::uint32_t latencies_ = 1)
      : channel(channel_), src(src_), dst(dst_), latencies(latencies_), bytes(bytes_) {}

  ResourceId channel;
  EndpointId src;
  EndpointId dst;
  // Times the channel's latency is paid before the bytes flow, in the low 30 bits; the
  // top bit (kLowLatencyProtocol) says the collective runs the library's low-latency
  // protocol, whose latencies the network models take (NetworkFabric::route_latency),
  // and the next (kTransportInWait) that the route's own transport latency is left out:
  // the transfer's wait holds its share of it (a ring step's first piece: the ring's
  // mean; a streamed tree's edges: the pipeline's fill) or it pays none (a pipeline's
  // later pieces, which follow the first through the same connection).
  std::uint32_t latencies = 1;
  Bytes bytes;  // (after the four 4-byte fields: 24 bytes, no padding)

  static constexpr std::uint32_t kLowLatencyProtocol = 1u << 31, kTransportInWait = 1u << 30;
  [[nodiscard]] static constexpr std::uint32_t count_of(std::uint32_t l) { return l & ~(kLowLatencyProtocol | kTransportInWait); }
  [[nodiscard]] static constexpr bool transport_in_wait(std::uint32_t l) { return (l & kTransportInWait) != 0; }
  [[nodiscard]] std::uint32_t latency_count() const { return count_of(latencies); }
  [[nodiscard]] bool low_latency() const { return (latencies & kLowLatencyProtocol) != 0; }
  [[nodiscard]] bool transport_in_wait() const { return transport_in_wait(latencies); }
};

struct Marker {};

struct Allocate {
  PoolId pool;
  Bytes bytes;
};

struct Free {
  PoolId pool;
  Bytes bytes;
};

using TaskKind = std::variant<Compute, Transfer, Marker, Allocate, Free>;
static_assert(sizeof(TaskKind) <= 32, "a task's kind is stored per task: keep it within 32 bytes");
// Every id a task names (stream, channel, pool) must be given and below 2^24; the graph
// rejects a task otherwise.

/// The resource a task runs on, or an invalid id for tasks that take no resource.
[[nodiscard]] inline ResourceId resource_of(const TaskKind& k) {
  switch (k.index()) {
    case 0: return std::get<Compute>(k).stream;
    case 1: return std::get<Transfer>(k).channel;
    default: return ResourceId{};
  }
}

[[nodiscard]] inline std::string_view kind_name(const TaskKind& k) {
  constexpr std::string_view names[] = {"compute", "transfer", "marker", "allocate", "free"};
  return names[k.index()];
}

}  // namespace ddlsim
