// The compute cost model: how long an operator takes on an accelerator.
//
//   time = max(FLOPs / (peak(dtype) x e_compute), bytes / (HBM bandwidth x e_memory)) + launch
//
// the roofline of the operator's arithmetic and memory traffic, each at the fraction of
// the device's peak that real kernels reach, plus a launch overhead per kernel. e_compute
// depends on the operator and its shape: a GEMM-like operator of shape (m x k)(k x n)
// reaches  max x m/(m + m_half) x n/(n + n_half) x k/(k + k_half)  of peak (small and
// skinny GEMMs fill few tiles); fused attention has its own forward and backward
// efficiencies; elementwise operators are bound by memory. The figures are data per
// device kind with their sources (sim/data/compute_efficiency.json, embedded); a
// calibration file of measured GEMM throughputs overrides the GEMM efficiency with the
// measurements nearest in shape (inverse-distance weighting in log m, log n, log k).
// Peaks and bandwidths come from the hardware catalog. fp32 operators run at the fp32
// peak (PyTorch's default: TF32 off for matmuls); int64 ones are memory-bound.
// A framework that issues operators from the host one by one also needs host_dispatch per
// operator (twice per backward); callers that sum a run of operators take the larger of
// the kernels' time and the dispatches' (dispatch_bound), since the host works ahead of
// the device but cannot issue faster than that.
#pragma once

#include <algorithm>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/units.hpp"
#include "topology/catalog.hpp"
#include "workloads/operator_graph.hpp"

namespace ddlsim {

struct GemmEfficiency {
  double max = 0.8;
  // FP8 GEMMs' max where it differs from the 16-bit one's (0: the same): a fraction of
  // the FP8 peak.
  double max_fp8 = 0.0;
  double half_m = 64, half_n = 64, half_k = 32;
  // A GEMM kernel's fixed time on the device (its prologue and epilogue, the waves of
  // one tile), added to FLOPs / (peak x efficiency) where no measurement prices it.
  Seconds latency{0.0};
};

struct DeviceEfficiency {
  GemmEfficiency gemm;
  double attention_forward = 0.6;
  double attention_backward = 0.45;
  double convolution = 0.65;
  double memory = 0.85;
  Seconds launch{3e-6};
  Seconds host_dispatch{0.0};  // host time to issue one operator's forward (backward: twice)
  // The fraction of its matrix units' throughput in short bursts (what the GEMM max and
  // the attention efficiencies describe) that the device keeps through a training
  // step's sustained load, when its clocks settle at the power limit: it scales the
  // model's GEMM, convolution and attention rates, not measured GEMMs (a calibration
  // file's) nor memory-bound kernels. 1 where the figures already describe training.
  double sustained = 1.0;
  // How much slower compute kernels run while a collective runs beside them (the SMs a
  // collective library's kernels hold, contention for memory, caches and power): for
  // the time they overlap, a kernel takes 1 + overlap_slowdown times as long. Priced in
  // Transformer Engine's userbuffers overlap's closed forms (tp_comm_overlap) and, in a
  // training replay, for every collective and send that runs beside the compute
  // (interference: transformer_step.hpp).
  double overlap_slowdown = 0.0;
};

/// A measured GEMM: shape, dtype and achieved FLOP/s.
struct GemmMeasurement {
  std::int64_t m = 0, n = 0, k = 0;
  DataType dtype = DataType::kBf16;
  double flops_per_s = 0.0;
};

/// A measured device-to-device copy: bytes read and written, and their rate.
struct CopyMeasurement {
  double bytes = 0.0;
  double bytes_per_s = 0.0;
};

enum class Pass { kForward, kBackward };

/// The smallest copy a calibration file may measure HBM with (256 MiB, larger than any
/// GPU's L2 cache), so that the copy's bandwidth is the memory's, not a cache's.
inline constexpr double kMinCopyBytes = 268435456.0;

class ComputeModel {
 public:
  /// The model of `device` (a catalog accelerator) with the built-in efficiencies.
  ComputeModel(const AcceleratorSpec& device);

  /// Reads a calibration file: {"device": ID, "gemm": [{"m", "n", "k", "dtype",
  /// "tflops"}, ...], "memory": optional {"bytes", "gbytes_per_s"} (a measured copy of at
  /// least kMinCopyBytes, bytes read and written: sets the HBM efficiency), "launch_us":
  /// optional, "host_dispatch_us":
  /// optional}. Its device must be this model's. Throws
  /// InputError naming `source` and the field.
  void calibrate(const nlohmann::json& doc, const std::string& source);

  [[nodiscard]] const AcceleratorSpec& device() const { return device_; }
  [[nodiscard]] const DeviceEfficiency& efficiency() const { return eff_; }
  /// The same model pricing kernels as short bursts do (sustained 1): how a profiler's or
  /// a benchmark's few calls of one kernel measure it, not a training step.
  [[nodiscard]] ComputeModel bursts() const {
    ComputeModel m = *this;
    m.eff_.sustained = 1.0;
    return m;
  }
  /// The same model with communication beside the compute costing it nothing
  /// (overlap_slowdown 0: a scenario's simulation.interference false).
  [[nodiscard]] ComputeModel without_interference() const {
    ComputeModel m = *this;
    m.eff_.overlap_slowdown = 0.0;
    return m;
  }
  /// The same model for a synchronous step on `devices` accelerators whose compute speeds
  /// vary from one to the next (silicon, clocks at the power limit) with coefficient of
  /// variation `cv` (normally distributed): a step that synchronizes them all waits for
  /// the slowest, so every kernel takes straggler_factor() = 1 + cv x
  /// expected_max_normal(devices) times as long (simulation.compute_speed_cv). Host
  /// dispatch is the host's and does not change.
  [[nodiscard]] ComputeModel slowest_of(std::int64_t devices, double cv) const {
    ComputeModel m = *this;
    m.straggler_ = 1.0 + cv * expected_max_normal(devices);
    return m;
  }
  /// What every kernel's time is multiplied by (1 unless slowest_of() set it).
  [[nodiscard]] double straggler_factor() const { return straggler_; }
  /// E[max of n independent standard normal draws] (0 for n = 1; 1/sqrt(pi) for 2),
  /// by quadrature: the expected shortfall of the slowest of n in standard deviations.
  [[nodiscard]] static double expected_max_normal(std::int64_t n);

  /// The time of a run of operators issued back to back from the host: the larger of
  /// their kernels' time and `forwards` + 2 x `backwards` dispatches.
  [[nodiscard]] Seconds dispatch_bound(Seconds kernels, int forwards, int backwards) const {
    const Seconds host = eff_.host_dispatch * static_cast<double>(forwards + 2 * backwards);
    return std::max(kernels, host);
  }

  /// The operator's time in one pass.
  [[nodiscard]] Seconds time(const Operator& op, Pass pass) const;
  /// The fraction of the dtype's peak a GEMM of this shape reaches.
  [[nodiscard]] double gemm_efficiency(const GemmShape& g, DataType dtype) const;
  /// The fixed time added to a GEMM of this dtype: the device's GEMM latency, or none
  /// where a calibration file measured GEMMs of the dtype (their time includes it).
  [[nodiscard]] Seconds gemm_latency(DataType dtype) const;
  /// Whether a calibration file measured GEMMs of this dtype.
  [[nodiscard]] bool measured(DataType dtype) const;
  /// The dtype's peak on this device (FLOP/s); fp32's for int64. InputError when the
  /// device has no peak for it (fp8 on an A100, ...).
  [[nodiscard]] double peak(DataType dtype) const;
  /// m/(m + m_half) x n/(n + n_half) x k/(k + k_half) for this device.
  [[nodiscard]] double shape_factor(const GemmShape& g) const;
  /// The time to move `bytes` through HBM at its usable bandwidth (no launch).
  [[nodiscard]] Seconds memory_time(double bytes) const;

  /// What calibrate() read: the GEMM points and the copy (none before it).
  [[nodiscard]] const std::vector<GemmMeasurement>& measurements() const { return measured_; }
  [[nodiscard]] const std::optional<CopyMeasurement>& copy_measurement() const { return copy_; }

 private:
  AcceleratorSpec device_;
  DeviceEfficiency eff_;
  double straggler_ = 1.0;  // slowest_of(): every kernel's time multiplier
  std::vector<GemmMeasurement> measured_;
  std::optional<CopyMeasurement> copy_;
};

}  // namespace ddlsim
