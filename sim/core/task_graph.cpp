#include "sim/core/task_graph.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>

#include "sim/core/errors.hpp"

namespace ddlsim {

TaskGraph::TaskGraph() {
  names_.emplace_back();
  name_index_.emplace(std::string(), 0);
}

void TaskGraph::reserve(std::size_t n) {
  // Grow at least geometrically, so that code reserving a little more before each of
  // many additions (one collective after another) does not copy the graph every time.
  if (n <= kinds_.capacity()) return;
  n = std::max(n, 2 * kinds_.capacity());
  kinds_.reserve(n);
  name_ids_.reserve(n);
  in_degree_.reserve(n);
  succ_.reserve(n);
}

namespace {
// Durations and sizes must be finite and non-negative, or a replay could run backwards
// or never end.
void check_amounts(const TaskKind& kind, std::string_view name) {
  auto bad = [&](const char* what, double v) {
    throw GraphError(std::string(kind_name(kind)) + " task '" + std::string(name) + "': " + what +
                     " must be finite and >= 0, got " + std::to_string(v));
  };
  auto ok = [](double v) { return std::isfinite(v) && v >= 0.0; };
  // Resource and pool ids index arrays in the engine, models and observers: a missing id
  // would silently turn a compute task into a zero-time one, a huge one allocate gigabytes.
  constexpr std::uint32_t kMaxId = 1u << 24;
  auto check_id = [&](const char* what, std::uint32_t id) {
    if (id >= kMaxId) {
      throw GraphError(std::string(kind_name(kind)) + " task '" + std::string(name) + "': " + what +
                       (id == std::numeric_limits<std::uint32_t>::max() ? " is missing"
                                                                        : " " + std::to_string(id) + " is not below 2^24"));
    }
  };
  if (const auto* c = std::get_if<Compute>(&kind)) {
    check_id("stream", c->stream.value);
    if (!ok(c->duration.value())) bad("duration", c->duration.value());
    if (!ok(c->flops.value())) bad("flops", c->flops.value());
  } else if (const auto* t = std::get_if<Transfer>(&kind)) {
    check_id("channel", t->channel.value);
    if (!ok(t->bytes.value())) bad("bytes", t->bytes.value());
  } else if (const auto* a = std::get_if<Allocate>(&kind)) {
    check_id("pool", a->pool.value);
    if (!ok(a->bytes.value())) bad("bytes", a->bytes.value());
  } else if (const auto* f = std::get_if<Free>(&kind)) {
    check_id("pool", f->pool.value);
    if (!ok(f->bytes.value())) bad("bytes", f->bytes.value());
  }
}
}  // namespace

TaskGraph::Name TaskGraph::intern(std::string_view name) {
  if (name.empty()) return Name{0};
  auto [it, inserted] = name_index_.try_emplace(std::string(name), static_cast<std::uint32_t>(names_.size()));
  if (inserted) names_.emplace_back(name);
  return Name{it->second};
}

TaskRef TaskGraph::add(const TaskKind& kind, std::string_view name) {
  return add(kind, intern(name));
}

TaskRef TaskGraph::add(const TaskKind& kind, Name name) {
  if (name.id >= names_.size()) throw GraphError("task name id " + std::to_string(name.id) + " was not interned");
  check_amounts(kind, names_[name.id]);
  if (kinds_.size() >= std::numeric_limits<std::uint32_t>::max() - 1) {
    throw GraphError("task graph is full: at most 4294967294 tasks");
  }
  const TaskId id(static_cast<std::uint32_t>(kinds_.size()));
  if (const ResourceId r = resource_of(kind); r.valid()) {
    if (r.value >= resource_kinds_.size()) resource_kinds_.resize(std::size_t{r.value} + 1, 0);
    resource_kinds_[r.value] |= static_cast<std::uint8_t>(1u << kind.index());
  }
  kinds_.push_back(kind);
  name_ids_.push_back(name.id);
  in_degree_.push_back(0);
  succ_.emplace_back();
  return TaskRef(this, id);
}

std::uint32_t TaskGraph::new_chunk() {
  chunks_.emplace_back();
  return static_cast<std::uint32_t>(chunks_.size() - 1);
}

void TaskGraph::add_edge(TaskId before, TaskId after) {
  if (before.value >= size() || after.value >= size()) {
    throw GraphError("edge " + std::to_string(before.value) + " -> " + std::to_string(after.value) +
                     " names a task that does not exist (graph has " + std::to_string(size()) + " tasks)");
  }
  EdgeList& e = succ_[before.value];
  const std::uint32_t target = after.value;
  if (e.size < kInline) {
    e.slot[e.size] = target;
  } else if (e.size == kInline) {
    // Move the inline successors into the first chunk.
    const std::uint32_t c = new_chunk();
    Chunk& ch = chunks_[c];
    for (std::uint32_t i = 0; i < kInline; ++i) ch.item[i] = e.slot[i];
    ch.item[kInline] = target;
    e.slot[0] = c;
    e.slot[1] = c;
    e.slot[2] = 0;
  } else {
    const std::uint32_t pos = e.size % kChunk;
    if (pos == 0) {
      const std::uint32_t c = new_chunk();
      chunks_[e.slot[1]].next = c;
      e.slot[1] = c;
    }
    chunks_[e.slot[1]].item[pos] = target;
  }
  ++e.size;
  ++in_degree_[after.value];
  ++edges_;
}

namespace {

// Sets task t's entry of a side table kept up to the last task given a value other than
// `fallback` (empty while none is), reserving for every task on first use.
template <class T>
void set_per_task(std::vector<T>& table, TaskId t, T value, T fallback, std::size_t tasks) {
  if (value == fallback && t.value >= table.size()) return;
  if (t.value >= table.size()) {
    if (table.empty()) table.reserve(tasks);
    table.resize(std::size_t{t.value} + 1, fallback);
  }
  table[t.value] = value;
}

}  // namespace

void TaskGraph::set_share(TaskId t, double share) {
  if (t.value >= kinds_.size()) throw GraphError("set_share: task " + std::to_string(t.value) + " does not exist");
  if (!std::isfinite(share) || share < 1.0) throw GraphError("set_share: a share is finite and at least 1");
  set_per_task(shares_, t, static_cast<float>(share), 1.0F, kinds_.capacity());
}

void TaskGraph::set_wait(TaskId t, double seconds) {
  if (t.value >= kinds_.size()) throw GraphError("set_wait: task " + std::to_string(t.value) + " does not exist");
  if (!std::isfinite(seconds) || seconds < 0.0) throw GraphError("set_wait: a wait is finite and not negative");
  set_per_task(waits_, t, seconds, 0.0, kinds_.capacity());
}

void TaskGraph::add_interference(TaskId t, ResourceId stream) {
  if (t.value >= kinds_.size()) throw GraphError("add_interference: task " + std::to_string(t.value) + " does not exist");
  const auto k = kinds_[t.value].index();
  if (k != 0 && k != 1) {
    throw GraphError("add_interference: task '" + std::string(name(t)) + "' is a " + std::string(kind_name(kinds_[t.value])) +
                     " task; only compute and transfer tasks run long enough to slow a stream");
  }
  if (!stream.valid() || stream.value >= (1u << 24)) throw GraphError("add_interference: the stream id is missing or not below 2^24");
  if (!interference_.empty() && t < interference_.back().task) {
    throw GraphError("add_interference: task " + std::to_string(t.value) + " comes after task " +
                     std::to_string(interference_.back().task.value) + "; add them in task order");
  }
  interference_.push_back(Interference{t, stream});
}

std::size_t TaskGraph::memory_bytes() const {
  std::size_t bytes = kinds_.capacity() * sizeof(TaskKind) + name_ids_.capacity() * sizeof(std::uint32_t) +
                      in_degree_.capacity() * sizeof(std::uint32_t) + succ_.capacity() * sizeof(EdgeList) +
                      chunks_.capacity() * sizeof(Chunk) + resource_kinds_.capacity() +
                      shares_.capacity() * sizeof(float) + waits_.capacity() * sizeof(double) +
                      interference_.capacity() * sizeof(Interference);
  for (const auto& n : names_) bytes += sizeof(std::string) + (n.size() > 15 ? n.capacity() : 0);
  return bytes;
}

namespace {
void write_dot_escaped(std::ostream& out, std::string_view s) {
  for (char c : s) {
    if (c == '"' || c == '\\') out << '\\';
    out << c;
  }
}
}  // namespace

void TaskGraph::write_dot(std::ostream& out) const {
  out << "digraph tasks {\n  node [shape=box, fontname=\"Helvetica\"];\n";
  for (std::uint32_t t = 0; t < size(); ++t) {
    const TaskId id(t);
    out << "  t" << t << " [label=\"";
    write_dot_escaped(out, name(id).empty() ? std::string_view("t" + std::to_string(t)) : name(id));
    out << "\\n" << kind_name(kind(id)) << "\"";
    if (kind(id).index() == 2) out << ", shape=diamond";
    out << "];\n";
  }
  for (std::uint32_t t = 0; t < size(); ++t) {
    for_each_successor(TaskId(t), [&](TaskId s) { out << "  t" << t << " -> t" << s.value << ";\n"; });
  }
  out << "}\n";
}

}  // namespace ddlsim
