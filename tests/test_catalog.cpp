#include <doctest/doctest.h>

#include "approx.hpp"

#include <nlohmann/json.hpp>

#include "support/input_error.hpp"
#include "topology/catalog.hpp"

using namespace ddlsim;
using ddlsim::test::Approx;

TEST_CASE("the built-in catalog holds the published figures") {
  // Expected (shared/hardware.md, from the vendors' datasheets): A100 80GB bf16 312
  // TFLOP/s, tf32 156, fp32 19.5, 80 GiB (nvidia-smi: 81920 MiB) at 2039 GB/s; H100 SXM
  // fp8 1979 TFLOP/s, 3350 GB/s and 81559 MiB (nvidia-smi); H200 141 GiB at 4800 GB/s; B200 bf16 2250; MI300X bf16 1307; TPU v4 bf16
  // 275; V100 has no bf16; NVLink 3 300 GB/s per GPU; IB NDR 50 GB/s; 400 GbE 50 GB/s;
  // IB HDR switch latency 0.6 us; TPU v4 ICI 45 GB/s per link.
  const Catalog c = Catalog::builtin();
  const auto& a100 = c.accelerator("a100-80gb");
  CHECK(a100.peak_for(Dtype::kBf16)->value() == Approx(312e12));
  CHECK(a100.peak_for(Dtype::kTf32)->value() == Approx(156e12));
  CHECK(a100.peak_for(Dtype::kFp32)->value() == Approx(19.5e12));
  CHECK_FALSE(a100.peak_for(Dtype::kFp8).has_value());
  CHECK(a100.memory.value() == Approx(81920.0 * 1024 * 1024));
  CHECK(a100.memory_bandwidth.value() == Approx(2039e9));
  CHECK(c.accelerator("h100-sxm").peak_for(Dtype::kFp8)->value() == Approx(1979e12));
  CHECK(c.accelerator("h100-sxm").memory_bandwidth.value() == Approx(3350e9));
  CHECK(c.accelerator("h100-sxm").memory.value() == Approx(81559.0 * 1024 * 1024).epsilon(1e-4));
  CHECK(c.accelerator("h200").memory.value() == Approx(141.0 * 1024 * 1024 * 1024));
  CHECK(c.accelerator("h200").memory_bandwidth.value() == Approx(4800e9));
  CHECK(c.accelerator("b200").peak_for(Dtype::kBf16)->value() == Approx(2250e12));
  CHECK(c.accelerator("mi300x").peak_for(Dtype::kBf16)->value() == Approx(1307e12));
  CHECK(c.accelerator("tpu-v4").peak_for(Dtype::kBf16)->value() == Approx(275e12));
  CHECK_FALSE(c.accelerator("v100-32gb").peak_for(Dtype::kBf16).has_value());
  CHECK(c.link("nvlink3").bandwidth.value() == Approx(25e9));
  CHECK(c.accelerator("b200").memory.value() == Approx(192e9));
  CHECK(c.link("ib-ndr").bandwidth.value() == Approx(50e9));
  CHECK(c.link("eth-400g").bandwidth.value() == Approx(50e9));
  CHECK(c.link("ib-hdr").latency.value() == Approx(0.6e-6));
  CHECK(c.link("ici-v4").bandwidth.value() == Approx(45e9));
}

TEST_CASE("scale-up bandwidth per accelerator is links x bandwidth per link") {
  // Expected (shared/hardware.md): P100 4 x 20 = 80, V100 6 x 25 = 150, A100 12 x 25 =
  // 300, H100 and H200 18 x 25 = 450, B200 18 x 50 = 900, MI300X 7 x 64 = 448 GB/s.
  const Catalog c = Catalog::builtin();
  const std::pair<const char*, double> expected[] = {{"p100", 80},      {"v100-32gb", 150}, {"a100-80gb", 300},
                                                     {"h100-sxm", 450}, {"h200", 450},      {"b200", 900},
                                                     {"mi300x", 448}};
  for (const auto& [id, gbps] : expected) {
    INFO(id);
    const auto& a = c.accelerator(id);
    CHECK(a.scale_up_links * c.link(a.scale_up).bandwidth.value() == Approx(gbps * 1e9));
  }
}

TEST_CASE("the catalog covers every accelerator and link family the project models, each with a source") {
  // Expected: the 11 accelerators and the NVLink 1-5, PCIe 3-6, IB EDR-XDR, 100-800 GbE,
  // TPU ICI v3/v4/v5p families; every entry has a source and its scale-up link exists.
  const Catalog c = Catalog::builtin();
  for (const char* id : {"p100", "v100-32gb", "a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "mi300x", "tpu-v3",
                         "tpu-v4", "tpu-v5p"}) {
    INFO(id);
    CHECK_FALSE(c.accelerator(id).source.empty());
    CHECK_NOTHROW((void)c.link(c.accelerator(id).scale_up));
  }
  for (const char* id : {"nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvlink5", "pcie3", "pcie4", "pcie5", "pcie6",
                         "ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "eth-100g", "eth-200g", "eth-400g", "eth-800g",
                         "ici-v3", "ici-v4", "ici-v5p"}) {
    INFO(id);
    CHECK_FALSE(c.link(id).source.empty());
    CHECK_FALSE(c.link(id).latency_source.empty());
  }
}

TEST_CASE("users patch existing entries and add new ones") {
  // Expected: a patch that names only memory_gbytes_per_s changes that field of h100-sxm
  // and keeps the rest (bf16 989 TFLOP/s); a capacity given in GB replaces a100-80gb's
  // built-in GiB figure (70 GB = 70e9 bytes); a complete new entry is added; the JSON dump
  // reads back to the same catalog.
  Catalog c = Catalog::builtin();
  c.merge(nlohmann::json::parse(R"({
    "accelerators": {
      "h100-sxm": {"memory_gbytes_per_s": 3000},
      "a100-80gb": {"memory_gb": 70},
      "my-chip": {"name": "Mine", "tflops": {"bf16": 500}, "memory_gb": 96, "memory_gbytes_per_s": 4000,
                  "scale_up": "nvlink4", "scale_up_links": 18, "source": "our measurements"}
    },
    "links": {"my-link": {"name": "ours", "gbytes_per_s": 40, "latency_us": 3, "source": "us"}}
  })"), "mine.json");
  CHECK(c.accelerator("h100-sxm").memory_bandwidth.value() == Approx(3000e9));
  CHECK(c.accelerator("h100-sxm").peak_for(Dtype::kBf16)->value() == Approx(989e12));
  CHECK(c.accelerator("my-chip").memory.value() == Approx(96e9));
  CHECK(c.accelerator("a100-80gb").memory.value() == Approx(70e9));
  CHECK(c.link("my-link").latency.value() == Approx(3e-6));
  Catalog again = Catalog::builtin();
  again.merge(nlohmann::json::parse(c.to_json()), "dump.json");
  CHECK(again.to_json() == c.to_json());
}

TEST_CASE("NVIDIA parts hold a CUDA context and NCCL buffers beside the model; parts without a source none") {
  // Expected: every NVIDIA entry 400 MiB of CUDA context (CUDA 11.7+ lazy loading,
  // pytorch/pytorch#109888) and 688 MiB per NCCL communicator (4 A100s over NVLink,
  // NVIDIA/nccl#964), with the source named; MI300X and the TPUs none (no figure found);
  // a patch changes them like any field.
  Catalog c = Catalog::builtin();
  for (const char* id : {"p100", "v100-32gb", "a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200"}) {
    INFO(id);
    CHECK(c.accelerator(id).context_memory.value() == 400.0 * 1024 * 1024);
    CHECK(c.accelerator(id).communicator_memory.value() == 688.0 * 1024 * 1024);
    CHECK(c.accelerator(id).runtime_memory_source.find("nccl issue 964") != std::string::npos);
  }
  for (const char* id : {"mi300x", "tpu-v3", "tpu-v4", "tpu-v5p"}) {
    INFO(id);
    CHECK(c.accelerator(id).context_memory.value() == 0);
    CHECK(c.accelerator(id).communicator_memory.value() == 0);
  }
  c.merge(nlohmann::json::parse(R"({"accelerators": {"h100-sxm": {"context_mib": 512, "communicator_mib": 0}}})"), "mine.json");
  CHECK(c.accelerator("h100-sxm").context_memory.value() == 512.0 * 1024 * 1024);
  CHECK(c.accelerator("h100-sxm").communicator_memory.value() == 0);
  CHECK_THROWS_WITH_AS(c.merge(nlohmann::json::parse(R"({"accelerators": {"h100-sxm": {"context_mib": -1}}})"), "mine.json"),
                       "mine.json: accelerators.h100-sxm.context_mib: expected a number from 0 to 1e+06, got -1", InputError);
}

TEST_CASE("NVLink hops cost NCCL's 3.4 us through a switch; only NVLink 3 has a ring overhead, with its source") {
  // Expected: NVLink 3-5 links 1.7 us each (two per GPU-to-GPU hop through an NVSwitch:
  // NCCL's 3.4 us), NVLink 1-2 1 us; nvlink3's ring_overhead 0.195 from vTrain's A100
  // tables, every other link kind 0; a patch sets it.
  Catalog c = Catalog::builtin();
  for (const char* id : {"nvlink3", "nvlink4", "nvlink5"}) CHECK(c.link(id).latency.value() == Approx(1.7e-6));
  for (const char* id : {"nvlink1", "nvlink2"}) CHECK(c.link(id).latency.value() == Approx(1e-6));
  CHECK(c.link("nvlink3").ring_overhead == Approx(0.195));
  CHECK(c.link("nvlink3").ring_overhead_source.find("vTrain") != std::string::npos);
  for (const std::string& id : c.link_ids()) {
    if (id != "nvlink3") CHECK(c.link(id).ring_overhead == 0.0);
  }
  c.merge(nlohmann::json::parse(R"({"links": {"nvlink4": {"ring_overhead": 0.1}}})"), "mine.json");
  CHECK(c.link("nvlink4").ring_overhead == Approx(0.1));
}

TEST_CASE("the low-latency protocol's latencies: NVLink 3-5 links 0.447 us, every RDMA NIC 7.45 us a message") {
  // Expected: NCCL's LL figures (0.6 us an NVLink hop, two links through an NVSwitch; 5.0
  // us a network hop of its tree) times 1.49: NVLink 3-5 links 0.447 us, InfiniBand and
  // RoCE NICs 7.45 us; NVLink 1-2, PCIe, TCP Ethernet, TPU links without (their own
  // latency, no transport); each with its source; a patch sets them.
  Catalog c = Catalog::builtin();
  for (const char* id : {"nvlink3", "nvlink4", "nvlink5"}) {
    INFO(id);
    REQUIRE(c.link(id).ll_latency.has_value());
    CHECK(c.link(id).ll_latency->value() == Approx(0.447e-6));
    CHECK(c.link(id).ll_latency_source.find("tuning.cc") != std::string::npos);
    CHECK(c.link(id).ll_transport_latency.value() == 0.0);
  }
  for (const char* id : {"ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "eth-100g", "eth-200g", "eth-400g", "eth-800g"}) {
    INFO(id);
    CHECK(c.link(id).ll_transport_latency.value() == Approx(7.45e-6));
    CHECK(c.link(id).ll_transport_latency_source.find("issue 1244") != std::string::npos);
    CHECK_FALSE(c.link(id).ll_latency.has_value());
  }
  for (const char* id : {"nvlink1", "nvlink2", "pcie4", "eth-10g", "eth-25g", "ici-v4", "dcn-tpu-host"}) {
    INFO(id);
    CHECK_FALSE(c.link(id).ll_latency.has_value());
    CHECK(c.link(id).ll_transport_latency.value() == 0.0);
  }
  c.merge(nlohmann::json::parse(R"({"links": {"nvlink2": {"ll_latency_us": 0.5}, "eth-25g": {"ll_transport_latency_us": 20}}})"),
          "mine.json");
  CHECK(c.link("nvlink2").ll_latency->value() == Approx(0.5e-6));
  CHECK(c.link("eth-25g").ll_transport_latency.value() == Approx(20e-6));
}

TEST_CASE("the bandwidth protocol's NIC transport: every RDMA NIC 14 us, NCCL's own figure, nothing else") {
  // Expected: NCCL's tuning figure for a network step of its Simple-protocol ring, 14 us
  // (tuning.cc since NCCL 2.20), on the InfiniBand and RoCE NICs, as published; every
  // other link kind 0 (scale-up links, PCIe, TCP Ethernet, TPU links); a patch sets it.
  Catalog c = Catalog::builtin();
  for (const char* id : {"ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "eth-100g", "eth-200g", "eth-400g", "eth-800g"}) {
    INFO(id);
    CHECK(c.link(id).transport_latency.value() == Approx(14e-6));
    CHECK(c.link(id).transport_latency_source.find("tuning.cc") != std::string::npos);
  }
  for (const char* id : {"nvlink1", "nvlink3", "nvlink4", "nvlink5", "pcie4", "eth-10g", "eth-25g", "ici-v4", "dcn-tpu-host"}) {
    INFO(id);
    CHECK(c.link(id).transport_latency.value() == 0.0);
  }
  c.merge(nlohmann::json::parse(R"({"links": {"ib-ndr": {"transport_latency_us": 0}, "eth-25g": {"transport_latency_us": 30}}})"),
          "mine.json");
  CHECK(c.link("ib-ndr").transport_latency.value() == 0.0);
  CHECK(c.link("eth-25g").transport_latency.value() == Approx(30e-6));
}

TEST_CASE("the low-latency protocol's rate: NCCL's per-GPU caps, by NVLink generation and 20 GB/s across NICs") {
  // Expected: NCCL's llMaxBws (tuning.cc): one server of V100s (and older GPUs) 39 GB/s,
  // of A100s 87.7, of H100s 141, of B200s 282 (2 x 141) on NVLink 1-2, 3, 4 and 5; beyond
  // two servers 20.4 (Intel hosts) and 19 (AMD), 20 GB/s on every InfiniBand and RoCE NIC;
  // no cap elsewhere; each with its source; a patch sets it.
  Catalog c = Catalog::builtin();
  const std::vector<std::pair<const char*, double>> nvlink{
      {"nvlink1", 39e9}, {"nvlink2", 39e9}, {"nvlink3", 87.7e9}, {"nvlink4", 141e9}, {"nvlink5", 282e9}};
  for (const auto& [id, cap] : nvlink) {
    INFO(id);
    REQUIRE(c.link(id).ll_bus_bandwidth.has_value());
    CHECK(c.link(id).ll_bus_bandwidth->value() == Approx(cap));
    CHECK(c.link(id).ll_bus_bandwidth_source.find("llMaxBws") != std::string::npos);
  }
  for (const char* id : {"ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "eth-100g", "eth-200g", "eth-400g", "eth-800g"}) {
    INFO(id);
    REQUIRE(c.link(id).ll_bus_bandwidth.has_value());
    CHECK(c.link(id).ll_bus_bandwidth->value() == Approx(20e9));
    CHECK(c.link(id).ll_bus_bandwidth_source.find("llMaxBws") != std::string::npos);
  }
  for (const char* id : {"pcie4", "eth-10g", "eth-25g", "ici-v4", "dcn-tpu-host", "xgmi-mi300x"}) {
    INFO(id);
    CHECK_FALSE(c.link(id).ll_bus_bandwidth.has_value());
  }
  c.merge(nlohmann::json::parse(R"({"links": {"ib-ndr": {"ll_bus_gbytes_per_s": 39}}})"), "mine.json");
  CHECK(c.link("ib-ndr").ll_bus_bandwidth->value() == Approx(39e9));
}

TEST_CASE("bad catalog entries name the path, and leave the catalog unchanged") {
  // Expected: each error is an InputError whose message starts with the source and names
  // the field; the catalog keeps its previous contents.
  Catalog c = Catalog::builtin();
  auto bad = [&](const char* patch, const std::string& message) {
    INFO(patch);
    CHECK_THROWS_WITH_AS(c.merge(nlohmann::json::parse(patch), "mine.json"), message.c_str(), InputError);
  };
  bad(R"({"accelerators": {"h100-sxm": {"memory_gbytes_per_s": 0}}})",
      "mine.json: accelerators.h100-sxm.memory_gbytes_per_s: expected a number from 1e-06 to 1e+06, got 0");
  bad(R"({"accelerators": {"new": {"name": "x"}}})", "mine.json: accelerators.new.tflops: missing (a required field)");
  bad(R"({"accelerators": {"h100-sxm": {"tflops": {"bf61": 1}}}})",
      "mine.json: accelerators.h100-sxm.tflops.bf61: unknown key (did you mean 'bf16'?)");
  bad(R"({"accelerators": {"h100-sxm": {"scale_up": "nvlink9"}}})",
      "mine.json: accelerators.h100-sxm.scale_up: no link 'nvlink9' in the catalog (did you mean 'nvlink1'?)");
  bad(R"({"links": {"ib-ndr": {"gbytes_per_s": -5}}})",
      "mine.json: links.ib-ndr.gbytes_per_s: expected a number from 1e-06 to 1e+06, got -5");
  bad(R"({"links": {"nvlink3": {"ring_overhead": -0.5}}})",
      "mine.json: links.nvlink3.ring_overhead: expected a number from 0 to 10, got -0.5");
  bad(R"({"links": {"nvlink4": {"ll_latency_us": -1}}})",
      "mine.json: links.nvlink4.ll_latency_us: expected a number from 0 to 1e+06, got -1");
  bad(R"({"links": {"ib-ndr": {"ll_transport_latency_us": "12"}}})",
      "mine.json: links.ib-ndr.ll_transport_latency_us: expected a number from 0 to 1e+06, got \"12\"");
  bad(R"({"links": {"ib-hdr": {"transport_latency_us": -14}}})",
      "mine.json: links.ib-hdr.transport_latency_us: expected a number from 0 to 1e+06, got -14");
  bad(R"({"links": {"ib-ndr": {"ll_bus_gbytes_per_s": 0}}})",
      "mine.json: links.ib-ndr.ll_bus_gbytes_per_s: expected a number from 1e-06 to 1e+06, got 0");
  bad(R"({"links": {"nvlink4": {"ll_bus_gbytes_per_s": "fast"}}})",
      "mine.json: links.nvlink4.ll_bus_gbytes_per_s: expected a number from 1e-06 to 1e+06, got \"fast\"");
  bad(R"({"link": {}})", "mine.json: link: unknown key (did you mean 'links'?)");
  bad(R"({"accelerators": {"new": {"name": "x", "tflops": {"bf16": 1}, "memory_gb": 1, "memory_gib": 1,
      "memory_gbytes_per_s": 1, "scale_up": "nvlink4", "scale_up_links": 1, "source": "s"}}})",
      "mine.json: accelerators.new: give the memory capacity as exactly one of memory_gb (10^9 bytes) or memory_gib "
      "(2^30 bytes), not both");
  bad(R"({"accelerators": {"new": {"name": "x", "tflops": {"bf16": 1},
      "memory_gbytes_per_s": 1, "scale_up": "nvlink4", "scale_up_links": 1, "source": "s"}}})",
      "mine.json: accelerators.new: give the memory capacity as exactly one of memory_gb (10^9 bytes) or memory_gib "
      "(2^30 bytes)");
  CHECK(c.accelerator("h100-sxm").memory_bandwidth.value() == Approx(3350e9));
  CHECK_THROWS_WITH_AS((void)c.accelerator("h100"),
                       doctest::Contains("unknown accelerator 'h100' (did you mean 'h100-sxm'?)"), InputError);
}
