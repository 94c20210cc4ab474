// Custom task graphs (`ddlsim run` on a file with "tasks"): the replay against closed
// forms and `ddlsim collective`, and one exact line with exit status 2 (and no output
// file) for each kind of mistake, a cycle included.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli_fixtures.hpp"

using namespace ddlsim_test;
using ddlsim::test::Approx;
namespace fs = std::filesystem;

namespace {

std::string graph(const std::string& tasks, const std::string& network = "analytical") {
  return R"({"name": "g", "cluster": {"preset": "dgx-a100", "nodes": 2}, "simulation": {"network": ")" + network +
         R"("}, "tasks": [)" + tasks + "]}";
}

double makespan(const Scratch& s, const std::string& text) {
  const auto r = ddlsim_cmd({"run", s.write("g.json", text), "--json"});
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out)["makespan_s"].get<double>();
}

}  // namespace

TEST_CASE("task graph: compute, a transfer across nodes and compute again add up") {
  // Expected: 1 ms on GPU 0, then 1 GiB from GPU 0 to GPU 8 (the next server) over one HDR
  // NIC each, 25 GB/s x InfiniBand's 0.94 = 23.5 GB/s: 45.69 ms, then 2 ms on GPU 8:
  // 48.69 ms, plus the route's latency: two cables, 1.2 us, and the NICs' transport, 14 us.
  Scratch s;
  const double t = makespan(s, graph(R"({"name": "a", "kind": "compute", "device": 0, "seconds": 0.001},
    {"name": "send", "kind": "transfer", "from": 0, "to": 8, "bytes": 1073741824, "after": ["a"]},
    {"name": "b", "kind": "compute", "device": 8, "seconds": 0.002, "after": ["send"]})"));
  CHECK(t == Approx(0.001 + 1073741824 / 23.5e9 + 0.002 + 15.2e-6).epsilon(1e-6));
}

TEST_CASE("task graph: one device runs one task at a time, two devices in parallel") {
  // Expected: 1 ms and 2 ms with no dependency on one GPU: 3 ms; on two GPUs: 2 ms.
  Scratch s;
  CHECK(makespan(s, graph(R"({"name": "a", "kind": "compute", "device": 0, "seconds": 0.001},
    {"name": "b", "kind": "compute", "device": 0, "seconds": 0.002})")) == Approx(0.003));
  CHECK(makespan(s, graph(R"({"name": "a", "kind": "compute", "device": 0, "seconds": 0.001},
    {"name": "b", "kind": "compute", "device": 1, "seconds": 0.002})")) == Approx(0.002));
}

TEST_CASE("task graph: the text report gives times in one unit without exponents, and says when nothing computed") {
  // Expected: 1 ms and 2 ms on two GPUs: makespan "2.000 ms", each device's busy time in
  // ms; 2 us on one GPU: "2.000 us"; a lone 1 MiB transfer from GPU 0 to GPU 1 over
  // NVLink 3 (12 links of 25 GB/s x NVLink's efficiency, about 40 us): in us, and no
  // device table but a line saying no task computed.
  Scratch s;
  auto text = [&](const std::string& tasks) {
    const auto r = ddlsim_cmd({"run", s.write("g.json", graph(tasks))});
    REQUIRE(r.status == 0);
    return r.out;
  };
  const std::string two = text(R"({"name": "a", "kind": "compute", "device": 0, "seconds": 0.001},
    {"name": "b", "kind": "compute", "device": 1, "seconds": 0.002})");
  CHECK(two.find("makespan:   2.000 ms\n") != std::string::npos);
  CHECK(two.find("busy (ms)") != std::string::npos);
  CHECK(two.find("   2.000    100.0        1\n") != std::string::npos);
  CHECK(text(R"({"name": "a", "kind": "compute", "device": 0, "seconds": 2e-6})").find("makespan:   2.000 us\n") !=
        std::string::npos);
  const std::string moved = text(R"({"name": "t", "kind": "transfer", "from": 0, "to": 1, "bytes": 1048576})");
  CHECK(moved.find(" us\n") != std::string::npos);
  CHECK(moved.find("e-") == std::string::npos);
  CHECK(moved.find("devices:    none computed (the graph has no compute task)\n") != std::string::npos);
  CHECK(moved.find("busy (") == std::string::npos);
}

TEST_CASE("task graph: the trace names transfers by their task and endpoints by the cluster's node names") {
  // Expected: a transfer from rank 0 to rank 8 and an all-reduce "sync" over ranks 0 and
  // 8 (ring): the transfer's event is named "t" with src node0.gpu0 and dst node1.gpu0
  // (the names, not graph ids); each of the collective's transfers "sync (all-reduce/ring)".
  Scratch s;
  const std::string trace = (s.dir / "t.json").string();
  const auto r = ddlsim_cmd({"run", s.write("g.json", graph(R"({"name": "t", "kind": "transfer", "from": 0, "to": 8, "bytes": 1048576},
    {"name": "sync", "kind": "collective", "op": "all-reduce", "ranks": "0,8", "bytes": 1048576, "algorithm": "ring"})")),
                             "--trace", trace});
  REQUIRE(r.status == 0);
  const nlohmann::json doc = nlohmann::json::parse(std::ifstream(trace));
  int plain = 0, collective = 0;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.value("cat", "") != "transfer") continue;
    const std::string name = e.at("name").get<std::string>();
    if (name == "t") {
      ++plain;
      CHECK(e.at("args").at("src") == "node0.gpu0");
      CHECK(e.at("args").at("dst") == "node1.gpu0");
    } else {
      ++collective;
      CHECK(name == "sync (all-reduce/ring)");
      CHECK(e.at("args").at("src").get<std::string>().rfind("node", 0) == 0);
    }
  }
  CHECK(plain == 1);
  CHECK(collective > 0);
}

TEST_CASE("task graph: a collective takes what ddlsim collective says, on both network models") {
  // Expected: a ring all-reduce of 1 GiB over the 8 GPUs of one server, alone, equals the
  // time `ddlsim collective` prints for it; the same on the flow model; the replay twice
  // gives the same bytes.
  Scratch s;
  for (const char* network : {"analytical", "flow"}) {
    CAPTURE(network);
    const std::string text = graph(R"({"name": "ar", "kind": "collective", "op": "all-reduce", "ranks": "0-7",
      "bytes": 1073741824, "algorithm": "ring"})", network);
    const auto c = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--nodes", "2", "--ranks", "0-7", "-b", "1G", "-e", "1G",
                               "--algorithm", "ring", "--network", network, "--json"});
    REQUIRE(c.status == 0);
    const double expected = nlohmann::json::parse(c.out)["results"][0]["time_us"].get<double>() / 1e6;
    CHECK(makespan(s, text) == Approx(expected).epsilon(1e-9));
    const std::string f = s.write("g.json", text);
    CHECK(ddlsim_cmd({"run", f, "--json"}).out == ddlsim_cmd({"run", f, "--json"}).out);
  }
}

TEST_CASE("task graph: each kind of mistake is one line, exit status 2, and no trace file") {
  Scratch s;
  const std::string trace = (s.dir / "t.json").string();
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"name": "a", "kind": "compute", "device": 0, "seconds": 1, "after": ["c"]},
          {"name": "b", "kind": "compute", "device": 0, "seconds": 1, "after": ["a"]},
          {"name": "c", "kind": "marker", "after": ["b"]})",
       "tasks: the dependencies form a cycle: b -> c -> a -> b"},
      {R"({"name": "a", "kind": "marker", "after": ["a"]})", "tasks: the dependencies form a cycle: a -> a"},
      {R"({"name": "fwd0", "kind": "marker"}, {"name": "x", "kind": "marker", "after": ["fw0"]})",
       "tasks.1.after.0: no task named 'fw0' (did you mean 'fwd0'?)"},
      {R"({"name": "a", "kind": "marker"}, {"name": "a", "kind": "marker"})", "tasks.1.name: \"a\" is already the name of tasks.0"},
      {R"({"name": "a", "kind": "compute", "device": 16, "seconds": 1})", "tasks.0.device: expected a number from 0 to 15, got 16"},
      {R"({"name": "a", "kind": "compute", "device": 1.5, "seconds": 1})", "tasks.0.device: expected an accelerator's index, got 1.5"},
      {R"({"name": "a", "kind": "comput", "device": 1, "seconds": 1})",
       "tasks.0.kind: expected one of \"compute\", \"transfer\", \"collective\", \"marker\", got \"comput\" (did you mean 'compute'?)"},
      {R"({"name": "a", "kind": "compute", "device": 1})", "tasks.0.seconds: missing (a required field)"},
      {R"({"name": "a", "kind": "compute", "device": 1, "seconds": -1})", "tasks.0.seconds: expected a number from 0 to 1e+06, got -1"},
      {R"({"name": "a", "kind": "transfer", "from": 0, "to": 1, "bytes": 1e15})",
       "tasks.0.bytes: expected whole bytes from 1 to 1099511627776 (1 TiB), got 1e+15"},
      {R"({"name": "a", "kind": "transfer", "from": 0, "to": 1, "bytes": 1.5})",
       "tasks.0.bytes: expected whole bytes from 1 to 1099511627776 (1 TiB), got 1.5"},
      {R"({"name": "a", "kind": "collective", "op": "all-reduce", "ranks": "0-7", "bytes": "1M"})",
       "tasks.0.bytes: expected whole bytes from 1 to 1099511627776 (1 TiB), got \"1M\""},
      {R"({"name": "a", "kind": "transfer", "from": 3, "to": 3, "bytes": 100})", "tasks.0.to: the same accelerator as from (3)"},
      {R"({"name": "a", "kind": "collective", "op": "allreduce", "ranks": "0-7", "bytes": 100})",
       "tasks.0.op: unknown operation 'allreduce' (did you mean 'all-reduce'?)"},
      {R"({"name": "a", "kind": "collective", "op": "all-reduce", "ranks": "0-99", "bytes": 100})",
       "tasks.0.ranks: rank 99 does not exist (the cluster has 16 accelerators) in '0-99' (expected 'all' or a list like 0-7,16,18)"},
      {R"({"name": "a", "kind": "collective", "op": "all-to-all", "ranks": "0-7", "bytes": 100, "algorithm": "ring"})",
       "tasks.0.algorithm: ring does not implement all-to-all (use direct)"},
      {R"({"name": "a", "kind": "marker", "after": "b"})", "tasks.0.after: expected an array, got \"b\""},
      {R"({"name": "a", "kind": "marker"}, {"name": "b", "kind": "marker", "after": ["a", "a"]})",
       "tasks.1.after.1: 'a' is already in after"},
      {R"({"name": "a", "kind": "collective", "op": "send-recv", "ranks": "0-15", "bytes": 100})",
       "tasks.0.ranks: send-recv takes 2 ranks, the sender and the receiver, not 16"},
      {R"({"name": "a", "kind": "marker", "device": 3})", "tasks.0.device: unknown key"},
      {"", "tasks: expected at least one task, got []"},
  };
  for (const auto& [tasks, message] : cases) {
    CAPTURE(message);
    const auto r = ddlsim_cmd({"run", s.write("bad.json", graph(tasks)), "--trace", trace});
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "ddlsim run: " + message + "\n");
    CHECK_FALSE(fs::exists(trace));
  }
  const std::string ok = s.write("ok.json", graph(R"({"name": "a", "kind": "marker"})"));
  auto r = ddlsim_cmd({"run", ok, "--csv", (s.dir / "x.csv").string()});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --csv: a task graph has no strategies to tabulate; use --json\n");
  r = ddlsim_cmd({"run", ok, "--trace", trace});
  CHECK(r.status == 0);
  CHECK(fs::exists(trace));
}
