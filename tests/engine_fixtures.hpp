// Helpers for engine tests: a graph with its resources, replayed with a recorder that
// keeps every task's start and end time.
#pragma once

#include <memory>
#include <vector>

#include "sim/core/compute_stream.hpp"
#include "sim/core/engine.hpp"
#include "sim/shared_channel.hpp"

namespace ddlsim::test {

struct Times {
  double start = -1;
  double end = -1;
};

class Recorder final : public Observer {
 public:
  void on_begin(const TaskGraph& g, std::span<ResourceModel* const>) override { times.assign(g.size(), Times{}); }
  void on_task_start(TaskId t, ResourceId, Seconds at) override {
    times[t.value].start = at.value();
    order.push_back(t.value);
  }
  void on_task_end(TaskId t, ResourceId, Seconds at) override { times[t.value].end = at.value(); }
  std::vector<Times> times;
  std::vector<std::uint32_t> order;  // task ids in the order they started
};

struct Rig {
  TaskGraph g;
  std::vector<std::unique_ptr<ResourceModel>> models;
  Recorder rec;

  ResourceId stream(const std::string& name) {
    models.push_back(std::make_unique<ComputeStream>(name));
    return ResourceId(static_cast<std::uint32_t>(models.size() - 1));
  }
  ResourceId channel(const std::string& name, double bytes_per_s, double latency_s = 0.0) {
    models.push_back(std::make_unique<SharedChannel>(name, BytesPerSecond(bytes_per_s), Seconds(latency_s)));
    return ResourceId(static_cast<std::uint32_t>(models.size() - 1));
  }
  TaskId compute(ResourceId s, double seconds, const std::string& name = {}) {
    return g.add(Compute{s, Seconds(seconds), Flops(0)}, name).id();
  }
  TaskId transfer(ResourceId c, double bytes, const std::string& name = {}) {
    return g.add(Transfer{c, EndpointId(0), EndpointId(1), Bytes(bytes)}, name).id();
  }
  ReplayResult run(std::vector<Observer*> extra = {}) {
    std::vector<ResourceModel*> res;
    for (auto& m : models) res.push_back(m.get());
    extra.insert(extra.begin(), &rec);
    return replay(g, res, extra);
  }
  [[nodiscard]] const Times& at(TaskId t) const { return rec.times[t.value]; }
};

}  // namespace ddlsim::test
