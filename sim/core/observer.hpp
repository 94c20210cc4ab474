// Observers watch a replay: task starts and ends, in time order. Everything that
// measures a run (busy time, memory high-water marks, traces) is an observer; the engine
// itself keeps no statistics and prints nothing.
#pragma once

#include <span>

#include "sim/core/task.hpp"

namespace ddlsim {

class TaskGraph;
class ResourceModel;

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_begin(const TaskGraph& /*graph*/, std::span<ResourceModel* const> /*resources*/) {}
  /// `resource` is invalid for tasks that take no resource (markers, memory events).
  virtual void on_task_start(TaskId /*task*/, ResourceId /*resource*/, Seconds /*at*/) {}
  virtual void on_task_end(TaskId /*task*/, ResourceId /*resource*/, Seconds /*at*/) {}
  virtual void on_end(Seconds /*makespan*/) {}
};

}  // namespace ddlsim
