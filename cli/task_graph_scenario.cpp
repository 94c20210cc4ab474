#include "cli/task_graph_scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/collective_support.hpp"
#include "cli/scenario.hpp"
#include "cli/training.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/collectives.hpp"
#include "sim/core/compute_stream.hpp"
#include "sim/core/engine.hpp"
#include "sim/network_fabric.hpp"
#include "sim/usage.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "topology/presets.hpp"

namespace ddlsim {
namespace {

// A message's size: whole bytes, from 1 to 1 TiB (1.5 bytes was taken as given).
double whole_bytes(JsonObject& o) {
  const nlohmann::json& v = o.value("bytes");
  const double d = v.is_number() ? v.get<double>() : 0.0;
  if (!v.is_number() || !(d >= 1 && d <= kMaxCollectiveBytes) || d != std::floor(d)) {
    throw InputError(o.field_path("bytes") + ": expected whole bytes from 1 to 1099511627776 (1 TiB), got " + v.dump());
  }
  return d;
}

constexpr std::size_t kMaxTasks = 2'000'000;
constexpr std::uint64_t kMaxTransfers = 50'000'000;  // about 3 GB of task graph

struct TaskSpec {
  std::string name;
  std::string kind;  // compute, transfer, collective, marker
  std::size_t device = 0;  // compute
  double seconds = 0;
  double flops = 0;
  std::size_t from = 0, to = 0;  // transfer
  double bytes = 0;              // transfer, collective
  CollectiveGroup group;         // collective: its ranks
  CollectiveSpec collective;
  std::vector<std::size_t> after;  // indices of the tasks this one waits for
};

struct GraphScenario {
  std::string name;
  Catalog catalog = Catalog::builtin();
  Cluster cluster;
  std::string cluster_title;
  NetworkModelKind network = NetworkModelKind::kFlow;
  std::vector<TaskSpec> tasks;
  // Built once the cluster is read: checks the collectives, then carries the replay. It
  // points into `cluster`, so a GraphScenario is filled in place, never moved.
  std::optional<NetworkFabric> fabric;
};

// An accelerator's index, 0 to n-1, read from `key`.
std::size_t device_index(JsonObject& o, const std::string& key, std::size_t n) {
  const double v = o.number(key, 0, static_cast<double>(n) - 1);
  if (v != std::floor(v)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    throw InputError(o.field_path(key) + ": expected an accelerator's index, got " + text);
  }
  return static_cast<std::size_t>(v);
}

// The first cycle the dependencies form, as names "a -> b -> a" (b after a), or empty.
std::string find_cycle(const std::vector<TaskSpec>& tasks) {
  const std::size_t n = tasks.size();
  std::vector<std::size_t> waiting(n, 0);
  std::vector<std::vector<std::size_t>> next(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j : tasks[i].after) {
      next[j].push_back(i);
      ++waiting[i];
    }
  }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    const std::size_t i = ready.back();
    ready.pop_back();
    for (std::size_t k : next[i]) {
      if (--waiting[k] == 0) ready.push_back(k);
    }
  }
  // Every task left waits, directly or not, on a cycle: walk back through waiting
  // predecessors until one repeats.
  std::size_t at = n;
  for (std::size_t i = 0; i < n && at == n; ++i) {
    if (waiting[i] > 0) at = i;
  }
  if (at == n) return {};
  std::vector<std::size_t> seen_at(n, n), walk;
  while (seen_at[at] == n) {
    seen_at[at] = walk.size();
    walk.push_back(at);
    for (std::size_t j : tasks[at].after) {
      if (waiting[j] > 0) {
        at = j;
        break;
      }
    }
  }
  // walk[seen_at[at]..] is the cycle, each the successor of the next: print it forwards.
  std::string text;
  for (std::size_t k = walk.size(); k-- > seen_at[at];) text += tasks[walk[k]].name + " -> ";
  return text + tasks[walk.back()].name;
}

void read_graph_scenario(const nlohmann::json& doc, const std::string& base_dir, GraphScenario& s) {
  JsonObject root(doc, "");
  s.name = root.name("name");
  (void)root.string_or("description", "");
  root.known("catalog");
  merge_scenario_catalog(doc, base_dir, s.catalog);
  JsonObject cluster = root.object("cluster");
  s.cluster = read_scenario_cluster(cluster, s.catalog, base_dir, s.cluster_title);
  if (root.has("simulation")) {
    JsonObject sim = root.object("simulation");
    if (sim.has("network")) s.network = *parse_network_model(sim.choice("network", {"flow", "analytical"}));
    sim.finish();
  }
  JsonArray list = root.array("tasks");
  if (list.size() == 0) throw InputError("tasks: expected at least one task, got []");
  if (list.size() > kMaxTasks) {
    throw InputError("tasks: " + std::to_string(list.size()) + " tasks, more than the limit of " + std::to_string(kMaxTasks));
  }
  // Names first, so that `after` may name a task further down the list.
  std::map<std::string, std::size_t> index;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObject o = list.object(i);
    std::string name = o.name("name");
    if (const auto [it, fresh] = index.emplace(name, i); !fresh) {
      throw InputError(o.field_path("name") + ": \"" + name + "\" is already the name of tasks." + std::to_string(it->second));
    }
    names.push_back(std::move(name));
  }
  const auto accelerators = s.cluster.accelerators();
  const std::size_t n = accelerators.size();
  NetworkFabric& fabric = s.fabric.emplace(s.cluster, s.catalog);
  std::uint64_t transfers = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObject o = list.object(i);
    TaskSpec t;
    t.name = o.string("name");
    t.kind = o.choice("kind", {"compute", "transfer", "collective", "marker"});
    if (t.kind == "compute") {
      t.device = device_index(o, "device", n);
      t.seconds = o.number("seconds", 0, 1e6);
      t.flops = o.number_or("flops", 0, 1e21, 0);
    } else if (t.kind == "transfer") {
      t.from = device_index(o, "from", n);
      t.to = device_index(o, "to", n);
      if (t.from == t.to) throw InputError(o.field_path("to") + ": the same accelerator as from (" + std::to_string(t.from) + ")");
      t.bytes = whole_bytes(o);
      ++transfers;
    } else if (t.kind == "collective") {
      const std::string op_text = o.string("op");
      const auto op = parse_op(op_text);
      if (!op) {
        std::vector<std::string> ops;
        for (CollectiveOp x : kCollectiveOps) ops.emplace_back(op_name(x));
        throw InputError(o.field_path("op") + ": unknown operation '" + op_text + "'" + did_you_mean(op_text, ops));
      }
      const std::string algorithm = o.choice_or("algorithm", algorithm_choices(), "auto");
      const std::string ranks_text = o.string("ranks");
      std::vector<NodeId> ranks;
      try {
        for (std::size_t r : parse_ranks(ranks_text, n)) ranks.push_back(accelerators[r]);
      } catch (const InputError& e) {
        throw InputError(o.field_path("ranks") + std::string(e.what()).substr(std::string("--ranks").size()));
      }
      if (ranks.size() < 2) throw InputError(o.field_path("ranks") + ": a collective needs at least 2 ranks");
      if (*op == CollectiveOp::kSendRecv && ranks.size() != 2) {  // the first sends to the second; more would idle
        throw InputError(o.field_path("ranks") + ": send-recv takes 2 ranks, the sender and the receiver, not " +
                         std::to_string(ranks.size()));
      }
      t.bytes = whole_bytes(o);
      t.group = CollectiveGroup::of(fabric, std::move(ranks));
      const CollectiveGroup& group = t.group;
      t.collective.op = *op;
      t.collective.bytes = t.bytes;
      if (algorithm == "auto") {
        const CollectiveChoice pick = choose_algorithm(fabric, group, *op, t.bytes);
        t.collective.algorithm = pick.algorithm;
        t.collective.channels = pick.channels;
        t.collective.low_latency = pick.low_latency;
      } else {
        t.collective.algorithm = *parse_algorithm(algorithm);
        if (const std::string why = unsupported_reason(group, *op, t.collective.algorithm); !why.empty()) {
          throw InputError(o.field_path("algorithm") + ": " + why);
        }
        t.collective.low_latency = choose_protocol(fabric, group, t.collective);
      }
      transfers += collective_transfer_count(group, t.collective);
    }
    if (o.has("after")) {
      JsonArray after = o.array("after");
      std::set<std::size_t> listed;  // a long list (a marker after every task) stays n log n
      for (std::size_t k = 0; k < after.size(); ++k) {
        const nlohmann::json& a = after.at(k);
        const std::string where = after.path() + "." + std::to_string(k);
        if (!a.is_string()) throw InputError(where + ": expected a task's name, got " + a.dump());
        const auto it = index.find(a.get<std::string>());
        if (it == index.end()) {
          throw InputError(where + ": no task named '" + a.get<std::string>() + "'" + did_you_mean(a.get<std::string>(), names));
        }
        if (!listed.insert(it->second).second) throw InputError(where + ": '" + a.get<std::string>() + "' is already in after");
        t.after.push_back(it->second);
      }
    }
    o.finish();
    s.tasks.push_back(std::move(t));
  }
  if (transfers > kMaxTransfers) {
    throw InputError("tasks: the transfers and collectives make " + std::to_string(transfers) +
                     " transfers, more than the limit of " + std::to_string(kMaxTransfers));
  }
  if (const std::string cycle = find_cycle(s.tasks); !cycle.empty()) {
    throw InputError("tasks: the dependencies form a cycle: " + cycle);
  }
  root.finish();
}

}  // namespace

bool is_task_graph_scenario(const nlohmann::json& doc) { return doc.is_object() && doc.contains("tasks"); }

void run_task_graph_scenario(const nlohmann::json& doc, const TaskGraphRunOptions& options, std::ostream& out) {
  GraphScenario s;
  read_graph_scenario(doc, options.base_dir, s);
  if (options.network) {
    const auto kind = parse_network_model(*options.network);
    if (!kind) throw InputError("--network: expected flow or analytical, got '" + *options.network + "'");
    s.network = *kind;
  }
  NetworkFabric& fabric = *s.fabric;
  const auto accelerators = s.cluster.accelerators();
  // Resource 0 is the network; each accelerator that computes gets a stream.
  std::vector<std::unique_ptr<ResourceModel>> owned;
  std::unique_ptr<NetworkModel> net = make_network(s.network, "network", fabric);
  NetworkModel* network = net.get();
  owned.push_back(std::move(net));
  std::map<std::size_t, ResourceId> stream_of;
  for (const TaskSpec& t : s.tasks) {
    if (t.kind != "compute" || stream_of.count(t.device)) continue;
    stream_of.emplace(t.device, ResourceId(static_cast<std::uint32_t>(owned.size())));
    owned.push_back(std::make_unique<ComputeStream>(s.cluster.node(accelerators[t.device]).name + ".compute"));
  }
  TaskGraph g;
  std::vector<TaskId> entry, exit;
  std::uint64_t transfers = 0;
  const ResourceId net_id(0);
  for (const TaskSpec& t : s.tasks) {
    TaskId first, last;
    if (t.kind == "compute") {
      first = last = g.add(Compute{stream_of.at(t.device), Seconds(t.seconds), Flops(t.flops)}, t.name).id();
    } else if (t.kind == "transfer") {
      first = last = g.add(Transfer{net_id, EndpointId(accelerators[t.from].value), EndpointId(accelerators[t.to].value),
                                    Bytes(t.bytes)},
                           t.name)
                         .id();
      ++transfers;
    } else if (t.kind == "collective") {
      const LoweredCollective c =
          lower_collective(g, net_id, t.group, t.collective, s.network == NetworkModelKind::kAnalytical ? &fabric : nullptr, t.name);
      first = c.start;
      last = c.end;
      transfers += c.transfers;
    } else {
      first = last = g.add(Marker{}, t.name).id();
    }
    entry.push_back(first);
    exit.push_back(last);
  }
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    for (std::size_t j : s.tasks[i].after) g.add_edge(exit[j], entry[i]);
  }
  std::vector<ResourceModel*> resources;
  for (const auto& r : owned) resources.push_back(r.get());
  ResourceUsage usage;
  std::vector<Observer*> observers{&usage};
  std::optional<AtomicFile> trace_file;
  std::optional<ChromeTrace> trace;
  if (options.trace) {
    trace_file.emplace(*options.trace);
    trace.emplace(trace_file->stream());
    trace->name_endpoints(node_names(s.cluster));
    observers.push_back(&*trace);
  }
  const ReplayResult result = replay(g, resources, observers);
  if (trace_file) trace_file->commit();
  const double makespan = result.makespan.value();
  const std::vector<LinkUse> links =
      busiest_links(s.cluster, network->link_bytes(), makespan, kBusiestLinks, s.network != NetworkModelKind::kAnalytical);

  nlohmann::ordered_json j;
  j["scenario"] = s.name;
  j["cluster"] = s.cluster_title;
  j["accelerators"] = accelerators.size();
  j["network"] = network_model_name(s.network);
  j["tasks"] = s.tasks.size();
  j["replayed_tasks"] = result.tasks;
  j["transfers"] = transfers;
  j["makespan_s"] = makespan;
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const auto& [device, id] : stream_of) {
    const auto& e = usage.entries()[id.value];
    devices.push_back({{"device", device},
                       {"name", s.cluster.node(accelerators[device]).name},
                       {"busy_s", e.busy.value()},
                       {"utilization", makespan > 0 ? e.busy.value() / makespan : 0.0},
                       {"tasks", e.tasks},
                       {"flops", e.flops.value()}});
  }
  j["devices"] = devices;
  nlohmann::ordered_json busiest = nlohmann::ordered_json::array();
  for (const LinkUse& l : links) {
    busiest.push_back({{"link", l.link}, {"kind", l.kind}, {"bytes", l.bytes}, {"utilization", l.utilization}});
  }
  j["most_utilized_links"] = busiest;
  if (options.json) {
    out << j.dump(2) << "\n";
    return;
  }
  out << "task graph: " << s.name << ", " << s.tasks.size() << " tasks (" << result.tasks << " replayed, " << transfers
      << " transfers)\n";
  out << "cluster:    " << s.cluster_title << " (" << accelerators.size() << " accelerators), network "
      << network_model_name(s.network) << "\n";
  // Times in one unit for the report, the largest that keeps the makespan at least 1
  // (s, ms, us), with three decimals: no exponent notation, columns that line up.
  const auto [unit, scale] = makespan >= 1.0 ? std::pair{"s", 1.0} : makespan >= 1e-3 ? std::pair{"ms", 1e3} : std::pair{"us", 1e6};
  out << printf_string("makespan:   %.3f %s\n\n", makespan * scale, unit);
  if (devices.empty()) {
    out << "devices:    none computed (the graph has no compute task)\n";
  } else {
    std::size_t w = 24;
    for (const auto& d : devices) w = std::max(w, display_width(d["name"].get<std::string>()));
    out << padded("device", w) << printf_string(" %12s %8s %8s\n", ("busy (" + std::string(unit) + ")").c_str(), "busy %", "tasks");
    for (const auto& d : devices) {
      out << padded(d["name"].get<std::string>(), w)
          << printf_string(" %12.3f %8.1f %8llu\n", d["busy_s"].get<double>() * scale, d["utilization"].get<double>() * 100,
                           static_cast<unsigned long long>(d["tasks"].get<std::uint64_t>()));
    }
  }
  out << "\nbusiest links" << (s.network == NetworkModelKind::kAnalytical ? " (links between switches left out: the analytical model times them as balanced)" : "") << ":";
  if (links.empty()) out << " none (no traffic on the network)";
  for (const LinkUse& l : links) {
    out << "\n  " << padded(l.link, 40) << " " << padded(l.kind, 10) << printf_string(" %6.1f%%", l.utilization * 100);
  }
  out << "\n";
}

}  // namespace ddlsim
