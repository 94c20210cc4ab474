#include "sim/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "compute_efficiency_data.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"

namespace ddlsim {
namespace {

void read_device(const nlohmann::json& entry, DeviceEfficiency& e) {
  if (entry.contains("gemm")) {
    const auto& g = entry["gemm"];
    e.gemm.max = g.value("max", e.gemm.max);
    e.gemm.max_fp8 = g.value("max_fp8", e.gemm.max_fp8);
    if (!(e.gemm.max_fp8 >= 0.0 && e.gemm.max_fp8 <= 1.0)) throw std::logic_error("compute_efficiency.json: max_fp8 outside [0, 1]");
    e.gemm.half_m = g.value("half_m", e.gemm.half_m);
    e.gemm.half_n = g.value("half_n", e.gemm.half_n);
    e.gemm.half_k = g.value("half_k", e.gemm.half_k);
    if (g.contains("latency_us")) e.gemm.latency = Seconds(g["latency_us"].get<double>() * 1e-6);
  }
  if (entry.contains("attention")) {
    e.attention_forward = entry["attention"].value("forward", e.attention_forward);
    e.attention_backward = entry["attention"].value("backward", e.attention_backward);
  }
  if (entry.contains("convolution")) e.convolution = entry["convolution"].value("max", e.convolution);
  e.memory = entry.value("memory", e.memory);
  if (entry.contains("launch_us")) e.launch = Seconds(entry["launch_us"].get<double>() * 1e-6);
  if (entry.contains("host_dispatch_us")) e.host_dispatch = Seconds(entry["host_dispatch_us"].get<double>() * 1e-6);
  e.sustained = entry.value("sustained", e.sustained);
  e.overlap_slowdown = entry.value("overlap_slowdown", e.overlap_slowdown);
  if (!(e.overlap_slowdown >= 0.0 && e.overlap_slowdown < 1.0)) throw std::logic_error("compute_efficiency.json: overlap_slowdown outside [0, 1)");
  // Built-in data: a fraction of the burst rate, never more, never zero (GEMMs would be free).
  if (!(e.sustained > 0.0 && e.sustained <= 1.0)) throw std::logic_error("compute_efficiency.json: sustained outside (0, 1]");
}

double saturation(double x, double half) { return x / (x + half); }

Dtype catalog_dtype(DataType t) {
  switch (t) {
    case DataType::kBf16: return Dtype::kBf16;
    case DataType::kFp16: return Dtype::kFp16;
    case DataType::kFp8: return Dtype::kFp8;
    default: return Dtype::kFp32;
  }
}

}  // namespace

ComputeModel::ComputeModel(const AcceleratorSpec& device) : device_(device) {
  const nlohmann::json data = nlohmann::json::parse(kComputeEfficiencyJson);
  const auto& devices = data.at("devices");
  read_device(devices.at("default"), eff_);
  if (devices.contains(device.id)) read_device(devices.at(device.id), eff_);
}

double ComputeModel::peak(DataType dtype) const {
  const auto p = device_.peak_for(catalog_dtype(dtype));
  if (!p) {
    // The number formats a model may take on this accelerator instead.
    std::string usable;
    for (DataType d : {DataType::kFp32, DataType::kBf16, DataType::kFp16, DataType::kFp8}) {
      if (device_.peak_for(catalog_dtype(d))) usable += (usable.empty() ? "" : ", ") + std::string(data_type_name(d));
    }
    throw InputError("accelerator '" + device_.id + "' has no " + std::string(kDtypeNames[static_cast<int>(catalog_dtype(dtype))]) +
                     " peak in the catalog" + (usable.empty() ? "" : "; it runs " + usable));
  }
  return p->value();
}

double ComputeModel::gemm_efficiency(const GemmShape& g, DataType dtype) const {
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k);
  std::vector<std::pair<double, double>> near;  // (distance, efficiency) of measurements of this dtype
  for (const GemmMeasurement& x : measured_) {
    if (x.dtype != dtype) continue;
    const double d = std::hypot(std::log(m / static_cast<double>(x.m)), std::log(n / static_cast<double>(x.n)),
                                std::log(k / static_cast<double>(x.k)));
    near.emplace_back(d, x.flops_per_s / peak(dtype));
  }
  if (!near.empty()) {
    std::sort(near.begin(), near.end());
    if (near.size() > 4) near.resize(4);
    if (near.front().first < 1e-9) return near.front().second;  // a measured shape
    double weight = 0.0, sum = 0.0;
    for (const auto& [d, e] : near) {
      weight += 1.0 / d;
      sum += e / d;
    }
    return sum / weight;
  }
  const double max = dtype == DataType::kFp8 && eff_.gemm.max_fp8 > 0.0 ? eff_.gemm.max_fp8 : eff_.gemm.max;
  return max * shape_factor(g);
}

bool ComputeModel::measured(DataType dtype) const {
  return std::any_of(measured_.begin(), measured_.end(), [dtype](const GemmMeasurement& x) { return x.dtype == dtype; });
}

Seconds ComputeModel::gemm_latency(DataType dtype) const { return measured(dtype) ? Seconds(0.0) : eff_.gemm.latency; }

double ComputeModel::shape_factor(const GemmShape& g) const {
  return saturation(static_cast<double>(g.m), eff_.gemm.half_m) * saturation(static_cast<double>(g.n), eff_.gemm.half_n) *
         saturation(static_cast<double>(g.k), eff_.gemm.half_k);
}

Seconds ComputeModel::time(const Operator& op, Pass pass) const {
  const bool fwd = pass == Pass::kForward;
  const double flops = fwd ? op.cost.fwd_flops : op.cost.bwd_flops;
  const double bytes = fwd ? op.cost.fwd_bytes : op.cost.bwd_bytes;
  if (flops == 0.0 && bytes == 0.0) return Seconds(0.0);
  double compute = 0.0;
  Seconds fixed = eff_.launch;
  if (flops > 0.0 && op.dtype != DataType::kInt64) {
    double e = 0.0;
    // The model's rates are bursts' and run at the sustained fraction of them; a GEMM
    // rate a calibration file measured is taken as it stands.
    double sustained = eff_.sustained;
    std::optional<FlopsPerSecond> tensor_peak;  // a peak other than the dtype's
    switch (op.kind) {
      case OpKind::kLinear:
      case OpKind::kMatmul:
        e = gemm_efficiency(op.gemm, op.dtype);
        if (measured(op.dtype)) sustained = 1.0;
        fixed += gemm_latency(op.dtype) * (fwd ? 1.0 : 2.0);  // backward: input and weight gradients
        break;
      case OpKind::kConv2d:
        e = eff_.convolution * shape_factor(op.gemm);
        // cuDNN runs fp32 convolutions on TF32 tensor cores where there are any
        // (torch.backends.cudnn.allow_tf32 is on by default; matmuls' is off).
        if (op.dtype == DataType::kFp32) tensor_peak = device_.peak_for(Dtype::kTf32);
        break;
      case OpKind::kFlashAttention:  // per head: (s x d)(d x s) and back
        e = (fwd ? eff_.attention_forward : eff_.attention_backward) * shape_factor(op.gemm);
        break;
      default: e = 0.0;  // elementwise, norms, softmax, losses: a few FLOPs per byte, memory-bound
    }
    // (The catalog's peaks are the matrix units'; elementwise work runs on vector units
    // at far fewer FLOPs per byte than any device's ridge point, so only bytes count.)
    if (e > 0.0) compute = flops / ((tensor_peak ? tensor_peak->value() : peak(op.dtype)) * e * sustained);
  }
  return (Seconds(std::max(compute, memory_time(bytes).value())) + fixed) * straggler_;
}

double ComputeModel::expected_max_normal(std::int64_t n) {
  if (n <= 1) return 0.0;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx; Simpson's rule on [-10, 12], outside
  // which the integrand is below 1e-20 for n up to 1e9 (Phi(x)^(n-1) as
  // exp((n-1) log1p(-(1 - Phi(x)))), 1 - Phi from erfc so that the tail keeps its digits).
  constexpr double kLo = -10.0, kHi = 12.0;
  constexpr int kIntervals = 22000;  // even; step 0.001
  const double h = (kHi - kLo) / kIntervals;
  const double count = static_cast<double>(n);
  auto f = [count](double x) {
    const double upper = 0.5 * std::erfc(x / std::numbers::sqrt2);  // 1 - Phi(x), exact in the tail
    if (upper >= 1.0) return 0.0;
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    return x * count * pdf * std::exp((count - 1.0) * std::log1p(-upper));
  };
  double sum = f(kLo) + f(kHi);
  for (int i = 1; i < kIntervals; ++i) sum += f(kLo + i * h) * (i % 2 == 1 ? 4.0 : 2.0);
  return sum * h / 3.0;
}

Seconds ComputeModel::memory_time(double bytes) const {
  return Seconds(bytes / (device_.memory_bandwidth.value() * eff_.memory));
}

void ComputeModel::calibrate(const nlohmann::json& doc, const std::string& source) {
  try {
    JsonObject o(doc, "");
    const std::string dev = o.string("device");
    if (dev != device_.id) {
      throw InputError(o.field_path("device") + ": the file calibrates '" + dev + "', not '" + device_.id + "'");
    }
    std::vector<GemmMeasurement> points;
    JsonArray gemm = o.array("gemm");
    for (std::size_t i = 0; i < gemm.size(); ++i) {
      JsonObject g = gemm.object(i);
      GemmMeasurement x;
      // Far beyond any GEMM one times; keeps products of two dimensions in range.
      auto dim = [&g](const char* key) {
        constexpr std::int64_t kMaxDim = 10'000'000;
        const std::int64_t v = g.positive_int(key);
        if (v > kMaxDim) {
          throw InputError(g.field_path(key) + ": expected at most " + std::to_string(kMaxDim) + ", got " + std::to_string(v));
        }
        return v;
      };
      x.m = dim("m");
      x.n = dim("n");
      x.k = dim("k");
      const std::string dt = g.choice("dtype", kFloatTypeNames);
      x.dtype = *parse_float_type(dt);
      const double tflops = g.number("tflops", 1e-6, 1e6);
      x.flops_per_s = tflops * 1e12;
      if (x.flops_per_s > peak(x.dtype) * 1.05) {
        throw InputError(g.field_path("tflops") + ": " + std::to_string(tflops) + " is above the catalog's " +
                         std::to_string(peak(x.dtype) / 1e12) + " TFLOP/s peak for " + dt);
      }
      g.known("source");
      g.finish();
      points.push_back(x);
    }
    if (o.has("memory")) {
      // A copy's bytes read and written over its time: memory-bound kernels move their
      // bytes at that fraction of the catalog's HBM bandwidth.
      JsonObject m = o.object("memory");
      CopyMeasurement copy;
      copy.bytes = m.number("bytes", kMinCopyBytes, 1e15);  // beyond every cache: what HBM delivers
      const double gbps = m.number("gbytes_per_s", 1e-3, 1e6);
      const double bw = device_.memory_bandwidth.value();
      if (gbps * 1e9 > bw * 1.05) {
        throw InputError(m.field_path("gbytes_per_s") + ": " + std::to_string(gbps) + " is above the catalog's " +
                         std::to_string(bw / 1e9) + " GB/s HBM bandwidth");
      }
      m.known("source");
      m.finish();
      copy.bytes_per_s = gbps * 1e9;
      copy_ = copy;
      eff_.memory = std::min(1.0, copy.bytes_per_s / bw);
    }
    if (o.has("launch_us")) eff_.launch = Seconds(o.number("launch_us", 0.0, 1e3) * 1e-6);
    if (o.has("host_dispatch_us")) eff_.host_dispatch = Seconds(o.number("host_dispatch_us", 0.0, 1e4) * 1e-6);
    o.known("source");
    o.known("gpu");
    o.known("software");
    o.known("layer");      // measured transformer layers, dense and mixture-of-experts, for
    o.known("moe_layer");  // comparison (not used to calibrate)
    o.finish();
    measured_ = std::move(points);
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
}

}  // namespace ddlsim
