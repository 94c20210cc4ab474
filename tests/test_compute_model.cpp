// The compute cost model: roofline terms, shape-dependent GEMM efficiency, calibration.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "sim/compute_model.hpp"
#include "support/input_error.hpp"
#include "topology/catalog.hpp"

using namespace ddlsim;
using ddlsim::test::Approx;

namespace {
const Operator& only_op(const OperatorGraph& g) { return g.ops().back(); }

OperatorGraph gemm(std::int64_t m, std::int64_t n, std::int64_t k, DataType dt = DataType::kBf16) {
  OperatorGraph g;
  g.linear("gemm", g.input("x", {m, k}, dt), n, false);
  return g;
}
}  // namespace

TEST_CASE("a large bf16 GEMM on an H200: ~788 TFLOP/s as a burst, 0.88 of that in a training step") {
  // Expected: the calibration point the built-in H200 efficiency was set from
  // (shared/hardware.md: 8192^3 through PyTorch in a short burst, ~80% of the 989 TFLOP/s
  // peak), within 2%; a training step, which holds the GPU at its power limit, prices it
  // at 0.88 of that rate (sim/data/compute_efficiency.json: our H200's sustained runs).
  const Catalog cat = Catalog::builtin();
  const ComputeModel m(cat.accelerator("h200"));
  const OperatorGraph g = gemm(8192, 8192, 8192);
  const Seconds launch = m.efficiency().launch;
  const double burst = (m.bursts().time(only_op(g), Pass::kForward) - launch).value();
  CHECK(2.0 * 8192.0 * 8192.0 * 8192.0 / burst / 1e12 == Approx(788).epsilon(0.02));
  const double latency = m.gemm_latency(DataType::kBf16).value();
  CHECK(m.efficiency().sustained == 0.88);
  CHECK((m.time(only_op(g), Pass::kForward) - launch).value() - latency == Approx((burst - latency) / 0.88));
  // An A100's figures were fitted to training steps: nothing more to scale.
  CHECK(ComputeModel(cat.accelerator("a100-80gb")).efficiency().sustained == 1.0);
  // Flash attention and convolutions (tensor-core work too) take 1 / 0.88 of their burst
  // time (launch aside: both are compute-bound at these sizes); a memory-bound operator
  // takes the same time either way.
  OperatorGraph a;
  const auto bf = DataType::kBf16;
  a.flash_attention("attn", a.input("q", {1, 32, 4096, 128}, bf), a.input("k", {1, 8, 4096, 128}, bf),
                    a.input("v", {1, 8, 4096, 128}, bf), true);
  OperatorGraph c;
  c.conv2d("conv", c.input("x", {64, 256, 56, 56}, bf), 256, 3, 1, 1, false);
  for (const OperatorGraph* graph : {&a, &c}) {
    const Operator& op = only_op(*graph);
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      const double sustained = (m.time(op, pass) - launch).value(), b = (m.bursts().time(op, pass) - launch).value();
      CHECK(sustained == Approx(b / 0.88));
    }
  }
  OperatorGraph e;
  e.gelu("gelu", e.input("x", {8192, 8192}, bf));
  CHECK(m.time(only_op(e), Pass::kForward).value() == m.bursts().time(only_op(e), Pass::kForward).value());
}

TEST_CASE("a memory-bound operator takes its bytes over the usable HBM bandwidth, plus the launch") {
  // Expected: GeLU over 2^24 bf16 elements reads and writes 2 x 2^25 bytes; on an H100
  // (3350 GB/s) at the default 85%: 2^26 / (3.35e12 x 0.85) s + 3 us.
  const Catalog cat = Catalog::builtin();
  const ComputeModel m(cat.accelerator("h100-sxm"));
  OperatorGraph g;
  g.gelu("gelu", g.input("x", {1 << 24}, DataType::kBf16));
  CHECK(m.time(only_op(g), Pass::kForward).value() == Approx(67108864.0 / (3.35e12 * 0.85) + 3e-6).epsilon(1e-12));
}

TEST_CASE("skinny GEMMs run far below peak") {
  // With m at its half size (64), m/(m + 64) = 1/2 replaces 8192/8256: the efficiency is
  // half of the square GEMM's, over 8192/8256.
  const Catalog cat = Catalog::builtin();
  const ComputeModel m(cat.accelerator("h100-sxm"));
  const double square = m.gemm_efficiency(GemmShape{1, 8192, 8192, 8192}, DataType::kBf16);
  const double skinny = m.gemm_efficiency(GemmShape{1, 64, 8192, 8192}, DataType::kBf16);
  CHECK(square > 0.7);
  CHECK(skinny == Approx(square / 2 * 8256.0 / 8192.0).epsilon(1e-12));
}

TEST_CASE("an fp32 convolution runs on TF32 tensor cores where the accelerator has them") {
  // Expected (cuDNN's default, torch.backends.cudnn.allow_tf32): the same fp32 convolution
  // takes flops / (tf32 peak x efficiency) on an A100 (156 TFLOP/s) and flops / (fp32
  // peak x efficiency) on a V100 (no TF32: 15.7), the efficiency being the convolution's
  // max x shape factor on each; an fp32 GEMM stays at the A100's fp32 peak (19.5).
  const Catalog cat = Catalog::builtin();
  OperatorGraph g;
  g.conv2d("conv", g.input("x", {64, 256, 56, 56}, DataType::kFp32), 256, 3, 1, 1, false);
  const Operator& conv = only_op(g);
  REQUIRE(conv.kind == OpKind::kConv2d);
  for (const char* id : {"a100-80gb", "v100-32gb"}) {
    const ComputeModel m(cat.accelerator(id));
    const auto tf32 = cat.accelerator(id).peak_for(Dtype::kTf32);
    const double peak = tf32 ? tf32->value() : m.peak(DataType::kFp32);
    const double e = m.efficiency().convolution * m.shape_factor(conv.gemm);
    INFO(id);
    CHECK((m.time(conv, Pass::kForward) - m.efficiency().launch).value() ==
          Approx(std::max(conv.cost.fwd_flops / (peak * e), m.memory_time(conv.cost.fwd_bytes).value())).epsilon(1e-12));
  }
  CHECK(cat.accelerator("a100-80gb").peak_for(Dtype::kTf32)->value() == Approx(156e12));
  CHECK_FALSE(cat.accelerator("v100-32gb").peak_for(Dtype::kTf32));
  const ComputeModel a100(cat.accelerator("a100-80gb"));
  const OperatorGraph f = gemm(8192, 8192, 8192, DataType::kFp32);
  const double t = (a100.time(only_op(f), Pass::kForward) - a100.efficiency().launch).value();
  CHECK(2.0 * 8192.0 * 8192.0 * 8192.0 / t == Approx(19.5e12 * a100.gemm_efficiency(only_op(f).gemm, DataType::kFp32)));
}

TEST_CASE("a calibration file replaces the GEMM efficiency with measurements") {
  // Expected: a measured shape is predicted at exactly its measured throughput; a shape
  // between two measurements gets a throughput between theirs.
  const Catalog cat = Catalog::builtin();
  ComputeModel m(cat.accelerator("a100-80gb"));
  m.calibrate(nlohmann::json::parse(R"({"device": "a100-80gb", "source": "test",
    "gemm": [{"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 250},
             {"m": 1024, "n": 1024, "k": 1024, "dtype": "bf16", "tflops": 150}]})"), "cal.json");
  CHECK(m.gemm_efficiency(GemmShape{1, 4096, 4096, 4096}, DataType::kBf16) == Approx(250.0 / 312.0));
  const double mid = m.gemm_efficiency(GemmShape{1, 2048, 2048, 2048}, DataType::kBf16) * 312.0;
  CHECK(mid > 150.0);
  CHECK(mid < 250.0);
  const OperatorGraph g = gemm(4096, 4096, 4096);
  CHECK((m.time(only_op(g), Pass::kForward) - m.efficiency().launch).value() ==
        Approx(2.0 * 4096.0 * 4096.0 * 4096.0 / 250e12));
}

TEST_CASE("an H100 GEMM kernel pays a fixed latency, unless a calibration file measured the dtype") {
  // Expected (sim/data/compute_efficiency.json, fitted to XLA's measured H100 table): a
  // 1024^3 bf16 GEMM on an H100 takes 2 x 1024^3 / (989e12 x 0.816 x 0.88 (sustained) x
  // (1024/1088)^2 x 1024/1056) (more than its 6.3 MB over 0.85 x 3,350 GB/s)
  // + 6 us + the 3 us launch (its backward, two kernels, twice both FLOPs and latency);
  // an A100 has no GEMM latency; once a file measures bf16
  // GEMMs, their throughput (a kernel time) prices the GEMM without the latency, and
  // without the sustained factor (the file's measurement stands as it is).
  const Catalog cat = Catalog::builtin();
  ComputeModel h100(cat.accelerator("h100-sxm"));
  const OperatorGraph g = gemm(1024, 1024, 1024);
  const double flops = 2.0 * 1024 * 1024 * 1024;
  const double compute = flops / (989e12 * 0.816 * 0.88 * (1024.0 / 1088) * (1024.0 / 1088) * (1024.0 / 1056));
  CHECK(compute > 3.0 * 1024 * 1024 * 2 / (0.85 * 3350e9));
  CHECK(h100.time(only_op(g), Pass::kForward).value() == Approx(compute + 6e-6 + 3e-6));
  // Its backward is two GEMM kernels (input and weight gradients): twice the FLOPs, two
  // latencies.
  CHECK(h100.time(only_op(g), Pass::kBackward).value() == Approx(2 * compute + 2 * 6e-6 + 3e-6));
  CHECK(ComputeModel(cat.accelerator("a100-80gb")).gemm_latency(DataType::kBf16).value() == 0.0);
  h100.calibrate(nlohmann::json::parse(R"({"device": "h100-sxm",
    "gemm": [{"m": 1024, "n": 1024, "k": 1024, "dtype": "bf16", "tflops": 236.3}]})"), "cal.json");
  CHECK(h100.gemm_latency(DataType::kBf16).value() == 0.0);
  CHECK(h100.gemm_latency(DataType::kFp16).value() == Approx(6e-6));
  CHECK(h100.time(only_op(g), Pass::kForward).value() == Approx(flops / 236.3e12 + 3e-6));
  // An fp16 GEMM, which the file does not measure, keeps the model's sustained price.
  const OperatorGraph g16 = gemm(1024, 1024, 1024, DataType::kFp16);
  CHECK(h100.time(only_op(g16), Pass::kForward).value() == Approx(compute + 6e-6 + 3e-6));
}

TEST_CASE("a measured copy sets the HBM efficiency of memory-bound kernels") {
  // Expected: a copy measured at 1,700 GB/s on an A100 80GB (2,039 GB/s in the catalog)
  // makes a memory-bound kernel of 1 GB take 1e9 / 1.7e12 s plus the launch; before,
  // the built-in 0.85 x 2,039 GB/s. A copy faster than the catalog's bandwidth is refused.
  const Catalog cat = Catalog::builtin();
  ComputeModel m(cat.accelerator("a100-80gb"));
  Operator copy{OpKind::kAdd, "copy", -1, {}, 0, {}, DataType::kBf16, {}};
  copy.cost.fwd_bytes = 1e9;
  CHECK((m.time(copy, Pass::kForward) - m.efficiency().launch).value() == Approx(1e9 / (0.85 * 2039e9)));
  m.calibrate(nlohmann::json::parse(R"({"device": "a100-80gb", "gemm": [],
    "memory": {"bytes": 2147483648, "gbytes_per_s": 1700, "source": "test"}})"), "cal.json");
  CHECK(m.efficiency().memory == Approx(1700.0 / 2039.0));
  CHECK((m.time(copy, Pass::kForward) - m.efficiency().launch).value() == Approx(1e9 / 1700e9));
  try {
    m.calibrate(nlohmann::json::parse(R"({"device": "a100-80gb", "gemm": [], "memory": {"bytes": 2147483648, "gbytes_per_s": 2500}})"),
                "cal.json");
    FAIL("a copy above the catalog's bandwidth was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "cal.json: memory.gbytes_per_s: 2500.000000 is above the catalog's 2039.000000 GB/s HBM bandwidth");
  }
}

TEST_CASE("bad calibration files and unsupported dtypes are errors that say why") {
  const Catalog cat = Catalog::builtin();
  ComputeModel m(cat.accelerator("a100-80gb"));
  auto error = [&](const char* text) {
    try {
      m.calibrate(nlohmann::json::parse(text), "cal.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(R"({"device": "h100-sxm", "gemm": []})") == "cal.json: device: the file calibrates 'h100-sxm', not 'a100-80gb'");
  CHECK(error(R"({"device": "a100-80gb", "gemm": [{"m": 1, "n": 1, "k": 1, "dtype": "bf16", "tflops": 400}]})") ==
        "cal.json: gemm.0.tflops: 400.000000 is above the catalog's 312.000000 TFLOP/s peak for bf16");
  CHECK(error(R"({"device": "a100-80gb", "gemm": [{"m": 0, "n": 1, "k": 1, "dtype": "bf16", "tflops": 1}]})") ==
        "cal.json: gemm.0.m: expected a positive integer, got 0");
  CHECK(error(R"({"device": "a100-80gb", "gemm": [{"m": 1, "n": 1, "k": 20000000, "dtype": "bf16", "tflops": 1}]})") ==
        "cal.json: gemm.0.k: expected at most 10000000, got 20000000");
  CHECK_THROWS_AS((void)m.peak(DataType::kFp8), InputError);
}

TEST_CASE("the host's dispatch bounds a run of short kernels, not long ones") {
  // Expected (sim/data/compute_efficiency.json): GPUs under PyTorch eager need 55 us of
  // host time per operator forward and 110 us per backward; 10 forwards and 10
  // backwards of 1 ms kernels in all take 1 ms (the host works ahead), of 10 s take
  // 10 s; 3 forwards + 2 backwards with 0.1 ms of kernels take 7 x 55 us. TPUs (XLA
  // compiles the step) pay nothing. A calibration file may set the figure.
  const Catalog cat = Catalog::builtin();
  ComputeModel gpu(cat.accelerator("a100-80gb"));
  CHECK(gpu.efficiency().host_dispatch.value() == Approx(55e-6));
  CHECK(gpu.dispatch_bound(Seconds(1e-3), 10, 0).value() == Approx(1e-3));
  CHECK(gpu.dispatch_bound(Seconds(10.0), 10, 10).value() == Approx(10.0));
  CHECK(gpu.dispatch_bound(Seconds(1e-4), 3, 2).value() == Approx(7 * 55e-6));
  const ComputeModel tpu(cat.accelerator("tpu-v4"));
  CHECK(tpu.dispatch_bound(Seconds(1e-6), 100, 100).value() == Approx(1e-6));
  gpu.calibrate(nlohmann::json::parse(R"({"device": "a100-80gb", "gemm": [], "host_dispatch_us": 10})"), "cal.json");
  CHECK(gpu.dispatch_bound(Seconds(0.0), 1, 1).value() == Approx(30e-6));
  try {
    gpu.calibrate(nlohmann::json::parse(R"({"device": "a100-80gb", "gemm": [], "host_dispatch_us": -1})"), "cal.json");
    FAIL("a negative dispatch time was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("cal.json: host_dispatch_us") == 0);
  }
}

TEST_CASE("the slowest of n accelerators: E[max of n standard normals] scales every kernel, not the host") {
  // Expected: E[max] of n standard normal draws has closed forms for small n: 0 for one,
  // 1/sqrt(pi) for two, 3/(2 sqrt(pi)) for three, (3/sqrt(pi)) (1/2 + asin(1/3)/pi) for
  // four; for 1000, 3.24144 (Harter's 1961 tables of normal order statistics); for 1e9,
  // 6.08768 (mpmath's adaptive quadrature of the same integral, outside this code). A model
  // for 32 accelerators whose speeds vary with cv 0.02 prices every kernel (a GEMM, a
  // memory-bound GeLU) at 1 + 0.02 x E[max of 32] times the plain model's, launch and
  // GEMM latency included, while the host's dispatches take what they took.
  const double pi = 3.14159265358979323846;
  CHECK(ComputeModel::expected_max_normal(1) == 0.0);
  CHECK(ComputeModel::expected_max_normal(2) == Approx(1.0 / std::sqrt(pi)).epsilon(1e-9));
  CHECK(ComputeModel::expected_max_normal(3) == Approx(1.5 / std::sqrt(pi)).epsilon(1e-9));
  CHECK(ComputeModel::expected_max_normal(4) == Approx(3.0 / std::sqrt(pi) * (0.5 + std::asin(1.0 / 3.0) / pi)).epsilon(1e-9));
  CHECK(ComputeModel::expected_max_normal(1000) == Approx(3.24144).epsilon(5e-6));  // the table's 6 digits
  CHECK(ComputeModel::expected_max_normal(1'000'000'000) == Approx(6.08768).epsilon(2e-6));

  const Catalog cat = Catalog::builtin();
  const ComputeModel plain(cat.accelerator("a100-80gb"));
  const ComputeModel slow = plain.slowest_of(32, 0.02);
  const double factor = 1.0 + 0.02 * ComputeModel::expected_max_normal(32);
  CHECK(plain.straggler_factor() == 1.0);
  CHECK(slow.straggler_factor() == Approx(factor).epsilon(1e-15));
  CHECK(plain.slowest_of(1, 0.02).straggler_factor() == 1.0);
  const OperatorGraph g = gemm(4096, 4096, 4096);
  OperatorGraph elementwise;
  elementwise.gelu("gelu", elementwise.input("x", {1 << 24}, DataType::kBf16));
  const OperatorGraph& e = elementwise;
  for (const OperatorGraph* graph : {&g, &e}) {
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      CHECK(slow.time(only_op(*graph), pass).value() == Approx(plain.time(only_op(*graph), pass).value() * factor).epsilon(1e-12));
    }
  }
  CHECK(slow.dispatch_bound(Seconds(0.0), 3, 2).value() == plain.dispatch_bound(Seconds(0.0), 3, 2).value());
}
