// `ddlsim validate`: every measured case replayed, predicted against measured, and the
// accuracy per suite and model size.
#include <boost/program_options.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <optional>

#include "cli/cli.hpp"
#include "cli/cost_model.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/training.hpp"
#include "cli/validation.hpp"
#include "support/atomic_file.hpp"
#include "support/json_set.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

// --cost-model without a value: the embedded default scenario (a name no file has).
constexpr const char* kEmbeddedScenario = "\x01embedded";
// The network model of a record's figures when no --network was given.
constexpr const char* kOwnNetworks = "each case's own";

constexpr const char* kValidateHelp = R"(Usage: ddlsim validate [--suite NAME] [OPTIONS]

Replays measured training steps and compares ddlsim's step time with the measurement.
Suites (data in validation/, embedded in the binary, each with its source and licence):
  vtrain-single  1,440 iteration times of GPT models (0.2B-1.3B) on one node of 2-8
                 A100s, over every tp x dp x pp and micro-batch (vTrain, MICRO 2024)
  vtrain-multi   109 iteration times of GPT 3.6B-175B on 64-512 A100s (vTrain)
  nccl           NCCL all-reduce bus bandwidth (GB/s) on NVSwitch servers, DGX-1,
                 InfiniBand nodes and (RCCL) an MI300X platform, from nccl-tests and
                 benchmark figures published in GitHub issues and ml-engineering, and
                 on 2-8 GPUs of vTrain's A100 server at 64 MiB-1 GiB (its lookup
                 tables); all-reduce times (us) across 2 servers of 8 GPUs at 1 KiB-256
                 MiB (dstack's nccl-tests tables, H100 and A100; nccl issue 1244's
                 1 KiB tree); each collective timed alone
  public-runs    124 published runs: Megatron-LM's weak scaling from 1.7B to 1T (Table
                 1 of Narayanan et al. 2021) and its ZeRO-3 against PTD-P (Table 2),
                 sequence parallelism and selective recomputation against full
                 recomputation (Korthikanti et al. 2022), MT-NLG 530B, BLOOM 176B,
                 PaLM 540B, and NeMo's GPT-3 175B (128-2,048 H100s), Llama 3.1 8B
                 (8-128), 70B (64-2,048) and 405B (32-2,304; the last three with
                 context parallelism), Grok-1 314B (8-2,048; a mixture of experts)
                 and Nemotron-4 15B (16-2,048) and 340B (128-2,048) in BF16 and FP8
                 (NVIDIA's DGX Cloud Benchmarking)
Cases are built from what the source states of the setup (cli/validation.hpp says
how); nothing in a case is fitted. Two figures of the compute model are: the host's
dispatch time per operator and the A100's GEMM half sizes, both fitted to vtrain-single
(sim/data/compute_efficiency.json gives each with its fit), so that suite's error is
in-sample. The catalog's NVLink and InfiniBand efficiencies were set from two NCCL
figures that are not cases (8 x H100 ring ~370 GB/s, one NDR NIC 46-48 GB/s); the nccl
row 'NVLink 4 busbw (in sample)' restates the first and is kept apart. NVLink 3's
ring overhead solves the A100 tables' 2- and 8-GPU busbw at 1 GiB (two of the nccl
suite's 'A100 NVLink all-reduce' points), and the one factor (1.49) on NCCL's
low-latency-protocol latencies that small collectives pay (the catalog's ll_latency_us
and ll_transport_latency_us) has the least mean error over the nccl rows
'small-message latency (in sample)', three 1 KiB all-reduces across 2 servers (LL's
rate, ll_bus_gbytes_per_s, is NCCL's own cap, not fitted). The
H100's sustained fraction of its burst GEMM rate was measured on our H200, not on a
case. Nothing else was fitted to any suite.

Printed: every case of the suites with at most 100 cases (--cases: all), numbered
within its suite, measured, predicted and the error; then per suite and model (or run,
or kind of point): cases, how many of them are within 10% of their measurement (the
accuracy target of the NCCL points and the published runs), mean and worst absolute
percentage error, and Kendall's tau-b between predicted and measured figures among the
strategies of one model on one GPU count and batch (1 = same order, -1 = reversed; -
where no two cases compare or all pairs tie). --json: per suite and model cases,
refused, unfit, within_10pct, mean_abs_error and worst_abs_error (fractions: 0.05 is
5%), kendall_tau (null where undefined), pairs, and network where --network was given.
--csv writes every case: suite, index, model, case, gpus, global_batch, micro_batch,
hidden, heads, layers, seq, tp, dp, pp, cp (empty where not set), unit (s, GB/s or us),
measured and predicted (in that unit), error ((predicted - measured) / measured), refused
(why), and for a replayed training step where it goes, in seconds: compute_s,
exposed_tp_s, exposed_pp_s, exposed_dp_s, exposed_other_s, bubble_s (the six add up to
predicted), the fullest device's peak_memory_gib (GiB) and estimate_s (below). A
measured step ran, so its plan fit its accelerators: a training case whose peak ddlsim
finds over their memory is counted per model as unfit (a line under the table, JSON
unfit), and --check fails on any.

--record FILE writes the table (rounded to 4 decimals) for --check; into an existing
record it writes the suites run and keeps the others (a file there that is no record is
refused), and a record that is --check's own file stays as it was when that check
fails; --network, where given, is recorded with the figures. --check FILE refuses
(status 2) a record without a suite being run or made on another network model, and fails
(status 3) on a figure worse than recorded, fewer cases within 10% than recorded, a
count of cases or pairs changed, a model recorded but no longer produced, a refused or
an unfit case.

Last, the cost model over every replayed plan: the estimate the searches rank it by
(as --cost-model gives it) against its replay, per suite and model the cases estimated
and the mean and worst |estimate - replay| / replay (JSON and --record: estimated,
estimate_mean_abs_error, estimate_worst_abs_error, fractions; --check holds them too
where the record has them; --csv: estimate_s, seconds).

--set PATH=VALUE (repeatable) asks what-if of the suites: every training case's scenario
takes the override before its replay (and in what --case prints), as 'ddlsim run --set'
would, e.g. --set simulation.interference=false, --set simulation.compute_speed_cv=0.015;
the NCCL cases, collectives timed alone, take none (the table's last line says so). An
override the first training case refuses stops the run in one line; a later case whose
plan refuses it counts as refused. Not with --record or --check, whose figures are the
cases' own, nor a simulation.network override with --network.

--case N (with --suite or --measured) prints what reproduces one case outside
validate and replays nothing: a training case's scenario as JSON (the cluster, the
model, the one strategy, the measurement in the description), which 'ddlsim run'
replays to the same predicted step, with its breakdown, memory and --trace; an NCCL
case's 'ddlsim collective' command. --network puts that network model in it.

--measured FILE.csv replays your own measurements instead of the suites: a header
scenario_file,strategy,measured_step_s, then a row per measured step (a training
scenario's file, relative to the CSV's folder; the name of one of its strategies; the
seconds per step you measured, 1e-6 to 1e7). They are printed and tabled like a
suite, "measured", one model per scenario file, Kendall's tau among the strategies
measured on one file; --csv, --json, --record, --check and --case work on them as on
the suites.

--cost-model [SCENARIO.json] checks a cost model instead: for every strategy of the
training scenario (the embedded default without a file), the analytical estimate the
searches rank plans by (estimate_step for Megatron-style plans, sbp_cost for SBP
plans), or with --estimates FILE.csv your own (a header scenario,strategy,predicted_step_s;
scenario is the scenario's "name", rows naming another are skipped; at most one row per
strategy, in seconds from 1e-6 to 1e7; those without one are named after the summary,
JSON not_estimated), against the replay of the same plan on the scenario's network
(--network overrides): the error per strategy, the mean and worst absolute error, and
Kendall's tau between estimated and replayed times (JSON: scenario, network, strategies
with strategy, source, estimate_s, replay_s, error, then mean_abs_error,
worst_abs_error, kendall_tau, pairs, not_estimated; errors as fractions).

Examples:
  ddlsim validate --suite vtrain-single
  ddlsim validate --suite nccl --network analytical
  ddlsim validate --csv cases.csv --json > accuracy.json
  ddlsim validate --check validation/accuracy.json    # fails (exit 3) if accuracy got worse
  ddlsim validate --suite nccl --record validation/accuracy.json   # one suite again, the rest kept
  ddlsim validate --suite vtrain-multi --case 12 > case.json && ddlsim run case.json --trace t.json
  ddlsim validate --measured my-steps.csv --record mine.json   # your cluster, then --check mine.json
  ddlsim validate --suite public-runs --set simulation.compute_speed_cv=0.015   # a what-if on every case
  ddlsim validate --cost-model scenarios/megatron-zero3-vs-ptdp.json
  ddlsim validate --cost-model my.json --estimates mine.csv --json

Exit status: 0 done; 1 an output (a file, standard output) failed while being written (a
full disk); 2 bad input (an output path that cannot be written too); 3 --check failed.

Options)";

void print_table(std::ostream& out, const std::vector<Accuracy>& table) {
  char nums[128];
  std::size_t w = 30;  // the model column: its longest name
  for (const Accuracy& a : table) w = std::max(w, display_width(a.model));
  std::snprintf(nums, sizeof nums, "%6s %10s %13s %9s %12s\n", "cases", "within 10%", "mean |err| %", "worst %", "Kendall tau");
  out << padded("suite", 14) << " " << padded("model", w) << " " << nums;
  for (const Accuracy& a : table) {
    char tau[32] = "-";
    if (a.tau_defined) std::snprintf(tau, sizeof tau, "%.3f", a.kendall_tau);
    std::snprintf(nums, sizeof nums, "%6d %10d %13.2f %9.2f %12s\n", a.cases, a.within, a.mean_abs_error * 100,
                  a.worst_abs_error * 100, tau);
    out << padded(a.suite, 14) << " " << padded(a.model, w) << " " << nums;
    if (a.refused > 0) out << "  (" << a.refused << " cases refused by ddlsim; see --csv)\n";
    if (a.unfit > 0) out << "  (" << a.unfit << " cases that ran do not fit in memory by ddlsim's model; see --csv's peak_memory_gib)\n";
  }
  // The searches' estimate of each replayed plan against its replay (the cost-model
  // check over the suites' plans).
  bool any = false;
  for (const Accuracy& a : table) any = any || a.estimated > 0;
  if (!any) return;
  out << "\nthe searches' estimate of each case's plan against its replay (as validate --cost-model):\n";
  std::snprintf(nums, sizeof nums, "%9s %13s %9s\n", "estimated", "mean |err| %", "worst %");
  out << padded("suite", 14) << " " << padded("model", w) << " " << nums;
  for (const Accuracy& a : table) {
    if (a.estimated == 0) continue;
    std::snprintf(nums, sizeof nums, "%9d %13.2f %9.2f\n", a.estimated, a.estimate_mean_abs_error * 100,
                  a.estimate_worst_abs_error * 100);
    out << padded(a.suite, 14) << " " << padded(a.model, w) << " " << nums;
  }
}

// `network`: --network's model where it overrode every case's, recorded with each model's
// figures so that --check does not compare them with a run on another network model.
nlohmann::ordered_json accuracy_json(const std::vector<Accuracy>& table, std::optional<NetworkModelKind> network) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const Accuracy& a : table) {
    j[a.suite][a.model] = {{"cases", a.cases},
                           {"refused", a.refused},
                           {"unfit", a.unfit},
                           {"within_10pct", a.within},
                           {"mean_abs_error", a.mean_abs_error},
                           {"worst_abs_error", a.worst_abs_error},
                           {"kendall_tau", a.tau_defined ? nlohmann::ordered_json(a.kendall_tau) : nlohmann::ordered_json()},
                           {"pairs", a.pairs}};
    if (a.estimated > 0) {
      j[a.suite][a.model]["estimated"] = a.estimated;
      j[a.suite][a.model]["estimate_mean_abs_error"] = a.estimate_mean_abs_error;
      j[a.suite][a.model]["estimate_worst_abs_error"] = a.estimate_worst_abs_error;
    }
    if (network) j[a.suite][a.model]["network"] = network_model_name(*network);
  }
  return j;
}

void write_csv(const std::string& path, const std::vector<ValidationCase>& cases) {
  AtomicFile f(path);
  std::ostream& o = f.stream();
  o << "suite,index,model,case,gpus,global_batch,micro_batch,hidden,heads,layers,seq,tp,dp,pp,cp,unit,measured,predicted,error,"
       "refused,compute_s,exposed_tp_s,exposed_pp_s,exposed_dp_s,exposed_other_s,bubble_s,peak_memory_gib,estimate_s\n";
  for (const ValidationCase& c : cases) {
    o << c.suite << "," << c.index << "," << csv_quoted(c.model) << "," << csv_quoted(c.label) << "," << c.gpus;
    // The training setup's columns stay empty for a case without one (a collective).
    for (std::int64_t v : {c.global_batch, c.micro_batch, c.hidden, c.heads, c.layers, c.seq, std::int64_t{c.tp},
                           std::int64_t{c.dp}, std::int64_t{c.pp}, std::int64_t{c.cp}}) {
      o << ",";
      if (v != 0) o << v;
    }
    o << "," << c.unit << "," << shortest_text(c.measured) << "," << shortest_text(c.predicted) << ","
      << shortest_text(c.refused.empty() ? c.error() : 0.0) << "," << csv_quoted(c.refused);
    // Where a replayed training step goes (empty for a collective or a refused plan).
    const auto& b = c.breakdown;
    if (b.step && c.refused.empty()) {
      for (double v : {b.compute_s, b.exposed_tp_s, b.exposed_pp_s, b.exposed_dp_s, b.exposed_other_s, b.bubble_s,
                       b.peak_memory_bytes / (1024.0 * 1024 * 1024)}) {
        o << "," << shortest_text(v);
      }
      o << ",";
      if (b.estimate_s > 0.0) o << shortest_text(b.estimate_s);
      o << "\n";
    } else {
      o << ",,,,,,,,\n";
    }
  }
  f.commit();
}

// Every case of the suites with at most `most` cases (all with most = 0), predicted
// against measured: the case's description last, where its length misaligns nothing.
void print_cases(std::ostream& out, const std::vector<ValidationCase>& cases, std::size_t most) {
  std::map<std::string, std::size_t> per_suite;
  std::map<std::string, std::size_t> model_width;  // each suite's longest model name, at least 28
  for (const ValidationCase& c : cases) {
    ++per_suite[c.suite];
    std::size_t& w = model_width.try_emplace(c.suite, 28).first->second;
    w = std::max(w, c.model.size());
  }
  std::string suite;
  for (const ValidationCase& c : cases) {
    if (most > 0 && per_suite[c.suite] > most) continue;
    const std::size_t width = model_width[c.suite];
    if (c.suite != suite) {
      suite = c.suite;
      out << suite << ":\n";
      char head[96];
      std::snprintf(head, sizeof head, "%10s %10s %-4s %8s  case\n", "measured", "predicted", "unit", "error");
      out << "     #  " << padded("model", width) << " " << head;
    }
    char index[16];
    std::snprintf(index, sizeof index, "  %4d  ", c.index);
    out << index << padded(c.model, width) << " ";
    char nums[96];
    if (!c.refused.empty()) {
      std::snprintf(nums, sizeof nums, "%10s %10s %-4s %8s  ", "-", "-", "", "refused");
      out << nums << c.label << " (refused: " << c.refused << ")\n";
    } else {
      std::snprintf(nums, sizeof nums, "%10.4g %10.4g %-4s %+7.1f%%  ", c.measured, c.predicted, c.unit.c_str(),
                    rounded_for_print(c.error() * 100, 1));
      out << nums << c.label << "\n";
    }
  }
  if (!suite.empty()) out << "\n";
}

// --set's overrides, in the order given (none without it).
std::vector<std::string> set_overrides(const po::variables_map& vm) {
  return vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

int check_cost_model_command(const po::variables_map& vm, std::ostream& out) {
  for (const char* other : {"csv", "check", "record", "measured", "case", "cases"}) {
    if (vm.count(other)) throw InputError(std::string("--") + other + ": not with --cost-model");
  }
  if (!vm["suite"].defaulted()) throw InputError("--suite: not with --cost-model");
  std::string given = vm["cost-model"].as<std::string>();
  if (given.empty()) {
    throw InputError("--cost-model: an empty file name (leave the value out for the embedded default scenario)");
  }
  if (given == kEmbeddedScenario) given.clear();
  if (given.size() > 4 && given.compare(given.size() - 4, 4, ".csv") == 0) {
    throw InputError("--cost-model: " + given + " is a CSV; --cost-model takes a training scenario (JSON), and your "
                     "estimates go in --estimates FILE.csv beside it");
  }
  TrainingScenario s = load_training_scenario(
      given.empty() ? std::nullopt : std::optional<std::string>(given), set_overrides(vm),
      "the scenario must train a model on a cluster preset or topology file (\"cluster\": {\"preset\": ...} or "
      "{\"file\": ...}) to check a cost model");
  if (vm.count("network")) {
    const auto kind = parse_network_model(vm["network"].as<std::string>());
    if (!kind) throw InputError("--network: expected flow or analytical, got '" + vm["network"].as<std::string>() + "'");
    s.network = *kind;
  }
  std::optional<std::string> csv;
  std::string csv_name;
  if (vm.count("estimates")) {
    csv_name = vm["estimates"].as<std::string>();
    csv = read_input_file(csv_name, "estimates");
  }
  print_cost_model(out, s, check_cost_model(s, csv, csv_name), vm.count("json") > 0);
  return kExitOk;
}

// validate --set on the suites: every training case's scenario takes the overrides, in
// its key order (its replay, and what --case prints); the NCCL cases, collectives timed
// alone, have no scenario. Refused with --record and --check, whose figures are the
// cases' own, and with --network beside a simulation.network override. A malformed
// expression, or a path or value the first training case's scenario refuses, is refused
// here, in one line; a later case whose plan refuses it is a refused case. Returns the
// number of cases that took the overrides.
std::size_t apply_sets(std::vector<ValidationCase>& cases, const std::vector<std::string>& sets, const po::variables_map& vm) {
  for (const char* other : {"record", "check"}) {
    if (vm.count(other)) {
      throw InputError(std::string("--set: not with --") + other + " (a record holds the cases as they stand; run the "
                       "what-if without it)");
    }
  }
  for (const std::string& s : sets) {
    if (vm.count("network") && s.rfind("simulation.network", 0) == 0) {
      throw InputError("--set " + s + ": not with --network, which sets every case's network model too");
    }
  }
  std::size_t taken = 0;
  for (ValidationCase& c : cases) {
    if (c.suite == "nccl") continue;
    try {
      nlohmann::ordered_json doc = nlohmann::ordered_json::parse(c.reproduce);
      for (const std::string& s : sets) apply_set(doc, s);
      if (taken == 0) (void)read_training_scenario(nlohmann::json::parse(doc.dump()), "");
      c.reproduce = doc.dump(2) + "\n";
      ++taken;
    } catch (const InputError& e) {
      const std::string what = e.what();
      throw InputError(what.rfind("--set", 0) == 0 ? what : "--set: " + what);
    }
  }
  if (taken == 0) throw InputError("--set: the nccl suite's cases are collectives timed alone, without a scenario to set");
  return taken;
}

}  // namespace

int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kValidateHelp);
  d.add_options()("help,h", "show this help")
      ("suite", po::value<std::string>()->value_name("NAME")->default_value("all"),
       "vtrain-single, vtrain-multi, nccl, public-runs or all")
      ("network", po::value<std::string>()->value_name("MODEL"),
       "flow or analytical for every case (default: flow for vtrain and nccl, each scenario's own for public-runs)")
      ("cases", "print every case, predicted against measured (default: those of suites of at most 100 cases)")
      ("measured", po::value<std::string>()->value_name("FILE"),
       "your measurements instead of the suites: a CSV scenario_file,strategy,measured_step_s")
      ("case", po::value<std::string>()->value_name("N"),
       "print what reproduces case N of --suite or --measured (its number in the list and the CSV's index) and "
       "replay nothing: a "
       "training case's scenario, for 'ddlsim run', or an NCCL case's 'ddlsim collective' command")
      ("jobs,j", po::value<int>()->value_name("N"), "threads (default: the machine's cores)")
      ("csv", po::value<std::string>()->value_name("FILE"), "write every case, predicted against measured")
      ("json", "print the accuracy table as JSON")
      ("check", po::value<std::string>()->value_name("FILE"),
       "fail (status 3) if any figure is worse than this recorded table (JSON), a count of cases or pairs differs or "
       "a recorded model is gone; refuse (status 2) a record without a suite run or of another network model")
      ("record", po::value<std::string>()->value_name("FILE"),
       "write the accuracy table as JSON, for --check; into an existing record, keeping the suites not run")
      ("cost-model", po::value<std::string>()->value_name("[SCENARIO]")->implicit_value(kEmbeddedScenario, ""),
       "check estimates against replays for a training scenario's strategies (default: the embedded one)")
      ("estimates", po::value<std::string>()->value_name("FILE"), "with --cost-model: your estimates, CSV")
      ("set", po::value<std::vector<std::string>>()->composing()->value_name("PATH=VALUE"),
       "override a field of every training case's scenario, or with --cost-model of its scenario (VALUE null "
       "removes it)");
  po::variables_map vm;
  if (const auto done = parse_command_options(args, d, nullptr, "validate", vm, out, err)) return *done;
  try {
    std::vector<std::string> inputs;  // --check's record may be --record's file: it is read first
    for (const char* in : {"measured", "cost-model", "estimates"}) {
      if (vm.count(in) && !vm[in].as<std::string>().empty() && vm[in].as<std::string>() != kEmbeddedScenario) {
        inputs.push_back(vm[in].as<std::string>());
      }
    }
    check_outputs(vm, {"csv", "record"}, inputs);
    // --record may rewrite --check's record (read first); --csv would destroy it.
    if (vm.count("csv") && vm.count("check") && same_file(vm["csv"].as<std::string>(), vm["check"].as<std::string>())) {
      throw InputError("--csv: " + vm["csv"].as<std::string>() + " is --check's record too; writing the CSV there would "
                       "destroy it, so give the CSV another name");
    }
    if (vm.count("cost-model")) return check_cost_model_command(vm, out);
    if (vm.count("estimates")) throw InputError("--estimates: only with --cost-model");
    std::string suite = vm["suite"].as<std::string>();
    std::vector<ValidationCase> cases;
    if (vm.count("measured")) {
      if (!vm["suite"].defaulted()) throw InputError("--suite: not with --measured (your measurements are their own suite)");
      suite = "measured";
      cases = measured_cases(vm["measured"].as<std::string>());
    }
    for (const char* name : kValidationSuites) {
      if (suite != "all" && suite != name) continue;
      for (ValidationCase& c : validation_cases(name)) cases.push_back(std::move(c));
    }
    if (cases.empty()) validation_cases(suite);  // throws the unknown-suite error
    std::optional<NetworkModelKind> network;
    if (vm.count("network")) {
      network = parse_network_model(vm["network"].as<std::string>());
      if (!network) throw InputError("--network: expected flow or analytical, got '" + vm["network"].as<std::string>() + "'");
    }
    const std::vector<std::string> sets = set_overrides(vm);
    const std::size_t set_cases = sets.empty() ? 0 : apply_sets(cases, sets, vm);
    if (vm.count("case")) {
      for (const char* other : {"cases", "jobs", "csv", "json", "check", "record"}) {
        if (vm.count(other)) throw InputError(std::string("--") + other + ": not with --case (which replays nothing)");
      }
      if (suite == "all") {
        throw InputError("--case: name its suite too (--suite vtrain-multi --case 12, or --measured FILE): cases are "
                         "numbered within their suite");
      }
      const std::string text = vm["case"].as<std::string>();
      int n = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size() || n < 1 || static_cast<std::size_t>(n) > cases.size()) {
        throw InputError("--case: expected a whole number from 1 to " + std::to_string(cases.size()) + " (the cases of " +
                         suite + "), got '" + text + "'");
      }
      out << reproduce_case(cases[static_cast<std::size_t>(n) - 1], network);
      return kExitOk;
    }
    if (vm.count("cases") && vm.count("json")) {
      throw InputError("--cases: prints every case in the text table; --json has the accuracy table only (--csv FILE "
                       "writes every case)");
    }
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (vm.count("jobs")) {
      jobs = vm["jobs"].as<int>();
      if (jobs < 1 || jobs > 1024) throw InputError("--jobs: expected 1 to 1024, got " + std::to_string(jobs));
    }
    std::vector<std::string> run_suites;  // this run's suites, once each
    for (const ValidationCase& c : cases) {
      if (std::find(run_suites.begin(), run_suites.end(), c.suite) == run_suites.end()) run_suites.push_back(c.suite);
    }
    auto recorded_suites = [](const nlohmann::json& r) {
      std::string names;
      for (const auto& [k, v] : r.items()) names += (names.empty() ? "" : ", ") + k;
      return names.empty() ? std::string("none") : names;
    };
    // The network model figures were replayed on: --network's, or each case's own; a
    // record names it with each model's figures where --network was given.
    const std::string run_network = network ? std::string(network_model_name(*network)) : kOwnNetworks;
    nlohmann::json recorded;
    if (vm.count("check")) {
      const std::string path = vm["check"].as<std::string>();
      recorded = parse_json(read_input_file(path, "recorded accuracy"), path);
      (void)accuracy_regressions({}, recorded, path);  // refuses a malformed record (not one --record writes), up front
      for (const std::string& name : run_suites) {
        if (!recorded.contains(name)) {
          throw InputError("--check: " + path + " records no figures for suite '" + name + "' (it records " +
                           recorded_suites(recorded) + "); check against a record of the suites run, or --record one");
        }
        // Figures of another network model are no baseline for these.
        for (const auto& [model, figures] : recorded[name].items()) {
          const std::string was = figures.value("network", std::string(kOwnNetworks));
          if (was != run_network) {
            throw InputError("--check: " + path + " recorded " + name + " / " + model + " with the network model " + was +
                             ", and this run uses " + run_network +
                             (network ? (figures.contains("network") ? "" : " (leave --network out)")
                                      : " (give --network " + was + ")"));
          }
        }
      }
    }
    // --record keeps the suites an existing record holds that this run leaves out (one
    // suite re-recorded into validation/accuracy.json leaves the others' figures as they
    // were); a file there that is no record is refused rather than replaced.
    nlohmann::ordered_json kept = nlohmann::ordered_json::object();
    // (Only a regular file holds a record: a pipe or /dev/stdout is written, not read.)
    if (vm.count("record") && std::filesystem::is_regular_file(vm["record"].as<std::string>())) {
      const std::string path = vm["record"].as<std::string>();
      try {
        const std::string text = read_input_file(path, "record");
        if (text.find_first_not_of(" \t\r\n") != std::string::npos) {  // (an empty file holds nothing to keep)
          (void)accuracy_regressions({}, parse_json(text, path), path);
          kept = nlohmann::ordered_json::parse(text);  // in its order, as parse_json found it sound
        }
      } catch (const InputError& e) {
        throw InputError("--record: " + path + " is there and is no record that --record could add to (" + e.what() +
                         "); remove it or name another file");
      }
      // One record, one network model: a suite kept from another would fail every later
      // --check of the whole record.
      for (const auto& [name, models] : kept.items()) {
        if (std::find(run_suites.begin(), run_suites.end(), name) != run_suites.end()) continue;
        for (const auto& [model, figures] : models.items()) {
          const std::string was = figures.value("network", std::string(kOwnNetworks));
          if (was != run_network) {
            throw InputError("--record: " + path + " keeps " + name + " / " + model + " recorded with the network model " +
                             was + ", and this run uses " + run_network + "; record into another file, or run with the same model");
          }
        }
      }
    }
    run_validation(cases, network, jobs);
    const std::vector<Accuracy> table = accuracy_table(cases);
    // Compared before anything is written: a malformed record stops with one line.
    const std::vector<std::string> bad =
        vm.count("check") ? accuracy_regressions(table, recorded, vm["check"].as<std::string>()) : std::vector<std::string>{};
    if (vm.count("csv")) {
      try {
        write_csv(vm["csv"].as<std::string>(), cases);
      } catch (const InputError&) {
        throw;
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string("--csv: ") + e.what());  // a failed write (a full disk): status 1
      }
    }
    // A record that is --check's own file is left as it was when the check fails: else
    // the worse figures would become what the next check holds the run to.
    const bool record_is_check = vm.count("record") && vm.count("check") &&
                                 same_file(vm["record"].as<std::string>(), vm["check"].as<std::string>());
    const bool record_kept = vm.count("record") && record_is_check && !bad.empty();
    if (vm.count("record") && !record_kept) {
      nlohmann::ordered_json j = kept;
      const nlohmann::ordered_json now = accuracy_json(table, network);
      for (const auto& [suite, models] : now.items()) j[suite] = models;
      // Rounded to the check's slack, so that the file stays readable and stable.
      for (auto& [s, models] : j.items()) {
        for (auto& [m, a] : models.items()) {
          for (const char* k : {"mean_abs_error", "worst_abs_error", "kendall_tau", "estimate_mean_abs_error", "estimate_worst_abs_error"}) {
            if (a.contains(k) && a[k].is_number()) a[k] = std::round(a[k].get<double>() * 1e4) / 1e4;
          }
        }
      }
      try {
        AtomicFile f(vm["record"].as<std::string>());
        f.stream() << j.dump(2) << "\n";
        f.commit();
      } catch (const InputError&) {
        throw;
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string("--record: ") + e.what());
      }
    }
    if (vm.count("json")) {
      out << accuracy_json(table, network).dump(2) << "\n";
    } else {
      print_cases(out, cases, vm.count("cases") ? 0 : 100);
      print_table(out, table);
      out << "\nnetwork model: "
          << (network ? std::string(network_model_name(*network)) + " for every case (--network)"
                      : std::string("each case's own (flow for vTrain and NCCL cases, the scenario's simulation.network for "
                                    "published runs and --measured)"))
          << "\n";
      if (set_cases > 0) {
        std::string list;
        for (const std::string& x : sets) list += (list.empty() ? "" : " ") + x;
        const std::size_t collectives = cases.size() - set_cases;
        out << "--set: " << list << " on " << set_cases << " training case" << (set_cases == 1 ? "" : "s")
            << (collectives > 0 ? "; the " + std::to_string(collectives) + " NCCL cases take none" : std::string()) << "\n";
      }
    }
    for (const std::string& b : bad) err << "ddlsim validate: worse than recorded: " << b << "\n";
    if (record_kept) {
      err << "ddlsim validate: --record: " << vm["record"].as<std::string>()
          << " left as it was, since the check against it failed\n";
    }
    return bad.empty() ? kExitOk : 3;
  } catch (...) {
    return exit_for_current_exception("validate", err);
  }
}

}  // namespace ddlsim
