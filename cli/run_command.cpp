// `ddlsim run`: load and validate a scenario, lower each strategy to a task graph,
// replay it, and report.
#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "cli/options.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/report.hpp"
#include "cli/scenario.hpp"
#include "cli/task_graph_scenario.hpp"
#include "cli/training.hpp"
#include "scenarios/default_scenario.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/core/engine.hpp"
#include "sim/usage.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

constexpr const char* kRunHelp = R"(Usage: ddlsim run [SCENARIO.json] [OPTIONS]

Replays one training step of every strategy in the scenario on its cluster and prints,
per strategy: step time, samples and tokens per second, model TFLOP/s per device, MFU
and HFU, the fullest device's memory against its capacity, and the busiest links
(--json adds where the critical device's step goes: compute, exposed tensor-, pipeline-
and data-parallel communication, bubble, idle). Without SCENARIO.json the embedded
default scenario runs: a 1.7B GPT on 4 DGX A100 servers under data parallelism, ZeRO-3,
TP+DP and PTD-P (scenarios/default.json). A strategy is Megatron-style (tp, pp, dp, cp,
ZeRO, ...) or an SBP plan: a matmul signature per layer role on a device mesh, as
'ddlsim search --method autoddl' writes them (CNNs take SBP strategies only; see
scenarios/autoddl-vgg16-single-gpu-nodes.json). A scenario with "tasks" instead is a
task graph of your own (compute, transfer, collective and marker tasks with their
dependencies) replayed on a preset cluster or topology file: the makespan, each
device's busy time and the busiest links (scenarios/custom-task-graph.json; README
"Custom task graphs").

The scenario is checked before anything runs: an unknown key, a wrong type, a missing
field, an out-of-range value or an impossible plan (tp not dividing the heads, ...)
stops with one line naming its JSON path and exit status 2.

Examples:
  ddlsim run                                   # the embedded default scenario, as a table
  ddlsim run scenarios/default.json --json     # the same as JSON (fields in README.md)
  ddlsim run --set cluster.nodes=8 --set strategies.3.pp=4    # what if: 8 servers, 4 stages
  ddlsim run --set cluster.nic=ib-ndr          # what if the NICs were 400 Gb/s?
  ddlsim run --set catalog.links.nvlink3.gbytes_per_s=50   # what if NVLink were twice as fast?
  ddlsim run --set simulation.collective_algorithm=tree   # as with NCCL_ALGO=Tree (all-reduces)
  ddlsim run --strategy ptd-p --trace step.json   # open in ui.perfetto.dev
  ddlsim run --csv results.csv                 # one row per strategy
  ddlsim run --links links.csv                 # every link's bytes and utilization, per strategy
  ddlsim run --print-scenario > my.json        # start your own scenario from the default
  ddlsim run scenarios/autoddl-vgg16-single-gpu-nodes.json   # VGG-16: DP, Megatron, an SBP plan

Options)";

struct RunArgs {
  std::optional<std::string> scenario;
  std::vector<std::string> sets;
  std::optional<std::string> strategy;
  std::optional<std::string> trace;
  std::optional<std::string> dot;
  std::optional<std::string> network;
  std::optional<std::string> csv;
  std::optional<std::string> links;
  bool json = false;
  bool print_scenario = false;
  bool help = false;
};

po::options_description run_options() {
  po::options_description d(kRunHelp);
  d.add_options()
      ("help,h", "show this help")
      ("json", "print the report as JSON instead of a table")
      ("set", po::value<std::vector<std::string>>()->composing()->value_name("PATH=VALUE"),
       "override a scenario field before validation; repeatable. PATH is dot-separated, array elements "
       "by index (strategies.0.tp=4); VALUE is JSON, or else a string; null removes the field or element "
       "(its default then applies)")
      ("strategy", po::value<std::string>()->value_name("NAME"), "replay only this strategy of the scenario")
      ("trace", po::value<std::string>()->value_name("FILE"),
       "write a Perfetto/Chrome trace of the replay (one strategy: use --strategy when the scenario has several)")
      ("dot", po::value<std::string>()->value_name("FILE"),
       "write the strategy's task graph in GraphViz dot syntax (one strategy)")
      ("csv", po::value<std::string>()->value_name("FILE"),
       "also write one CSV row per strategy (training scenarios; columns as the JSON fields)")
      ("links", po::value<std::string>()->value_name("FILE"),
       "also write every link that carried traffic, per strategy, as CSV: strategy,link,kind,bytes,utilization "
       "(bytes in the step; utilization = bytes / (line rate x step time)); for plots/ddlsim_plots.py links")
      ("network", po::value<std::string>()->value_name("MODEL"),
       "flow (links shared max-min fairly among transfers) or analytical (each transfer alone, but a "
       "collective's own transfers share the NICs and ports they cross); "
       "overrides the scenario's simulation.network (default flow)")
      ("print-scenario", "print the scenario as it stands after --set (as JSON) and exit")
      ("scenario", po::value<std::string>()->value_name("FILE"), "the scenario JSON file (or give it first)");
  return d;
}

RunArgs parse_run_args(const std::vector<std::string>& args) {
  po::options_description desc = run_options();
  po::positional_options_description pos;
  pos.add("scenario", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).style(kOptionStyle).run(), vm);
  po::notify(vm);
  RunArgs a;
  a.help = vm.count("help") > 0;
  a.json = vm.count("json") > 0;
  a.print_scenario = vm.count("print-scenario") > 0;
  if (vm.count("scenario")) a.scenario = vm["scenario"].as<std::string>();
  if (vm.count("set")) a.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("strategy")) a.strategy = vm["strategy"].as<std::string>();
  if (vm.count("trace")) a.trace = vm["trace"].as<std::string>();
  if (vm.count("dot")) a.dot = vm["dot"].as<std::string>();
  if (vm.count("csv")) a.csv = vm["csv"].as<std::string>();
  if (vm.count("links")) a.links = vm["links"].as<std::string>();
  if (vm.count("network")) a.network = vm["network"].as<std::string>();
  return a;
}

// After --strategy kept `kept` of the scenario's strategies `names`: none kept is an
// error listing them; a file output (--trace, --dot) needs exactly one, and two files.
void check_strategy_choice(const std::vector<std::string>& names, std::size_t kept, const RunArgs& a) {
  if (a.strategy && kept == 0) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw InputError("--strategy " + *a.strategy + ": the scenario has no such strategy" +
                     did_you_mean(*a.strategy, names) + "; it has: " + list);
  }
  if ((a.trace || a.dot) && kept > 1) {
    throw InputError(std::string(a.trace ? "--trace" : "--dot") + ": the scenario has " + std::to_string(kept) +
                     " strategies; choose one with --strategy NAME");
  }
}

// Keeps only the strategy named by --strategy.
void select_strategy(Scenario& s, const RunArgs& a) {
  std::vector<std::string> names;
  for (const auto& p : s.strategies) names.push_back(p.name);
  if (a.strategy) {
    std::erase_if(s.strategies, [&](const DataParallelPlan& p) { return p.name != *a.strategy; });
  }
  check_strategy_choice(names, s.strategies.size(), a);
}

StrategyReport run_one(const Scenario& s, const DataParallelPlan& plan, const RunArgs& a) {
  const LoweredStep step = lower_data_parallel(s.workload, s.cluster, plan, s.network, s.collective_algorithm);
  std::vector<ResourceModel*> resources;
  for (const auto& r : step.resources) resources.push_back(r.get());
  ResourceUsage usage;
  MemoryTracker memory;
  std::vector<Observer*> observers{&usage, &memory};

  std::optional<AtomicFile> trace_file;
  std::optional<ChromeTrace> trace;
  if (a.trace) {
    trace_file.emplace(*a.trace);
    trace.emplace(trace_file->stream(), step.pool_names);
    observers.push_back(&*trace);
  }
  if (a.dot) {
    AtomicFile dot(*a.dot);
    step.graph.write_dot(dot.stream());
    dot.commit();
  }
  const ReplayResult result = replay(step.graph, resources, observers);
  if (trace_file) trace_file->commit();
  return make_report(plan.name, s, step, result, usage, memory);
}

// A scenario that trains a real transformer on a preset cluster.
int run_training(const nlohmann::json& doc, const RunArgs& a, std::ostream& out) {
  const std::string base = a.scenario ? std::filesystem::path(*a.scenario).parent_path().string() : std::string();
  TrainingScenario s = read_training_scenario(doc, base);  // checked before it is printed, too
  if (a.print_scenario) {
    out << doc.dump(2) << "\n";
    return kExitOk;
  }
  if (a.network) {
    const auto kind = parse_network_model(*a.network);
    if (!kind) throw InputError("--network: expected flow or analytical, got '" + *a.network + "'");
    s.network = *kind;
  }
  std::vector<std::string> names;
  for (const auto& t : s.strategies) names.push_back(t.plan.name);
  if (a.strategy) {
    std::erase_if(s.strategies, [&](const TrainingStrategy& t) { return t.plan.name != *a.strategy; });
  }
  check_strategy_choice(names, s.strategies.size(), a);
  TrainingOutputs outputs;
  outputs.trace = a.trace;
  outputs.dot = a.dot;
  outputs.all_links = a.links.has_value();
  std::vector<TrainingReport> reports;
  for (const auto& t : s.strategies) {
    try {
      reports.push_back(run_training_strategy(s, t, outputs));
    } catch (const TooLargeError& e) {
      // (Found as the step is lowered, where the replicas it replays are known: named as
      // the scenario's strategy.)
      const auto at = std::find(names.begin(), names.end(), t.plan.name) - names.begin();
      throw TooLargeError("strategies." + std::to_string(at) + ": " + e.what());
    }
  }
  if (a.csv) {
    AtomicFile csv(*a.csv);
    print_training_csv(csv.stream(), reports);
    csv.commit();
  }
  if (a.links) {
    AtomicFile f(*a.links);
    f.stream() << "strategy,link,kind,bytes,utilization\n";
    for (const TrainingReport& r : reports) {
      for (const LinkUse& l : r.all_links) {
        f.stream() << csv_quoted(r.name) << "," << csv_quoted(l.link) << "," << l.kind << "," << shortest_text(l.bytes)
                   << "," << shortest_text(l.utilization) << "\n";
      }
    }
    f.commit();
  }
  if (a.json) print_training_json(out, s, reports);
  else print_training_table(out, s, reports);
  return kExitOk;
}

}  // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  RunArgs a;
  try {
    a = parse_run_args(args);
  } catch (const po::too_many_positional_options_error&) {
    err << "ddlsim run: " << stray_argument_error(args, run_options(), "scenario", 1) << " (see 'ddlsim run --help')\n";
    return kExitBadInput;
  } catch (const po::error& e) {
    err << "ddlsim run: " << option_error(e, run_options()) << " (see 'ddlsim run --help')\n";
    return kExitBadInput;
  }
  if (a.help) {
    out << run_options() << "\nThe scenario format (every field, unit and default) is described in README.md.\n";
    return kExitOk;
  }
  try {
    if (a.print_scenario) {
      // It prints the scenario and replays nothing: an option for the replay would be
      // silently ignored.
      const std::pair<const char*, bool> replay_only[] = {{"--strategy", a.strategy.has_value()}, {"--trace", a.trace.has_value()},
                                                          {"--dot", a.dot.has_value()},           {"--csv", a.csv.has_value()},
                                                          {"--links", a.links.has_value()}};
      for (const auto& [flag, given] : replay_only) {
        if (given) throw InputError(std::string(flag) + ": does not apply with --print-scenario, which prints the scenario and replays nothing");
      }
      if (a.json) throw InputError("--json: --print-scenario prints the scenario as JSON already");
      if (a.network) {
        throw InputError("--network: does not change what --print-scenario prints; use --set simulation.network=" + *a.network);
      }
    }
    check_outputs({{"trace", a.trace}, {"dot", a.dot}, {"csv", a.csv}, {"links", a.links}},
                  a.scenario ? std::vector<std::string>{*a.scenario} : std::vector<std::string>{});
    const std::string source = a.scenario ? *a.scenario : std::string(kDefaultScenarioName);
    const std::string text = a.scenario ? read_input_file(*a.scenario, "scenario") : std::string(kDefaultScenario);
    const nlohmann::json doc = scenario_document(text, source, a.sets);
    if (is_task_graph_scenario(doc)) {
      if (a.print_scenario) {
        out << doc.dump(2) << "\n";
        return kExitOk;
      }
      if (a.csv) throw InputError("--csv: a task graph has no strategies to tabulate; use --json");
      if (a.links) throw InputError("--links: available for training scenarios only; a task graph's --json lists its busiest links");
      if (a.strategy) throw InputError("--strategy: a task graph has no strategies");
      if (a.dot) throw InputError("--dot: available for scenarios with strategies; the task graph is your file");
      TaskGraphRunOptions o;
      o.json = a.json;
      o.network = a.network;
      o.trace = a.trace;
      if (a.scenario) o.base_dir = std::filesystem::path(*a.scenario).parent_path().string();
      run_task_graph_scenario(doc, o, out);
      return kExitOk;
    }
    if (is_training_scenario(doc)) return run_training(doc, a, out);
    if (doc.is_object() && !doc.contains("cluster")) {
      // Neither kind: a misspelt key is the likely cause.
      const std::vector<std::string> keys{"name",       "description", "cluster",    "catalog", "calibration",
                                          "workload",   "strategies",  "simulation", "tasks"};
      for (const auto& item : doc.items()) {
        if (std::find(keys.begin(), keys.end(), item.key()) != keys.end()) continue;
        if (const std::string hint = did_you_mean(item.key(), keys); !hint.empty()) {
          throw InputError(source + ": " + item.key() + ": unknown key" + hint);
        }
      }
      throw InputError(source + ": neither a scenario (\"cluster\", \"workload\", \"strategies\") nor a task graph (\"tasks\"): "
                       "cluster: missing");
    }
    Scenario s = read_scenario(doc);
    if (a.network) {
      const auto kind = parse_network_model(*a.network);
      if (!kind) throw InputError("--network: expected flow or analytical, got '" + *a.network + "'");
      s.network = *kind;
    }
    if (a.print_scenario) {
      out << doc.dump(2) << "\n";
      return kExitOk;
    }
    if (a.csv) throw InputError("--csv: available for training scenarios (a preset cluster or topology file and a real model) only");
    if (a.links) throw InputError("--links: available for training scenarios (a preset cluster or topology file and a real model) only");
    select_strategy(s, a);
    std::vector<StrategyReport> reports;
    for (const auto& plan : s.strategies) reports.push_back(run_one(s, plan, a));
    if (a.json) {
      print_json(out, s, reports);
    } else {
      print_table(out, s, reports);
    }
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("run", err);
  }
}

}  // namespace ddlsim
