// `ddlsim search`: find a parallel plan for a training scenario's model and cluster.
#include <algorithm>
#include <boost/program_options.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/search.hpp"
#include "cli/training.hpp"
#include "support/strings.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

constexpr const char* kSearchHelp = R"(Usage: ddlsim search [SCENARIO.json] [--method grid|autoddl|mcmc] [OPTIONS]

Searches parallel plans for the scenario's model on its cluster (a training scenario:
a cluster preset or topology file and a model; without a file, the embedded default)
and ranks them by replayed step time.

  grid     every Megatron-style plan of a transformer: tp dividing the heads, pp the
           layers or the accelerators (up to the layers), dp filling the cluster, micro-batch 1-16, 1F1B or interleaved
           (v = 2, or each --virtual-stages lists), or the schedules --schedules
           lists (zero-bubble and gpipe too),
           ZeRO 0-3 (zero-bubble without ZeRO-3), recomputation none/selective/full,
           sequence parallelism with tp > 1, and for a mixture of experts every
           expert-parallel ep dividing dp (dp x cp) and the experts (ZeRO 0-1), context
           parallelism at each degree --cp lists (default 1: none; it needs flash
           attention and 2 cp dividing the sequence); layers balanced
           over the stages, each pipelined plan also with its layers balanced by
           compute time where that lightens its busiest stage by 1% or more (a large
           vocabulary's output layer and loss weigh several layers: Llama 3 8B on
           pp 4, selective recomputation, takes layers 8, 9, 9, 6), and with multi-token prediction (workload
           mtp_layers) also with its last chunk free of layers. Each plan
           keeps the framework settings of the scenario's first Megatron-style
           strategy (bucket_mib, overlap_grad_reduce, align_grad_reduce, overlap_param_gather, align_param_gather, overlap_p2p,
           overlap_tp_backward, tp_comm_overlap, overlap_ep_comm, moe_dispatcher, fp8_dispatch,
           moe_capacity_factor, moe_pad_to_capacity, moe_grouped_gemm, grad_accumulation,
           grad_reduce_fp32, master_weights, fp8_params, tp_only_amax_red, order), so a
           DeepSpeed-like scenario is searched as DeepSpeed runs; --orders
           tries other rank orders (tp-dp-pp, Megatron's, keeps an
           expert-parallel group inside a server where tp-pp-dp spreads
           it over pp x tp x ep accelerators). Plans the memory model says do not fit the accelerator
           are pruned; the rest are ranked by a closed-form estimate
           (strategies/search.hpp), and the best --replay of them, with the scenario's
           own strategies as baselines, are replayed.
  autoddl  AutoDDL-style, for transformers and CNNs: an SBP signature per layer role
           (every GEMM of the whole model: a transformer's QKV, projection, MLP and
           output layers, a CNN's convolutions and classifier) on meshes of 1 to 3
           dimensions over all accelerators, found by coordinate descent on an
           analytical cost (strategies/sbp_search.hpp) with a memory limit; the step
           runs in micro-batches (1, 2, 4, ...): as many as fit, then fewer or more
           while faster.
  mcmc     FlexFlow-style: the same space (meshes of 1 or 2 dimensions) searched by
           Metropolis-Hastings (--seed, --iterations, --budget) with the replay of each
           plan as its cost.
  The SBP methods replay the plan found, data parallelism and Megatron in SBP terms
  (tensor parallelism over tp devices, the mesh's inner dimension, data parallelism over
  the groups; the tp the analytical cost ranks first, or a line saying why none can run)
  and the scenario's strategies of the same global batch, and say why the found plan is
  faster or slower (its compute, activation re-layouts and gradient synchronization
  against data parallelism's).

Prints the replayed plans ranked by step time (plans that fit in memory first, each
with its estimate, so the cost model's error shows), the best plan, and how many plans
were enumerated, pruned, estimated and replayed (why none were enumerated, and how far
the search got when --budget ran out); the search time goes to stderr (stdout
is the same for the same input, unless --budget cuts the search short). --out writes
the scenario with the best plan as its first strategy ("search-best"), ready for
'ddlsim run'.

Examples:
  ddlsim search                                     # the default scenario's GPT, 32 A100s
  ddlsim search my.json --replay 20 --top 5 --out best.json
  ddlsim search my.json --global-batch 1024 --network flow
  ddlsim search --method autoddl --out best.json    # SBP plans for the default's GPT
  ddlsim search my.json --method mcmc --seed 2 --iterations 1000

Options)";

// The items of a comma-separated list, empty ones kept ("" gives one empty item).
std::vector<std::string> list_items(const std::string& list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = list.find(',', from);
    out.push_back(list.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

// --schedules: a comma-separated list of distinct schedule names, in the grid's order.
std::vector<PipelineSchedule> parse_schedules(const std::string& list) {
  std::vector<PipelineSchedule> out;
  for (const std::string& name : list_items(list)) {
    const auto it = std::find_if(std::begin(kScheduleNames), std::end(kScheduleNames),
                                 [&](const auto& n) { return n.first == name; });
    if (it == std::end(kScheduleNames)) {
      throw InputError("--schedules: expected a comma-separated list of 1f1b, interleaved, zero-bubble and gpipe, got '" +
                       name + "'");
    }
    if (std::find(out.begin(), out.end(), it->second) != out.end()) throw InputError("--schedules: '" + name + "' given twice");
    out.push_back(it->second);
  }
  return out;
}

// A comma-separated list of distinct integers from lo to hi, in the order given
// (`option` and `what` name them in errors: "--cp", "context-parallel degrees").
std::vector<int> parse_distinct_ints(const std::string& list, const char* option, const char* what, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& item : list_items(list)) {
    int v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < lo || v > hi) {
      throw InputError(std::string(option) + ": expected a comma-separated list of " + what + ", " + std::to_string(lo) +
                       " to " + std::to_string(hi) + ", got '" + item + "'");
    }
    if (std::find(out.begin(), out.end(), v) != out.end()) throw InputError(std::string(option) + ": " + item + " given twice");
    out.push_back(v);
  }
  return out;
}

// --cp: distinct context-parallel degrees, 1 to 64, sorted.
std::vector<int> parse_context_parallel(const std::string& list) {
  std::vector<int> out = parse_distinct_ints(list, "--cp", "context-parallel degrees", 1, 64);
  std::sort(out.begin(), out.end());
  return out;
}

// --virtual-stages: distinct chunk counts, 2 to 64, in the order given.
std::vector<int> parse_virtual_stages(const std::string& list) {
  return parse_distinct_ints(list, "--virtual-stages", "model chunks per device", 2, 64);
}

// --orders: a comma-separated list of distinct rank orders, each tp, pp and dp (and cp,
// if named) once joined by '-', innermost first.
std::vector<std::vector<MeshAxis>> parse_orders(const std::string& list) {
  std::vector<std::vector<MeshAxis>> out;
  for (const std::string& item : list_items(list)) {
    std::vector<MeshAxis> order;
    std::size_t from = 0, parts = 0;
    for (; from <= item.size(); ++parts) {
      const std::size_t dash = std::min(item.find('-', from), item.size());
      const std::string name = item.substr(from, dash - from);
      for (MeshAxis a : {MeshAxis::kTp, MeshAxis::kPp, MeshAxis::kDp, MeshAxis::kCp}) {
        if (name == axis_name(a) && std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
      }
      from = dash + 1;
    }
    const bool three = std::find(order.begin(), order.end(), MeshAxis::kCp) == order.end();
    if (parts != order.size() || order.size() != (three ? 3u : 4u)) {
      throw InputError("--orders: expected a comma-separated list of rank orders, each tp, pp and dp (and cp, if named) once joined by '-', "
                       "innermost first (tp-pp-dp, tp-dp-pp, ...), got '" + item + "'");
    }
    if (std::find(out.begin(), out.end(), order) != out.end()) throw InputError("--orders: '" + item + "' given twice");
    out.push_back(std::move(order));
  }
  return out;
}

}  // namespace

int search_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kSearchHelp);
  d.add_options()("help,h", "show this help")
      ("method", po::value<std::string>()->value_name("NAME")->default_value("grid"), "grid, autoddl or mcmc")
      ("seed", po::value<std::string>()->value_name("N")->default_value("1"), "mcmc: the random walk's seed (0 to 2^64-1)")
      ("iterations", po::value<int>()->value_name("N")->default_value(500), "mcmc: proposals")
      ("global-batch", po::value<std::int64_t>()->value_name("N"), "sequences per step (default: the first strategy's)")
      ("replay", po::value<int>()->value_name("N")->default_value(8), "replay the N plans with the best estimates")
      ("top", po::value<int>()->value_name("K")->default_value(10), "print the K best replayed plans")
      ("schedules", po::value<std::string>()->value_name("LIST")->default_value("1f1b,interleaved"),
       "grid: the pipeline schedules to try, comma-separated: 1f1b, interleaved (v = 2), zero-bubble, gpipe")
      ("virtual-stages", po::value<std::string>()->value_name("LIST")->default_value("2"),
       "grid: the model chunks per device the interleaved schedule tries, comma-separated (2 to 64)")
      ("cp", po::value<std::string>()->value_name("LIST")->default_value("1"),
       "grid: the context-parallel degrees to try, comma-separated (1 to 64; > 1 needs flash attention)")
      ("orders", po::value<std::string>()->value_name("LIST"),
       "grid: the rank orders to try, comma-separated, each innermost first: tp-pp-dp, tp-dp-pp, ... (default: the "
       "scenario's)")
      ("budget", po::value<double>()->value_name("SECONDS"), "grid: stop estimating and replaying plans (the scenario's strategies still replay), mcmc: stop proposing, after this long")
      ("network", po::value<std::string>()->value_name("MODEL"), "flow or analytical for the replays (default: the scenario's)")
      ("set", po::value<std::vector<std::string>>()->composing()->value_name("PATH=VALUE"), "override a scenario field (VALUE null removes it)")
      ("out", po::value<std::string>()->value_name("FILE"), "write the scenario with the best plan as its first strategy")
      ("json", "print the result as JSON")
      ("scenario", po::value<std::string>()->value_name("FILE"), "the scenario (or give it first)");
  po::variables_map vm;
  if (const auto done = parse_command_options(args, d, "scenario", "search", vm, out, err)) return *done;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    // The search time goes to stderr: stdout stays the same for the same input.
    auto report_time = [&] {
      char t[96];
      std::snprintf(t, sizeof t, "ddlsim search: %.2f s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      err << t;
    };
    const std::string method = vm["method"].as<std::string>();
    if (method != "grid" && method != "autoddl" && method != "mcmc") {
      throw InputError("--method: expected grid, autoddl or mcmc, got '" + method + "'");
    }
    // An option the method does not use is refused rather than ignored.
    const auto only_for = [&](const char* option, bool used, const char* methods) {
      if (vm.count(option) && !vm[option].defaulted() && !used) {
        throw InputError(std::string("--") + option + ": applies to --method " + methods + ", not " + method);
      }
    };
    only_for("seed", method == "mcmc", "mcmc");
    only_for("iterations", method == "mcmc", "mcmc");
    only_for("replay", method == "grid", "grid");
    only_for("schedules", method == "grid", "grid");
    only_for("virtual-stages", method == "grid", "grid");
    only_for("orders", method == "grid", "grid");
    only_for("cp", method == "grid", "grid");
    only_for("budget", method != "autoddl", "grid and mcmc");
    const int replays = vm["replay"].as<int>(), top = vm["top"].as<int>();
    if (replays < 0 || replays > 10000) throw InputError("--replay: expected 0 to 10000, got " + std::to_string(replays));
    if (top < 1 || top > 10000) throw InputError("--top: expected 1 to 10000, got " + std::to_string(top));
    if (!vm["top"].defaulted() && vm.count("json")) {
      throw InputError("--top: prints the best K in the table; --json has every replayed plan");
    }
    check_outputs(vm, {"out"}, vm.count("scenario") ? std::vector<std::string>{vm["scenario"].as<std::string>()} : std::vector<std::string>{});
    double budget = 1e300;
    if (vm.count("budget")) {
      budget = vm["budget"].as<double>();
      if (!(budget > 0) || !std::isfinite(budget)) throw InputError("--budget: expected a positive number of seconds");
    }
    std::ostringstream budget_os;
    budget_os << budget;
    const std::string budget_text = budget_os.str();  // as given: 5, 0.5, 1e+03
    const std::vector<std::string> sets = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
    const std::optional<std::string> file =
        vm.count("scenario") ? std::optional<std::string>(vm["scenario"].as<std::string>()) : std::nullopt;
    nlohmann::json doc;
    TrainingScenario s = load_training_scenario(
        file, sets, "the scenario must train a model on a cluster preset or topology file (\"cluster\": {\"preset\": ...} or "
        "{\"file\": ...}) to search plans",
        &doc, /*keep_unfit=*/true);
    if (vm.count("network")) {
      const auto kind = parse_network_model(vm["network"].as<std::string>());
      if (!kind) throw InputError("--network: expected flow or analytical, got '" + vm["network"].as<std::string>() + "'");
      s.network = *kind;
    }
    SearchSpace space;
    space.schedules = parse_schedules(vm["schedules"].as<std::string>());
    space.virtual_stages = parse_virtual_stages(vm["virtual-stages"].as<std::string>());
    if (vm.count("orders")) space.orders = parse_orders(vm["orders"].as<std::string>());
    space.context_parallel = parse_context_parallel(vm["cp"].as<std::string>());
    if (!vm["virtual-stages"].defaulted() &&
        std::find(space.schedules.begin(), space.schedules.end(), PipelineSchedule::kInterleaved1F1B) == space.schedules.end()) {
      throw InputError("--virtual-stages: applies to the interleaved schedule, which --schedules leaves out");
    }
    space.global_batch = vm.count("global-batch") ? vm["global-batch"].as<std::int64_t>() : s.strategies.front().plan.global_batch;
    if (space.global_batch < 1 || space.global_batch > 100'000'000) throw InputError("--global-batch: expected 1 to 100000000");
    // The grid's plans run on the framework the scenario's first Megatron-style strategy
    // describes (bucket size, overlaps, gradient accumulation and reduction, rank order).
    for (const TrainingStrategy& t : s.strategies) {
      if (!t.sbp) {
        space.framework = t.plan;
        break;
      }
    }

    auto write_out = [&](const nlohmann::ordered_json& best) {
      if (!vm.count("out")) return;
      nlohmann::ordered_json o = nlohmann::ordered_json::parse(doc.dump());
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      list.push_back(best);
      // Not the strategies that cannot run on this cluster: 'ddlsim run' refuses a scenario with one.
      std::set<std::string> unfit;
      for (const TrainingStrategy& t : s.strategies) {
        if (!t.unfit.empty()) unfit.insert(t.plan.name);
      }
      for (const auto& st : o["strategies"]) {
        const std::string name = st.value("name", "");
        if (name != "search-best" && !unfit.count(name)) list.push_back(st);
      }
      o["strategies"] = list;
      AtomicFile f(vm["out"].as<std::string>());
      f.stream() << o.dump(2) << "\n";
      f.commit();
    };
    if (method == "grid" && !s.transformer) {
      throw InputError("--method grid: the grid holds Megatron-style plans of transformers; " + s.model.name +
                       " is not one (use --method autoddl or mcmc)");
    }
    if (method != "grid") {
      SbpSearchOptions so;
      so.global_batch = space.global_batch;
      so.mcmc = method == "mcmc";
      {
        // Boost reads "-1" into an unsigned as 2^64-1; a seed is digits only.
        const std::string seed = vm["seed"].as<std::string>();
        std::uint64_t value = 0;
        const auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), value);
        if (seed.empty() || ec != std::errc() || end != seed.data() + seed.size()) {
          throw InputError("--seed: expected a whole number from 0 to 18446744073709551615, got '" + seed + "'");
        }
        so.seed = value;
      }
      so.iterations = vm["iterations"].as<int>();
      if (so.iterations < 1 || so.iterations > 1'000'000) throw InputError("--iterations: expected 1 to 1000000");
      so.json = vm.count("json") > 0;
      so.budget_s = budget;
      so.top = top;
      const bool terminal = &err == &std::cerr && ::isatty(2);
      if (terminal) so.progress = [&](const std::string& what) { err << "\rddlsim search: " << what << std::string(12, ' ') << std::flush; };
      const nlohmann::ordered_json best = sbp_search(s, so, out);
      if (terminal) err << "\r" << std::string(60, ' ') << "\r";
      write_out(best);
      report_time();
      return kExitOk;
    }
    SearchOptions opts;
    opts.space = space;
    opts.replays = replays;
    opts.budget_s = budget;
    const bool tty = &err == &std::cerr && ::isatty(2);
    if (tty) {
      opts.progress = [&](bool estimating, std::size_t done, std::size_t total) {
        err << "\rddlsim search: " << (estimating ? "estimating " : "replaying ") << done + 1 << "/" << total
            << std::string(8, ' ') << std::flush;
      };
    }
    const SearchResult result = grid_search(s, opts);
    if (tty) err << "\r" << std::string(40, ' ') << "\r";
    const std::vector<SearchCandidate>& replayed = result.ranked;
    const std::size_t devices = s.cluster.accelerators().size();
    if (replayed.empty() && result.too_large > 0) {
      throw TooLargeError("no plan to replay: all " + std::to_string(result.too_large) +
                          " plans tried are too large to replay (the first, " + result.too_large_reason + ")");
    }
    if (replayed.empty() && result.out_of_budget) {
      throw InputError("no plan to replay: --budget " + budget_text + " s ran out before any of the " +
                       std::to_string(result.enumerated - result.pruned) + " plans that fit was estimated, and no strategy has this global batch");
    }
    if (replayed.empty() && result.enumerated == 0) {
      throw InputError("no plan to replay: no strategy has this global batch and the grid has no plan: " +
                       result.empty_reason);
    }
    if (replayed.empty()) throw InputError("no plan to replay: every grid plan is pruned and no strategy has this global batch");
    const SearchCandidate& best = replayed.front();

    write_out(plan_json(best.plan, "search-best"));
    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["scenario"] = s.name;
      j["method"] = method;
      j["global_batch"] = space.global_batch;
      j["enumerated"] = result.enumerated;
      j["pruned_by_memory"] = result.pruned;
      j["estimated"] = result.estimated;
      j["replayed"] = replayed.size();
      j["too_large_to_replay"] = result.too_large;
      j["out_of_budget"] = result.out_of_budget;
      if (result.enumerated == 0) j["empty_grid_reason"] = result.empty_reason;
      j["unfit_strategies"] = unfit_strategies_json(s);
      nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
      for (const SearchCandidate& e : replayed) {
        nlohmann::ordered_json r = plan_json(e.plan, e.plan.name);
        r["baseline"] = e.baseline;
        r["estimate_s"] = e.estimate_s;
        r["step_time_s"] = e.report.step_time_s;
        r["mfu"] = e.report.mfu;
        r["peak_memory_bytes"] = TrainingReport::whole(e.report.peak_memory_bytes);
        r["fits_in_memory"] = e.report.fits_in_memory;
        ranked.push_back(r);
      }
      j["ranked"] = ranked;
      nlohmann::ordered_json steps = nlohmann::ordered_json::array();
      for (const auto& [n, cost] : result.convergence) steps.push_back({{"evaluations", n}, {"best_estimate_s", cost}});
      // The end of the search, so that the line reaches it.
      if (!result.convergence.empty() && result.convergence.back().first < result.estimated) {
        steps.push_back({{"evaluations", result.estimated}, {"best_estimate_s", result.convergence.back().second}});
      }
      j["convergence"] = steps;
      out << j.dump(2) << "\n";
      report_time();
      return kExitOk;
    }
    out << "scenario: " << s.name << " (" << s.model.name << " on " << devices << " accelerators, global batch "
        << space.global_batch << ", network " << network_model_name(s.network) << ")\n";
    print_collective_policy(out, s.collectives);
    print_speed_policy(out, s);
    out << "\n";
    std::string line;
    // The plan column as wide as the longest plan shown (framework settings lengthen them).
    const std::size_t shown = std::min(replayed.size(), static_cast<std::size_t>(top));
    std::vector<std::string> plans;
    std::size_t width = 68;
    for (std::size_t i = 0; i < shown; ++i) {
      plans.push_back(describe_plan(replayed[i].plan));
      width = std::max(width, std::min<std::size_t>(display_width(plans.back()), 300));
    }
    out << printf_string("%4s  ", "rank") << padded("name", 14) << " " << padded("plan", width)
        << printf_string(" %12s %10s %6s %10s\n", "estimate (s)", "step (s)", "MFU %", "peak (GiB)");
    for (std::size_t i = 0; i < shown; ++i) {
      const SearchCandidate& e = replayed[i];
      out << printf_string("%4zu  ", i + 1) << padded(e.plan.name, 14) << " " << padded(plans[i], width)
          << printf_string(" %12.3f %10.3f %6.1f %10.2f%s\n", e.estimate_s, e.report.step_time_s, e.report.mfu * 100,
                           e.report.peak_memory_bytes / kGiB, e.report.fits_in_memory ? "" : "  OUT OF MEMORY");
    }
    out << "\nbest: " << describe_plan(best.plan) << " (" << best.plan.name << "), " << best.report.step_time_s
        << " s per step" << (best.report.fits_in_memory ? "" : ", OUT OF MEMORY: no plan replayed fits")
        << "\n      " << plan_json(best.plan, "search-best").dump() << "\n";
    line = printf_string(
                  "\ngrid: %zu plans enumerated, %zu pruned by the memory model, %zu estimated, %zu replayed "
                  "(%zu baselines)\n",
                  result.enumerated, result.pruned, result.estimated, replayed.size(), result.baselines);
    out << line;
    if (result.too_large > 0) {
      out << "      " << result.too_large << " skipped as too large to replay (the first, " << result.too_large_reason
          << ")\n";
    }
    if (result.enumerated == 0) out << "      no grid plan: " << result.empty_reason << "\n";
    print_unfit_strategies(s, out);
    if (result.out_of_budget) {
      // Grid plans replayed: those that are not a baseline (a baseline always replays).
      std::size_t grid_replays = 0;
      for (const SearchCandidate& c : replayed) grid_replays += c.baseline ? 0 : 1;
      out << "      --budget " << budget_text << " s ran out: " << result.estimated << " of the "
          << result.enumerated - result.pruned << " plans that fit estimated, " << grid_replays << " of "
          << std::min(result.enumerated - result.pruned, static_cast<std::size_t>(replays))
          << " grid replays made\n";
    }
    report_time();
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("search", err);
  }
}

}  // namespace ddlsim
