// A shared-bandwidth channel: transfers in progress share its capacity equally.
//
// Model (processor sharing with a fixed start-up latency):
//   A transfer of b bytes arriving at time a first waits the channel's latency L, using no
//   bandwidth, then joins the set of active transfers. While n transfers are active each
//   receives C/n bytes per second (C: the channel's capacity). A transfer finishes once it
//   has received its b bytes. Alone on the channel it therefore takes L + b/C.
//
// Implementation: "virtual time" V(t), the bytes any one active transfer has received
// since the channel began, grows at dV/dt = C/n. A transfer joining when V = v finishes
// when V reaches v + b, so active transfers sit in a min-heap on that tag and every
// arrival or departure costs O(log n), independent of how many transfers are active.
// The model's events for the replay are finishes (and a join only when more than eight
// are due before the next finish): next_event() plays the joins due before the next
// finish forward (they change rates but finish nothing), which halves the events a
// transfer costs the replay. A submission first plays what is due, finishes included,
// so a finish due at the same time is reported from submit().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/resource_model.hpp"

namespace ddlsim {

class SharedChannel final : public ResourceModel {
 public:
  SharedChannel(std::string name, BytesPerSecond capacity, Seconds latency);

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] bool accepts(const TaskKind& kind) const override { return kind.index() == 1; }
  void begin(const TaskGraph& graph) override;
  Seconds submit(TaskId task, Seconds now, ReplaySink& sink) override;
  [[nodiscard]] Seconds next_event() const override;
  Seconds advance(Seconds t, ReplaySink& sink) override;

  [[nodiscard]] BytesPerSecond capacity() const { return capacity_; }
  [[nodiscard]] Seconds latency() const { return latency_; }

 private:
  struct Active {
    double tag;  // value of V at which this transfer has all its bytes
    std::uint64_t seq;
    TaskId task;
  };
  struct Waiting {
    Seconds join_at;
    double bytes;
    TaskId task;
  };
  static constexpr std::size_t kJoinsAhead = 8;  // joins next_event() plays forward at most

  // Inlined into submit and advance: as calls they were a tenth of a channel's
  // instructions (benchmark RandomDag).
  [[gnu::always_inline]] inline void progress(double& v, Seconds& t, Seconds to, std::size_t n) const;
  [[gnu::always_inline]] [[nodiscard]] inline Seconds finish(double v, Seconds t, double min_tag, std::size_t n) const;
  [[gnu::always_inline]] inline void progress_to(Seconds t);
  [[gnu::always_inline]] inline void join(TaskId task, double bytes);
  [[gnu::always_inline]] inline void play_to(Seconds t, ReplaySink& sink);
  [[gnu::always_inline]] [[nodiscard]] inline Seconds next_finish() const;
  [[gnu::always_inline]] inline void pop_active();

  std::string name_;
  BytesPerSecond capacity_;
  Seconds latency_;
  const TaskGraph* graph_ = nullptr;
  std::vector<Active> active_;    // min-heap on (tag, seq)
  std::vector<Waiting> waiting_;  // FIFO in join time (latency is constant); head at waiting_head_
  std::size_t waiting_head_ = 0;
  double v_ = 0.0;                // bytes received by each active transfer since begin
  Seconds t_{0.0};                // time at which v_ holds
  std::uint64_t seq_ = 0;
};

}  // namespace ddlsim
