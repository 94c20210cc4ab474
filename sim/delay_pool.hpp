// A delay pool: runs every task it gets at once, each for its own fixed duration, with
// no queue and no sharing. Models work whose time was priced beforehand and that nothing
// else on the resource slows down: a collective priced by the analytical network model
// (whose transfers never contend, so the collective takes its contention-free time
// however many others run beside it).
#pragma once

#include <string>

#include "sim/core/resource_model.hpp"
#include "sim/finish_heap.hpp"

namespace ddlsim {

class DelayPool final : public ResourceModel {
 public:
  explicit DelayPool(std::string name) : name_(std::move(name)) {}

  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] bool accepts(const TaskKind& kind) const override { return kind.index() == 0; }  // Compute
  void begin(const TaskGraph& graph) override;
  Seconds submit(TaskId task, Seconds now, ReplaySink& sink) override;
  [[nodiscard]] Seconds next_event() const override { return pending_.next(); }
  Seconds advance(Seconds t, ReplaySink& sink) override;

 private:
  std::string name_;
  const TaskGraph* graph_ = nullptr;
  FinishHeap pending_;
};

}  // namespace ddlsim
