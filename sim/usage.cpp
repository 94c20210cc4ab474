#include "sim/usage.hpp"

#include "sim/core/task_graph.hpp"

namespace ddlsim {

void ResourceUsage::on_begin(const TaskGraph& graph, std::span<ResourceModel* const> resources) {
  graph_ = &graph;
  entries_.assign(resources.size(), Entry{});
  active_.assign(resources.size(), 0);
  since_.assign(resources.size(), Seconds(0.0));
}

void ResourceUsage::on_task_start(TaskId, ResourceId resource, Seconds at) {
  if (!resource.valid()) return;
  if (active_[resource.value]++ == 0) since_[resource.value] = at;
}

void ResourceUsage::on_task_end(TaskId task, ResourceId resource, Seconds at) {
  if (!resource.valid()) return;
  Entry& e = entries_[resource.value];
  ++e.tasks;
  const TaskKind& k = graph_->kind(task);
  if (const auto* c = std::get_if<Compute>(&k)) e.flops += c->flops;
  if (const auto* x = std::get_if<Transfer>(&k)) e.bytes += x->bytes;
  if (--active_[resource.value] == 0) e.busy += at - since_[resource.value];
}

void MemoryTracker::on_begin(const TaskGraph& graph, std::span<ResourceModel* const>) {
  graph_ = &graph;
  pools_.clear();
}

MemoryTracker::Pool& MemoryTracker::pool(PoolId id) {
  if (id.value >= pools_.size()) pools_.resize(std::size_t{id.value} + 1);
  return pools_[id.value];
}

void MemoryTracker::on_task_end(TaskId task, ResourceId, Seconds at) {
  const TaskKind& k = graph_->kind(task);
  if (const auto* a = std::get_if<Allocate>(&k)) {
    Pool& p = pool(a->pool);
    p.current += a->bytes;
    if (p.current > p.peak) {
      p.peak = p.current;
      p.peak_at = at;
    }
  } else if (const auto* f = std::get_if<Free>(&k)) {
    pool(f->pool).current -= f->bytes;
  }
}

}  // namespace ddlsim
