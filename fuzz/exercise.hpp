// What both fuzz harnesses do with a scenario that passed validation: lower and replay
// every strategy small enough to replay quickly, with every observer attached, and print
// both report formats. Anything but a clean run is a bug and aborts.
#pragma once

#include <sstream>
#include <vector>

#include "cli/report.hpp"
#include "cli/scenario.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/core/engine.hpp"
#include "sim/usage.hpp"

namespace ddlsim::fuzz {

inline void exercise(const Scenario& s) {
  constexpr std::uint64_t kMaxTasks = 20'000;  // keeps one input well under a second
  std::vector<StrategyReport> reports;
  ReplayEngine engine;
  for (const auto& plan : s.strategies) {
    if (data_parallel_task_count(s.workload, s.cluster, plan) > kMaxTasks) continue;
    const LoweredStep step = lower_data_parallel(s.workload, s.cluster, plan, s.network, s.collective_algorithm);
    std::vector<ResourceModel*> resources;
    for (const auto& r : step.resources) resources.push_back(r.get());
    ResourceUsage usage;
    MemoryTracker memory;
    std::ostringstream trace_text;
    ChromeTrace trace(trace_text, step.pool_names);
    std::vector<Observer*> observers{&usage, &memory, &trace};
    const ReplayResult result = engine.run(step.graph, resources, observers);
    reports.push_back(make_report(plan.name, s, step, result, usage, memory));
  }
  std::ostringstream out;
  print_table(out, s, reports);
  print_json(out, s, reports);
}

}  // namespace ddlsim::fuzz
