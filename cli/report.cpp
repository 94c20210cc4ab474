#include "cli/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "cli/scenario.hpp"
#include "sim/core/engine.hpp"
#include "sim/usage.hpp"
#include "support/strings.hpp"

namespace ddlsim {

StrategyReport make_report(const std::string& name, const Scenario& scenario, const LoweredStep& step,
                           const ReplayResult& result, const ResourceUsage& usage, const MemoryTracker& memory) {
  StrategyReport r;
  r.name = name;
  r.step_time_s = result.makespan.value();
  double flops = 0;
  for (ResourceId id : step.compute) {
    const auto& e = usage.entries()[id.value];
    r.compute_busy_s = std::max(r.compute_busy_s, e.busy.value());
    flops = std::max(flops, e.flops.value());
  }
  for (ResourceId id : step.links) {
    r.communication_busy_s = std::max(r.communication_busy_s, usage.entries()[id.value].busy.value());
  }
  for (const auto& pool : memory.pools()) r.peak_memory_bytes = std::max(r.peak_memory_bytes, pool.peak.value());
  r.peak_memory_bytes = std::round(r.peak_memory_bytes);  // whole bytes
  r.compute_utilization = r.step_time_s > 0 ? r.compute_busy_s / r.step_time_s : 0.0;
  r.exposed_communication_s = r.step_time_s - r.compute_busy_s;
  r.achieved_tflops_per_device = r.step_time_s > 0 ? flops / r.step_time_s / 1e12 : 0.0;
  r.device_memory_bytes = scenario.cluster.device_memory.value();
  r.fits_in_memory = r.peak_memory_bytes <= r.device_memory_bytes;
  r.tasks = result.tasks;
  r.events = result.events;
  return r;
}

namespace {
std::string fmt(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}
}  // namespace

void print_table(std::ostream& out, const Scenario& s, const std::vector<StrategyReport>& reports) {
  out << "scenario: " << s.name << "\n";
  out << "cluster:  " << s.cluster.devices << " devices, " << fmt("%g", s.cluster.device_flops.value() / 1e12)
      << " TFLOP/s each, " << fmt("%g", s.cluster.link_bandwidth.value() / 1e9) << " GB/s link, "
      << fmt("%g", s.cluster.device_memory.value() / kGiB) << " GiB memory\n";
  out << "workload: synthetic, " << s.workload.layers << " layers\n\n";

  std::size_t w = 8;
  for (const auto& r : reports) w = std::max(w, display_width(r.name));
  out << padded("strategy", w)
      << printf_string(" %12s %12s %8s %12s %12s %10s %12s  %s\n", "step (ms)", "compute (ms)", "util %", "comm (ms)",
                       "exposed (ms)", "TFLOP/s", "peak (GiB)", "memory");
  for (const auto& r : reports) {
    out << padded(r.name, w)
        << printf_string(" %12.3f %12.3f %8.1f %12.3f %12.3f %10.1f %12.2f  %s\n", r.step_time_s * 1e3,
                         r.compute_busy_s * 1e3, r.compute_utilization * 100.0, r.communication_busy_s * 1e3,
                         r.exposed_communication_s * 1e3, r.achieved_tflops_per_device, r.peak_memory_bytes / kGiB,
                         r.fits_in_memory ? "fits" : "OUT OF MEMORY");
  }
  out << "\nstep: simulated time of one training step; compute: busiest device's compute time; util: compute/step;\n"
         "comm: time the network carried traffic; exposed: step - compute; TFLOP/s: achieved per device;\n"
         "peak: highest per-device memory high-water mark.\n";
}

void print_json(std::ostream& out, const Scenario& s, const std::vector<StrategyReport>& reports) {
  nlohmann::ordered_json doc;
  doc["scenario"] = s.name;
  doc["devices"] = s.cluster.devices;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& r : reports) {
    nlohmann::ordered_json j;
    j["name"] = r.name;
    j["step_time_s"] = r.step_time_s;
    j["compute_busy_s"] = r.compute_busy_s;
    j["compute_utilization"] = r.compute_utilization;
    j["communication_busy_s"] = r.communication_busy_s;
    j["exposed_communication_s"] = r.exposed_communication_s;
    j["achieved_tflops_per_device"] = r.achieved_tflops_per_device;
    j["peak_memory_bytes"] = std::llround(r.peak_memory_bytes);
    j["device_memory_bytes"] = std::llround(r.device_memory_bytes);
    j["fits_in_memory"] = r.fits_in_memory;
    j["tasks"] = r.tasks;
    j["events"] = r.events;
    list.push_back(std::move(j));
  }
  doc["strategies"] = std::move(list);
  out << doc.dump(2) << "\n";
}

}  // namespace ddlsim
