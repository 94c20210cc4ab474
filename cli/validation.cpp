#include "cli/validation.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "cli/collective_support.hpp"
#include "cli/cost_model.hpp"
#include "cli/training.hpp"
#include "sim/collectives.hpp"
#include "sim/core/engine.hpp"
#include "sim/network_fabric.hpp"
#include "support/strings.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/presets.hpp"
#include "validation/validation_data.hpp"

namespace ddlsim {
namespace {

constexpr std::int64_t kVtrainVocab = 50257;

// Rows of a CSV as header -> cell maps.
std::vector<std::map<std::string, std::string>> read_csv(std::string_view text) {
  std::stringstream in{std::string(text)};
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = csv_fields(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> cells = csv_fields(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string size_label(const ValidationCase& c, const std::string& billions) {
  char buf[96];
  if (billions.empty()) {
    // Megatron's count: 12 l h^2 (1 + 13/(12h)) + (V + s) h.
    const double h = static_cast<double>(c.hidden), l = static_cast<double>(c.layers);
    const double n = 12 * l * h * h * (1 + 13 / (12 * h)) + static_cast<double>(kVtrainVocab + c.seq) * h;
    std::snprintf(buf, sizeof buf, "%.2gB (h %lld, %lld layers)", n / 1e9, static_cast<long long>(c.hidden),
                  static_cast<long long>(c.layers));
  } else {
    std::snprintf(buf, sizeof buf, "%sB (h %lld, %lld layers)", billions.c_str(), static_cast<long long>(c.hidden),
                  static_cast<long long>(c.layers));
  }
  return buf;
}

// The replayed step time, its breakdown kept in the case.
double step_of(ValidationCase& c, const TrainingReport& r) {
  auto& b = c.breakdown;
  b.step = true;
  b.compute_s = r.compute_busy_s;
  b.exposed_tp_s = r.exposed_tp_s;
  b.exposed_pp_s = r.exposed_pp_s;
  b.exposed_dp_s = r.exposed_dp_s;
  // The CSV has no ep column: expert parallelism's all-to-all waits count as other.
  b.exposed_other_s = r.other_comm_s() + r.exposed_ep_s;
  b.bubble_s = r.bubble_s;
  b.peak_memory_bytes = r.peak_memory_bytes;
  b.fits = r.fits_in_memory;
  return r.step_time_s;
}

// A case's training setup (the CSV's columns) from its scenario and strategy: an SBP
// plan has no micro-batch size or tp x dp x pp, a CNN no transformer shape.
void set_setup(ValidationCase& c, const TrainingScenario& s, const TrainingStrategy& t) {
  const ParallelPlan& p = t.plan;
  c.gpus = t.sbp ? static_cast<int>(s.cluster.accelerators().size()) : p.devices();
  c.global_batch = p.global_batch;
  if (!t.sbp) {
    c.micro_batch = p.micro_batch;
    c.tp = p.tp;
    c.dp = p.dp;
    c.pp = p.pp;
    c.cp = p.cp;
  }
  if (s.transformer) {
    c.hidden = s.model.hidden;
    c.heads = s.model.heads;
    c.layers = s.model.layers;
    c.seq = s.model.seq;
  }
}

// The scenario of a vTrain case, as JSON text: what predict_scenario replays and what
// `validate --case` prints.
std::string vtrain_scenario(const ValidationCase& c, const std::string& source) {
  using J = nlohmann::ordered_json;
  char measured[64];
  std::snprintf(measured, sizeof measured, "%.6g s", c.measured);
  J scenario = J::object();
  scenario["name"] = c.suite + " " + std::to_string(c.index) + ": " + c.model + ", " + c.label;
  scenario["description"] =
      "vTrain's measured iteration (" + source + ", MIT licence; Bang et al., MICRO 2024): " + measured +
      ". Megatron-DeepSpeed's GPT (learned positions, tied embedding, vocabulary 50,257) on DGX A100 servers, "
      "800 Gb/s per server as one 100 Gb/s InfiniBand EDR NIC per GPU; ranks as Megatron-DeepSpeed places them "
      "(tensor-parallel innermost, then data-parallel, then pipeline stages); 1F1B, full recomputation, the "
      "gradients all-reduced after the whole backward and accumulated by autograd, a pass per micro-batch, as "
      "DeepSpeed's 16-bit engines do (cli/validation.hpp)";
  scenario["cluster"] = J{{"preset", "dgx-a100"}, {"nodes", (c.gpus + 7) / 8}, {"nic", "ib-edr"}};
  scenario["workload"] = J{{"hf_config", J{{"model_type", "gpt2"},
                                          {"n_layer", c.layers},
                                          {"n_embd", c.hidden},
                                          {"n_head", c.heads},
                                          {"n_positions", c.seq},
                                          {"vocab_size", kVtrainVocab}}}};
  J strategy = J::object();
  strategy["name"] = "tp" + std::to_string(c.tp) + "-dp" + std::to_string(c.dp) + "-pp" + std::to_string(c.pp) + "-mb" +
                     std::to_string(c.micro_batch);
  strategy["tp"] = c.tp;
  strategy["pp"] = c.pp;
  strategy["dp"] = c.dp;
  strategy["global_batch"] = c.global_batch;
  strategy["micro_batch"] = c.micro_batch;
  strategy["schedule"] = "1f1b";
  strategy["recompute"] = "full";
  strategy["overlap_grad_reduce"] = false;
  strategy["grad_accumulation"] = "add";
  strategy["order"] = J::array({"tp", "dp", "pp"});
  scenario["strategies"] = J::array({strategy});
  scenario["simulation"] = J{{"network", "flow"}};
  return scenario.dump(2) + "\n";
}

// Replays a case's scenario (its one strategy). A plan ddlsim refuses, reading it (as
// `ddlsim run` checks a plan: "strategies.0: tp (5) must divide ...") or lowering it (a
// step beyond the replay's limits), is the case's refusal, not an error of the suite.
double predict_scenario(ValidationCase& c, std::optional<NetworkModelKind> network) {
  try {
    TrainingScenario s = read_training_scenario(nlohmann::json::parse(c.reproduce), "");
    if (network) s.network = *network;
    const double step = step_of(c, run_training_strategy(s, s.strategies.front()));
    // The searches' estimate of the same plan (on the analytical fabric, as they rank
    // it); a plan it cannot price keeps its replay, unestimated.
    try {
      NetworkFabric fabric(s.cluster, s.catalog, s.collectives);
      std::string by;
      c.breakdown.estimate_s = search_estimate(s, s.strategies.front(), fabric, by);
    } catch (const InputError&) {
      c.breakdown.estimate_s = 0;
    }
    return step;
  } catch (const InputError& e) {
    c.refused = e.what();
    return 0;
  }
}

std::vector<ValidationCase> vtrain_cases(const std::string& suite, std::string_view csv, const std::string& source) {
  std::vector<ValidationCase> out;
  for (auto& row : read_csv(csv)) {
    auto num = [&](const char* col) { return std::stod(row.at(col)); };
    ValidationCase c;
    c.suite = suite;
    c.gpus = static_cast<int>(num("# GPUs"));
    c.global_batch = static_cast<std::int64_t>(num("global batch"));
    c.micro_batch = static_cast<std::int64_t>(num("micro batch"));
    c.hidden = static_cast<std::int64_t>(num("hidden size"));
    c.heads = static_cast<std::int64_t>(num("attention heads"));
    c.layers = static_cast<std::int64_t>(num("# layers"));
    c.seq = static_cast<std::int64_t>(num("sequence length"));
    c.tp = static_cast<int>(num("tensor parallelism"));
    c.dp = static_cast<int>(num("data parallelism"));
    c.pp = static_cast<int>(num("pipeline parallelism"));
    c.measured = num("iteration time (ms)") / 1e3;
    const auto p = row.find("Parameters (billion)");
    c.model = size_label(c, p == row.end() ? std::string() : p->second);
    c.label = "tp " + std::to_string(c.tp) + " x dp " + std::to_string(c.dp) + " x pp " + std::to_string(c.pp) +
              ", micro-batch " + std::to_string(c.micro_batch);
    c.group = c.model + " / " + std::to_string(c.gpus) + " GPUs / batch " + std::to_string(c.global_batch);
    c.index = static_cast<int>(out.size()) + 1;
    c.reproduce = vtrain_scenario(c, source);
    c.predict = predict_scenario;
    out.push_back(std::move(c));
  }
  return out;
}


// --- nccl: each measured collective timed alone on the preset standing for the machine ---

std::vector<ValidationCase> nccl_cases() {
  std::vector<ValidationCase> out;
  int line = 1;
  for (auto& row : read_csv(kNcclCases)) {
    ++line;
    const std::string where = "validation/nccl/cases.csv:" + std::to_string(line);
    const auto op = parse_op(row.at("op"));
    // "auto" (absent): the library's own choice (nccl-tests without NCCL_ALGO), ddlsim's
    // selector's (chosen_spec).
    const bool automatic = row.at("algorithm") == "auto";
    const auto algorithm = automatic ? std::nullopt : parse_algorithm(row.at("algorithm"));
    const std::string metric = row.at("metric");
    if (!op || (!automatic && !algorithm) || (metric != "busbw_gbytes_per_s" && metric != "time_us")) {
      throw InputError(where + ": unknown op, algorithm or metric");
    }
    ValidationCase c;
    c.suite = "nccl";
    c.model = row.at("group");
    c.label = row.at("system") + ": " + row.at("algorithm") + " " + row.at("op") + " of " + row.at("bytes");
    c.unit = metric == "time_us" ? "us" : "GB/s";
    c.measured = std::stod(row.at("measured"));
    PresetOptions o;
    o.nodes = std::stoi(row.at("nodes"));
    if (!row.at("accelerator").empty()) o.accelerator = row.at("accelerator");
    if (!row.at("nic").empty()) o.nic = row.at("nic");
    if (!row.at("nics_per_node").empty()) o.nics_per_node = std::stoi(row.at("nics_per_node"));
    const double bytes = parse_size(where + ": bytes", row.at("bytes"));
    c.index = static_cast<int>(out.size()) + 1;
    c.reproduce = "ddlsim collective --preset " + row.at("preset") + " --nodes " + row.at("nodes");
    if (!row.at("accelerator").empty()) c.reproduce += " --accelerator " + row.at("accelerator");
    if (!row.at("nic").empty()) c.reproduce += " --nic " + row.at("nic");
    if (!row.at("nics_per_node").empty()) c.reproduce += " --nics-per-node " + row.at("nics_per_node");
    c.reproduce += " --ranks " + row.at("ranks") + " --op " + row.at("op") + " --algorithm " + row.at("algorithm") +
                   " -b " + row.at("bytes") + " -e " + row.at("bytes");  // reproduce_case adds --network
    c.predict = [o, preset = row.at("preset"), ranks = row.at("ranks"), op = *op, algorithm, bytes, metric,
                 op_text = row.at("op")](ValidationCase& c, std::optional<NetworkModelKind> network) {
      const Catalog catalog = Catalog::builtin();
      const Cluster cluster = build_preset(catalog, preset, o);
      NetworkFabric fabric(cluster, catalog);
      const auto accelerators = cluster.accelerators();
      std::vector<NodeId> members;
      for (std::size_t r : parse_ranks(ranks, accelerators.size())) members.push_back(accelerators[r]);
      c.gpus = static_cast<int>(members.size());
      const CollectiveGroup group = CollectiveGroup::of(fabric, members);
      CollectiveSpec spec;
      if (algorithm) {
        spec.op = op;
        spec.algorithm = *algorithm;
        spec.bytes = bytes;
      } else {
        spec = chosen_spec(fabric, group, op, bytes);
      }
      ReplayEngine engine;
      const double t = collective_seconds(fabric, group, spec, network.value_or(NetworkModelKind::kFlow), op_text, engine);
      return metric == "time_us" ? t * 1e6 : bytes / t * busbw_factor(op, members.size()) / 1e9;
    };
    out.push_back(std::move(c));
  }
  return out;
}

// --- public-runs: published runs as scenarios ---

// A published figure as seconds per step of the scenario's one strategy.
double published_step_s(const nlohmann::json& measured, const TrainingScenario& s, const std::string& where) {
  if (!measured.is_object() || measured.size() != 1) throw InputError(where + ".measured: expected one figure");
  const auto figure = measured.begin();  // an iterator into `measured`, which outlives it
  const std::string kind = figure.key();
  if (!figure.value().is_number()) throw InputError(where + ".measured." + kind + ": expected a number");
  const double v = figure.value().get<double>();
  const ParallelPlan& p = s.strategies.front().plan;
  const double B = static_cast<double>(p.global_batch), seq = static_cast<double>(s.model.seq);
  if (kind == "step_s") return v;
  if (kind == "tokens_per_s") return B * seq / v;
  if (kind == "tflops_per_gpu_megatron") {
    // Narayanan et al. 2021, eq. 3: FLOPs per iteration with activation recomputation.
    const double l = static_cast<double>(s.model.layers), h = static_cast<double>(s.model.hidden);
    const double V = static_cast<double>(s.model.vocab);
    const double flops = 96 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (16 * l * h));
    return flops / (v * 1e12 * static_cast<double>(p.devices()));
  }
  throw InputError(where + ".measured: unknown figure '" + kind + "'");
}

std::vector<ValidationCase> public_run_cases() {
  // In the file's key order, for the scenarios `validate --case` prints.
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(kPublicRuns);
  std::vector<ValidationCase> out;
  std::size_t i = 0;
  for (const nlohmann::ordered_json& e : doc.at("cases")) {
    const std::string where = "validation/public_runs/cases.json: cases[" + std::to_string(i++) + "]";
    ValidationCase c;
    c.suite = "public-runs";
    c.model = e.at("run").get<std::string>();
    c.label = e.at("case").get<std::string>() + " (published: " + e.at("published").get<std::string>() + ")";
    const TrainingScenario s = read_training_scenario(nlohmann::json(e.at("scenario")), "");
    if (s.strategies.size() != 1) throw InputError(where + ".scenario: expected one strategy");
    set_setup(c, s, s.strategies.front());
    c.group = c.model + " / " + std::to_string(c.gpus) + " GPUs / batch " + std::to_string(c.global_batch);
    c.measured = published_step_s(nlohmann::json(e.at("measured")), s, where);
    c.index = static_cast<int>(out.size()) + 1;
    nlohmann::ordered_json scenario = nlohmann::ordered_json::object();
    for (const auto& [key, value] : e.at("scenario").items()) {
      scenario[key] = value;
      if (key == "name" && !e.at("scenario").contains("description")) {
        char step[64];
        std::snprintf(step, sizeof step, "%.6g s per step", c.measured);
        scenario["description"] = c.model + ", " + e.at("case").get<std::string>() + ". " +
                                  e.at("source").get<std::string>() + ". Published: " +
                                  e.at("published").get<std::string>() + ", " + step +
                                  " (validation/public_runs/cases.json)";
      }
    }
    c.reproduce = scenario.dump(2) + "\n";
    c.predict = predict_scenario;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::vector<ValidationCase> measured_cases(const std::string& path) {
  const std::string text = read_input_file(path, "measurements");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::vector<ValidationCase> out;
  for (const CsvRow& row : csv_rows(text, path, {"scenario_file", "strategy", "measured_step_s"})) {
    const std::string where = path + ":" + std::to_string(row.line);
    const std::vector<std::string>& f = row.fields;
    const std::optional<double> measured = step_seconds(f[2]);
    if (!measured) {
      throw InputError(where + ": measured_step_s: expected seconds from 1e-06 to 1e+07, got '" + f[2] + "'");
    }
    if (f[0].empty()) throw InputError(where + ": scenario_file: expected a file name, got ''");
    const std::filesystem::path file = std::filesystem::path(f[0]).is_absolute() ? std::filesystem::path(f[0]) : folder / f[0];
    ValidationCase c;
    try {
      const std::string scenario_text = read_input_file(file.string(), "scenario");
      const nlohmann::json doc = parse_json(scenario_text, file.string());
      if (doc.is_object() && doc.contains("tasks")) {
        throw InputError(file.string() + ": a task graph (it lists \"tasks\"), which only 'ddlsim run' replays; "
                         "--measured needs a training scenario, whose strategies it replays");
      }
      if (!is_training_scenario(doc)) {
        throw InputError(file.string() + ": not a training scenario (its cluster names no preset or topology file)");
      }
      TrainingScenario whole;  // the whole scenario, as 'ddlsim run' reads it
      try {
        whole = read_training_scenario(doc, file.parent_path().string());
      } catch (const InputError& e) {
        throw InputError(file.string() + ": " + e.what());
      }
      std::vector<std::string> names;
      for (const TrainingStrategy& t : whole.strategies) names.push_back(t.plan.name);
      const auto found = std::find(names.begin(), names.end(), f[1]);
      if (found == names.end()) {
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        throw InputError("strategy: " + file.string() + " has no strategy '" + f[1] + "'" + did_you_mean(f[1], names) +
                         " (its strategies: " + list + ")");
      }
      const auto which = static_cast<std::size_t>(found - names.begin());
      // The scenario with the measured strategy alone (the reader keeps the file's order),
      // in its own key order, and a HuggingFace file written in place: a scenario that
      // reads the same from anywhere.
      nlohmann::ordered_json scenario = nlohmann::ordered_json::parse(scenario_text);
      scenario["strategies"] = nlohmann::ordered_json::array({scenario["strategies"][which]});
      char note[96];
      std::snprintf(note, sizeof note, "Measured: %.6g s per step (", *measured);
      const std::string measured_note = note + where + ").";
      const auto description = scenario.find("description");
      if (description != scenario.end() && description->is_string() && !description->get<std::string>().empty()) {
        *description = description->get<std::string>() + " " + measured_note;
      } else {
        scenario["description"] = measured_note;
      }
      if (whole.workload.hf_config) {  // the file the reader resolved against the scenario's folder
        const std::string& hf_path = *whole.workload.hf_config;
        scenario["workload"]["hf_config"] =
            nlohmann::ordered_json::parse(parse_json(read_input_file(hf_path, "HuggingFace config"), hf_path).dump());
      }
      c.reproduce = scenario.dump(2) + "\n";
      set_setup(c, whole, whole.strategies[which]);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    c.suite = "measured";
    c.model = f[0];
    c.label = f[1];
    c.group = f[0];
    c.measured = *measured;
    c.index = static_cast<int>(out.size()) + 1;
    c.predict = predict_scenario;
    out.push_back(std::move(c));
  }
  if (out.empty()) throw InputError(path + ": no measurement (a row per measured step after the header)");
  return out;
}

std::vector<ValidationCase> validation_cases(const std::string& suite) {
  if (suite == "vtrain-single") return vtrain_cases(suite, kVtrainSingle, "validation/vtrain/ground_truth_single.csv");
  if (suite == "vtrain-multi") return vtrain_cases(suite, kVtrainMulti, "validation/vtrain/ground_truth_multi.csv");
  if (suite == "nccl") return nccl_cases();
  if (suite == "public-runs") return public_run_cases();
  std::vector<std::string> names{"all"};
  for (const char* n : kValidationSuites) names.emplace_back(n);
  throw InputError("--suite: unknown suite '" + suite + "'" + did_you_mean(suite, names) +
                   "; suites: vtrain-single, vtrain-multi, nccl, public-runs, all");
}

std::string reproduce_case(const ValidationCase& c, std::optional<NetworkModelKind> network) {
  if (c.suite == "nccl") {  // a command line, timed on the flow network unless told
    return c.reproduce + " --network " + std::string(network_model_name(network.value_or(NetworkModelKind::kFlow))) + "\n";
  }
  if (!network) return c.reproduce;
  const std::string name(network_model_name(*network));
  nlohmann::ordered_json scenario = nlohmann::ordered_json::parse(c.reproduce);
  scenario["simulation"]["network"] = name;
  return scenario.dump(2) + "\n";
}

void run_validation(std::vector<ValidationCase>& cases, std::optional<NetworkModelKind> network, int jobs) {
  // Largest first, so that the last thread does not start the slowest case last.
  std::vector<std::size_t> order(cases.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return cases[a].global_batch * cases[a].layers * cases[a].gpus > cases[b].global_batch * cases[b].layers * cases[b].gpus;
  });
  std::atomic<std::size_t> next{0};
  // The first error of any case stops the others from starting and is rethrown once
  // every thread has joined (an exception may not leave a thread).
  std::exception_ptr failed;
  std::mutex failed_mutex;
  auto work = [&] {
    for (std::size_t i = next++; i < order.size(); i = next++) {
      ValidationCase& c = cases[order[i]];
      try {
        c.predicted = c.predict(c, network);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failed_mutex);
        if (!failed) failed = std::current_exception();
        next = order.size();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < std::max(1, jobs); ++j) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
}

std::vector<Accuracy> accuracy_table(const std::vector<ValidationCase>& cases) {
  std::vector<Accuracy> out;
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  auto entry = [&](const std::string& suite, const std::string& model) -> Accuracy& {
    auto [it, fresh] = index.emplace(std::make_pair(suite, model), out.size());
    if (fresh) out.push_back(Accuracy{suite, model});
    return out[it->second];
  };
  // Groups of cases that differ only in strategy.
  using GroupKey = std::tuple<std::string, std::string, std::string>;  // suite, group, model
  std::map<GroupKey, std::vector<const ValidationCase*>> groups;
  // Every entry first: references into `out` stay valid while counting.
  for (const ValidationCase& c : cases) entry(c.suite, c.model);
  for (const ValidationCase& c : cases) entry(c.suite, "all");
  for (const ValidationCase& c : cases) {
    for (Accuracy* a : {&entry(c.suite, c.model), &entry(c.suite, "all")}) {
      ++a->cases;
      if (!c.refused.empty()) {
        ++a->refused;
        continue;
      }
      if (c.breakdown.step && !c.breakdown.fits) ++a->unfit;
      const double e = std::abs(c.error());
      if (e <= kAccuracyTarget) ++a->within;
      a->mean_abs_error += e;
      a->worst_abs_error = std::max(a->worst_abs_error, e);
      if (c.breakdown.step && c.breakdown.estimate_s > 0.0 && c.predicted > 0.0) {
        const double d = std::abs(c.breakdown.estimate_s - c.predicted) / c.predicted;
        ++a->estimated;
        a->estimate_mean_abs_error += d;
        a->estimate_worst_abs_error = std::max(a->estimate_worst_abs_error, d);
      }
    }
    if (c.refused.empty() && !c.group.empty()) groups[{c.suite, c.group, c.model}].push_back(&c);
  }
  // Kendall's tau-b: (concordant - discordant) / sqrt((n0 - t_measured)(n0 - t_predicted))
  // over the n0 pairs, t_x the pairs tied in x (a configuration measured twice and
  // predicted alike is neither for nor against the order).
  struct Pairs {
    std::int64_t net = 0, tied_measured = 0, tied_predicted = 0;
  };
  std::map<std::pair<std::string, std::string>, Pairs> counts;
  for (const auto& [key, g] : groups) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      for (std::size_t j = i + 1; j < g.size(); ++j) {
        const double dm = g[i]->measured - g[j]->measured, dp = g[i]->predicted - g[j]->predicted;
        const int sign = (dm * dp > 0) ? 1 : (dm * dp < 0) ? -1 : 0;
        for (const std::string& model : {std::get<2>(key), std::string("all")}) {
          Accuracy& a = entry(std::get<0>(key), model);
          ++a.pairs;
          Pairs& c = counts[{a.suite, a.model}];
          c.net += sign;
          c.tied_measured += dm == 0 ? 1 : 0;
          c.tied_predicted += dp == 0 ? 1 : 0;
        }
      }
    }
  }
  for (Accuracy& a : out) {
    const int ran = a.cases - a.refused;
    if (ran > 0) a.mean_abs_error /= ran;
    if (a.estimated > 0) a.estimate_mean_abs_error /= a.estimated;
    const Pairs& c = counts[{a.suite, a.model}];
    const double n0 = static_cast<double>(a.pairs);
    const double denominator = std::sqrt((n0 - static_cast<double>(c.tied_measured)) * (n0 - static_cast<double>(c.tied_predicted)));
    a.tau_defined = denominator > 0;
    if (a.tau_defined) a.kendall_tau = static_cast<double>(c.net) / denominator;
  }
  // Each suite's "all" after its models.
  std::vector<Accuracy> ordered;
  for (const Accuracy& a : out) {
    if (a.model == "all") continue;
    if (!ordered.empty() && ordered.back().suite != a.suite) ordered.push_back(out[index.at({ordered.back().suite, "all"})]);
    ordered.push_back(a);
  }
  if (!ordered.empty()) ordered.push_back(out[index.at({ordered.back().suite, "all"})]);
  return ordered;
}

// The largest error a record may hold: anything --record writes (a prediction of
// hours over a measured step of a microsecond is an error of 1e10), so that a record
// is never refused by the check it was written for.
constexpr double kMaxRecordedError = std::numeric_limits<double>::infinity();

std::vector<std::string> accuracy_regressions(const std::vector<Accuracy>& table, const nlohmann::json& recorded,
                                              const std::string& path) {
  if (!recorded.is_object()) throw InputError(path + ": expected an object of suites");
  // The record's shape first (what --record writes): a suite (or "measured") -> a model
  // -> its figures, nothing else, so that another kind of file is refused as one.
  std::vector<std::string> suites{"measured"};
  for (const char* n : kValidationSuites) suites.emplace_back(n);
  for (const auto& [suite, models] : recorded.items()) {
    if (std::find(suites.begin(), suites.end(), suite) == suites.end()) {
      throw InputError(path + ": " + suite + ": unknown suite" + did_you_mean(suite, suites) +
                       " (a record from 'ddlsim validate --record' has vtrain-single, vtrain-multi, nccl, public-runs or measured)");
    }
    if (!models.is_object()) throw InputError(path + ": " + suite + ": expected an object of models, got " + shown(models));
    for (const auto& [model, figures] : models.items()) {
      JsonObject e(figures, path + ": " + suite + "." + model);
      (void)e.number("mean_abs_error", 0.0, kMaxRecordedError);
      (void)e.number("worst_abs_error", 0.0, kMaxRecordedError);
      for (const char* key : {"cases", "refused", "unfit", "pairs", "estimated", "within_10pct"}) {
        if (!e.has(key)) continue;
        const double v = e.number(key, 0.0, 1e12);
        if (v != std::floor(v)) {
          throw InputError(path + ": " + suite + "." + model + "." + key + ": expected a whole number, got " + shown(e.value(key)));
        }
      }
      for (const char* key : {"estimate_mean_abs_error", "estimate_worst_abs_error"}) {
        if (e.has(key)) (void)e.number(key, 0.0, kMaxRecordedError);
      }
      if (e.has("kendall_tau") && !e.value("kendall_tau").is_null()) (void)e.number("kendall_tau", -1.0, 1.0);
      if (e.has("network")) (void)e.choice("network", {"flow", "analytical"});  // --network's, where it was given
      e.known("kendall_tau");
      e.finish();
    }
  }
  std::vector<std::string> out;
  // A model the record holds for a suite run now, that the run no longer produces: its
  // cases are gone, which must not pass for progress either.
  std::vector<std::string> run;  // the suites of this run, once each, in table order
  for (const Accuracy& a : table) {
    if (std::find(run.begin(), run.end(), a.suite) == run.end()) run.push_back(a.suite);
  }
  for (const std::string& suite : run) {
    if (!recorded.contains(suite)) continue;
    for (const auto& entry : recorded[suite].items()) {
      const std::string model = entry.key();  // (a name a lambda may capture)
      const bool produced = std::any_of(table.begin(), table.end(),
                                        [&](const Accuracy& b) { return b.suite == suite && b.model == model; });
      if (!produced) out.push_back(suite + " / " + model + ": recorded in " + path + " but no longer produced (its cases are gone)");
    }
  }
  constexpr double kSlack = 1e-4;
  for (const Accuracy& a : table) {
    if (!recorded.contains(a.suite) || !recorded[a.suite].is_object() || !recorded[a.suite].contains(a.model)) {
      // Nothing to hold it to: a check that compares nothing must not pass.
      out.push_back(a.suite + " / " + a.model + ": not in " + path + " (record it with --record)");
      continue;
    }
    JsonObject r(recorded[a.suite][a.model], path + ": " + a.suite + "." + a.model);
    auto worse = [&](const char* field, double now, bool lower_is_better) {
      const double was = r.number(field, -1.0, kMaxRecordedError);
      if (lower_is_better ? now > was + kSlack : now < was - kSlack) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s / %s: %s is %.4f, recorded %.4f in %s", a.suite.c_str(), a.model.c_str(),
                      field, now, was, path.c_str());
        out.emplace_back(buf);
      }
    };
    // Fewer cases or pairs than recorded would let a dropped bad row pass as progress.
    for (const auto& [field, now] : {std::pair<const char*, double>{"cases", a.cases},
                                     {"pairs", static_cast<double>(a.pairs)},
                                     {"estimated", a.estimated}}) {
      if (!r.has(field)) continue;
      const double was = r.number(field, 0.0, 1e12);
      if (now != was) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s / %s: %s is %.0f, recorded %.0f in %s (record again once the change is meant)",
                      a.suite.c_str(), a.model.c_str(), field, now, was, path.c_str());
        out.emplace_back(buf);
      }
    }
    worse("mean_abs_error", a.mean_abs_error, true);
    worse("worst_abs_error", a.worst_abs_error, true);
    // Fewer cases within the target than recorded (where recorded): a case that left it
    // while others' errors shrank would pass the mean.
    if (r.has("within_10pct")) {
      const double was = r.number("within_10pct", 0.0, 1e12);
      if (a.within < was) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s / %s: %d cases within 10%%, recorded %.0f in %s", a.suite.c_str(),
                      a.model.c_str(), a.within, was, path.c_str());
        out.emplace_back(buf);
      }
    }
    // The searches' estimate against the replay, where recorded.
    for (const auto& [field, now] : {std::pair<const char*, double>{"estimate_mean_abs_error", a.estimate_mean_abs_error},
                                     {"estimate_worst_abs_error", a.estimate_worst_abs_error}}) {
      if (r.has(field)) worse(field, now, true);
    }
    // None (null) where no two cases compare, or every pair is tied in one figure.
    const bool tau_recorded = r.has("kendall_tau") && !r.value("kendall_tau").is_null();
    if (a.tau_defined && tau_recorded) worse("kendall_tau", a.kendall_tau, false);
    if (!a.tau_defined && tau_recorded) {
      out.push_back(a.suite + " / " + a.model + ": kendall_tau is undefined now (no pair ordered in both figures), recorded a value in " + path);
    }
    if (a.refused > 0) out.push_back(a.suite + " / " + a.model + ": " + std::to_string(a.refused) + " cases refused");
    if (a.unfit > 0) {
      out.push_back(a.suite + " / " + a.model + ": " + std::to_string(a.unfit) +
                    " cases that ran do not fit in memory by ddlsim's model (see --csv's peak_memory_gib)");
    }
  }
  return out;
}

}  // namespace ddlsim
