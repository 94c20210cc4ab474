#include "sim/core/compute_stream.hpp"

namespace ddlsim {

void ComputeStream::begin(const TaskGraph& graph) {
  graph_ = &graph;
  queue_.clear();
  head_ = 0;
  running_ = TaskId{};
  end_ = kNever;
  pace_ = 1.0;
  beside_ = 0;
}

}  // namespace ddlsim
