// The compute model against measurements: every point of a calibration file
// (scripts/calibrate_compute.py) next to what the built-in model predicts for it, so
// that the model's error on a real GPU can be read off and reported.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim {

class Catalog;

struct GemmCheck {
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;
  double measured_tflops = 0;   // 10^12 FLOP/s, 2 m n k over the measured time
  double predicted_tflops = 0;  // the same for the model's time of one call
  [[nodiscard]] double error() const { return predicted_tflops / measured_tflops - 1.0; }
};

struct MemoryCheck {
  double bytes = 0;  // read and written by the measured copy
  double measured_gbytes_per_s = 0, predicted_gbytes_per_s = 0;
  [[nodiscard]] double error() const { return predicted_gbytes_per_s / measured_gbytes_per_s - 1.0; }
};

/// One transformer layer (Llama-style, flash attention, no embedding or loss), forward
/// and backward: measured, predicted by the built-in model as a training step prices it
/// (each half layer the larger of its kernels and the host's dispatches), and predicted
/// with the file's measurements applied (GEMMs, memory, launch and dispatch times), which
/// leaves the error of everything else. With experts > 0 the MLP is a mixture of experts
/// (router, top-k dispatch, the experts' GEMMs, weighted combine; ffn is one expert's).
struct LayerCheck {
  std::int64_t hidden = 0, heads = 0, kv_heads = 0, ffn = 0, seq = 0, batch = 0;
  std::int64_t experts = 0, experts_per_token = 0;
  std::string dtype;
  double measured_forward_s = 0, measured_backward_s = 0;
  double model_forward_s = 0, model_backward_s = 0;
  double calibrated_forward_s = 0, calibrated_backward_s = 0;
};

struct CalibrationCheck {
  std::string device, gpu, software, source;
  std::vector<GemmCheck> gemms;
  std::optional<MemoryCheck> memory;
  std::optional<LayerCheck> layer;      // the file's "layer" (dense MLP)
  std::optional<LayerCheck> moe_layer;  // its "moe_layer" (mixture-of-experts MLP)
  /// Mean and worst absolute GEMM error over all points (0 without points), and where
  /// the worst is.
  double gemm_mean_abs_error = 0, gemm_worst_abs_error = 0;
  std::size_t gemm_worst = 0;
};

/// Reads the calibration file `doc` (named `source` in errors) for a device of
/// `catalog` and compares. Throws InputError for a malformed file or an unknown device.
CalibrationCheck check_calibration(const Catalog& catalog, const nlohmann::json& doc, const std::string& source);

}  // namespace ddlsim
