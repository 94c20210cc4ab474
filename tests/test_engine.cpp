#include <algorithm>
#include <doctest/doctest.h>

#include "approx.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "engine_fixtures.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/core/errors.hpp"
#include "sim/usage.hpp"

using namespace ddlsim;
using ddlsim::test::Rig;
using ddlsim::test::Approx;

TEST_CASE("a chain runs back to back") {
  // Expected: tasks of 1, 2 and 3 s in a chain on one stream start at 0, 1, 3; the
  // step ends at 6 s.
  Rig r;
  const auto s = r.stream("s");
  const auto a = r.compute(s, 1), b = r.compute(s, 2), c = r.compute(s, 3);
  r.g.add_edge(a, b);
  r.g.add_edge(b, c);
  const auto res = r.run();
  CHECK(res.makespan.value() == 6.0);
  CHECK(r.at(a).start == 0.0);
  CHECK(r.at(b).start == 1.0);
  CHECK(r.at(c).start == 3.0);
  CHECK(r.at(c).end == 6.0);
  CHECK(res.tasks == 3);
}

TEST_CASE("a diamond waits for its slower branch") {
  // Expected: A (1 s) fans out to B (2 s) and C (3 s) on separate streams, which join
  // into D (1 s): D starts at 1 + max(2, 3) = 4 and the step ends at 5 s.
  Rig r;
  const auto s0 = r.stream("s0"), s1 = r.stream("s1"), s2 = r.stream("s2");
  const auto a = r.compute(s0, 1), b = r.compute(s1, 2), c = r.compute(s2, 3), d = r.compute(s0, 1);
  r.g.add_edge(a, b);
  r.g.add_edge(a, c);
  r.g.add_edge(b, d);
  r.g.add_edge(c, d);
  const auto res = r.run();
  CHECK(r.at(b).start == 1.0);
  CHECK(r.at(c).start == 1.0);
  CHECK(r.at(d).start == 4.0);
  CHECK(res.makespan.value() == 5.0);
}

TEST_CASE("independent tasks on one stream serialize in arrival order") {
  // Expected: three independent 1 s tasks on one stream run one at a time, in the order
  // they were added: starts at 0, 1, 2 and the step ends at 3 s. On three streams the
  // same tasks end at 1 s.
  Rig r;
  const auto s = r.stream("s");
  const auto a = r.compute(s, 1), b = r.compute(s, 1), c = r.compute(s, 1);
  CHECK(r.run().makespan.value() == 3.0);
  CHECK(r.at(a).start == 0.0);
  CHECK(r.at(b).start == 1.0);
  CHECK(r.at(c).start == 2.0);

  Rig p;
  for (int i = 0; i < 3; ++i) p.compute(p.stream("s" + std::to_string(i)), 1);
  CHECK(p.run().makespan.value() == 1.0);
}

TEST_CASE("transfers share a channel's bandwidth equally") {
  // Channel of 100 B/s, no latency.
  // On r, a channel of 1 B/s with 1 s latency: transfer A of `first` bytes at time 0, and
  // transfer B of `second` bytes submitted after a compute task of `wait` seconds.
  struct LatePair {
    TaskId a, b;
  };
  auto late_pair = [](Rig& r, double first, double wait, double second) {
    const auto ch = r.channel("c", 1, 1.0);
    const auto s = r.stream("s");
    const auto a = r.transfer(ch, first);
    const auto w = r.compute(s, wait);
    const auto b = r.transfer(ch, second);
    r.g.add_edge(w, b);
    return LatePair{a, b};
  };
  SUBCASE("two equal transfers") {
    // Expected: each gets 50 B/s, so both 100 B transfers end at 2 s (one alone: 1 s).
    Rig r;
    const auto ch = r.channel("c", 100);
    const auto a = r.transfer(ch, 100), b = r.transfer(ch, 100);
    CHECK(r.run().makespan.value() == Approx(2.0));
    CHECK(r.at(a).end == Approx(2.0));
    CHECK(r.at(b).end == Approx(2.0));
  }
  SUBCASE("unequal transfers") {
    // Expected: 100 B and 300 B together: the short one ends at 2 s (50 B/s); the long one
    // then has 200 B left at the full 100 B/s and ends at 4 s.
    Rig r;
    const auto ch = r.channel("c", 100);
    const auto a = r.transfer(ch, 100), b = r.transfer(ch, 300);
    r.run();
    CHECK(r.at(a).end == Approx(2.0));
    CHECK(r.at(b).end == Approx(4.0));
  }
  SUBCASE("a late arrival") {
    // Expected: A (100 B) alone from 0 to 0.5 s receives 50 B; B (100 B) arrives at 0.5 s
    // (after a 0.5 s compute task); sharing, A needs 1 s more and ends at 1.5 s, when B
    // has 50 B; B finishes the rest alone by 2.0 s.
    Rig r;
    const auto ch = r.channel("c", 100);
    const auto s = r.stream("s");
    const auto a = r.transfer(ch, 100);
    const auto w = r.compute(s, 0.5);
    const auto b = r.transfer(ch, 100);
    r.g.add_edge(w, b);
    r.run();
    CHECK(r.at(b).start == Approx(0.5));
    CHECK(r.at(a).end == Approx(1.5));
    CHECK(r.at(b).end == Approx(2.0));
  }
  SUBCASE("latency") {
    // Expected: latency 0.25 s then 100 B at 100 B/s: 1.25 s. Two at once: 0.25 + 2 s.
    Rig r;
    const auto ch = r.channel("c", 100, 0.25);
    const auto a = r.transfer(ch, 100);
    r.run();
    CHECK(r.at(a).end == Approx(1.25));
    Rig q;
    const auto ch2 = q.channel("c", 100, 0.25);
    q.transfer(ch2, 100);
    q.transfer(ch2, 100);
    CHECK(q.run().makespan.value() == Approx(2.25));
  }
  SUBCASE("a join during another transfer, with latency") {
    // Expected: 1 B/s, latency 1 s. A (2 B) is submitted at 0 and joins at 1; B (0.5 B)
    // is submitted at 1 (after a 1 s compute task) and joins at 2, when A has 1 B. Sharing
    // at 0.5 B/s each, B ends at 3 with A at 1.5 B; A's last 0.5 B alone ends at 3.5.
    // The replay's events are the three finishes: the two joins change rates inside the
    // channel and need none (2 more before the channel played its joins forward).
    Rig r;
    const auto [a, b] = late_pair(r, 2, 1, 0.5);
    const ReplayResult res = r.run();
    CHECK(r.at(b).start == Approx(1.0));
    CHECK(r.at(b).end == Approx(3.0));
    CHECK(r.at(a).end == Approx(3.5));
    CHECK(res.events == 3);
  }
  SUBCASE("an arrival after another transfer's join") {
    // Expected: 1 B/s, latency 1 s. A (2 B) joins at 1 and runs alone; B (1 B) is
    // submitted at 1.5, when A has 0.5 B, and joins at 2.5, when A has 1.5 B. Sharing,
    // A's last 0.5 B take 1 s (A ends at 3.5, B then has 0.5 B) and B ends alone at 4.
    // (B's submission must first play A's join, which was due but not an event.)
    Rig r;
    const auto [a, b] = late_pair(r, 2, 1.5, 1);
    r.run();
    CHECK(r.at(a).end == Approx(3.5));
    CHECK(r.at(b).end == Approx(4.0));
  }
}

TEST_CASE("a shared channel matches a processor-sharing reference on random arrivals") {
  // Expected: 60 transfers (0-100 B, one in ten empty) on one channel of 37 B/s with
  // 0.15 s of latency (seeds 1-20) or none (21-30), each submitted at a random time
  // (after a compute task of 0-3 s on its own stream; a quarter at 0, so more than eight
  // joins are pending at once), finish when a direct simulation of the model says: a
  // transfer joins the sharing at submit + latency, the n joined ones each receive
  // 37/n B/s, and it leaves with its bytes. The reference steps from join to finish in
  // plain arithmetic.
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    std::uint64_t st = seed;
    auto next = [&st] {
      st += 0x9e3779b97f4a7c15ULL;
      std::uint64_t z = st;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      return z ^ (z >> 31);
    };
    const double cap = 37, lat = seed <= 20 ? 0.15 : 0.0;
    Rig r;
    const auto ch = r.channel("c", cap, lat);
    std::vector<TaskId> xs;
    std::vector<double> submit, bytes;
    for (int i = 0; i < 60; ++i) {
      submit.push_back(i % 4 == 0 ? 0.0 : static_cast<double>(next() % 3000) / 1000.0);
      bytes.push_back(next() % 10 == 0 ? 0.0 : static_cast<double>(1 + next() % 100));
      const auto w = r.compute(r.stream("s" + std::to_string(i)), submit.back());
      xs.push_back(r.transfer(ch, bytes.back()));
      r.g.add_edge(w, xs.back());
    }
    r.run();
    // Reference: joins in time order; between events every joined transfer's remainder
    // falls at cap / n bytes per second.
    std::vector<double> left(60, 0.0), end(60, -1.0);
    std::vector<bool> joined(60, false);
    std::vector<int> order(60);
    for (int i = 0; i < 60; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return submit[a] < submit[b]; });
    double t = 0;
    std::size_t j = 0;
    for (;;) {
      int n = 0, first = -1;
      for (int i = 0; i < 60; ++i) {
        if (!joined[i] || end[i] >= 0) continue;
        ++n;
        if (first < 0 || left[i] < left[first]) first = i;
      }
      const double t_join = j < order.size() ? submit[order[j]] + lat : 1e300;
      const double t_fin = n > 0 ? t + std::max(0.0, left[first]) * n / cap : 1e300;
      if (j == order.size() && n == 0) break;
      const double to = std::min(t_join, t_fin);
      for (int i = 0; i < 60; ++i) {
        if (joined[i] && end[i] < 0) left[i] -= (to - t) * cap / n;
      }
      t = to;
      if (t_fin <= t_join) {
        end[first] = t;
      } else {
        left[order[j]] = bytes[order[j]];
        joined[order[j]] = true;
        ++j;
      }
    }
    for (int i = 0; i < 60; ++i) {
      INFO("seed " << seed << ", transfer " << i);
      CHECK(r.at(xs[i]).end == Approx(end[i]).epsilon(1e-9));
    }
  }
}

TEST_CASE("tasks without resources take no time and keep order") {
  // Expected: marker and memory tasks finish the instant they become ready, so a chain
  // compute(1 s) -> marker -> allocate -> compute(2 s) ends at 3 s.
  Rig r;
  const auto s = r.stream("s");
  const auto a = r.compute(s, 1);
  const auto m = r.g.add(Marker{}, "m").id();
  const auto al = r.g.add(Allocate{PoolId(0), Bytes(8)}).id();
  const auto b = r.compute(s, 2);
  r.g.add_edge(a, m);
  r.g.add_edge(m, al);
  r.g.add_edge(al, b);
  CHECK(r.run().makespan.value() == 3.0);
  CHECK(r.at(m).start == 1.0);
  CHECK(r.at(m).end == 1.0);
}

TEST_CASE("observers measure busy time and memory high-water marks") {
  // Expected busy time: transfers [0, 2] and [1, 3] overlap on one channel; the union
  // of their intervals is 3 s (sum of durations would be 4). Memory: +10, +5, -10, +7
  // peaks at 15 B at the second allocation (t = 0) and ends at 12 B.
  Rig r;
  const auto ch = r.channel("c", 100);
  const auto s = r.stream("s");
  r.transfer(ch, 150);  // shares [1, 2] with the second
  const auto w = r.compute(s, 1);
  const auto t2 = r.transfer(ch, 150);
  r.g.add_edge(w, t2);
  const auto a1 = r.g.add(Allocate{PoolId(1), Bytes(10)}).id();
  const auto a2 = r.g.add(Allocate{PoolId(1), Bytes(5)}).id();
  const auto f1 = r.g.add(Free{PoolId(1), Bytes(10)}).id();
  const auto a3 = r.g.add(Allocate{PoolId(1), Bytes(7)}).id();
  r.g.add_edge(a1, a2);
  r.g.add_edge(a2, f1);
  r.g.add_edge(f1, a3);
  ResourceUsage usage;
  MemoryTracker memory;
  const auto res = r.run({&usage, &memory});
  CHECK(res.makespan.value() == Approx(3.0));
  CHECK(usage.entries()[ch.value].busy.value() == Approx(3.0));
  CHECK(usage.entries()[ch.value].bytes.value() == 300.0);
  CHECK(usage.entries()[s.value].busy.value() == 1.0);
  REQUIRE(memory.pools().size() == 2);
  CHECK(memory.pools()[1].peak.value() == 15.0);
  CHECK(memory.pools()[1].current.value() == 12.0);
}

namespace {
// A pseudo-random DAG over a few streams and channels, for determinism checks.
void build_random(Rig& r, int n, std::uint64_t seed) {
  std::vector<ResourceId> res;
  for (int i = 0; i < 3; ++i) res.push_back(r.stream("s" + std::to_string(i)));
  for (int i = 0; i < 2; ++i) res.push_back(r.channel("c" + std::to_string(i), 1e3, 1e-3));
  auto next = [&seed] {
    seed += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  for (int i = 0; i < n; ++i) {
    const auto k = next() % 5;
    TaskId t = k < 3 ? r.compute(res[k], 0.001 * static_cast<double>(next() % 10), "c" + std::to_string(i))
                     : r.transfer(res[k], static_cast<double>(next() % 100), "x" + std::to_string(i));
    for (int e = 0; e < 2 && i > 0; ++e) r.g.add_edge(TaskId(static_cast<std::uint32_t>(next() % i)), t);
  }
}
}  // namespace

TEST_CASE("replays are byte-identical") {
  // Expected: the same graph replayed twice, and an identically built second graph,
  // give byte-identical traces.
  auto trace_of = [](std::uint64_t seed) {
    Rig r;
    build_random(r, 2000, seed);
    std::ostringstream os;
    ChromeTrace trace(os);
    r.run({&trace});
    return os.str();
  };
  const std::string first = trace_of(7);
  CHECK(first.size() > 100000);
  CHECK(trace_of(7) == first);
  CHECK(trace_of(8) != first);

  Rig r;
  build_random(r, 2000, 7);
  std::ostringstream a, b;
  ChromeTrace ta(a), tb(b);
  r.run({&ta});
  r.run({&tb});
  CHECK(a.str() == b.str());
}

// Replays g once on `x` and once on `y` with one engine, recording every task of both.
struct TwoReplays {
  test::Recorder a, b;
  ReplayResult ra, rb;
};
void replay_twice(const TaskGraph& g, std::span<ResourceModel* const> x, std::span<ResourceModel* const> y,
                  TwoReplays& out) {
  std::vector<Observer*> oa{&out.a}, ob{&out.b};
  ReplayEngine engine;
  out.ra = engine.run(g, x, oa);
  out.rb = engine.run(g, y, ob);
}

// Whether every task started and ended at the same times in both recordings.
bool same_times(const test::Recorder& a, const test::Recorder& b) {
  if (a.times.size() != b.times.size()) return false;
  for (std::size_t i = 0; i < a.times.size(); ++i) {
    if (a.times[i].start != b.times[i].start || a.times[i].end != b.times[i].end) return false;
  }
  return true;
}

TEST_CASE("both event queues give the same replay") {
  // Expected: the engine keeps its resources' events in a tournament tree when there
  // are few resources and in a binary heap otherwise; both order by (time, scheduling
  // order), so the same graph, given once with its 5 resources and once padded with
  // null (unused) slots past the tree's limit, starts its tasks in the same order at the
  // same times (ties included: many tasks of the random graph start at equal times),
  // with as many events and the same makespan.
  Rig r;
  build_random(r, 2000, 11);
  std::vector<ResourceModel*> few;
  for (auto& m : r.models) few.push_back(m.get());
  std::vector<ResourceModel*> many = few;
  many.resize(1000, nullptr);
  TwoReplays t;
  replay_twice(r.g, few, many, t);
  const auto& [a, b, ra, rb] = t;
  REQUIRE(a.order.size() == 2000);
  CHECK(a.order == b.order);
  std::size_t tied_starts = 0;
  for (std::size_t i = 1; i < 2000; ++i) {
    if (a.times[a.order[i]].start == a.times[a.order[i - 1]].start) ++tied_starts;
  }
  CHECK(same_times(a, b));
  CHECK(tied_starts > 100);
  CHECK(ra.events == rb.events);
  CHECK(ra.makespan == rb.makespan);
}

TEST_CASE("compute streams called directly replay as through the model interface") {
  // Expected: the engine calls a ComputeStream's submit and advance directly (no virtual
  // call); a model that merely forwards to a ComputeStream through the ResourceModel
  // interface takes the virtual path. Both must replay the same random graph with the
  // same task order, start and end times, events and makespan.
  class Forwarding final : public ResourceModel {
   public:
    explicit Forwarding(ResourceModel& inner) : inner_(inner) {}
    [[nodiscard]] const std::string& name() const override { return inner_.name(); }
    [[nodiscard]] bool accepts(const TaskKind& kind) const override { return inner_.accepts(kind); }
    void begin(const TaskGraph& graph) override { inner_.begin(graph); }
    Seconds submit(TaskId task, Seconds now, ReplaySink& sink) override { return inner_.submit(task, now, sink); }
    [[nodiscard]] Seconds next_event() const override { return inner_.next_event(); }
    Seconds advance(Seconds t, ReplaySink& sink) override { return inner_.advance(t, sink); }

   private:
    ResourceModel& inner_;
  };
  Rig r;
  build_random(r, 2000, 13);
  std::vector<ResourceModel*> direct;
  std::vector<std::unique_ptr<Forwarding>> wrappers;
  std::vector<ResourceModel*> wrapped;
  std::size_t streams = 0;
  for (auto& m : r.models) {
    direct.push_back(m.get());
    if (dynamic_cast<ComputeStream*>(m.get()) != nullptr) {
      ++streams;
      wrappers.push_back(std::make_unique<Forwarding>(*m));
      wrapped.push_back(wrappers.back().get());
    } else {
      wrapped.push_back(m.get());
    }
  }
  REQUIRE(streams > 0);
  TwoReplays t;
  replay_twice(r.g, direct, wrapped, t);
  const auto& [a, b, ra, rb] = t;
  REQUIRE(a.order.size() == 2000);
  CHECK(a.order == b.order);
  CHECK(same_times(a, b));
  CHECK(ra.events == rb.events);
  CHECK(ra.makespan == rb.makespan);
}

TEST_CASE("a dependency cycle is an error naming it") {
  // Expected: a -> b -> c -> b never finishes; the error names the cycle b -> c -> b and
  // says 2 of 4 tasks are unfinished (a and the independent d run).
  Rig r;
  const auto s = r.stream("s");
  const auto a = r.compute(s, 1, "a"), b = r.compute(s, 1, "b"), c = r.compute(s, 1, "c");
  r.compute(s, 1, "d");
  r.g.add_edge(a, b);
  r.g.add_edge(b, c);
  r.g.add_edge(c, b);
  std::string msg;
  try {
    r.run();
  } catch (const ReplayError& e) {
    msg = e.what();
  }
  CHECK(msg.find("replay stalled at t=2 s with 2 of 4 tasks unfinished") != std::string::npos);
  CHECK(msg.find("dependency cycle: t1 'b' -> t2 'c' -> t1 'b'") != std::string::npos);
  CHECK(msg.find("t1 'b' waits on 1 unfinished (e.g. t2 'c')") != std::string::npos);
}

TEST_CASE("a self-loop is a cycle") {
  // Expected: a task that waits on itself is reported as the cycle t0 -> t0.
  Rig r;
  const auto a = r.g.add(Marker{}, "loop").id();
  r.g.add_edge(a, a);
  CHECK_THROWS_WITH_AS(r.run(), doctest::Contains("dependency cycle: t0 'loop' -> t0 'loop'"), ReplayError);
}

namespace {
// A model that accepts work and never finishes it.
class BlackHole final : public ResourceModel {
 public:
  const std::string& name() const override { return name_; }
  bool accepts(const TaskKind&) const override { return true; }
  void begin(const TaskGraph&) override {}
  Seconds submit(TaskId, Seconds, ReplaySink&) override { return kNever; }
  Seconds next_event() const override { return kNever; }
  Seconds advance(Seconds, ReplaySink&) override { return kNever; }

 private:
  std::string name_ = "black hole";
};

// A model that always claims an event now and never makes progress.
class Stuck final : public ResourceModel {
 public:
  const std::string& name() const override { return name_; }
  bool accepts(const TaskKind&) const override { return true; }
  void begin(const TaskGraph&) override {}
  Seconds submit(TaskId, Seconds, ReplaySink&) override { return Seconds(1.0); }
  Seconds next_event() const override { return Seconds(1.0); }
  Seconds advance(Seconds, ReplaySink&) override { return Seconds(1.0); }

 private:
  std::string name_ = "stuck";
};
}  // namespace

TEST_CASE("work a resource never finishes is an error, not a hang") {
  // Expected: the task given to a model that never finishes it is named, with the model,
  // and its successor is reported as waiting on it.
  TaskGraph g;
  const auto a = g.add(Compute{ResourceId(0), Seconds(1), Flops(0)}, "lost").id();
  const auto b = g.add(Marker{}, "after").id();
  g.add_edge(a, b);
  BlackHole hole;
  std::vector<ResourceModel*> res{&hole};
  CHECK_THROWS_WITH_AS(replay(g, res),
                       doctest::Contains("t0 'lost' was given to resource 'black hole' and never finished"),
                       ReplayError);

  Stuck stuck;
  std::vector<ResourceModel*> res2{&stuck};
  CHECK_THROWS_WITH_AS(replay(g, res2), doctest::Contains("resource 'stuck' made no progress at t=1 s"), ReplayError);
}

TEST_CASE("tasks bound to missing or unsuitable resources are rejected before running") {
  // Expected: resource id 5 with one model given, and a transfer bound to a compute
  // stream, are ReplayErrors naming the task and the resource, before anything runs.
  Rig r;
  r.stream("gpu0");
  r.compute(ResourceId(5), 1, "orphan");
  CHECK_THROWS_WITH_AS(r.run(), doctest::Contains("t0 'orphan' (compute) runs on resource 5, which does not exist"),
                       ReplayError);
  Rig q;
  const auto s = q.stream("gpu0");
  q.transfer(s, 10, "misplaced");
  CHECK_THROWS_WITH_AS(q.run(), doctest::Contains("cannot run transfer tasks"), ReplayError);
}

TEST_CASE("an empty graph replays to time zero") {
  // Expected: nothing to do ends at t = 0 with no tasks.
  Rig r;
  const auto res = r.run();
  CHECK(res.makespan.value() == 0.0);
  CHECK(res.tasks == 0);
}

TEST_CASE("a reused engine gives the same results as a fresh one, also after a failed run") {
  // Expected: replaying a large graph, then a small one, then a cyclic one (which fails),
  // then the large one again on one ReplayEngine gives the same makespans and traces as
  // fresh replays of each.
  auto trace = [](ReplayEngine* engine, Rig& r) {
    std::ostringstream os;
    ChromeTrace t(os);
    std::vector<ResourceModel*> res;
    for (auto& m : r.models) res.push_back(m.get());
    std::vector<Observer*> obs{&t};
    const auto result = engine ? engine->run(r.g, res, obs) : replay(r.g, res, obs);
    return std::to_string(result.makespan.value()) + os.str();
  };
  Rig big, small, cyclic;
  build_random(big, 3000, 1);
  build_random(small, 50, 2);
  const auto a = cyclic.g.add(Marker{}, "a").id();
  cyclic.g.add_edge(a, a);
  ReplayEngine engine;
  const std::string big_fresh = trace(nullptr, big);
  CHECK(trace(&engine, big) == big_fresh);
  CHECK(trace(&engine, small) == trace(nullptr, small));
  CHECK_THROWS_AS(trace(&engine, cyclic), ReplayError);
  CHECK(trace(&engine, big) == big_fresh);
}

TEST_CASE("zero-length work and simultaneous departure and arrival") {
  // Expected: a 0 s compute task and a 0-byte transfer finish the instant they start;
  // a transfer arriving at exactly the time another leaves (1 s on a 100 B/s channel,
  // 100 B each) is not slowed by it: it runs alone from 1 s and ends at 2 s.
  Rig r;
  const auto s = r.stream("s");
  const auto ch = r.channel("c", 100);
  const auto z = r.compute(s, 0);
  const auto zb = r.transfer(ch, 0);
  const auto first = r.transfer(ch, 100);
  const auto gate = r.compute(s, 1);
  const auto second = r.transfer(ch, 100);
  r.g.add_edge(z, gate);
  r.g.add_edge(gate, second);
  r.run();
  CHECK(r.at(z).end == 0.0);
  CHECK(r.at(zb).end == 0.0);
  CHECK(r.at(first).end == Approx(1.0));
  CHECK(r.at(second).start == Approx(1.0));
  CHECK(r.at(second).end == Approx(2.0));
}

namespace {
// A model that breaks the contract in a chosen way.
class Liar final : public ResourceModel {
 public:
  enum Lie { kFinishLate, kEventInPast };
  explicit Liar(Lie lie) : lie_(lie) {}
  const std::string& name() const override { return name_; }
  bool accepts(const TaskKind&) const override { return true; }
  void begin(const TaskGraph&) override { held_ = TaskId{}; }
  Seconds submit(TaskId t, Seconds now, ReplaySink& sink) override {
    held_ = t;
    if (lie_ == kFinishLate) sink.finished(t, now + Seconds(5));  // claims a finish in the future
    return next_event();
  }
  Seconds next_event() const override { return lie_ == kEventInPast && held_.valid() ? Seconds(-1) : kNever; }
  Seconds advance(Seconds, ReplaySink&) override { return next_event(); }

 private:
  Lie lie_;
  TaskId held_;
  std::string name_ = "liar";
};
}  // namespace

TEST_CASE("a model that breaks its contract is named in the error") {
  // Expected: a finish noted at a time other than now, and an event asked for in the
  // past, are ReplayErrors naming the model.
  TaskGraph g;
  g.add(Compute{ResourceId(0), Seconds(1), Flops(0)}, "x");
  Liar late(Liar::kFinishLate), past(Liar::kEventInPast);
  std::vector<ResourceModel*> r1{&late}, r2{&past};
  CHECK_THROWS_WITH_AS(replay(g, r1), doctest::Contains("resource 'liar' reported t0 'x' finished at t=5 s while the replay was at t=0 s"),
                       ReplayError);
  CHECK_THROWS_WITH_AS(replay(g, r2), doctest::Contains("resource 'liar' asked for an event at t=-1 s"), ReplayError);
}

TEST_CASE("unused resource slots may be null; tasks must name a resource") {
  // Expected: a null entry for an id no task uses is fine; a compute task without a
  // stream id is refused when it is added (it would otherwise run in zero time).
  Rig r;
  r.stream("s0");
  r.models.push_back(nullptr);
  const auto t = r.compute(ResourceId(0), 2);
  CHECK(r.run().makespan.value() == 2.0);
  CHECK(r.at(t).end == 2.0);
  TaskGraph g;
  CHECK_THROWS_WITH_AS(g.add(Compute{ResourceId{}, Seconds(1), Flops(0)}, "orphan"),
                       doctest::Contains("compute task 'orphan': stream is missing"), GraphError);
  CHECK_THROWS_WITH_AS(g.add(Allocate{PoolId(1u << 24), Bytes(1)}, "a"),
                       doctest::Contains("pool 16777216 is not below 2^24"), GraphError);
}

namespace {
ComputeStream& stream_model(Rig& r, ResourceId s) { return static_cast<ComputeStream&>(*r.models[s.value]); }
}  // namespace

TEST_CASE("communication beside a compute stream slows it while it runs") {
  // Expected, with the stream slowed by half (interference 0.5: a task's second takes
  // 1.5 s while communication runs beside it):
  //  - a 10 s task from 0 beside a 4 s collective from 2 to 6: of those 4 s only 4/1.5
  //    are its work, so it ends 4 x (1 - 1/1.5) = 4/3 s late, at 34/3 s; the 3 s task
  //    after it runs alone, to 34/3 + 3;
  //  - two collectives that overlap (0 to 4 and 2 to 6) slow it as one from 0 to 6, not
  //    twice: a 10 s task ends at 6 + (10 - 6/1.5) = 12;
  //  - a task that starts beside a collective (0 to 6) runs slowed from its start: 2 s
  //    tasks end at 3 and 6, the 1 s task after them at 7;
  //  - a transfer slows it as a compute task does (3 bytes at 1 byte/s: 10 + 3/3 = 11);
  //  - without an interference fraction, the same graph runs as if nothing were beside.
  SUBCASE("a collective in the middle of a task") {
    Rig r;
    const auto s = r.stream("s"), c = r.stream("comm");
    stream_model(r, s).set_interference(0.5);
    const auto a = r.compute(s, 10), b = r.compute(s, 3);
    r.g.add_edge(a, b);
    const auto p = r.compute(c, 2), x = r.compute(c, 4, "collective");
    r.g.add_edge(p, x);
    r.g.add_interference(x, s);
    const auto res = r.run();
    CHECK(r.at(x).start == 2.0);
    CHECK(r.at(x).end == 6.0);
    CHECK(r.at(a).end == Approx(34.0 / 3.0).epsilon(1e-14));
    CHECK(r.at(b).end == Approx(34.0 / 3.0 + 3.0).epsilon(1e-14));
    CHECK(res.makespan.value() == Approx(34.0 / 3.0 + 3.0).epsilon(1e-14));
  }
  SUBCASE("overlapping collectives slow it once") {
    Rig r;
    const auto s = r.stream("s"), c1 = r.stream("c1"), c2 = r.stream("c2");
    stream_model(r, s).set_interference(0.5);
    const auto a = r.compute(s, 10);
    const auto x = r.compute(c1, 4);
    const auto p = r.compute(c2, 2), y = r.compute(c2, 4);
    r.g.add_edge(p, y);
    r.g.add_interference(x, s);
    r.g.add_interference(y, s);
    r.run();
    CHECK(r.at(a).end == Approx(12.0).epsilon(1e-14));
  }
  SUBCASE("tasks that start beside it") {
    Rig r;
    const auto s = r.stream("s"), c = r.stream("comm");
    stream_model(r, s).set_interference(0.5);
    const auto a = r.compute(s, 2), b = r.compute(s, 2), d = r.compute(s, 1);
    r.g.add_edge(a, b);
    r.g.add_edge(b, d);
    r.g.add_interference(r.compute(c, 6), s);
    r.run();
    CHECK(r.at(a).end == Approx(3.0).epsilon(1e-14));
    CHECK(r.at(b).end == Approx(6.0).epsilon(1e-14));
    CHECK(r.at(d).end == Approx(7.0).epsilon(1e-14));
  }
  SUBCASE("a transfer") {
    Rig r;
    const auto s = r.stream("s"), ch = r.channel("link", 1.0);
    stream_model(r, s).set_interference(0.5);
    const auto a = r.compute(s, 10);
    r.g.add_interference(r.transfer(ch, 3.0), s);
    r.run();
    CHECK(r.at(a).end == Approx(11.0).epsilon(1e-14));
  }
  SUBCASE("no fraction, no slowdown") {
    Rig r;
    const auto s = r.stream("s"), c = r.stream("comm");
    const auto a = r.compute(s, 10);
    r.g.add_interference(r.compute(c, 4), s);
    r.run();
    CHECK(r.at(a).end == 10.0);
  }
}

TEST_CASE("interference is checked: a task that takes time, a stream that is a compute stream") {
  // Expected: a marker cannot slow a stream (it takes no time), nor a task that does not
  // exist, nor a task added after a later one (GraphError when added); a fraction that is
  // negative or not a number is refused by the stream; a stream id that is a channel
  // fails the replay with a ReplayError naming the task, before anything runs.
  Rig r;
  const auto s = r.stream("s"), ch = r.channel("link", 1.0);
  const auto m = r.g.add(Marker{}, "join").id();
  CHECK_THROWS_WITH_AS(r.g.add_interference(m, s),
                       "add_interference: task 'join' is a marker task; only compute and transfer tasks run long enough to slow a stream",
                       GraphError);
  CHECK_THROWS_AS(r.g.add_interference(TaskId(99), s), GraphError);
  const auto x = r.compute(s, 1, "collective");
  const auto y = r.compute(s, 1, "later");
  r.g.add_interference(y, s);
  // (In task order, as a lowering adds them: an earlier task after a later one is refused.)
  CHECK_THROWS_WITH_AS(r.g.add_interference(x, ch), "add_interference: task 1 comes after task 2; add them in task order",
                       GraphError);
  CHECK_THROWS_AS(stream_model(r, s).set_interference(-0.1), std::invalid_argument);
  CHECK_THROWS_AS(stream_model(r, s).set_interference(std::nan("")), std::invalid_argument);
  Rig q;
  const auto qs = q.stream("s"), qc = q.channel("link", 1.0);
  q.g.add_interference(q.compute(qs, 1, "collective"), qc);
  CHECK_THROWS_WITH_AS(q.run(), "t0 'collective' slows resource 1, which is not a compute stream", ReplayError);
}
