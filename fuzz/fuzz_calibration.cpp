// libFuzzer harness: arbitrary bytes as a compute calibration file for an H100. Only
// InputError may come out; an accepted file must give finite, positive GEMM efficiencies,
// and `ddlsim workload --compare` on it finite, positive predictions.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/calibration_check.hpp"
#include "sim/compute_model.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ddlsim::Catalog catalog = ddlsim::Catalog::builtin();
  const std::string text(reinterpret_cast<const char*>(data), size);
  ddlsim::ComputeModel model(catalog.accelerator("h100-sxm"));
  try {
    model.calibrate(ddlsim::parse_json(text, "fuzz.json"), "fuzz.json");
    for (std::int64_t s : {1, 64, 4096, 1 << 20}) {
      const double e = model.gemm_efficiency(ddlsim::GemmShape{1, s, s, s}, ddlsim::DataType::kBf16);
      if (!(std::isfinite(e) && e > 0)) __builtin_trap();
    }
    const auto ok = [](double x) { return std::isfinite(x) && x > 0; };
    const ddlsim::CalibrationCheck c = ddlsim::check_calibration(catalog, ddlsim::parse_json(text, "fuzz.json"), "fuzz.json");
    for (const auto& g : c.gemms) {
      if (!ok(g.predicted_tflops)) __builtin_trap();
    }
    if (c.memory && !ok(c.memory->predicted_gbytes_per_s)) __builtin_trap();
    if (c.layer && !(ok(c.layer->model_forward_s) && ok(c.layer->model_backward_s) && ok(c.layer->calibrated_forward_s) &&
                     ok(c.layer->calibrated_backward_s))) {
      __builtin_trap();
    }
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
