#pragma once

// Transformer Engine's userbuffers overlap of the tensor-parallel collectives with the
// GEMMs beside them (Megatron-Core's --tp-comm-overlap, NeMo's ub_tp_comm_overlap),
// with sequence parallelism: each half layer's all-gather and reduce-scatter run in
// pieces between the pieces of the GEMM that needs or produces them, and the
// communication kernels take SMs from the GEMMs.
//
// Ten places in a layer, as TE names them: the forward's column-parallel GEMMs after
// the input's all-gather (qkv_fprop, fc1_fprop) and row-parallel GEMMs before the
// output's reduce-scatter (proj_fprop, fc2_fprop); the backward's row-parallel input
// gradients after the output gradient's all-gather (proj_dgrad, fc2_dgrad), and the
// column-parallel input gradients, beside which the layer input's all-gather for the
// weight gradient runs (qkv_dgrad, fc1_dgrad), and weight gradients, beside which the
// input gradient's reduce-scatter runs (qkv_wgrad, fc1_wgrad).

#include <algorithm>
#include <array>
#include <compare>

namespace ddlsim {

enum class UbMethod { kRingExchange, kPipeline, kBulk };
/// TE's names of the methods, by UbMethod.
inline constexpr std::array<const char*, 3> kUbMethodNames = {"ring_exchange", "pipeline", "bulk"};

struct UbOverlap {
  UbMethod method = UbMethod::kRingExchange;
  int num_sm = 16;        // SMs the communication kernels take (pipeline, bulk)
  int num_splits = 4;     // pipeline: pieces of the GEMM and of the reduce-scatter
  bool sm_margin = false; // the GEMM leaves num_sm SMs free for the whole overlap
  // TE's fp8_buf: under FP8 GEMMs a pipelined reduce-scatter moves FP8 (read for the
  // pipeline method only; the all-gathers of GEMM inputs move FP8 whatever it says:
  // ub_fp8_moves).
  bool fp8_buf = false;
  auto operator<=>(const UbOverlap&) const = default;
};

enum UbSite { kQkvFprop, kProjFprop, kFc1Fprop, kFc2Fprop, kQkvDgrad, kQkvWgrad, kFc1Dgrad, kFc1Wgrad, kProjDgrad, kFc2Dgrad,
              kUbSites };
inline constexpr std::array<const char*, kUbSites> kUbSiteNames = {
    "qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop", "qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad", "proj_dgrad", "fc2_dgrad"};

// A reduce-scatter place (ring_exchange or pipeline), an all-gather place beside the GEMM
// that needs it (ring_exchange only) or a bulk place (bulk only).
inline bool ub_reduce_scatter(int site) { return site == kProjFprop || site == kFc2Fprop; }
inline bool ub_bulk(int site) { return site >= kQkvDgrad && site <= kFc1Wgrad; }
// The all-gathers TE runs in FP8 under FP8 GEMMs (its fp8_buf default): the inputs of
// the column-parallel GEMMs and the output gradients of the row-parallel ones.
inline bool ub_fp8_buffer(int site) { return !ub_reduce_scatter(site) && site != kQkvWgrad && site != kFc1Wgrad; }

struct TpCommOverlap {
  bool on = false;
  // Transformer Engine's defaults (initialize_ub without a configuration): ring exchange
  // for the all-gathers, pipeline in 4 pieces on 16 SMs for the reduce-scatters, bulk on
  // 16 SMs for the backward's, no SM margin.
  std::array<UbOverlap, kUbSites> site = [] {
    std::array<UbOverlap, kUbSites> s{};
    for (int i = 0; i < kUbSites; ++i) {
      s[i].method = ub_bulk(i) ? UbMethod::kBulk : ub_reduce_scatter(i) ? UbMethod::kPipeline : UbMethod::kRingExchange;
    }
    return s;
  }();
  auto operator<=>(const TpCommOverlap&) const = default;
};

// One overlapped GEMM and its collective: the GEMM's time as it runs (on fewer SMs
// where the communication takes some), and the time past the longer of the two (the
// piece of one that cannot overlap the other): the pair takes max(gemm, comm) + tail.
struct UbTimes {
  double gemm = 0.0, tail = 0.0;
};

// `gemm`: the GEMM's time on the whole device (in the pieces the method runs it in);
// `comm`: the collective's time alone; tp ranks; sms: the device's SMs; slowdown: how
// much slower a GEMM runs while a collective runs beside it (contention beyond the SMs
// it takes, DeviceEfficiency::overlap_slowdown): G becomes G + slowdown x min(G, C)
// before the method's form.
//  ring exchange: tp steps, each a GEMM piece beside the send of the next input piece:
//    max(G, C + G/tp) (the last piece, or the first, outside the exchange);
//  pipeline: k pieces, the reduce-scatter of piece i beside the GEMM of piece i + 1:
//    max(G' + C/k, C + G'/k), G' = G x S/(S - n) with an SM margin, else G;
//  bulk: the collective beside the whole GEMM, which runs on S - n SMs while the
//    collective does (on S - n throughout with a margin): max(C, G + C n/S), or
//    max(C, G S/(S - n)).
// Whether a place's collective moves FP8 under FP8 GEMMs (TE's initialize_ub rule).
inline bool ub_fp8_moves(const UbOverlap& o, int site) {
  return ub_fp8_buffer(site) || (o.fp8_buf && o.method == UbMethod::kPipeline);
}

inline UbTimes ub_overlap_times(const UbOverlap& o, double gemm, double comm, int tp, int sms, double slowdown) {
  gemm += slowdown * std::min(gemm, comm);
  const double slowed = gemm * sms / static_cast<double>(sms - o.num_sm);
  switch (o.method) {
    case UbMethod::kRingExchange: {
      const double total = std::max(gemm, comm + gemm / tp);
      return {gemm, total - std::max(gemm, comm)};
    }
    case UbMethod::kPipeline: {
      const double g = o.sm_margin ? slowed : gemm, k = o.num_splits;
      const double total = std::max(g + comm / k, comm + g / k);
      return {g, total - std::max(g, comm)};
    }
    case UbMethod::kBulk:
      return {o.sm_margin ? slowed : std::min(slowed, gemm + comm * o.num_sm / sms), 0.0};
  }
  return {gemm, 0.0};
}

}  // namespace ddlsim
