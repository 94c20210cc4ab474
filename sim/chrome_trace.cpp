#include "sim/chrome_trace.hpp"

#include <cstdio>
#include <ostream>

#include "sim/core/resource_model.hpp"
#include "sim/core/task_graph.hpp"

namespace ddlsim {
namespace {

void write_json_string(std::ostream& out, std::string_view s) {
  out << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          out << static_cast<char>(c);
        }
    }
  }
  out << '"';
}

// Microseconds with nanosecond resolution, formatted the same way on every machine.
std::string micros(double seconds) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e6);
  return buf;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

ChromeTrace::ChromeTrace(std::ostream& out, std::vector<std::string> pool_names)
    : out_(out), pool_names_(std::move(pool_names)) {}

void ChromeTrace::separator() {
  out_ << (first_ ? "\n" : ",\n");
  first_ = false;
}

void ChromeTrace::on_begin(const TaskGraph& graph, std::span<ResourceModel* const> resources) {
  graph_ = &graph;
  start_.assign(graph.size(), 0.0);
  lane_.assign(graph.size(), 0);
  busy_.assign(resources.size(), {});
  track_.assign(resources.size(), {});
  resource_names_.clear();
  for (ResourceModel* m : resources) resource_names_.push_back(m ? m->name() : std::string("unused"));
  pool_bytes_.clear();
  first_ = true;
  out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  separator();
  out_ << R"({"name":"process_name","ph":"M","pid":0,"args":{"name":"ddlsim replay"}})";
  for (std::size_t r = 0; r < resources.size(); ++r) {
    separator();
    out_ << R"({"name":"thread_name","ph":"M","pid":0,"tid":)" << r << R"(,"args":{"name":)";
    write_json_string(out_, resources[r] ? resources[r]->name() : std::string("unused"));
    out_ << "}}";
    separator();
    out_ << R"({"name":"thread_sort_index","ph":"M","pid":0,"tid":)" << r << R"(,"args":{"sort_index":)"
         << r * 1024 << "}}";
    track_[r].push_back(static_cast<std::uint32_t>(r));  // lane 0 is the resource's own track
  }
  marker_track_ = static_cast<std::uint32_t>(resources.size());
  next_track_ = marker_track_ + 1;
  separator();
  out_ << R"({"name":"thread_name","ph":"M","pid":0,"tid":)" << marker_track_
       << R"(,"args":{"name":"markers"}})";
}

std::uint32_t ChromeTrace::track_of(std::uint32_t resource, std::uint32_t lane) {
  auto& tracks = track_[resource];
  while (tracks.size() <= lane) {
    const auto k = static_cast<std::uint32_t>(tracks.size());
    const std::uint32_t tid = next_track_++;
    tracks.push_back(tid);
    separator();
    out_ << R"({"name":"thread_name","ph":"M","pid":0,"tid":)" << tid << R"(,"args":{"name":)";
    write_json_string(out_, resource_names_[resource] + " #" + std::to_string(k + 1));
    out_ << "}}";
    separator();
    out_ << R"({"name":"thread_sort_index","ph":"M","pid":0,"tid":)" << tid << R"(,"args":{"sort_index":)"
         << std::uint64_t{resource} * 1024 + k << "}}";
  }
  return tracks[lane];
}

void ChromeTrace::on_task_start(TaskId task, ResourceId resource, Seconds at) {
  start_[task.value] = at.value();
  if (!resource.valid()) return;
  auto& busy = busy_[resource.value];
  std::uint32_t lane = 0;
  while (lane < busy.size() && busy[lane]) ++lane;
  if (lane == busy.size()) busy.push_back(false);
  busy[lane] = true;
  lane_[task.value] = lane;
}

void ChromeTrace::on_task_end(TaskId task, ResourceId resource, Seconds at) {
  const TaskKind& k = graph_->kind(task);
  const std::string_view name = graph_->name(task);
  const std::string fallback = "t" + std::to_string(task.value);
  const std::string_view shown = name.empty() ? std::string_view(fallback) : name;
  if (resource.valid()) {
    const std::uint32_t lane = lane_[task.value];
    busy_[resource.value][lane] = false;
    const std::uint32_t tid = track_of(resource.value, lane);
    separator();
    out_ << R"({"name":)";
    write_json_string(out_, shown);
    out_ << R"(,"cat":")" << kind_name(k) << R"(","ph":"X","pid":0,"tid":)" << tid
         << ",\"ts\":" << micros(start_[task.value]) << ",\"dur\":" << micros(at.value() - start_[task.value])
         << ",\"args\":{\"task\":" << task.value;
    if (const auto* c = std::get_if<Compute>(&k)) out_ << ",\"flops\":" << number(c->flops.value());
    if (const auto* x = std::get_if<Transfer>(&k)) {
      out_ << ",\"bytes\":" << number(x->bytes.value());
      write_endpoint("src", x->src.value);
      write_endpoint("dst", x->dst.value);
    }
    out_ << "}}";
    return;
  }
  PoolId pool;
  double delta = 0.0;
  if (const auto* a = std::get_if<Allocate>(&k)) {
    pool = a->pool;
    delta = a->bytes.value();
  } else if (const auto* f = std::get_if<Free>(&k)) {
    pool = f->pool;
    delta = -f->bytes.value();
  }
  if (!pool.valid()) {
    separator();
    out_ << R"({"name":)";
    write_json_string(out_, shown);
    out_ << R"(,"cat":"marker","ph":"i","s":"t","pid":0,"tid":)" << marker_track_ << ",\"ts\":" << micros(at.value())
         << ",\"args\":{\"task\":" << task.value << "}}";
    return;
  }
  if (pool.value >= pool_bytes_.size()) pool_bytes_.resize(std::size_t{pool.value} + 1, 0.0);
  pool_bytes_[pool.value] += delta;
  const std::string pool_name =
      pool.value < pool_names_.size() ? pool_names_[pool.value] : "pool " + std::to_string(pool.value);
  separator();
  out_ << R"({"name":)";
  write_json_string(out_, pool_name + " memory");
  out_ << R"(,"ph":"C","pid":0,"ts":)" << micros(at.value()) << R"(,"args":{"bytes":)"
       << number(pool_bytes_[pool.value]) << "}}";
}

void ChromeTrace::write_endpoint(const char* key, std::uint32_t e) {
  out_ << ",\"" << key << "\":";
  if (e < endpoint_names_.size()) {
    write_json_string(out_, endpoint_names_[e]);
  } else {
    out_ << e;
  }
}

void ChromeTrace::on_end(Seconds) { out_ << "\n]}\n"; }

}  // namespace ddlsim
