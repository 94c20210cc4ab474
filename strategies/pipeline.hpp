// Pipeline schedules: the order in which each device runs the forward and backward
// passes of its model chunks over the micro-batches of a step.
//
//   GPipe        all m forwards, then all m backwards.
//   1F1B         (PipeDream-Flush) stage i runs min(pp - i - 1, m) warm-up forwards,
//                then alternates one forward and one backward, then drains the backwards;
//                at most pp - i micro-batches are in flight.
//   interleaved  (Megatron's interleaved 1F1B) each device holds v model chunks: chunk c
//                of device i is virtual stage c pp + i of a pp v stage pipeline.
//                Micro-batches go in groups of g (pp unless the plan's microbatch_group
//                says otherwise; the last group takes the rest, none or at least pp of
//                them, as Megatron-Core requires): a device runs a group's forwards
//                through chunk 0, then chunk 1, ..., then the next group's; with
//                g = pp and m a multiple of it the k-th forward runs chunk (k / pp) mod v
//                on micro-batch (k / (pp v)) pp + k mod pp. The k-th backward runs the
//                k-th forward's micro-batch through the mirrored chunk v - 1 - c;
//                (pp - i - 1) 2 + (v - 1) g warm-up forwards (every forward when m = pp,
//                as Megatron-LM runs it).
//   zero-bubble  ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B's
//                order with each backward split into B, the input gradient the stage
//                before waits for, and W, the weight gradient nothing in the pipeline
//                waits for. Stage i lets up to i W passes wait (a W runs right after a
//                B once more than i are pending) and runs the rest after its last B, so
//                the later stages, which idle longest at the end of 1F1B, fill that
//                time with weight gradients. Every stage then holds at most min(m, pp)
//                micro-batches' activations (until their W), 1F1B's peak on stage 0.
// With free communication and equal stages of forward time f and backward time b per
// device, a step of GPipe or 1F1B takes (m + pp - 1)(f + b), a bubble share of
// (pp - 1)/(m + pp - 1); interleaving divides the bubble by v. ZB-H1 with b = B + W and
// W no longer than f or B takes (pp - 2 + min(m, pp)) W less than 1F1B: m (f + b) +
// (pp - 1)(f + B - W) when m >= pp.
#pragma once

#include <vector>

#include "strategies/plan.hpp"

namespace ddlsim {

struct PipelineOp {
  bool forward;
  int chunk;        // model chunk on this device (0 .. v-1)
  int micro_batch;  // 0 .. m-1
  bool weights = false;  // zero-bubble: this backward's deferred weight-gradient pass (W);
                         // a backward op of that schedule is then its input-gradient pass (B)
  bool with_next = false;  // combined 1F1B: this forward runs beside the backward after it
};

/// The interleaved schedule's warm-up forwards on stage i (chunk forwards, at most m v);
/// `combined`: one more (combined 1F1B); `group`: the micro-batch group (0: pp).
int interleaved_warmup(int pp, int virtual_stages, int micro_batches, int stage, bool combined = false, int group = 0);

/// Each device's (pipeline rank's) operations in program order. Throws
/// std::invalid_argument for counts the schedule cannot take (plan_problem checks them).
///
/// `combined` (1F1B and interleaved only; ParallelPlan::combined_1f1b): Megatron-Core's
/// combined 1F1B, which runs one warm-up forward more on every stage so that each
/// steady-state forward and the backward after it belong to different micro-batches (or
/// model chunks) and neither waits for the other; each such forward is marked with_next
/// and runs beside that backward. Without a pipeline: F0, F1 with B0, ..., F(m-1) with
/// B(m-2), then B(m-1).
/// `group` (interleaved only): micro-batches per group (0: pp).
std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule kind, int pp, int virtual_stages,
                                                       int micro_batches, bool combined = false, int group = 0);

/// The interleaved schedule's peak on stage `stage` of what its chunk forwards hold
/// until their backwards, `held[c]` for chunk c (virtual_stages = held.size()): the
/// maximum of that sum along stage_program, in O(v^2 g) rather than O(m v).
double interleaved_peak(const std::vector<double>& held, int pp, int micro_batches, int stage, bool combined = false,
                        int group = 0);

/// Stage `stage`'s operations alone (pipeline_schedule's entry for it).
std::vector<PipelineOp> stage_program(PipelineSchedule kind, int pp, int virtual_stages, int micro_batches, int stage,
                                      bool combined = false, int group = 0);

}  // namespace ddlsim
