// Typed 32-bit identifiers: a TaskId cannot be confused with a ResourceId.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace ddlsim {

template <class Tag>
struct Id {
  std::uint32_t value = std::numeric_limits<std::uint32_t>::max();

  constexpr Id() = default;
  constexpr explicit Id(std::uint32_t v) : value(v) {}
  [[nodiscard]] constexpr bool valid() const { return value != std::numeric_limits<std::uint32_t>::max(); }
  friend constexpr auto operator<=>(Id, Id) = default;
};

struct TaskTag {};
struct ResourceTag {};
struct PoolTag {};
struct EndpointTag {};

using TaskId = Id<TaskTag>;          // index of a task in its TaskGraph
using ResourceId = Id<ResourceTag>;  // index of a resource model in a replay
using PoolId = Id<PoolTag>;          // a memory pool whose occupancy observers follow
using EndpointId = Id<EndpointTag>;  // a transfer's source or destination, interpreted by the channel model

}  // namespace ddlsim
