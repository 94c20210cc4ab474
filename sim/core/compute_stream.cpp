#include "sim/core/compute_stream.hpp"

namespace ddlsim {

void ComputeStream::begin(const TaskGraph& graph) {
  graph_ = &graph;
  queue_.clear();
  head_ = 0;
  running_ = TaskId{};
  end_ = kNever;
}

}  // namespace ddlsim
