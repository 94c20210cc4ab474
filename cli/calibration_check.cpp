#include "cli/calibration_check.hpp"

#include <cmath>
#include <tuple>
#include <nlohmann/json.hpp>

#include "sim/compute_model.hpp"
#include "strategies/stage_costs.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/catalog.hpp"
#include "workloads/operator_graph.hpp"
#include "workloads/transformer.hpp"

namespace ddlsim {
namespace {

DataType dtype_of(const std::string& name) { return *parse_float_type(name); }

// The model's kernel time of one (m x k)(k x n) GEMM: its time without the launch gap
// between dependent kernels, as a profiler (or CUDA events around a graph of them)
// measures a kernel (the caller passes a model that prices bursts).
double gemm_seconds(const ComputeModel& model, std::int64_t m, std::int64_t n, std::int64_t k, DataType dt) {
  OperatorGraph g("gemm");
  const std::uint32_t a = g.input("a", {m, k}, dt), b = g.input("b", {k, n}, dt);
  g.matmul("gemm", a, b, false);
  return (model.time(g.ops().back(), Pass::kForward) - model.efficiency().launch).value();
}

// Forward and backward of one Llama-style layer (flash attention) on one device, as a
// training step prices it: each half layer the larger of its kernels' time and the
// host's dispatches (stage_costs, without parallelism or recomputation).
TransformerConfig layer_config(const LayerCheck& l) {
  TransformerConfig c = llama_config("layer", 1, l.hidden, l.heads, l.kv_heads, l.ffn, l.seq, 32000);
  c.dtype = dtype_of(l.dtype);
  c.experts = l.experts;
  c.experts_per_token = l.experts_per_token;
  return c;
}

std::pair<double, double> layer_seconds(const ComputeModel& model, const LayerCheck& l) {
  const TransformerConfig c = layer_config(l);
  ParallelPlan p;
  p.micro_batch = l.batch;
  p.global_batch = l.batch;
  const StageCosts s = stage_costs(c, p, model);
  return {(s.attention.forward + s.mlp.forward).value(), (s.attention.backward + s.mlp.backward).value()};
}

}  // namespace

CalibrationCheck check_calibration(const Catalog& catalog, const nlohmann::json& doc, const std::string& source) {
  CalibrationCheck out;
  try {
    JsonObject o(doc, "");
    out.device = o.string("device");
    const AcceleratorSpec& device = catalog.accelerator(out.device);
    out.gpu = o.string_or("gpu", "");
    out.software = o.string_or("software", "");
    out.source = o.string_or("source", "");
    const ComputeModel model(device);
    // A GEMM point is a few calls of one kernel: priced as a burst. The layers below are
    // priced as a training step prices them, sustained.
    const ComputeModel bursts = model.bursts();
    ComputeModel calibrated(device);
    calibrated.calibrate(doc, source);  // reads and checks the GEMM points and the copy

    for (const GemmMeasurement& x : calibrated.measurements()) {
      GemmCheck c;
      c.m = x.m;
      c.n = x.n;
      c.k = x.k;
      c.dtype = std::string(data_type_name(x.dtype));
      c.measured_tflops = x.flops_per_s / 1e12;
      const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
      c.predicted_tflops = flops / gemm_seconds(bursts, c.m, c.n, c.k, x.dtype) / 1e12;
      out.gemms.push_back(c);
    }
    for (std::size_t i = 0; i < out.gemms.size(); ++i) {
      const double e = std::abs(out.gemms[i].error());
      out.gemm_mean_abs_error += e / static_cast<double>(out.gemms.size());
      if (e > out.gemm_worst_abs_error) {
        out.gemm_worst_abs_error = e;
        out.gemm_worst = i;
      }
    }
    if (const auto& copy = calibrated.copy_measurement()) {
      MemoryCheck c;
      c.bytes = copy->bytes;
      c.measured_gbytes_per_s = copy->bytes_per_s / 1e9;
      c.predicted_gbytes_per_s = c.bytes / model.memory_time(c.bytes).value() / 1e9;
      out.memory = c;
    }

    // A measured layer: its shape, checked as a model's would be, and both predictions.
    auto read_layer = [&](const char* key, bool moe) {
      JsonObject l = o.object(key);
      LayerCheck c;
      c.hidden = l.positive_int("hidden");
      c.heads = l.positive_int("heads");
      c.kv_heads = l.positive_int("kv_heads");
      c.ffn = l.positive_int("ffn");
      if (moe) {
        c.experts = l.positive_int("experts");
        c.experts_per_token = l.positive_int("experts_per_token");
      }
      c.seq = l.positive_int("seq");
      c.batch = l.positive_int("batch");
      c.dtype = l.choice_or("dtype", kFloatTypeNames, "bf16");
      c.measured_forward_s = l.number("forward_ms", 1e-6, 1e9) * 1e-3;
      c.measured_backward_s = l.number("backward_ms", 1e-6, 1e9) * 1e-3;
      l.finish();
      const TransformerConfig shape = layer_config(c);
      if (std::string why = transformer_problem(shape); !why.empty()) throw InputError(l.path() + ": " + why);
      if (std::string why = transformer_batch_problem(shape, c.batch); !why.empty()) throw InputError(l.path() + "." + why);
      std::tie(c.model_forward_s, c.model_backward_s) = layer_seconds(model, c);
      std::tie(c.calibrated_forward_s, c.calibrated_backward_s) = layer_seconds(calibrated, c);
      return c;
    };
    if (o.has("layer")) out.layer = read_layer("layer", false);
    if (o.has("moe_layer")) out.moe_layer = read_layer("moe_layer", true);
    // The rest (launch_us, host_dispatch_us, sources) calibrate() has checked.
  } catch (const InputError& e) {
    const std::string what = e.what();
    throw InputError(what.rfind(source + ": ", 0) == 0 ? what : source + ": " + what);
  }
  return out;
}

}  // namespace ddlsim
