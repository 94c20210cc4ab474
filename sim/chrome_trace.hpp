// Writes a replay as a Chrome / Perfetto trace (the JSON "Trace Event Format"), loadable
// in ui.perfetto.dev or chrome://tracing.
//
// One track (thread) per resource, named after it; each task that ran on a resource is a
// complete event ("ph":"X") with its name, kind and its FLOPs or bytes as arguments.
// Complete events on one track must nest, so a resource that runs several tasks at once
// (a shared channel) gets extra "lanes", tracks named "dev0.link #2", "#3", ...: each task
// goes to the lowest lane free when it starts.
// Markers are instant events on a "markers" track; every memory pool is a counter track
// showing the bytes it holds. Times are in microseconds, as the format requires.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/observer.hpp"

namespace ddlsim {

class ChromeTrace final : public Observer {
 public:
  /// `pool_names[i]` names PoolId i in the trace (pools without a name are "pool i").
  explicit ChromeTrace(std::ostream& out, std::vector<std::string> pool_names = {});

  /// Names transfers' endpoints in the trace (`endpoint_names[e]` for EndpointId e: the
  /// cluster's node names); without them a transfer's src and dst are the ids.
  void name_endpoints(std::vector<std::string> endpoint_names) { endpoint_names_ = std::move(endpoint_names); }

  void on_begin(const TaskGraph& graph, std::span<ResourceModel* const> resources) override;
  void on_task_start(TaskId task, ResourceId resource, Seconds at) override;
  void on_task_end(TaskId task, ResourceId resource, Seconds at) override;
  void on_end(Seconds makespan) override;

 private:
  void separator();
  void write_endpoint(const char* key, std::uint32_t e);  // ,"key": its name, or e without names
  std::ostream& out_;
  std::vector<std::string> pool_names_;
  std::vector<std::string> endpoint_names_;
  const TaskGraph* graph_ = nullptr;
  std::uint32_t track_of(std::uint32_t resource, std::uint32_t lane);

  std::vector<double> start_;      // start time of each task, s
  std::vector<std::uint32_t> lane_;                // lane of each running task
  std::vector<std::vector<bool>> busy_;            // per resource, per lane: a task is running
  std::vector<std::vector<std::uint32_t>> track_;  // per resource, per lane: its tid
  std::vector<std::string> resource_names_;
  std::uint32_t next_track_ = 0;
  std::vector<double> pool_bytes_;
  std::uint32_t marker_track_ = 0;
  bool first_ = true;
};

}  // namespace ddlsim
