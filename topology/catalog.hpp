// The hardware catalog: accelerators and links with their published figures.
//
// The figures are data (topology/data/catalog.json, embedded in the binary), each entry
// with its source. A user adds entries, or changes fields of existing ones, from a JSON
// document of the same shape: an entry given for an existing id is a patch (only the
// fields it names change); a new id must give every required field.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/units.hpp"

namespace ddlsim {

/// Number formats whose peak throughput the catalog records.
enum class Dtype { kFp32, kTf32, kBf16, kFp16, kFp8 };
inline constexpr std::array<std::string_view, 5> kDtypeNames = {"fp32", "tf32", "bf16", "fp16", "fp8"};

struct AcceleratorSpec {
  std::string id;
  std::string name;
  std::array<std::optional<FlopsPerSecond>, 5> peak;  // by Dtype; empty: not supported
  Bytes memory{0.0};        // the capacity a program can use: what the driver reports as total
  std::string memory_source;  // where the capacity figure comes from, when not the datasheet
  /// Memory the software stack holds on each device beside the model's tensors: the
  /// runtime's context (CUDA's: driver state and loaded kernels), and the buffers of
  /// each collective communicator the device joins (NCCL's per group). 0: not known.
  Bytes context_memory{0.0};
  Bytes communicator_memory{0.0};
  std::string runtime_memory_source;
  BytesPerSecond memory_bandwidth{0.0};
  std::string scale_up;  // link id of its scale-up fabric (NVLink generation, ICI, ...)
  int scale_up_links = 1;  // how many such links the accelerator has
  /// Streaming multiprocessors (0: not given): what communication kernels that run
  /// beside a GEMM take SMs from (Transformer Engine's userbuffers overlap).
  int sms = 0;
  /// The accelerator's total scale-up bandwidth per direction needs the link's figure:
  /// scale_up_links x that link's bandwidth.
  std::string source;

  [[nodiscard]] std::optional<FlopsPerSecond> peak_for(Dtype d) const { return peak[static_cast<int>(d)]; }
};

struct LinkSpec {
  std::string id;
  std::string name;
  BytesPerSecond bandwidth{0.0};  // per direction
  Seconds latency{0.0};           // per hop
  std::string source;
  std::string latency_source;
  /// The fraction of the line rate that collective traffic (NCCL-like libraries)
  /// reaches on this link: protocol headers, flow control and synchronisation cost the
  /// rest. The network models multiply the bandwidth by it. Default 1 (line rate) for
  /// user entries that do not give it; every built-in entry gives it with its source.
  double efficiency = 1.0;
  std::string efficiency_source;
  /// The extra time a ring phase (a reduce-scatter, an all-gather, either half of an
  /// all-reduce) takes among accelerators of one scale-up domain whose links are of
  /// this kind, in steps at the rate of each accelerator's port (its links of this kind
  /// together): p ranks take p - 1 + ring_overhead steps' time, not p - 1, so a pair
  /// loses the most (CollectiveGroup::ring_wait). NCCL pulls data over NVLink 3 with
  /// peer-to-peer reads (A100s), which reach less than the writes other generations
  /// use. Default 0.
  double ring_overhead = 0.0;
  std::string ring_overhead_source;
  /// The latency of this link when the collective library runs its low-latency protocol
  /// (NCCL's LL: 8-byte stores that carry their own flag, no separate synchronisation),
  /// which it uses for small collectives (choose_protocol in sim/collectives.hpp);
  /// absent: `latency`.
  std::optional<Seconds> ll_latency;
  std::string ll_latency_source;
  /// The collective library's cost of one low-latency-protocol message through a NIC of
  /// this kind (NCCL's network transport: the proxy thread, the RDMA write and its
  /// completion), paid once by every transfer of a small collective whose route crosses
  /// such a link, beside the links' own latencies (a ring's steps pay the ring's mean of
  /// it instead, a pipeline of chunks its first chunk alone); default 0 (scale-up
  /// links). Larger collectives pay transport_latency.
  Seconds ll_transport_latency{0.0};
  std::string ll_transport_latency_source;
  /// The same for the library's bandwidth protocol (NCCL's Simple), which collectives
  /// above the LL range run: paid once by every transfer whose route crosses such
  /// a link (a ring's steps: the ring's mean over its hops); default 0.
  Seconds transport_latency{0.0};
  std::string transport_latency_source;
  /// The bus bandwidth (nccl-tests' busbw) at which the library's low-latency protocol
  /// moves a collective's data when its ranks talk over links of this kind: each 8-byte
  /// store carries 4 bytes and a flag, and the receiving threads poll for it, so LL runs
  /// far below the links' rate (NCCL's tuning model caps it per GPU, its llMaxBw). A
  /// group's cap is the smallest among its routes' links (CollectiveGroup::
  /// ll_bus_bandwidth); absent: the protocol is not capped (and runs only up to
  /// kLowLatencyMaxBytes, when no link of the group's routes has a cap).
  std::optional<BytesPerSecond> ll_bus_bandwidth;
  std::string ll_bus_bandwidth_source;
};

class Catalog {
 public:
  /// The catalog shipped with ddlsim.
  static Catalog builtin();

  /// Adds or patches entries from `doc` ({"accelerators": {...}, "links": {...}}), named
  /// `source` in errors. Throws InputError naming the JSON path; on error the catalog is
  /// unchanged.
  void merge(const nlohmann::json& doc, const std::string& source);

  /// The entry with this id; InputError with a "did you mean" for an unknown one.
  [[nodiscard]] const AcceleratorSpec& accelerator(std::string_view id) const;
  [[nodiscard]] const LinkSpec& link(std::string_view id) const;

  [[nodiscard]] std::vector<std::string> accelerator_ids() const;
  [[nodiscard]] std::vector<std::string> link_ids() const;

  /// The catalog as JSON, in the shape it is read from.
  [[nodiscard]] std::string to_json() const;

 private:
  Catalog() = default;
  void parse(const std::string& source);
  void merge_checked(const nlohmann::json& doc, const std::string& source);

  std::string doc_;  // the merged JSON document, serialised (keeps json out of this header)
  std::map<std::string, AcceleratorSpec, std::less<>> accelerators_;
  std::map<std::string, LinkSpec, std::less<>> links_;
};

}  // namespace ddlsim
