// The interface between the replay engine and the models of the things tasks run on.
//
// A resource model owns the tasks the engine submits to it and decides when they start
// and finish. The engine asks it only two questions: "when is your next event?"
// (next_event) and "advance to time t" (advance), plus handing it ready tasks (submit).
// submit() and advance() also return next_event() as it stands after the call, which
// spares the replay loop a second virtual call per task.
// Models never call back into the engine while it is inside them: they report starts and
// finishes to a ReplaySink, and the engine acts on those after the call returns.
//
// Contract, which the engine checks:
//  - submit(task, now) and advance(t) are called with non-decreasing times;
//  - advance(t) reports every task finishing at or before t (with its true finish time)
//    and afterwards next_event() is strictly later than t, or kNever when idle;
//  - submit(task, now) may report finishes too, only at `now` (a model whose own event
//    at `now` the replay has not taken yet may settle it there).
//  - next_event() need not be every change of the model's state, only those the replay
//    must act on or that the model needs to be advanced for.
#pragma once

#include <string>
#include <vector>

#include "sim/core/task.hpp"

namespace ddlsim {

class TaskGraph;

/// Where a model notes what happened inside an advance() or submit() call. The engine
/// reads the notes, in order, after the call returns (and checks that each is at the
/// current time), so a model is never re-entered while it is updating itself.
class ReplaySink {
 public:
  struct Note {
    Seconds at;
    TaskId task;
    bool finished;  // false: the task started
  };

  [[gnu::always_inline]] void started(TaskId task, Seconds at) {
    if (keep_starts_) notes_.push_back(Note{at, task, false});
  }
  [[gnu::always_inline]] void finished(TaskId task, Seconds at) { notes_.push_back(Note{at, task, true}); }

  [[nodiscard]] const std::vector<Note>& notes() const { return notes_; }
  void clear() { notes_.clear(); }
  /// Starts matter to observers and to interference (a graph's tasks that slow compute
  /// streams act from their starts): without either, the engine drops them unread.
  /// Every model reports each task's start before its finish.
  void keep_starts(bool keep) { keep_starts_ = keep; }

 private:
  std::vector<Note> notes_;
  bool keep_starts_ = true;
};

class ResourceModel {
 public:
  virtual ~ResourceModel() = default;

  /// A short name for reports and traces, e.g. "dev3.compute".
  [[nodiscard]] virtual const std::string& name() const = 0;
  /// Whether this model can run tasks of this kind (checked before a run; the answer must
  /// depend only on the kind's type, as it is asked once per kind).
  [[nodiscard]] virtual bool accepts(const TaskKind& kind) const = 0;

  /// Forget all state and prepare to run tasks of `graph`, which outlives the run.
  virtual void begin(const TaskGraph& graph) = 0;
  /// A task whose dependencies are all done arrives at time `now`. Returns next_event().
  virtual Seconds submit(TaskId task, Seconds now, ReplaySink& sink) = 0;
  /// The time of this model's next internal event (a finish, or a change of rates), or
  /// kNever when it holds no work.
  [[nodiscard]] virtual Seconds next_event() const = 0;
  /// Bring the model's state to time t, reporting every start and finish up to t.
  /// Returns next_event().
  virtual Seconds advance(Seconds t, ReplaySink& sink) = 0;
};

}  // namespace ddlsim
