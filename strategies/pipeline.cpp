#include "strategies/pipeline.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace ddlsim {

int interleaved_warmup(int pp, int v, int m, int stage, bool combined, int group) {
  // Megatron-LM's warm-up: with as many micro-batches as stages it runs every forward
  // first (schedules.py, all_warmup_microbatches); Megatron-Core's, with micro-batch
  // groups of g, (pp - i - 1) 2 + (v - 1) g.
  const std::int64_t total = static_cast<std::int64_t>(m) * v, g = group > 0 ? group : pp;
  const std::int64_t warmup = m == pp ? total : std::min(total, (pp - stage - 1) * std::int64_t{2} + (v - 1) * g + (combined ? 1 : 0));
  return static_cast<int>(std::min<std::int64_t>(warmup, std::numeric_limits<int>::max()));
}

std::vector<PipelineOp> stage_program(PipelineSchedule kind, int pp, int v, int m, int i, bool combined, int group) {
  if (pp < 1 || v < 1 || m < 1) throw std::invalid_argument("pipeline_schedule: pp, v and m must be positive");
  if (combined && kind != PipelineSchedule::k1F1B && kind != PipelineSchedule::kInterleaved1F1B) {
    throw std::invalid_argument("pipeline_schedule: combined 1F1B needs the 1f1b or interleaved schedule");
  }
  if (kind != PipelineSchedule::kInterleaved1F1B && v != 1) {
    throw std::invalid_argument("pipeline_schedule: model chunks need the interleaved schedule");
  }
  const int g = group > 0 ? group : pp;
  if (kind == PipelineSchedule::kInterleaved1F1B && (g < pp || g > m || (m % g != 0 && m % g < pp))) {
    throw std::invalid_argument(
        "pipeline_schedule: interleaving needs micro-batch groups of pp to m, the last one empty or of at least pp");
  }
  if (i < 0 || i >= pp) throw std::invalid_argument("pipeline_schedule: no such stage");
  std::vector<PipelineOp> ops;
  switch (kind) {
    case PipelineSchedule::kGPipe:
      for (int k = 0; k < m; ++k) ops.push_back({true, 0, k});
      for (int k = 0; k < m; ++k) ops.push_back({false, 0, k});
      break;
    case PipelineSchedule::k1F1B: {
      const int warmup = std::min(pp - i - 1 + (combined ? 1 : 0), m);
      int f = 0, b = 0;
      for (; f < warmup; ++f) ops.push_back({true, 0, f});
      while (f < m) {
        ops.push_back({true, 0, f++, false, combined});
        ops.push_back({false, 0, b++});
      }
      while (b < m) ops.push_back({false, 0, b++});
      break;
    }
    case PipelineSchedule::kZeroBubbleH1: {
      const int warmup = std::min(pp - i - 1, m);
      int f = 0, b = 0, w = 0;
      auto input_gradient = [&] {
        ops.push_back({false, 0, b++});
        if (b - w > i) ops.push_back({false, 0, w++, true});
      };
      for (; f < warmup; ++f) ops.push_back({true, 0, f});
      while (f < m) {
        ops.push_back({true, 0, f++});
        input_gradient();
      }
      while (b < m) input_gradient();
      while (w < m) ops.push_back({false, 0, w++, true});
      break;
    }
    case PipelineSchedule::kInterleaved1F1B: {
      // The k-th forward's (chunk, micro-batch), Megatron-Core's schedule table: micro-
      // batches in groups of g (the last group takes the m mod g left, when any), each
      // group through chunk 0, then chunk 1, ...; the k-th backward runs the same
      // micro-batch through the mirrored chunk v - 1 - c.
      const int total = m * v, in_full = m / g * g * v, r = m % g;  // entries of the full groups; the last one's size
      auto chunk_of = [&](int k, bool forward) {
        const int c = k < in_full ? k % (v * g) / g : (k - in_full) / r;
        return forward ? c : v - 1 - c;
      };
      auto micro_of = [&](int k) { return k < in_full ? k / (v * g) * g + k % g : m / g * g + (k - in_full) % r; };
      const int warmup = interleaved_warmup(pp, v, m, i, combined, g);
      int f = 0, b = 0;
      for (; f < warmup; ++f) ops.push_back({true, chunk_of(f, true), micro_of(f)});
      while (f < total) {
        ops.push_back({true, chunk_of(f, true), micro_of(f), false, combined});
        ++f;
        ops.push_back({false, chunk_of(b, false), micro_of(b)});
        ++b;
      }
      for (; b < total; ++b) ops.push_back({false, chunk_of(b, false), micro_of(b)});
      break;
    }
  }
  return ops;
}

double interleaved_peak(const std::vector<double>& held, int pp, int m, int i, bool combined, int group) {
  const std::int64_t v = static_cast<std::int64_t>(held.size()), g = group > 0 ? group : pp;
  const std::int64_t total = m * v, warmup = interleaved_warmup(pp, static_cast<int>(v), m, i, combined, static_cast<int>(g));
  const std::int64_t full = m / g * g * v, r = m - m / g * g;  // forwards in full groups; the last group's size
  // Sums of held[chunk] (forward) and held[v - 1 - chunk] (backward) over the first k
  // entries of the schedule table (pipeline_schedule).
  const auto sums = [&](std::int64_t k) {
    double forward = 0.0, backward = 0.0;
    const std::int64_t in_full = std::min(k, full), rest = k - in_full;
    for (std::int64_t c = 0; c < v; ++c) {
      std::int64_t n = in_full / (v * g) * g + std::clamp(in_full % (v * g) - c * g, std::int64_t{0}, g);
      if (rest > 0) n += std::clamp(rest - c * r, std::int64_t{0}, r);
      forward += held[static_cast<std::size_t>(c)] * static_cast<double>(n);
      backward += held[static_cast<std::size_t>(v - 1 - c)] * static_cast<double>(n);
    }
    return std::pair{forward, backward};
  };
  if (warmup >= total) return sums(total).first;
  // After the steady state's k-th forward, before its backward (k - warmup): the peak.
  // Within the full groups the held sum repeats every v g forwards, so the first v g of
  // them and those from the last group on cover every value.
  double peak = 0.0;
  const auto at = [&](std::int64_t k) { peak = std::max(peak, sums(k + 1).first - sums(k - warmup).second); };
  for (std::int64_t k = warmup; k < std::min(total, warmup + v * g); ++k) at(k);
  for (std::int64_t k = std::max(warmup + v * g, full - 1); k < total; ++k) at(k);
  return peak;
}

std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule kind, int pp, int v, int m, bool combined,
                                                       int group) {
  if (pp < 1) throw std::invalid_argument("pipeline_schedule: pp, v and m must be positive");
  std::vector<std::vector<PipelineOp>> out;
  for (int i = 0; i < pp; ++i) out.push_back(stage_program(kind, pp, v, m, i, combined, group));
  return out;
}

}  // namespace ddlsim
