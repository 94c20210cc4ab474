#include "strategies/pipeline.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddlsim {

int interleaved_warmup(int pp, int v, int m, int stage, bool combined) {
  // Megatron-LM's warm-up: with as many micro-batches as stages it runs every forward
  // first (schedules.py, all_warmup_microbatches).
  const int total = m * v;
  return m == pp ? total : std::min(total, (pp - stage - 1) * 2 + (v - 1) * pp + (combined ? 1 : 0));
}

std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule kind, int pp, int v, int m, bool combined) {
  if (pp < 1 || v < 1 || m < 1) throw std::invalid_argument("pipeline_schedule: pp, v and m must be positive");
  if (combined && kind != PipelineSchedule::k1F1B && kind != PipelineSchedule::kInterleaved1F1B) {
    throw std::invalid_argument("pipeline_schedule: combined 1F1B needs the 1f1b or interleaved schedule");
  }
  if (kind != PipelineSchedule::kInterleaved1F1B && v != 1) {
    throw std::invalid_argument("pipeline_schedule: model chunks need the interleaved schedule");
  }
  if (kind == PipelineSchedule::kInterleaved1F1B && m % pp != 0) {
    throw std::invalid_argument("pipeline_schedule: interleaving needs micro-batches in multiples of pp");
  }
  std::vector<std::vector<PipelineOp>> out(static_cast<std::size_t>(pp));
  for (int i = 0; i < pp; ++i) {
    auto& ops = out[static_cast<std::size_t>(i)];
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
        const int total = m * v;
        auto chunk_of = [&](int k, bool forward) {
          const int c = (k / pp) % v;
          return forward ? c : v - 1 - c;
        };
        auto micro_of = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
        const int warmup = interleaved_warmup(pp, v, m, i, combined);
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
  }
  return out;
}

}  // namespace ddlsim
