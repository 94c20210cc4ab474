// Building large clusters and looking up routes.
//
//   ./build/bench/topology_bench
//
// Targets (issue 3): building a 16,384-GPU rail-optimized fat tree or a 16x16x16 torus in
// at most 1 s; a cached route look-up in at most 1 microsecond.
#include <benchmark/benchmark.h>

#include "topology/presets.hpp"
#include "topology/routing.hpp"

namespace {

using namespace ddlsim;

void BM_BuildDgxH100(benchmark::State& state) {
  const Catalog catalog = Catalog::builtin();
  PresetOptions o;
  o.nodes = static_cast<int>(state.range(0));
  std::size_t links = 0;
  for (auto _ : state) {
    Cluster c = build_preset(catalog, "dgx-h100", o);
    links = c.link_count();
    benchmark::DoNotOptimize(links);
  }
  state.counters["gpus"] = static_cast<double>(8 * state.range(0));
  state.counters["directed_links"] = static_cast<double>(links);
}

void BM_BuildTpuV4Pod(benchmark::State& state) {
  const Catalog catalog = Catalog::builtin();
  std::size_t links = 0;
  for (auto _ : state) {
    Cluster c = build_preset(catalog, "tpu-v4-pod", {});
    links = c.link_count();
    benchmark::DoNotOptimize(links);
  }
  state.counters["chips"] = 4096;
  state.counters["directed_links"] = static_cast<double>(links);
}

// Ring neighbours over all 4096 chips of a TPU v4 pod: the first pass fills the cache
// (one breadth-first search per source); the timed passes are cached look-ups.
void BM_CachedRingRoutes(benchmark::State& state) {
  const Catalog catalog = Catalog::builtin();
  const Cluster c = build_preset(catalog, "tpu-v4-pod", {});
  ShortestPathRouter router(c);
  const auto chips = c.accelerators();
  for (std::size_t i = 0; i < chips.size(); ++i) router.route(chips[i], chips[(i + 1) % chips.size()]);
  for (auto _ : state) {
    std::size_t hops = 0;
    for (std::size_t i = 0; i < chips.size(); ++i) hops += router.route(chips[i], chips[(i + 1) % chips.size()]).size();
    benchmark::DoNotOptimize(hops);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * chips.size()));
}

// A ring over all 16,384 GPUs of 2,048 DGX H100 servers: each look-up's first pass
// searches (stopping at the destination), later passes hit the cache.
void BM_RingRoutesDgxH100(benchmark::State& state) {
  const Catalog catalog = Catalog::builtin();
  PresetOptions o;
  o.nodes = 2048;
  const Cluster c = build_preset(catalog, "dgx-h100", o);
  const auto gpus = c.accelerators();
  const bool cached = state.range(0) != 0;
  ShortestPathRouter warm(c);
  if (cached) {
    for (std::size_t i = 0; i < gpus.size(); ++i) warm.route(gpus[i], gpus[(i + 1) % gpus.size()]);
  }
  for (auto _ : state) {
    ShortestPathRouter cold(c);
    ShortestPathRouter& r = cached ? warm : cold;
    std::size_t hops = 0;
    for (std::size_t i = 0; i < gpus.size(); ++i) hops += r.route(gpus[i], gpus[(i + 1) % gpus.size()]).size();
    benchmark::DoNotOptimize(hops);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * gpus.size()));
  state.SetLabel(cached ? "cached" : "first look-up");
}

}  // namespace

BENCHMARK(BM_RingRoutesDgxH100)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildDgxH100)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildTpuV4Pod)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CachedRingRoutes)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
