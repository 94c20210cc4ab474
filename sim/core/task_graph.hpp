// A task graph: tasks in contiguous storage, dependencies as successor lists.
//
// Storage is structure-of-arrays, indexed by TaskId: the kind (a closed std::variant),
// an interned name, the in-degree, and a successor list. A successor list keeps up to
// three successors inline (chains, diamonds and most real graphs never leave it); a
// longer list moves into linked chunks of seven in one shared arena, so a fan-out of a
// million costs about 4.6 bytes per edge and no per-task heap allocation.
//
//   TaskGraph g;
//   auto a = g.add(Compute{s0, Seconds(1e-3), Flops(1e9)}, "fwd");
//   auto b = g.add(Marker{}, "join");
//   a.precede(b);
#pragma once

#include <algorithm>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/core/task.hpp"

namespace ddlsim {

class TaskGraph;

/// A non-owning handle to a task of a graph, for readable graph construction.
class TaskRef {
 public:
  TaskRef(TaskGraph* g, TaskId id) : g_(g), id_(id) {}
  [[nodiscard]] TaskId id() const { return id_; }
  TaskRef& precede(TaskRef other);  // this runs before other
  TaskRef& succeed(TaskRef other);  // this runs after other

 private:
  TaskGraph* g_;
  TaskId id_;
};

class TaskGraph {
 public:
  TaskGraph();

  /// Reserve room for n tasks (avoids reallocation while building large graphs).
  void reserve(std::size_t n);

  TaskRef add(const TaskKind& kind, std::string_view name = {});

  /// A name interned once, for code that adds many tasks of one name: add(kind, name)
  /// then skips the look-up.
  struct Name {
    std::uint32_t id = 0;
  };
  Name intern(std::string_view name);
  TaskRef add(const TaskKind& kind, Name name);
  /// Adds the dependency `before -> after`: `after` starts only when `before` has finished.
  void add_edge(TaskId before, TaskId after);

  [[nodiscard]] std::size_t size() const { return kinds_.size(); }
  [[nodiscard]] std::size_t edge_count() const { return edges_; }
  [[nodiscard]] const TaskKind& kind(TaskId t) const { return kinds_[t.value]; }
  [[nodiscard]] std::string_view name(TaskId t) const { return names_[name_ids_[t.value]]; }
  [[nodiscard]] std::uint32_t in_degree(TaskId t) const { return in_degree_[t.value]; }
  [[nodiscard]] std::uint32_t out_degree(TaskId t) const { return succ_[t.value].size; }

  /// A transfer's bandwidth share: the factor by which the analytical network model
  /// divides its route's bottleneck capacity because transfers of its own collective run
  /// beside it on the same links (see lower_collective); 1 unless set. Network models
  /// that find sharing themselves (flow) ignore it. Kept apart from the task kinds, and
  /// held only by graphs that set one.
  void set_share(TaskId t, double share);
  [[nodiscard]] double share(TaskId t) const { return t.value < shares_.size() ? shares_[t.value] : 1.0; }

  /// Seconds a transfer waits beyond its route's latencies before its bytes flow,
  /// without loading its links (a ring step's overhead: CollectiveGroup::ring_wait; a
  /// ring step's share of the NICs' transport latency, or a streamed tree's fill of it,
  /// in place of its route's: Transfer::kTransportInWait); 0
  /// unless set. The flow and analytical network models add it (a SharedChannel, which
  /// has one latency for every transfer, does not). Held only by graphs that set one.
  void set_wait(TaskId t, double seconds);
  [[nodiscard]] double wait(TaskId t) const { return t.value < waits_.size() ? waits_[t.value] : 0.0; }

  /// Communication that slows compute beside it: from the start of task t (a compute or
  /// transfer task) to its finish, the compute stream `stream` (a ComputeStream
  /// resource) runs its tasks slower, by the fraction that stream was given
  /// (ComputeStream::set_interference): the SMs a collective library's kernels take from
  /// the compute kernels running beside them. A task may slow several streams. Kept
  /// apart from the task kinds, and held only by graphs that set some; added in task
  /// order (a task's entries together, tasks ascending), as a lowering adds its tasks.
  struct Interference {
    TaskId task;
    ResourceId stream;
  };
  void add_interference(TaskId t, ResourceId stream);
  /// Every transfer task from `first` on (a collective just lowered) slows the streams
  /// `stream_of(endpoint value)` gives for its source and destination (an invalid id:
  /// none there); a transfer from a node to itself (a collective's wait for its
  /// protocol's rate, which every rank's kernels spend) slows every stream the others
  /// slow, in the order of their ids.
  template <class F>
  void add_transfer_interference(TaskId first, F&& stream_of) {
    const auto self = [](const Transfer* x) { return x != nullptr && x->src.value == x->dst.value; };
    std::vector<ResourceId> all;  // with a transfer to itself: the streams the others slow
    bool any_self = false;
    for (std::uint32_t t = first.value; t < kinds_.size() && !any_self; ++t) any_self = self(std::get_if<Transfer>(&kinds_[t]));
    for (std::uint32_t t = first.value; any_self && t < kinds_.size(); ++t) {
      const auto* x = std::get_if<Transfer>(&kinds_[t]);
      if (x == nullptr || self(x)) continue;
      for (const std::uint32_t end : {x->src.value, x->dst.value}) {
        if (const ResourceId s = stream_of(end); s.valid()) all.push_back(s);
      }
    }
    std::sort(all.begin(), all.end(), [](ResourceId a, ResourceId b) { return a.value < b.value; });
    all.erase(std::unique(all.begin(), all.end(), [](ResourceId a, ResourceId b) { return a.value == b.value; }), all.end());
    for (std::uint32_t t = first.value; t < kinds_.size(); ++t) {
      const auto* x = std::get_if<Transfer>(&kinds_[t]);
      if (x == nullptr) continue;
      if (self(x)) {
        for (const ResourceId s : all) add_interference(TaskId(t), s);
        continue;
      }
      for (const std::uint32_t end : {x->src.value, x->dst.value}) {
        if (const ResourceId s = stream_of(end); s.valid()) add_interference(TaskId(t), s);
      }
    }
  }
  [[nodiscard]] const std::vector<Interference>& interference() const { return interference_; }

  /// Calls f(TaskId successor) for each successor of t, in the order the edges were added.
  template <class F>
  void for_each_successor(TaskId t, F&& f) const {
    const EdgeList& e = succ_[t.value];
    if (e.size <= kInline) {
      for (std::uint32_t i = 0; i < e.size; ++i) f(TaskId(e.slot[i]));
      return;
    }
    std::uint32_t left = e.size;
    for (std::uint32_t c = e.slot[0]; left > 0; c = chunks_[c].next) {
      const Chunk& ch = chunks_[c];
      const std::uint32_t n = left < kChunk ? left : kChunk;
      for (std::uint32_t i = 0; i < n; ++i) f(TaskId(ch.item[i]));
      left -= n;
    }
  }

  /// A hint that task t will finish soon: starts loading its successor list into cache.
  /// Models call it when a task starts, so that the engine's read at its finish (often
  /// many events later, in an order unrelated to task ids) does not wait on memory.
  void prefetch_finish(TaskId t) const {
    __builtin_prefetch(&succ_[t.value]);
  }

  /// A hint that task t will soon become ready: starts loading its kind and successor
  /// list into cache (the replay calls it for tasks some thousands of ids ahead).
  void prefetch_ahead(TaskId t) const {
    __builtin_prefetch(&kinds_[t.value]);
    __builtin_prefetch(&succ_[t.value]);
  }

  /// For each resource id that tasks name, a bitmask of the task kinds (bit = variant
  /// index) bound to it; lets a replay check bindings without a pass over all tasks.
  [[nodiscard]] const std::vector<std::uint8_t>& resource_kinds() const { return resource_kinds_; }

  /// Heap bytes held by the graph (capacities, not sizes).
  [[nodiscard]] std::size_t memory_bytes() const;

  /// Writes the graph in GraphViz dot syntax, one node per task labelled with its name
  /// and kind.
  void write_dot(std::ostream& out) const;

 private:
  static constexpr std::uint32_t kInline = 3;
  static constexpr std::uint32_t kChunk = 7;

  // size <= kInline: slot[0..size) are the successors. Otherwise slot[0] is the first
  // chunk and slot[1] the last one (the list is filled in order).
  struct EdgeList {
    std::uint32_t size = 0;
    std::uint32_t slot[kInline] = {0, 0, 0};
  };
  struct Chunk {
    std::uint32_t next = 0;
    std::uint32_t item[kChunk] = {};
  };

  std::uint32_t new_chunk();

  std::vector<TaskKind> kinds_;
  std::vector<std::uint32_t> name_ids_;
  std::vector<std::uint32_t> in_degree_;
  std::vector<EdgeList> succ_;
  std::vector<Chunk> chunks_;
  std::size_t edges_ = 0;
  std::vector<std::uint8_t> resource_kinds_;
  std::vector<float> shares_;  // per task up to the last one given a share; empty if none
  std::vector<double> waits_;  // per task up to the last one given a wait; empty if none
  std::vector<Interference> interference_;

  std::vector<std::string> names_;  // names_[0] is the empty name
  std::unordered_map<std::string, std::uint32_t> name_index_;
};

inline TaskRef& TaskRef::precede(TaskRef other) {
  g_->add_edge(id_, other.id_);
  return *this;
}
inline TaskRef& TaskRef::succeed(TaskRef other) {
  g_->add_edge(other.id_, id_);
  return *this;
}

}  // namespace ddlsim
