// Replay throughput and memory of the core engine on synthetic task graphs.
//
//   ./build/bench/replay_bench                       # all shapes, 10^5 .. 10^7 tasks
//   ./build/bench/replay_bench --benchmark_filter=Chain/100000
//
// Reported per benchmark:
//   items_per_second  tasks replayed per second (the target is >= 10 million, one thread)
//   bytes_per_task    peak heap bytes of building and replaying the graph, per task
//   budget_ratio      that peak over the budget of 64 bytes per task + 8 per edge (<= 1)
//
// Memory is measured by counting every heap allocation (operator new is replaced in this
// program), from before the graph is built to the end of one replay, so it includes the
// graph, the engine's state, the resource models and the event queue. The timed loop
// reuses one ReplayEngine, as a search replaying many plans would.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <malloc.h>
#include <memory>
#include <new>
#include <vector>

#include "sim/core/compute_stream.hpp"
#include "sim/core/engine.hpp"
#include "sim/shared_channel.hpp"

namespace {

std::size_t g_current = 0;
std::size_t g_peak = 0;

void* counted_alloc(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  g_current += malloc_usable_size(p);
  if (g_current > g_peak) g_peak = g_current;
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  g_current -= malloc_usable_size(p);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace {

using namespace ddlsim;

struct Workload {
  TaskGraph graph;
  std::vector<std::unique_ptr<ResourceModel>> models;
  std::vector<ResourceModel*> resources;

  ResourceId add(std::unique_ptr<ResourceModel> m) {
    models.push_back(std::move(m));
    resources.push_back(models.back().get());
    return ResourceId(static_cast<std::uint32_t>(models.size() - 1));
  }
};

std::uint64_t splitmix(std::uint64_t& s) {
  s += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = s;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// n compute tasks in one chain on one stream.
void build_chain(Workload& w, std::size_t n) {
  const ResourceId s = w.add(std::make_unique<ComputeStream>("s"));
  w.graph.reserve(n);
  TaskId prev;
  for (std::size_t i = 0; i < n; ++i) {
    const TaskId t = w.graph.add(Compute{s, Seconds(1e-6), Flops(1e6)}, "op").id();
    if (prev.valid()) w.graph.add_edge(prev, t);
    prev = t;
  }
}

// One source fanning out to n - 2 tasks over 64 streams, all joining into one sink.
void build_fan(Workload& w, std::size_t n) {
  std::vector<ResourceId> streams;
  for (int i = 0; i < 64; ++i) streams.push_back(w.add(std::make_unique<ComputeStream>("s" + std::to_string(i))));
  w.graph.reserve(n);
  const TaskId src = w.graph.add(Marker{}, "source").id();
  const TaskId sink = w.graph.add(Marker{}, "sink").id();
  for (std::size_t i = 0; i + 2 < n; ++i) {
    const TaskId t = w.graph.add(Compute{streams[i % 64], Seconds(1e-6 * static_cast<double>(1 + i % 7)), Flops(1e6)},
                                 "op").id();
    w.graph.add_edge(src, t);
    w.graph.add_edge(t, sink);
  }
}

// A random DAG: each task depends on 1-3 tasks among the previous 1024, and is a compute
// task on one of 32 streams (80%) or a transfer on one of 32 shared channels (20%).
void build_random(Workload& w, std::size_t n) {
  std::vector<ResourceId> streams, channels;
  for (int i = 0; i < 32; ++i) streams.push_back(w.add(std::make_unique<ComputeStream>("s" + std::to_string(i))));
  for (int i = 0; i < 32; ++i) {
    channels.push_back(
        w.add(std::make_unique<SharedChannel>("c" + std::to_string(i), BytesPerSecond(1e11), Seconds(1e-6))));
  }
  w.graph.reserve(n);
  std::uint64_t seed = 42;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = splitmix(seed);
    TaskId t;
    if (r % 5 != 0) {
      t = w.graph.add(Compute{streams[(r >> 8) % 32], Seconds(1e-6 * static_cast<double>(1 + (r >> 16) % 50)),
                              Flops(1e9)}, "op").id();
    } else {
      t = w.graph.add(Transfer{channels[(r >> 8) % 32], EndpointId(0), EndpointId(1),
                               Bytes(static_cast<double>(1 + (r >> 16) % 1000000))}, "xfer").id();
    }
    if (i == 0) continue;
    const std::size_t preds = 1 + (r >> 40) % 3;
    const std::size_t window = i < 1024 ? i : 1024;
    for (std::size_t k = 0; k < preds; ++k) {
      const std::size_t back = 1 + splitmix(seed) % window;
      w.graph.add_edge(TaskId(static_cast<std::uint32_t>(i - back)), t);
    }
  }
}

template <void (*Build)(Workload&, std::size_t)>
void BM_Replay(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t before = g_current;
  g_peak = g_current;
  Workload w;
  Build(w, n);
  ReplayEngine engine;
  (void)engine.run(w.graph, w.resources);
  const double peak = static_cast<double>(g_peak - before);
  const double budget = 64.0 * static_cast<double>(n) + 8.0 * static_cast<double>(w.graph.edge_count());

  for (auto _ : state) {
    const ReplayResult r = engine.run(w.graph, w.resources);
    benchmark::DoNotOptimize(r.makespan);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
  state.counters["edges_per_task"] = static_cast<double>(w.graph.edge_count()) / static_cast<double>(n);
  state.counters["bytes_per_task"] = peak / static_cast<double>(n);
  state.counters["budget_ratio"] = peak / budget;
}

}  // namespace

BENCHMARK(BM_Replay<build_chain>)->Name("Chain")->Arg(100'000)->Arg(1'000'000)->Arg(10'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Replay<build_fan>)->Name("FanOutIn")->Arg(100'000)->Arg(1'000'000)->Arg(10'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Replay<build_random>)->Name("RandomDag")->Arg(100'000)->Arg(1'000'000)->Arg(10'000'000)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
