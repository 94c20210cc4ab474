// Observers that measure a replay: how busy each resource was, and how much memory each
// pool held at its peak.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/observer.hpp"

namespace ddlsim {

/// Per resource: busy time (the union of the intervals in which it had at least one task
/// started and not finished), the number of tasks, and the FLOPs or bytes they carried.
class ResourceUsage final : public Observer {
 public:
  struct Entry {
    Seconds busy{0.0};
    std::uint64_t tasks = 0;
    Flops flops{0.0};  // compute tasks
    Bytes bytes{0.0};  // transfer tasks
  };

  void on_begin(const TaskGraph& graph, std::span<ResourceModel* const> resources) override;
  void on_task_start(TaskId task, ResourceId resource, Seconds at) override;
  void on_task_end(TaskId task, ResourceId resource, Seconds at) override;

  [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }

 private:
  const TaskGraph* graph_ = nullptr;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> active_;
  std::vector<Seconds> since_;
};

/// Per memory pool: bytes held now and the peak (high-water mark), with when it was reached.
class MemoryTracker final : public Observer {
 public:
  struct Pool {
    Bytes current{0.0};
    Bytes peak{0.0};
    Seconds peak_at{0.0};
  };

  void on_begin(const TaskGraph& graph, std::span<ResourceModel* const> resources) override;
  void on_task_end(TaskId task, ResourceId resource, Seconds at) override;

  [[nodiscard]] const std::vector<Pool>& pools() const { return pools_; }

 private:
  Pool& pool(PoolId id);
  const TaskGraph* graph_ = nullptr;
  std::vector<Pool> pools_;
};

}  // namespace ddlsim
