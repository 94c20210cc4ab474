// Errors raised by the replay core. The core never prints and never exits: it throws,
// and the caller decides how to report.
#pragma once

#include <stdexcept>
#include <string>

namespace ddlsim {

/// A task graph that cannot be replayed: a cycle, a task that never becomes ready, a
/// task bound to a resource that does not exist or cannot run it.
class ReplayError : public std::runtime_error {
 public:
  explicit ReplayError(const std::string& what) : std::runtime_error(what) {}
};

/// A malformed graph construction call (an edge to a task that does not exist).
class GraphError : public std::invalid_argument {
 public:
  explicit GraphError(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace ddlsim
