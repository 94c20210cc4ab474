// `ddlsim workload`: a model's operators with their costs, and their predicted time on
// one accelerator.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/calibration_check.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/scenario.hpp"
#include "sim/compute_model.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "topology/catalog.hpp"
#include "topology/presets.hpp"
#include "workloads/model_workload.hpp"
#include "workloads/presets.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

constexpr const char* kWorkloadHelp = R"(Usage: ddlsim workload --preset NAME [OPTIONS]
       ddlsim workload --hf-config config.json [OPTIONS]
       ddlsim workload SCENARIO.json [OPTIONS]   (its "workload": {"model": NAME, "batch": N, ...})
       ddlsim workload --compare CALIBRATION.json [--device ID] [--catalog FILE] [--json]
       ddlsim workload --list

Builds a model as an operator graph for one training step and prints, per operator
(operators repeated in every layer are one row, with their count): parameters, forward
and backward GFLOP, activation memory kept for backward, and the predicted forward and
backward time on one accelerator; then the totals. On a scenario, --batch, --seq,
--dtype and --attention apply where its workload leaves them out (one it sets is refused).

Predicted time per operator = max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x
efficiency)) + a launch overhead (+ a GEMM kernel latency per kernel on the H100, H200 and
B200), with efficiencies by operator class and GEMM shape
(sim/data/compute_efficiency.json) and peaks from the hardware catalog. On the H100 and
H200 the GEMMs, convolutions and attention run at 0.88 of their short-burst rate (the
sustained rate of a training step at the power limit, measured on our H200). A calibration
file of measured GEMM throughputs (scripts/calibrate_compute.py writes one) replaces the
GEMM efficiencies with measurements (and a measured memory kernel the HBM efficiency).

--compare FILE checks the model against such a file instead: every measured GEMM's
TFLOP/s beside the built-in model's kernel-time prediction (no launch gap, priced as a
short burst; error = predicted / measured - 1), the
mean and worst error; the memory kernel's GB/s; the measured transformer layers' (dense,
and mixture-of-experts where the file has one) forward and backward against the model
and against the model with the file's measurements.

Units: GFLOP = 10^9 FLOP; MiB = 2^20 bytes; ms = 10^-3 s; parameters as counts.

Examples:
  ddlsim workload --preset llama3-8b --batch 1 --seq 8192
  ddlsim workload --preset gpt3-175b --attention plain --device a100-80gb
  ddlsim workload --hf-config config.json --seq 4096 --json
  ddlsim workload --preset resnet50 --batch 256 --device h100-sxm
  ddlsim workload --compare validation/compute/h100-sxm-xla.json   # the model against measured GEMMs
  ddlsim workload --compare validation/compute/h200-measured.json  # ... and layers, on our H200

Options)";

struct Row {
  std::string name;
  std::string kind;
  int count = 0;
  OpCost cost;
  double fwd_s = 0, bwd_s = 0;
};

// Operators of layer i are named "layer<i>.<rest>": one row per <rest>.
std::string row_name(const Operator& op) {
  if (op.layer >= 0 && op.name.rfind("layer", 0) == 0) {
    const std::size_t dot = op.name.find('.');
    if (dot != std::string::npos) return "layer*." + op.name.substr(dot + 1);
  }
  return op.name;
}

std::string fmt(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}


std::string pct(double fraction) { return fmt("%+.1f", rounded_for_print(100.0 * fraction, 1)); }

// The built-in catalog with --catalog's patches.
// The built-in catalog, patched by a scenario's "catalog" (when `scenario` is given),
// then by --catalog FILE.
Catalog load_catalog(const po::variables_map& vm, const std::optional<nlohmann::json>& scenario = std::nullopt) {
  Catalog catalog = Catalog::builtin();
  if (scenario) {
    const std::string file = vm["scenario"].as<std::string>();
    try {
      merge_scenario_catalog(*scenario, std::filesystem::path(file).parent_path().string(), catalog);
    } catch (const InputError& e) {
      throw InputError(file + ": " + e.what());
    }
  }
  if (vm.count("catalog")) {
    const std::string path = vm["catalog"].as<std::string>();
    catalog.merge(parse_json(read_input_file(path, "catalog"), path), path);
  }
  return catalog;
}

// `--compare FILE`: every measured point beside the built-in model's prediction.
int compare(const po::variables_map& vm, std::ostream& out) {
  if (vm.count("scenario")) throw InputError("a scenario file: not with --compare, which takes its shapes from the calibration file");
  for (const char* opt : {"preset", "hf-config", "calibration", "seq", "dtype", "gemm-dtype", "attention", "list"}) {
    if (vm.count(opt)) throw InputError(std::string("--") + opt + ": not with --compare, which takes its shapes from the file");
  }
  if (!vm["batch"].defaulted()) throw InputError("--batch: not with --compare, which takes its shapes from the file");
  const std::string path = vm["compare"].as<std::string>();
  const CalibrationCheck c = check_calibration(load_catalog(vm), parse_json(read_input_file(path, "calibration"), path), path);
  if (!vm["device"].defaulted() && vm["device"].as<std::string>() != c.device) {
    throw InputError("--device: " + path + " measures '" + c.device + "', not '" + vm["device"].as<std::string>() + "'");
  }
  if (vm.count("json")) {
    nlohmann::ordered_json j;
    j["device"] = c.device;
    j["gpu"] = c.gpu;
    j["software"] = c.software;
    j["source"] = c.source;
    nlohmann::ordered_json gemms = nlohmann::ordered_json::array();
    for (const GemmCheck& g : c.gemms) {
      gemms.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"dtype", g.dtype}, {"measured_tflops", g.measured_tflops},
                       {"predicted_tflops", g.predicted_tflops}, {"error", g.error()}});
    }
    j["gemm"] = gemms;
    j["gemm_mean_abs_error"] = c.gemm_mean_abs_error;
    j["gemm_worst_abs_error"] = c.gemm_worst_abs_error;
    if (c.memory) {
      j["memory"] = {{"bytes", static_cast<std::int64_t>(c.memory->bytes)}, {"measured_gbytes_per_s", c.memory->measured_gbytes_per_s},
                     {"predicted_gbytes_per_s", c.memory->predicted_gbytes_per_s}, {"error", c.memory->error()}};
    }
    auto layer_json = [](const LayerCheck& l) {
      nlohmann::ordered_json x = {{"hidden", l.hidden}, {"heads", l.heads}, {"kv_heads", l.kv_heads}, {"ffn", l.ffn}};
      if (l.experts > 0) {
        x["experts"] = l.experts;
        x["experts_per_token"] = l.experts_per_token;
      }
      x.update(nlohmann::ordered_json{{"seq", l.seq}, {"batch", l.batch}, {"dtype", l.dtype},
                {"measured_forward_s", l.measured_forward_s}, {"measured_backward_s", l.measured_backward_s},
                {"model_forward_s", l.model_forward_s}, {"model_backward_s", l.model_backward_s},
                {"calibrated_forward_s", l.calibrated_forward_s}, {"calibrated_backward_s", l.calibrated_backward_s}});
      return x;
    };
    if (c.layer) j["layer"] = layer_json(*c.layer);
    if (c.moe_layer) j["moe_layer"] = layer_json(*c.moe_layer);
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << "compute model against " << path << ": " << c.device;
  if (!c.gpu.empty()) out << " (" << c.gpu << ")";
  out << "\n";
  if (!c.software.empty() || !c.source.empty()) out << "measured with " << c.software << (c.software.empty() || c.source.empty() ? "" : ", ") << c.source << "\n";
  out << "predicted: the built-in model (sim/data/compute_efficiency.json), without this file's measurements\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%8s %8s %8s %6s %18s %18s %9s\n", "m", "n", "k", "dtype", "measured TFLOP/s",
                "predicted TFLOP/s", "error %");
  out << line;
  for (const GemmCheck& g : c.gemms) {
    std::snprintf(line, sizeof line, "%8lld %8lld %8lld %6s %18.1f %18.1f %9s\n", static_cast<long long>(g.m),
                  static_cast<long long>(g.n), static_cast<long long>(g.k), g.dtype.c_str(), g.measured_tflops,
                  g.predicted_tflops, pct(g.error()).c_str());
    out << line;
  }
  if (!c.gemms.empty()) {
    const GemmCheck& w = c.gemms[c.gemm_worst];
    out << "\nGEMMs: " << c.gemms.size() << (c.gemms.size() == 1 ? " point" : " points") << ", mean |error| " << fmt("%.1f", 100 * c.gemm_mean_abs_error)
        << "%, worst " << fmt("%.1f", 100 * c.gemm_worst_abs_error) << "% (" << w.m << " x " << w.n << " x " << w.k
        << " " << w.dtype << ")\n";
  }
  if (c.memory) {
    out << "memory: " << fmt("%.4g", c.memory->bytes / 1e9) << " GB read and written, measured "
        << fmt("%.4g", c.memory->measured_gbytes_per_s) << " GB/s, predicted " << fmt("%.4g", c.memory->predicted_gbytes_per_s)
        << " GB/s (" << pct(c.memory->error()) << "%)\n";
  }
  auto print_layer = [&](const LayerCheck& l) {
    out << "\n" << (l.experts > 0 ? "mixture-of-experts layer" : "layer") << " (Llama-style, flash attention): hidden "
        << l.hidden << ", heads " << l.heads << ", kv heads " << l.kv_heads << ", ffn " << l.ffn;
    if (l.experts > 0) out << ", experts " << l.experts << ", top " << l.experts_per_token;
    out << ", seq " << l.seq << ", batch " << l.batch << ", " << l.dtype << "\n";
    std::snprintf(line, sizeof line, "%-10s %14s %14s %9s %16s %9s\n", "pass", "measured (ms)", "model (ms)", "error %",
                  "calibrated (ms)", "error %");
    out << line;
    auto row = [&](const char* name, double measured, double model, double calibrated) {
      std::snprintf(line, sizeof line, "%-10s %14.3f %14.3f %9s %16.3f %9s\n", name, measured * 1e3, model * 1e3,
                    pct(model / measured - 1).c_str(), calibrated * 1e3, pct(calibrated / measured - 1).c_str());
      out << line;
    };
    row("forward", l.measured_forward_s, l.model_forward_s, l.calibrated_forward_s);
    row("backward", l.measured_backward_s, l.model_backward_s, l.calibrated_backward_s);
  };
  if (c.layer) print_layer(*c.layer);
  if (c.moe_layer) print_layer(*c.moe_layer);
  if (c.layer || c.moe_layer) {
    out << "(model: as a training step prices the layer, each half the larger of its kernels and the host's\n"
           " dispatches; calibrated: with this file's GEMMs, memory bandwidth, launch and dispatch times where it\n"
           " gives them. What error remains there is the rest of the layer, attention, norms, activations and\n"
           " expert dispatch, or, for a layer of short kernels, the host dispatch time: fitted to\n"
           " Megatron-DeepSpeed unless the file sets it)\n";
  }
  return kExitOk;
}

}  // namespace

int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kWorkloadHelp);
  d.add_options()("help,h", "show this help")
      ("list", "list the workload presets")
      ("preset", po::value<std::string>()->value_name("NAME"), "a named model (see --list)")
      ("hf-config", po::value<std::string>()->value_name("FILE"),
       "a HuggingFace config.json (llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, glm4_moe, deepseek_v3, kimi_k2, nemotron, gpt2)")
      ("batch", po::value<std::int64_t>()->value_name("N")->default_value(1), "samples (sequences) per step")
      ("seq", po::value<std::int64_t>()->value_name("N"), "tokens per sequence (transformers; default the model's)")
      ("dtype", po::value<std::string>()->value_name("TYPE"),
       "fp32, bf16, fp16 or fp8 (default bf16 for transformers, fp32 for CNNs and MLPs)")
      ("gemm-dtype", po::value<std::string>()->value_name("TYPE"),
       "fp8: FP8 training's linear layers (Transformer Engine's recipe) in a bf16 or fp16 model (default: --dtype)")
      ("attention", po::value<std::string>()->value_name("KIND"),
       "plain (separate scores, softmax, context) or flash (fused); default: the model's")
      ("device", po::value<std::string>()->value_name("ID")->default_value("h100-sxm"),
       "the catalog accelerator to predict times on (with a scenario file: its cluster's accelerator unless given)")
      ("catalog", po::value<std::string>()->value_name("FILE"), "JSON that adds or patches catalog entries")
      ("calibration", po::value<std::string>()->value_name("FILE"), "measured GEMM throughputs for --device")
      ("compare", po::value<std::string>()->value_name("FILE"),
       "instead of a model: the compute model against the measurements in a calibration file, point by point")
      ("json", "print the table as JSON")
      ("scenario", po::value<std::string>()->value_name("FILE"), "a scenario whose workload names a model (or give it first)");
  po::variables_map vm;
  if (const auto done = parse_command_options(args, d, "scenario", "workload", vm, out, err)) return *done;
  try {
    if (vm.count("compare")) return compare(vm, out);
    if (vm.count("list")) {
      // It lists every preset; anything else given with it would be ignored.
      for (const char* opt :
           {"preset", "hf-config", "scenario", "calibration", "seq", "dtype", "gemm-dtype", "attention", "json", "catalog"}) {
        if (vm.count(opt)) {
          throw InputError(std::string("--list: lists every preset as text; not with ") +
                           (std::string(opt) == "scenario" ? "a scenario file" : "--" + std::string(opt)));
        }
      }
      for (const char* opt : {"batch", "device"}) {
        if (!vm[opt].defaulted()) throw InputError(std::string("--list: lists every preset as text; not with --") + opt);
      }
      for (const auto& p : workload_preset_list()) out << "  " << p.name << "  " << p.summary << "\n";
      return kExitOk;
    }
    const int sources = static_cast<int>(vm.count("preset") + vm.count("hf-config") + vm.count("scenario"));
    if (sources != 1) {
      throw InputError(sources > 1 ? "give one of --preset, --hf-config or a scenario file, not several"
                                   : "--preset: required, or --hf-config or a scenario file (see --list for the presets)");
    }
    WorkloadOptions o;
    o.batch = vm["batch"].as<std::int64_t>();
    if (vm.count("seq")) o.seq = vm["seq"].as<std::int64_t>();
    o.spelled = "--";
    if (vm.count("dtype")) {
      o.dtype = parse_float_type(vm["dtype"].as<std::string>());
      if (!o.dtype) throw InputError("--dtype: expected fp32, bf16, fp16 or fp8, got '" + vm["dtype"].as<std::string>() + "'");
    }
    if (vm.count("gemm-dtype")) {
      o.gemm_dtype = parse_float_type(vm["gemm-dtype"].as<std::string>());
      if (!o.gemm_dtype) {
        throw InputError("--gemm-dtype: expected fp32, bf16, fp16 or fp8, got '" + vm["gemm-dtype"].as<std::string>() + "'");
      }
    }
    if (vm.count("attention")) {
      const std::string a = vm["attention"].as<std::string>();
      if (a != "plain" && a != "flash") throw InputError("--attention: expected plain or flash, got '" + a + "'");
      o.flash_attention = a == "flash";
    }
    // A scenario's catalog patch first, then --catalog's over it.
    std::optional<nlohmann::json> scenario_doc;
    if (vm.count("scenario")) {
      const std::string file = vm["scenario"].as<std::string>();
      scenario_doc = parse_json(read_input_file(file, "scenario"), file);
    }
    const Catalog catalog = load_catalog(vm, scenario_doc);
    // A scenario's own accelerator unless --device names one (its cluster's preset, or
    // the accelerator it puts in it).
    std::string device = vm["device"].as<std::string>();
    if (scenario_doc && vm["device"].defaulted()) {
      const std::string file = vm["scenario"].as<std::string>();
      const nlohmann::json& doc = *scenario_doc;
      if (names_cluster_graph(doc)) {
        try {
          JsonObject cluster(doc["cluster"], "cluster");
          std::string title;
          const Cluster c = read_scenario_cluster(cluster, catalog, std::filesystem::path(file).parent_path().string(), title);
          if (!c.accelerators().empty()) device = c.node(c.accelerators()[0]).model;
        } catch (const InputError& e) {
          throw InputError(file + ": " + e.what());
        }
      }
    }
    ComputeModel model(catalog.accelerator(device));
    if (vm.count("calibration")) {
      const std::string path = vm["calibration"].as<std::string>();
      model.calibrate(parse_json(read_input_file(path, "calibration"), path), path);
    } else if (scenario_doc && vm["device"].defaulted()) {
      // The scenario's own calibration, for its own accelerator.
      const std::string file = vm["scenario"].as<std::string>();
      try {
        calibrate_scenario_compute(*scenario_doc, std::filesystem::path(file).parent_path().string(), model);
      } catch (const InputError& e) {
        throw InputError(file + ": " + e.what());
      }
    }
    OperatorGraph g;
    std::string source;
    if (vm.count("preset")) {
      source = vm["preset"].as<std::string>();
      g = build_workload_preset(source, o);
    } else if (vm.count("scenario")) {
      source = vm["scenario"].as<std::string>();
      const nlohmann::json doc = parse_json(read_input_file(source, "scenario"), source);
      // An option the scenario's workload leaves to its default applies; one it sets is
      // a conflict, refused rather than one of them silently winning.
      const std::vector<const char*> given = [&] {
        std::vector<const char*> g;
        for (const char* opt : {"batch", "seq", "dtype", "gemm-dtype", "attention"}) {
          if (vm.count(opt) && !vm[opt].defaulted()) g.push_back(opt);
        }
        return g;
      }();
      if (doc.is_object() && doc.contains("workload") && doc["workload"].is_object()) {
        for (const char* opt : given) {
          const std::string key = std::string(opt) == "gemm-dtype" ? "gemm_dtype" : opt;  // the scenario's spelling
          if (doc["workload"].contains(key)) {
            throw InputError(std::string("--") + opt + ": the scenario's workload sets \"" + key + "\": " +
                             doc["workload"][key].dump() + "; edit the scenario, or leave out --" + opt);
          }
        }
      }
      if (o.batch <= 0 || o.batch > 1'000'000) throw InputError("--batch: expected 1 to 1000000, got " + std::to_string(o.batch));
      if (o.seq && (*o.seq <= 0 || *o.seq > 10'000'000)) {
        throw InputError("--seq: expected 1 to 10000000, got " + std::to_string(*o.seq));
      }
      try {
        JsonObject root(doc, "");
        JsonObject w = root.object("workload");
        if (doc.at("workload").value("model", std::string()) == "synthetic") {
          throw InputError("workload.model: the synthetic model has no operators to describe");
        }
        ModelWorkload mw = read_model_workload(w, std::filesystem::path(source).parent_path().string());
        for (const char* opt : given) {
          const std::string name = opt;
          if (name == "batch") mw.options.batch = o.batch;
          if (name == "seq") {
            mw.options.seq = o.seq;
            mw.options.spelled = "--";  // the model's checks of the length name the option
          }
          if (name == "dtype") mw.options.dtype = o.dtype;
          if (name == "gemm-dtype") {
            mw.options.gemm_dtype = o.gemm_dtype;
            mw.options.spelled = "--";  // the model's checks of it name the option
          }
          if (name == "attention") mw.options.flash_attention = o.flash_attention;
        }
        o = mw.options;
        g = build_model_workload(mw);
      } catch (const InputError& e) {
        throw InputError(source + ": " + e.what());
      }
    } else {
      source = vm["hf-config"].as<std::string>();
      g = build_model_workload(ModelWorkload{std::nullopt, source, o, std::nullopt, std::nullopt, std::nullopt});
    }
    if (o.gemm_dtype == DataType::kFp8) {  // the device must have an fp8 peak
      try {
        (void)model.peak(DataType::kFp8);
      } catch (const InputError& e) {
        throw InputError(std::string(o.spelled == "--" ? "--gemm-dtype" : source + ": workload.gemm_dtype") + ": " + e.what());
      }
    }

    std::vector<Row> rows;
    std::map<std::string, std::size_t> index;
    Row total{"total", "", 0, {}, 0, 0};
    for (const Operator& op : g.ops()) {
      const std::string name = row_name(op);
      const auto [it, fresh] = index.emplace(name, rows.size());
      if (fresh) rows.push_back(Row{name, std::string(op_kind_name(op.kind)), 0, {}, 0, 0});
      Row& r = rows[it->second];
      const double f = model.time(op, Pass::kForward).value(), b = model.time(op, Pass::kBackward).value();
      r.count += 1;
      r.cost += op.cost;
      r.fwd_s += f;
      r.bwd_s += b;
      total.count += 1;
      total.cost += op.cost;
      total.fwd_s += f;
      total.bwd_s += b;
    }
    const double step_flops = total.cost.fwd_flops + total.cost.bwd_flops;
    const double step_s = total.fwd_s + total.bwd_s;
    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["workload"] = g.name();
      j["source"] = source;
      j["batch"] = o.batch;
      j["device"] = model.device().id;
      auto row_json = [](const Row& r) {
        return nlohmann::ordered_json{{"operator", r.name}, {"kind", r.kind}, {"count", r.count},
                                      {"parameters", r.cost.params}, {"forward_flops", r.cost.fwd_flops},
                                      {"backward_flops", r.cost.bwd_flops}, {"forward_bytes", r.cost.fwd_bytes},
                                      {"backward_bytes", r.cost.bwd_bytes}, {"activation_bytes", r.cost.saved_bytes},
                                      {"forward_time_s", r.fwd_s}, {"backward_time_s", r.bwd_s}};
      };
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const Row& r : rows) list.push_back(row_json(r));
      j["operators"] = list;
      j["total"] = row_json(total);
      j["step_compute_time_s"] = step_s;
      j["achieved_tflops"] = step_flops / step_s / 1e12;
      out << j.dump(2) << "\n";
      return kExitOk;
    }
    out << "workload: " << g.name() << " (" << source << "), batch " << o.batch << ", " << g.ops().size()
        << " operators\n";
    out << "device:   " << model.device().id << " (" << model.device().name << ")\n\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-28s %-15s %6s %14s %12s %12s %12s %10s %10s\n", "operator", "kind", "count",
                  "parameters", "fwd GFLOP", "bwd GFLOP", "act (MiB)", "fwd (ms)", "bwd (ms)");
    out << line;
    auto print = [&](const Row& r) {
      std::snprintf(line, sizeof line, "%-28s %-15s %6d %14.0f %12.3f %12.3f %12.2f %10.4f %10.4f\n", r.name.c_str(),
                    r.kind.c_str(), r.count, r.cost.params, r.cost.fwd_flops / 1e9, r.cost.bwd_flops / 1e9,
                    r.cost.saved_bytes / 1048576.0, r.fwd_s * 1e3, r.bwd_s * 1e3);
      out << line;
    };
    for (const Row& r : rows) print(r);
    print(total);
    out << "\nstep compute on one " << model.device().id << ": " << fmt("%.3f", step_s * 1e3) << " ms for "
        << fmt("%.4g", step_flops / 1e12) << " TFLOP, " << fmt("%.1f", step_flops / step_s / 1e12) << " TFLOP/s achieved\n";
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("workload", err);
  }
}

}  // namespace ddlsim
