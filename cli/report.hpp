// What `ddlsim run` reports for each strategy, computed from a replay, and how it is
// printed (a table for people, JSON for programs). Field names carry their units.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ddlsim {

struct Scenario;
struct LoweredStep;
struct ReplayResult;
class ResourceUsage;
class MemoryTracker;

struct StrategyReport {
  std::string name;
  double step_time_s = 0;               // simulated time of one training step
  double compute_busy_s = 0;            // busiest device's compute stream, busy time
  double compute_utilization = 0;       // compute_busy_s / step_time_s
  double communication_busy_s = 0;      // busiest device's link, time with a transfer in flight
  double exposed_communication_s = 0;   // step_time_s - compute_busy_s: time compute waits
  double achieved_tflops_per_device = 0;  // busiest device's FLOPs / step_time_s / 1e12
  double peak_memory_bytes = 0;         // highest per-device memory high-water mark
  double device_memory_bytes = 0;       // capacity of one device
  bool fits_in_memory = true;           // peak_memory_bytes <= device_memory_bytes
  std::uint64_t tasks = 0;              // tasks replayed
  std::uint64_t events = 0;             // resource events processed
};

StrategyReport make_report(const std::string& name, const Scenario& scenario, const LoweredStep& step,
                           const ReplayResult& result, const ResourceUsage& usage, const MemoryTracker& memory);

void print_table(std::ostream& out, const Scenario& scenario, const std::vector<StrategyReport>& reports);
void print_json(std::ostream& out, const Scenario& scenario, const std::vector<StrategyReport>& reports);

}  // namespace ddlsim
