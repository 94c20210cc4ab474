#include "sim/core/engine.hpp"

#include <algorithm>
#include <utility>
#include <variant>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/compute_stream.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/event_queue.hpp"
#include "sim/core/tournament_queue.hpp"

namespace ddlsim {
namespace {

constexpr std::uint32_t kDone = std::numeric_limits<std::uint32_t>::max();

std::string describe(const TaskGraph& g, TaskId t) {
  std::string s = "t" + std::to_string(t.value);
  if (!g.name(t).empty()) s += " '" + std::string(g.name(t)) + "'";
  return s;
}

std::string format_time(Seconds t) {
  std::ostringstream os;
  os << t.value();
  return os.str();
}

}  // namespace

template <class Queue>
class Replayer {
 public:
  Replayer(ReplayEngine& e, Queue& queue, const TaskGraph& g, std::span<ResourceModel* const> res,
           std::span<Observer* const> obs)
      : g_(g), res_(res), obs_(obs), queue_(queue), pending_(e.pending_), done_(e.done_), ready_(e.ready_),
        streams_(e.streams_), sink_(e.sink_) {
    queue_.reset(res.size());
    ready_.clear();
    sink_.clear();
  }

  ReplayResult run() {
    check_bindings();
    streams_.clear();
    for (ResourceModel* m : res_) {
      if (m != nullptr) m->begin(g_);  // a null entry is an unused id (checked against the graph above)
      streams_.push_back(dynamic_cast<ComputeStream*>(m));
    }
    stream_at_ = streams_.data();
    slowing_ = !g_.interference().empty();
    if (slowing_) prepare_interference();
    // (Interference acts on the starts of the tasks that slow streams.)
    sink_.keep_starts(!obs_.empty() || slowing_);
    for (Observer* o : obs_) o->on_begin(g_, res_);

    const std::size_t n = g_.size();
    pending_.resize(n);
    done_.assign((n + 63) / 64, 0);
    pending_at_ = pending_.data();
    n_ = static_cast<std::uint32_t>(n);
    done_at_ = done_.data();
    // Nothing completes before drain(), so sources can be submitted while counting.
    for (std::uint32_t t = 0; t < n; ++t) {
      pending_[t] = g_.in_degree(TaskId(t));
      if (pending_[t] == 0) make_ready(TaskId(t));
    }
    drain();

    while (!queue_.empty()) {
      // The earliest resource stays in the queue while it advances; drain() then moves
      // its entry to its next event (or removes it), one sift instead of a pop and a push.
      const std::uint32_t r = queue_.top_key();
      now_ = queue_.top_time();
      ++events_;
      ComputeStream* const s = stream_at_[r];
      const Seconds next = s != nullptr ? s->advance(now_, sink_) : res_[r]->advance(now_, sink_);
      if (!(next > now_)) {  // also catches NaN
        throw ReplayError("resource '" + res_[r]->name() + "' made no progress at t=" + format_time(now_) +
                          " s: after advancing to that time it still reports an event at " +
                          format_time(next) + " s");
      }
      if (next == kNever) {
        queue_.cancel(r);
      } else {
        queue_.schedule(r, next);
      }
      drain();
    }

    if (finished_ != n) throw ReplayError(stall_report());
    for (Observer* o : obs_) o->on_end(now_);

    ReplayResult out;
    out.makespan = now_;
    out.tasks = finished_;
    out.events = events_;
    return out;
  }

 private:
  [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void bad_time(TaskId task, Seconds at, const char* what) const {
    throw ReplayError("resource '" + res_[resource_of(g_.kind(task)).value]->name() + "' reported " +
                      describe(g_, task) + " " + what + " at t=" + format_time(at) +
                      " s while the replay was at t=" + format_time(now_) + " s");
  }

  // Every task runs on a resource that exists and accepts its kind. The graph keeps
  // which kinds each resource id is given, so this costs O(resources), not O(tasks); a
  // failure then looks for the first offending task to name it.
  void check_bindings() const {
    const auto& kinds = g_.resource_kinds();
    for (std::uint32_t r = 0; r < kinds.size(); ++r) {
      for (std::uint32_t k = 0; k < std::variant_size_v<TaskKind>; ++k) {
        if (!(kinds[r] & (1u << k))) continue;
        const bool missing = r >= res_.size() || res_[r] == nullptr;
        if (!missing && res_[r]->accepts(representative(k))) continue;
        const auto [t, kind] = first_task(r, k);
        if (missing) {
          throw ReplayError(describe(g_, t) + " (" + std::string(kind_name(kind)) + ") runs on resource " +
                            std::to_string(r) + ", which does not exist (" + std::to_string(res_.size()) +
                            " resources given)");
        }
        throw ReplayError(describe(g_, t) + " is a " + std::string(kind_name(kind)) + " task but resource '" +
                          res_[r]->name() + "' cannot run " + std::string(kind_name(kind)) + " tasks");
      }
    }
  }

  // A default value of kind index k, for asking a model whether it accepts that kind.
  static TaskKind representative(std::uint32_t k) {
    switch (k) {
      case 0: return Compute{};
      case 1: return Transfer{};
      case 2: return Marker{};
      case 3: return Allocate{};
      default: return Free{};
    }
  }

  // The first task of kind index k on resource r (which exists: the graph recorded it).
  std::pair<TaskId, const TaskKind&> first_task(std::uint32_t r, std::uint32_t k) const {
    for (std::uint32_t t = 0;; ++t) {
      const TaskKind& kind = g_.kind(TaskId(t));
      if (kind.index() == k && resource_of(kind).value == r) return {TaskId(t), kind};
    }
  }

  void make_ready(TaskId t) {
    // Graphs are built roughly in program order, so tasks become ready roughly in id
    // order, but shuffled over a wide band at the leading edge, which the hardware's
    // stream prefetchers do not follow. Loading the task kAhead ids on (its kind,
    // successor list and pending count) has its memory in cache by the time the replay
    // reaches it: RandomDag at 10^6 and 10^7 tasks, 11.6-12.6 -> 15.0-15.6 M tasks/s.
    {
      const std::uint32_t a = t.value + kAhead < n_ ? t.value + kAhead : t.value;
      g_.prefetch_ahead(TaskId(a));
      __builtin_prefetch(pending_at_ + a);
    }
    const ResourceId r = resource_of(g_.kind(t));
    if (r.valid()) {
      ComputeStream* const s = stream_at_[r.value];
      const Seconds next = s != nullptr ? s->submit(t, now_, sink_) : res_[r.value]->submit(t, now_, sink_);
      // A submit moves the model's next event only if it was idle or shares capacity;
      // a busy FIFO stream keeps its entry untouched.
      if (next != queue_.time_of(r.value)) reschedule(r.value, next);
    } else {
      ready_.push_back(t);
    }
  }

  void complete(TaskId t) {
    done_at_[t.value >> 6] |= std::uint64_t{1} << (t.value & 63);
    ++finished_;
    g_.for_each_successor(t, [this](TaskId s) {
      if (--pending_at_[s.value] == 0) make_ready(s);
    });
  }

  [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void bad_schedule(std::uint32_t r, Seconds next) const {
    throw ReplayError("resource '" + res_[r]->name() + "' asked for an event at t=" + format_time(next) +
                      " s, before the replay's current time t=" + format_time(now_) + " s");
  }

  // Inlined, like drain() (its call cost a fifth of its instructions).
  [[gnu::always_inline]] void reschedule(std::uint32_t r, Seconds next) {
    if (!(next >= now_)) bad_schedule(r, next);  // also catches NaN
    if (next == kNever) {
      queue_.cancel(r);
    } else {
      queue_.schedule(r, next);
    }
  }

  // Act on everything that happens at now_: the starts and finishes the models noted
  // (finishing a task may submit its successors, which adds notes), then the tasks that
  // take no time, until none remain.
  // Inlined: it runs once per event, and as a call its register saves and restores
  // cost about 18 instructions each time.
  [[gnu::always_inline]] inline void drain() {
    std::size_t ni = 0;
    std::size_t ri = 0;
    const auto& notes = sink_.notes();
    for (;;) {
      if (ni < notes.size()) {
        const ReplaySink::Note note = notes[ni++];
        if (note.at != now_) bad_time(note.task, note.at, note.finished ? "finished" : "started");
        if (!obs_.empty()) {
          const ResourceId r = resource_of(g_.kind(note.task));
          for (Observer* o : obs_) {
            if (note.finished) o->on_task_end(note.task, r, now_);
            else o->on_task_start(note.task, r, now_);
          }
        }
        if (slowing_ && ((slows_bits_[note.task.value >> 6] >> (note.task.value & 63)) & 1)) {
          interfere(note.task, note.finished ? -1 : 1);
        }
        if (note.finished) complete(note.task);
      } else if (ri < ready_.size()) {
        const TaskId t = ready_[ri++];
        for (Observer* o : obs_) o->on_task_start(t, ResourceId{}, now_);
        for (Observer* o : obs_) o->on_task_end(t, ResourceId{}, now_);
        complete(t);
      } else {
        break;
      }
    }
    sink_.clear();
    ready_.clear();
  }

  // A bit per task that slows a stream (the graph keeps its interference in task order);
  // every stream it names must be a ComputeStream.
  void prepare_interference() {
    slows_bits_.assign((g_.size() + 63) / 64, 0);
    for (const auto& x : g_.interference()) {  // (TaskGraph::add_interference checked the tasks)
      if (x.stream.value >= streams_.size() || streams_[x.stream.value] == nullptr) {
        throw ReplayError(describe(g_, x.task) + " slows resource " + std::to_string(x.stream.value) +
                          ", which is not a compute stream");
      }
      slows_bits_[x.task.value >> 6] |= std::uint64_t{1} << (x.task.value & 63);
    }
  }

  // Task t started (delta 1) or finished (-1): the streams it slows change pace now.
  [[gnu::noinline]] void interfere(TaskId t, int delta) {
    const auto& slows = g_.interference();
    auto it = std::lower_bound(slows.begin(), slows.end(), t.value,
                               [](const TaskGraph::Interference& x, std::uint32_t v) { return x.task.value < v; });
    for (; it != slows.end() && it->task == t; ++it) {
      const std::uint32_t r = it->stream.value;
      const Seconds next = stream_at_[r]->interfere(delta, now_);
      if (next != queue_.time_of(r)) reschedule(r, next);
    }
  }

  [[nodiscard]] bool is_done(std::uint32_t t) const { return (done_[t >> 6] >> (t & 63)) & 1; }

  // Explains why tasks remain after the event queue drained.
  std::string stall_report() const {
    const std::size_t n = g_.size();
    // For each unfinished task, its first unfinished predecessor and how many it has.
    std::vector<std::uint32_t> first_wait(n, kDone);
    std::vector<std::uint32_t> waits(n, 0);
    for (std::uint32_t u = 0; u < n; ++u) {
      if (is_done(u)) continue;
      g_.for_each_successor(TaskId(u), [&](TaskId s) {
        if (is_done(s.value)) return;
        if (first_wait[s.value] == kDone) first_wait[s.value] = u;
        ++waits[s.value];
      });
    }
    std::ostringstream os;
    os << "replay stalled at t=" << now_.value() << " s with " << (n - finished_) << " of " << n
       << " tasks unfinished";
    std::uint32_t start = kDone;
    for (std::uint32_t t = 0; t < n && start == kDone; ++t) {
      if (!is_done(t)) start = t;
    }
    // Follow "waits on" links from the first stuck task: either they loop (a cycle) or
    // they end at a task that was submitted to a resource and never finished.
    std::vector<std::uint32_t> seen_at(n, kDone);
    std::vector<std::uint32_t> path;
    std::uint32_t t = start;
    while (t != kDone && seen_at[t] == kDone && first_wait[t] != kDone) {
      seen_at[t] = static_cast<std::uint32_t>(path.size());
      path.push_back(t);
      t = first_wait[t];
    }
    if (t != kDone && seen_at[t] != kDone) {
      os << "; dependency cycle: ";
      for (std::size_t i = seen_at[t]; i < path.size(); ++i) os << describe(g_, TaskId(path[i])) << " -> ";
      os << describe(g_, TaskId(t));
    } else if (t != kDone) {
      const ResourceId r = resource_of(g_.kind(TaskId(t)));
      os << "; " << describe(g_, TaskId(t));
      if (r.valid()) {
        os << " was given to resource '" << res_[r.value]->name() << "' and never finished";
      } else {
        os << " never ran";
      }
    }
    int shown = 0;
    os << "; stuck:";
    for (std::uint32_t u = 0; u < n && shown < 3; ++u) {
      if (is_done(u) || first_wait[u] == kDone) continue;
      os << (shown ? "," : "") << ' ' << describe(g_, TaskId(u)) << " waits on " << waits[u]
         << " unfinished (e.g. " << describe(g_, TaskId(first_wait[u])) << ")";
      ++shown;
    }
    if (shown == 0) os << " none waiting on dependencies";
    return os.str();
  }

  const TaskGraph& g_;
  std::span<ResourceModel* const> res_;
  std::span<Observer* const> obs_;
  Queue& queue_;
  std::vector<std::uint32_t>& pending_;
  std::vector<std::uint64_t>& done_;
  std::vector<TaskId>& ready_;
  // The resources that are ComputeStreams, called directly (the class is final, its hot
  // paths inline): no indirect call, and no mispredicted one, for most of a replay's
  // events (RandomDag: about 10% more tasks per second; instructions about the same).
  std::vector<ComputeStream*>& streams_;
  ReplaySink& sink_;
  // The data of the vectors above that the replay loop indexes per task, read once: as
  // references to vectors each access loaded the vector's data pointer again.
  std::uint32_t* pending_at_ = nullptr;
  std::uint64_t* done_at_ = nullptr;
  ComputeStream* const* stream_at_ = nullptr;
  // How far ahead of a task becoming ready make_ready() prefetches (1,024 and 4,096 did
  // equally well on RandomDag, 256 about 6% worse).
  static constexpr std::uint32_t kAhead = 4096;
  std::uint32_t n_ = 0;  // tasks in the graph
  bool slowing_ = false;  // the graph has interference
  std::vector<std::uint64_t> slows_bits_;
  Seconds now_{0.0};
  std::uint64_t finished_ = 0;
  std::uint64_t events_ = 0;
};

ReplayResult ReplayEngine::run(const TaskGraph& graph, std::span<ResourceModel* const> resources,
                               std::span<Observer* const> observers) {
  if (resources.size() <= kTournamentKeys) {
    return Replayer<TournamentQueue>(*this, tree_, graph, resources, observers).run();
  }
  return Replayer<EventQueue>(*this, heap_, graph, resources, observers).run();
}

ReplayResult replay(const TaskGraph& graph, std::span<ResourceModel* const> resources,
                    std::span<Observer* const> observers) {
  return ReplayEngine().run(graph, resources, observers);
}

}  // namespace ddlsim
