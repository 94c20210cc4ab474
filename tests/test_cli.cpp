// The ddlsim command, run in-process: the default scenario, the report's closed form,
// output files, and one test per kind of bad input (exact one-line error, exit 2).
#include <doctest/doctest.h>

#include "approx.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unistd.h>

#include "cli/cli.hpp"
#include "cli/search.hpp"
#include "cli/validation.hpp"
#include "sim/compute_model.hpp"
#include "support/strings.hpp"
#include "tests/cli_fixtures.hpp"

using namespace ddlsim;
namespace fs = std::filesystem;
using ddlsim::test::Approx;
using namespace ddlsim_test;

namespace {

const char* kSmall = R"({
  "name": "small",
  "cluster": {"devices": 4, "device_tflops": 100, "device_memory_gib": 16,
              "link_gbytes_per_s": 10, "link_latency_us": 10},
  "workload": {"model": "synthetic", "layers": 4, "forward_gflop_per_layer": 100,
               "gradient_mib_per_layer": 100, "activation_mib_per_layer": 1000},
  "strategies": [{"name": "serial", "overlap": false, "bucket_layers": 4},
                 {"name": "overlap", "overlap": true, "bucket_layers": 1}],
  "simulation": {"collective_algorithm": "ring"}
})";

// Runs `ddlsim run FILE` on kSmall with one --set applied, expecting exit 2 and `line`.
void expect_bad_set(const std::string& set, const std::string& line) {
  Scratch s;
  const auto r = ddlsim_cmd({"run", s.write("s.json", kSmall), "--set", set});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: " + line + "\n");
  CHECK(r.out.empty());
}

using BadInputs = std::vector<std::pair<std::vector<std::string>, std::string>>;

// Runs `ddlsim workload` with each case's arguments, expecting exit 2, nothing on stdout
// and one line on stderr that starts with the case's text (any line where it is empty).
void expect_bad_workload(const BadInputs& cases) {
  for (const auto& [extra, line] : cases) {
    std::vector<std::string> args{"workload"};
    args.insert(args.end(), extra.begin(), extra.end());
    INFO(line);
    const auto r = ddlsim_cmd(args);
    CHECK(r.status == 2);
    if (!line.empty()) CHECK(r.err.rfind("ddlsim workload: " + line, 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
  }
}

// Runs ddlsim with each case's full arguments, expecting exit 2 and exactly the case's
// text on stderr.
void expect_exact_errors(const BadInputs& cases) {
  for (const auto& [args, message] : cases) {
    CAPTURE(args.back());
    const auto r = ddlsim_cmd(args);
    CHECK(r.status == 2);
    CHECK(r.err == message);
  }
}

}  // namespace

TEST_CASE("the embedded default scenario runs") {
  // Expected: status 0, nothing on stderr, a table naming the scenario and its strategies.
  const auto r = ddlsim_cmd({"run"});
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("scenario: gpt-1.7b-on-4-dgx-a100") != std::string::npos);
  for (const char* name : {"dp ", "zero3 ", "tp8-dp4 ", "ptd-p "}) CHECK(r.out.find(name) != std::string::npos);
}

TEST_CASE("the report follows the closed form of the synthetic data-parallel step") {
  // Expected, per device: forward 4 x 100 GFLOP at 100 TFLOP/s = 4 ms, backward twice
  // that = 8 ms, so compute = 12 ms. Without overlap the all-reduce of 4 x 100 MiB runs
  // after backward as ring traffic 2(p-1)/p S = 1.5 x 419430400 B at 10 GB/s = 62.91456 ms
  // plus 2(p-1) x 10 us = 60 us: step = 12 + 62.97456 ms. Peak memory: 4 x 1000 MiB of
  // activations + 100 MiB of the first gradients = 4100 MiB.
  Scratch s;
  const auto r = ddlsim_cmd({"run", s.write("s.json", kSmall), "--json"});
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  const auto& serial = doc.at("strategies").at(0);
  CHECK(serial.at("name") == "serial");
  CHECK(serial.at("compute_busy_s").get<double>() == Approx(0.012));
  CHECK(serial.at("step_time_s").get<double>() == Approx(0.012 + 0.06291456 + 60e-6));
  CHECK(serial.at("peak_memory_bytes").get<double>() == 4100.0 * 1024 * 1024);
  CHECK(serial.at("fits_in_memory") == true);
  // With per-layer buckets the first all-reduce starts after forward (4 ms) and the first
  // backward (2 ms). Each bucket then needs 15.7 ms of link time but the next arrives
  // 2 ms later, so the links stay busy: the step ends once all 62.91456 ms of traffic is
  // through, no sooner than 6 + 62.91456 ms, and no later than that plus every ring
  // step's 10 us latency exposed (4 buckets x 2(p-1) steps).
  const auto& overlap = doc.at("strategies").at(1);
  const double t = overlap.at("step_time_s").get<double>();
  CHECK(t >= 0.006 + 0.06291456);
  CHECK(t <= 0.006 + 0.06291456 + 4 * 6 * 10e-6);
  // The analytical model lets the buckets' transfers overlap without sharing: faster.
  const auto a = ddlsim_cmd({"run", s.write("s2.json", kSmall), "--json", "--network", "analytical"});
  REQUIRE(a.status == 0);
  const double ta = nlohmann::json::parse(a.out).at("strategies").at(1).at("step_time_s").get<double>();
  CHECK(ta < t);
}

TEST_CASE("--set changes the scenario before validation") {
  // Expected: one device has no all-reduce, so the step is pure compute: 12 ms.
  Scratch s;
  const auto r = ddlsim_cmd({"run", s.write("s.json", kSmall), "--json", "--set", "cluster.devices=1"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("strategies").at(0).at("step_time_s").get<double>() == Approx(0.012));
  const auto p = ddlsim_cmd({"run", s.write("t.json", kSmall), "--print-scenario", "--set", "strategies.1.name=x"});
  CHECK(nlohmann::json::parse(p.out).at("strategies").at(1).at("name") == "x");
  // A whole number written as a float is that integer (2e0 is 2, printed so).
  const auto whole = ddlsim_cmd({"run", s.write("u.json", kSmall), "--print-scenario", "--set", "cluster.devices=2e0"});
  CHECK(nlohmann::json::parse(whole.out).at("cluster").at("devices").dump() == "2");
  // --print-scenario checks what it prints (its output is meant to start a new file):
  // a training scenario with a misspelt key is one line and status 2, nothing printed.
  const auto bad = ddlsim_cmd({"run", "--print-scenario", "--set", "cluster.nodez=3"});
  CHECK(bad.status == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err == "ddlsim run: cluster.nodez: unknown key (did you mean 'nodes'?)\n");
  // It replays nothing, so an option for the replay is refused, not ignored (--strategy
  // nope exited 0; --trace wrote no file and said nothing).
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"--strategy", "nope"}, "--strategy: does not apply with --print-scenario, which prints the scenario and replays nothing"},
      {{"--trace", (s.dir / "x.json").string()}, "--trace: does not apply with --print-scenario, which prints the scenario and replays nothing"},
      {{"--csv", (s.dir / "x.csv").string()}, "--csv: does not apply with --print-scenario, which prints the scenario and replays nothing"},
      {{"--network", "analytical"}, "--network: does not change what --print-scenario prints; use --set simulation.network=analytical"},
      {{"--json"}, "--json: --print-scenario prints the scenario as JSON already"},
  };
  for (const auto& [extra, line] : refused) {
    std::vector<std::string> args{"run", "--print-scenario"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "ddlsim run: " + line + "\n");
  }
}

TEST_CASE("output is byte-identical across runs") {
  // The whole default scenario twice is checked on the executable (cli_exit_status);
  // here its ZeRO-3 strategy, whose many concurrent flows stress tie-breaking most.
  const auto a = ddlsim_cmd({"run", "--json", "--strategy", "zero3"});
  const auto b = ddlsim_cmd({"run", "--json", "--strategy", "zero3"});
  CHECK(a.status == 0);
  CHECK(a.out == b.out);
  Scratch s;
  const std::string t1 = (s.dir / "t1.json").string(), t2 = (s.dir / "t2.json").string();
  REQUIRE(ddlsim_cmd({"run", "--strategy", "ptd-p", "--trace", t1}).status == 0);
  REQUIRE(ddlsim_cmd({"run", "--strategy", "ptd-p", "--trace", t2}).status == 0);
  std::stringstream x, y;
  x << std::ifstream(t1).rdbuf();
  y << std::ifstream(t2).rdbuf();
  CHECK(x.str().size() > 1000);
  CHECK(x.str() == y.str());
  CHECK(nlohmann::json::accept(x.str()));
}

// Each bad-input case below states the exact line expected on stderr, with status 2.

TEST_CASE("bad input: malformed JSON") {
  Scratch s;
  const auto r = ddlsim_cmd({"run", s.write("bad.json", R"({"name": "x", "cluster": {)")});
  CHECK(r.status == 2);
  CHECK(r.err.find("bad.json: invalid JSON: parse error at line 1, column 27") != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

TEST_CASE("bad input: wrong type") {
  expect_bad_set("workload.layers=\"x\"", "workload.layers: expected a positive integer, got \"x\"");
  expect_bad_set("strategies.0.overlap=1", "strategies.0.overlap: expected true or false, got 1");
  expect_bad_set("cluster=[]", "cluster: expected an object, got []");
}

TEST_CASE("bad input: out-of-range values") {
  expect_bad_set("cluster.devices=-3", "cluster.devices: expected a positive integer, got -3");
  expect_bad_set("cluster.device_tflops=0", "cluster.device_tflops: expected a number from 1e-06 to 1e+06, got 0");
  expect_bad_set("cluster.link_latency_us=-1", "cluster.link_latency_us: expected a number from 0 to 1e+09, got -1");
  expect_bad_set("workload.forward_gflop_per_layer=1e308",
                 "workload.forward_gflop_per_layer: expected a number from 1e-09 to 1e+12, got 1e+308");
  expect_bad_set("strategies.1.bucket_layers=9",
                 "strategies.1.bucket_layers: expected at most workload.layers (4), got 9");
  expect_bad_set("cluster.devices=2000000", "cluster.devices: at most 1000000 devices, got 2000000");
}

TEST_CASE("bad input: absurd scale is refused up front") {
  // Expected task count of strategy 0 (4-layer buckets): p (5 layers + buckets) +
  // buckets (3 + 2(p-1)p) + 1 (per bucket a done marker and a ring all-reduce of 2(p-1)p
  // transfers between two markers) = 10^6 x 5250 + 250 x (3 + 2 x 999999 x 10^6) + 1
  // with 10^6 devices and 1000 layers.
  Scratch s;
  const auto r = ddlsim_cmd({"run", s.write("s.json", kSmall), "--set", "cluster.devices=1000000", "--set",
                             "workload.layers=1000"});
  CHECK(r.status == 2);
  CHECK(r.err ==
        "ddlsim run: strategies.0: this plan would replay 500004750000751 tasks (about 3.5e+07 GB of memory), more than "
        "the limit of 50000000 tasks (3.5 GB); reduce cluster.devices or workload.layers\n");
}

TEST_CASE("bad input: unknown keys, with a suggestion") {
  expect_bad_set("cluster.devcies=4", "cluster.devcies: unknown key (did you mean 'devices'?)");
  expect_bad_set("simulation.netwrk=flow", "simulation.netwrk: unknown key (did you mean 'network'?)");
  expect_bad_set("simulation.network=packet", "simulation.network: expected one of \"flow\", \"analytical\", got \"packet\"");
  expect_bad_set("simulator.network=flow", "simulator: unknown key (did you mean 'simulation'?)");
  expect_bad_set("simulation.collective_algorithm=rign",
                 "simulation.collective_algorithm: expected one of \"auto\", \"ring\", \"tree\", \"halving-doubling\", "
                 "\"direct\", \"hierarchical\", \"torus\", got \"rign\" (did you mean 'ring'?)");
  expect_bad_set("simulation.collective_algorithm=torus",
                 "simulation.collective_algorithm: torus needs the group to be one whole torus of the cluster, in its order");
}

TEST_CASE("bad input: a document that is neither a scenario nor a task graph says which keys it lacks") {
  // Expected: 'task' for 'tasks' and 'clustr' for 'cluster' are named with the key meant;
  // a cluster with neither a preset nor a uniform cluster's devices lists what it has; a
  // preset's accelerator or NIC the catalog lacks is that field's mistake (it read
  // 'cluster: unknown link').
  Scratch s;
  auto err = [&](const char* name, const char* text) {
    const std::string f = s.write(name, text);
    const auto r = ddlsim_cmd({"run", f});
    CHECK(r.status == 2);
    return std::make_pair(f, r.err);
  };
  auto [t, t_err] = err("t.json", R"({"name": "x", "task": []})");
  CHECK(t_err == "ddlsim run: " + t + ": task: unknown key (did you mean 'tasks'?)\n");
  auto [c, c_err] = err("c.json", R"({"name": "x", "clustr": {}})");
  CHECK(c_err == "ddlsim run: " + c + ": clustr: unknown key (did you mean 'cluster'?)\n");
  auto [n, n_err] = err("n.json", R"({"name": "x"})");
  CHECK(n_err == "ddlsim run: " + n + ": neither a scenario (\"cluster\", \"workload\", \"strategies\") nor a task graph "
                 "(\"tasks\"): cluster: missing\n");
  CHECK(err("f.json", R"({"name": "x", "cluster": {"devics": 4}, "workload": {"model": "synthetic"}, "strategies": []})").second ==
        "ddlsim run: cluster: expected \"preset\" (a built-in cluster, as in {\"preset\": \"dgx-a100\", \"nodes\": 4}; 'ddlsim "
        "topology --list' lists them), \"file\" (an explicit topology) or \"devices\" and the other fields of a uniform "
        "cluster, got only 'devics'\n");
  // A file that is no topology is that field's mistake.
  CHECK(err("g.json", R"({"name": "x", "cluster": {"file": "t.json"}, "workload": {"model": "synthetic"}, "strategies": []})").second ==
        "ddlsim run: cluster.file: " + t + ": nodes: missing (a required field)\n");
  for (const auto& [set, line] : std::vector<std::pair<std::string, std::string>>{
           {"cluster.nic=ib-hdrr", "cluster.nic: unknown link 'ib-hdrr' (did you mean 'ib-hdr'?); the catalog has: "},
           {"cluster.accelerator=h100", "cluster.accelerator: unknown accelerator 'h100' (did you mean 'h100-sxm'?); the catalog has: "}}) {
    const auto r = ddlsim_cmd({"run", "--set", set});
    CHECK(r.status == 2);
    CHECK(r.err.rfind("ddlsim run: " + line, 0) == 0);
  }
}

TEST_CASE("bad input: missing fields") {
  Scratch s;
  std::string text = kSmall;
  text.replace(text.find("\"layers\": 4, "), 13, "");
  const auto r = ddlsim_cmd({"run", s.write("s.json", text)});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: workload.layers: missing (a required field)\n");
}

TEST_CASE("bad input: unknown choices and duplicate names") {
  expect_bad_set("workload.model=synthetc",
                 "workload.model: unknown model 'synthetc' (did you mean 'synthetic'?) (\"synthetic\" or a preset of "
                 "'ddlsim workload --list')");
  expect_bad_set("strategies.1.name=serial", "strategies.1.name: \"serial\" is already the name of strategies.0");
}

TEST_CASE("bad input: malformed --set expressions") {
  expect_bad_set("cluster.devices", "--set 'cluster.devices': expected PATH=VALUE, e.g. strategies.0.bucket_layers=4");
  expect_bad_set("strategies.7.overlap=true",
                 "--set strategies.7.overlap: strategies has 2 elements, so index 7 does not exist");
  expect_bad_set("name.x=1", "--set name.x: name is a string, not an object or array");
  // Removing a field that is not there, or below one that is not, is refused.
  expect_bad_set("strategies.0.bucket_mib=null", "--set strategies.0.bucket_mib=null: strategies.0 has no 'bucket_mib' to remove");
  expect_bad_set("simulation.rings.x=null", "--set simulation.rings.x=null: simulation has no 'rings' to remove");
  expect_bad_set("strategies.2=null", "--set strategies.2: strategies has 2 elements, so index 2 does not exist");
}

TEST_CASE("--set PATH=null removes a field or an array element, so that its default applies") {
  // Expected: removing the first strategy leaves the second, 'overlap'; removing the
  // scenario's collective_algorithm leaves simulation empty (the default, auto); a
  // training strategy's recompute_modules removed, a selective plan can become a full
  // one (with the modules in place that is refused); a field removed and then set again
  // takes the later value (they apply in order).
  Scratch s;
  const auto p = ddlsim_cmd({"run", s.write("s.json", kSmall), "--print-scenario", "--set", "strategies.0=null", "--set",
                             "simulation.collective_algorithm=null"});
  REQUIRE(p.status == 0);
  const auto doc = nlohmann::json::parse(p.out);
  REQUIRE(doc.at("strategies").size() == 1);
  CHECK(doc.at("strategies").at(0).at("name") == "overlap");
  CHECK(doc.at("simulation") == nlohmann::json::object());
  const std::vector<std::string> selective{"run", "--json", "--set", "workload.model=llama3-8b", "--set",
                                           "strategies.0.recompute=selective", "--set",
                                           R"(strategies.0.recompute_modules=["mlp"])", "--strategy", "dp"};
  std::vector<std::string> full = selective;
  full.insert(full.end(), {"--set", "strategies.0.recompute=full"});
  const auto refused = ddlsim_cmd(full);
  CHECK(refused.status == 2);
  full.insert(full.end(), {"--set", "strategies.0.recompute_modules=null"});
  const auto ran = ddlsim_cmd(full);
  REQUIRE(ran.status == 0);
  const auto put_back = ddlsim_cmd({"run", "--print-scenario", "--set", "strategies.0.micro_batch=null", "--set",
                                    "strategies.0.micro_batch=4"});
  REQUIRE(put_back.status == 0);
  CHECK(nlohmann::json::parse(put_back.out).at("strategies").at(0).at("micro_batch") == 4);
  // Inside an inline HuggingFace config null stays a value (its format's own meaning).
  const auto hf = ddlsim_cmd({"run", "--print-scenario", "--set",
                              R"(workload={"hf_config": {"model_type": "gpt2", "n_layer": 24, "n_embd": 512, "n_head": 32, "vocab_size": 1000, "n_positions": 1024}})",
                              "--set", "workload.hf_config.n_inner=null"});
  REQUIRE(hf.status == 0);
  const auto hf_doc = nlohmann::json::parse(hf.out);
  REQUIRE(hf_doc.at("workload").at("hf_config").contains("n_inner"));
  CHECK(hf_doc.at("workload").at("hf_config").at("n_inner").is_null());
}

TEST_CASE("bad input: the command line") {
  auto r = ddlsim_cmd({"run", "--frobnicate"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: unrecognised option '--frobnicate' (see 'ddlsim run --help')\n");
  // A prefix of an option is no option (Boost's guessing took --jso for --json); a
  // misspelt one gets a suggestion, in every command.
  r = ddlsim_cmd({"run", "--jso"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: unrecognised option '--jso' (did you mean '--json'?) (see 'ddlsim run --help')\n");
  r = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--chunk", "2"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim collective: unrecognised option '--chunk' (did you mean '--chunks'?) (see 'ddlsim collective --help')\n");
  r = ddlsim_cmd({"runn"});
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown command 'runn'") != std::string::npos);
  r = ddlsim_cmd({"run", "/nonexistent/s.json"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: cannot read scenario /nonexistent/s.json: no such file or not readable\n");
  // A file that never ends is refused at 512 MiB (it was read until memory ran out).
  r = ddlsim_cmd({"run", "/dev/zero"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: cannot read scenario /dev/zero: larger than 512 MiB, the most ddlsim reads\n");
  // A preset's refusal names the option as the input spells it: cluster.pods here,
  // --pods on the topology command.
  r = ddlsim_cmd({"run", "--set", "cluster.pods=2"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: cluster.pods: only TPU presets are made of pods (GPU presets take a server count)\n");
  // Interleaving with one chunk per device, or without a pipeline, is refused (it would
  // keep twice 1F1B's activations for 1F1B's step).
  r = ddlsim_cmd({"run", "--strategy", "ptd-p", "--set", "strategies.3.schedule=interleaved"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: strategies.3: the interleaved schedule needs virtual_stages of at least 2 (1 is the 1f1b schedule)\n");
  r = ddlsim_cmd({"run", "--strategy", "dp", "--set", "strategies.0.schedule=interleaved", "--set", "strategies.0.virtual_stages=2"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: strategies.0: the interleaved schedule needs pp of at least 2\n");
  // ZeRO-2 reduce-scatters every layer as it is produced: a bucket size would be ignored.
  r = ddlsim_cmd({"run", "--strategy", "dp", "--set", "strategies.0.zero=2", "--set", "strategies.0.bucket_mib=100"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: strategies.0.bucket_mib: applies to zero 0 and 1; ZeRO-2 and 3 reduce-scatter each layer's "
                 "gradients as every micro-batch's backward produces them\n");
  r = ddlsim_cmd({"topology", "--preset", "dgx-a100", "--pods", "2"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --pods: only TPU presets are made of pods (GPU presets take a server count)\n");
  r = ddlsim_cmd({"run", "--strategy", "pdt-p"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --strategy pdt-p: the scenario has no such strategy (did you mean 'ptd-p'?); it has: "
                 "dp, zero3, tp8-dp4, ptd-p\n");
}

TEST_CASE("no partial output file is left behind") {
  // Expected: a trace requested for an invalid run, or for an ambiguous one, leaves the
  // folder empty; a valid run leaves exactly the trace.
  Scratch s;
  const std::string trace = (s.dir / "trace.json").string();
  auto r = ddlsim_cmd({"run", "--set", "cluster.nodes=0", "--trace", trace});
  CHECK(r.status == 2);
  CHECK(s.files() == 0);
  r = ddlsim_cmd({"run", "--trace", trace});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --trace: the scenario has 4 strategies; choose one with --strategy NAME\n");
  CHECK(s.files() == 0);
  r = ddlsim_cmd({"run", "--strategy", "ptd-p", "--trace", trace});
  CHECK(r.status == 0);
  CHECK(s.files() == 1);
  CHECK(fs::file_size(trace) > 1000);
}

TEST_CASE("help and version") {
  auto r = ddlsim_cmd({"--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("Usage: ddlsim COMMAND") != std::string::npos);
  r = ddlsim_cmd({"run", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("Examples:") != std::string::npos);
  CHECK(r.out.find("--trace") != std::string::npos);
  r = ddlsim_cmd({"--version"});
  CHECK(r.out.rfind("ddlsim ", 0) == 0);
}

TEST_CASE("no value of any field crashes: every run ends with 0 or one line and status 2") {
  // Expected: for every field of the scenario and every kind of value (wrong types,
  // zero, negatives, extremes of double), ddlsim either runs (0) or stops with exactly
  // one line on stderr and status 2 -- never another status, never a partial report.
  const std::vector<std::string> fields = {
      "name", "description", "cluster", "cluster.devices", "cluster.device_tflops", "cluster.device_memory_gib",
      "cluster.link_gbytes_per_s", "cluster.link_latency_us", "workload", "workload.model", "workload.layers",
      "workload.forward_gflop_per_layer", "workload.backward_to_forward", "workload.gradient_mib_per_layer",
      "workload.activation_mib_per_layer", "strategies", "strategies.0", "strategies.0.name",
      "strategies.0.overlap", "strategies.0.bucket_layers"};
  const std::vector<std::string> values = {"0", "-1", "1", "0.5", "1e308", "-1e308", "1e-308", "4294967297",
                                           "18446744073709551616", "true", "null", "[]", "{}", "\"\"", "\"x\""};
  Scratch s;
  const std::string file = s.write("s.json", kSmall);
  for (const auto& f : fields) {
    for (const auto& v : values) {
      const auto r = ddlsim_cmd({"run", file, "--json", "--set", f + "=" + v});
      INFO(f << "=" << v << " -> " << r.err);
      CHECK((r.status == 0 || r.status == 2));
      if (r.status == 2) {
        CHECK(r.out.empty());
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      } else {
        CHECK(nlohmann::json::accept(r.out));
      }
    }
  }
}

TEST_CASE("bad input: numbers beyond a double, deep nesting and duplicate keys, in a file or in --set") {
  // Expected: each is one line naming the source and status 2.
  Scratch s;
  auto r = ddlsim_cmd({"run", s.write("big.json", R"({"name": "x", "cluster": {"devices": 1e400}})")});
  CHECK(r.status == 2);
  CHECK(r.err.find("big.json: invalid JSON: number overflow parsing '1e400'") != std::string::npos);

  std::string deep = R"({"name": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  r = ddlsim_cmd({"run", s.write("deep.json", deep)});
  CHECK(r.status == 2);
  CHECK(r.err.find("deep.json: nested more than 64 levels deep") != std::string::npos);

  expect_bad_set(R"(cluster={"devices": 4, "devices": 8})",
                 "--set cluster: key 'devices' appears twice in one object");
  expect_bad_set("name=\xff\xfe", "--set name: the value is not valid UTF-8 text");
}

TEST_CASE("--dot writes the task graph") {
  // Expected: the single-strategy graph of kSmall ("serial", 4 devices, 4 layers, one
  // bucket) has p (5 layers + buckets) + buckets (3 + 2(p-1)p) + 1 = 84 + 27 + 1 = 112
  // tasks, each a dot node line "tN [label=...]".
  Scratch s;
  const std::string dot = (s.dir / "g.dot").string();
  const auto r = ddlsim_cmd({"run", s.write("s.json", kSmall), "--strategy", "serial", "--dot", dot});
  REQUIRE(r.status == 0);
  std::stringstream ss;
  ss << std::ifstream(dot).rdbuf();
  const std::string text = ss.str();
  CHECK(text.rfind("digraph tasks {", 0) == 0);
  std::size_t nodes = 0;
  for (std::size_t at = text.find(" [label="); at != std::string::npos; at = text.find(" [label=", at + 1)) ++nodes;
  CHECK(nodes == 112);
  CHECK(text.find("\\ncompute\"]") != std::string::npos);
}

TEST_CASE("every device's peak holds the CUDA context and NCCL buffers per communicator, which the scenario may set") {
  // Expected on the default scenario (A100s: 400 MiB of context, 688 MiB per
  // communicator): dp 32 joins one communicator, 1088 MiB; tp 8 x dp 4 two, 1776 MiB;
  // tp 4 x pp 2 x dp 4 three, 2464 MiB; each in the peak and its breakdown. With
  // simulation.context_mib and communicator_mib 0 the runtime is 0 and every peak that
  // much lower, the model states the same.
  const auto run = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"run", "--network", "analytical", "--json"};
    for (auto& e : extra) args.push_back(std::move(e));
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json with = run({});
  const nlohmann::json without = run({"--set", "simulation.context_mib=0", "--set", "simulation.communicator_mib=0"});
  const std::map<std::string, double> expected{{"dp", 1088 * kMiB}, {"zero3", 1088 * kMiB}, {"tp8-dp4", 1776 * kMiB},
                                               {"ptd-p", 2464 * kMiB}};
  REQUIRE(with.at("strategies").size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const nlohmann::json& a = with.at("strategies").at(i);
    const nlohmann::json& b = without.at("strategies").at(i);
    const std::string name = a.at("name").get<std::string>();
    INFO(name);
    CHECK(a.at("memory_breakdown_bytes").at("runtime").get<double>() == expected.at(name));
    CHECK(b.at("memory_breakdown_bytes").at("runtime").get<double>() == 0);
    CHECK(a.at("peak_memory_bytes").get<double>() - b.at("peak_memory_bytes").get<double>() == expected.at(name));
    CHECK(a.at("memory_breakdown_bytes").at("optimizer") == b.at("memory_breakdown_bytes").at("optimizer"));
    CHECK(a.at("memory_breakdown_bytes").at("activations") == b.at("memory_breakdown_bytes").at("activations"));
  }
  const auto bad = ddlsim_cmd({"run", "--set", "simulation.communicator_mib=-5"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("simulation.communicator_mib: expected a number from 0 to 1e+06, got -5") != std::string::npos);
}

TEST_CASE("simulation.compute_speed_cv prices every kernel as the slowest of the cluster's accelerators") {
  // Expected on the default scenario (32 A100s): with speeds varying at cv 0.02 every
  // kernel takes 1 + 0.02 x E[max of 32 standard normals] = 1.041393 times as long, so
  // each strategy's forward, backward and optimizer compute grow by that factor and its
  // step by at most that; the text names the factor, the JSON gives it with the cv; 0
  // (the default) changes nothing; outside 0 to 0.5 it is refused.
  const double factor = 1.0 + 0.02 * ComputeModel::expected_max_normal(32);
  CHECK(factor == Approx(1.041393).epsilon(1e-6));
  const auto plain = ddlsim_cmd({"run", "--network", "analytical", "--json"});
  const auto slow = ddlsim_cmd({"run", "--network", "analytical", "--json", "--set", "simulation.compute_speed_cv=0.02"});
  REQUIRE(plain.status == 0);
  REQUIRE(slow.status == 0);
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(slow.out);
  CHECK(!a.contains("straggler_factor"));
  CHECK(b.at("compute_speed_cv").get<double>() == 0.02);
  CHECK(b.at("straggler_factor").get<double>() == Approx(factor).epsilon(1e-12));
  REQUIRE(a.at("strategies").size() == b.at("strategies").size());
  for (std::size_t i = 0; i < a.at("strategies").size(); ++i) {
    const nlohmann::json& x = a.at("strategies").at(i);
    const nlohmann::json& y = b.at("strategies").at(i);
    INFO(x.at("name").get<std::string>());
    for (const char* part : {"forward", "backward", "optimizer"}) {
      const double before = x.at("breakdown").at("compute_parts_s").at(part).get<double>();
      CHECK(y.at("breakdown").at("compute_parts_s").at(part).get<double>() == Approx(before * factor).epsilon(1e-9));
    }
    const double step = x.at("step_time_s").get<double>(), slower = y.at("step_time_s").get<double>();
    CHECK(slower > step);
    CHECK(slower <= step * factor * (1 + 1e-9));
  }
  const auto text = ddlsim_cmd({"run", "--network", "analytical", "--set", "simulation.compute_speed_cv=0.02"});
  CHECK(text.out.find("speeds:   compute x1.0414, the slowest of 32 accelerators at speed cv 0.02\n") != std::string::npos);
  // The search and the cost-model check price with it too, and say so.
  const auto search = ddlsim_cmd({"search", "--network", "analytical", "--set", "simulation.compute_speed_cv=0.02"});
  CHECK(search.out.find("\nspeeds:   compute x1.0414, the slowest of 32 accelerators") != std::string::npos);
  const auto check = ddlsim_cmd({"validate", "--cost-model", "--json", "--set", "simulation.compute_speed_cv=0.02"});
  REQUIRE(check.status == 0);
  CHECK(nlohmann::json::parse(check.out).at("straggler_factor").get<double>() == Approx(factor).epsilon(1e-12));
  const auto zero = ddlsim_cmd({"run", "--network", "analytical", "--json", "--set", "simulation.compute_speed_cv=0"});
  CHECK(zero.out == plain.out);
  const auto bad = ddlsim_cmd({"run", "--set", "simulation.compute_speed_cv=0.6"});
  CHECK(bad.status == 2);
  CHECK(bad.err == "ddlsim run: simulation.compute_speed_cv: expected a number from 0 to 0.5, got 0.6\n");
}

TEST_CASE("tables pad names by the columns they take, not their bytes") {
  // Expected: "é" (2 bytes) takes 1 column, "零" (3 bytes) 2, a combining acute accent
  // none, ASCII one each; in 'ddlsim run's table the plan column starts at the same
  // column on every row whatever the names' bytes.
  CHECK(display_width("dp") == 2);
  CHECK(display_width("z\xc3\xa9ro") == 4);
  CHECK(display_width("\xe9\x9b\xb6") == 2);
  CHECK(display_width("e\xcc\x81") == 1);
  CHECK(display_width("\xff") == 1);
  CHECK(padded("z\xc3\xa9ro", 6) == "z\xc3\xa9ro  ");
  CHECK(padded("longer", 3) == "longer");
  const auto r = ddlsim_cmd({"run", "--network", "analytical", "--set", "strategies.0.name=z\xc3\xa9ro-\xe9\x9b\xb6"});
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::vector<std::size_t> plan_columns;
  for (std::string line; std::getline(lines, line);) {
    const std::size_t at = line.find(line.rfind("strategy", 0) == 0 ? "plan" : "dp ");
    if (line.rfind("strategy", 0) == 0 || (at != std::string::npos && line.find(" x tp ") != std::string::npos)) {
      plan_columns.push_back(display_width(line.substr(0, at)));
    }
  }
  REQUIRE(plan_columns.size() == 5);  // the header and four strategies
  for (std::size_t c : plan_columns) CHECK(c == plan_columns.front());
}

TEST_CASE("an fp32 model keeps 4-byte weights and gradients, 8-byte optimizer states, and moves 4-byte gradients") {
  // Expected, ZeRO-1 data parallelism on the default scenario: against bf16 the weights
  // and gradients double (4 bytes per parameter, not 2), the sharded optimizer states
  // shrink by 8/12 (two fp32 moments, no master copy), and every byte of data-parallel
  // traffic (the gradients' reduce-scatter, the updated weights' all-gather) doubles.
  auto run = [](const char* dtype) {
    const auto r = ddlsim_cmd({"run", "--network", "analytical", "--strategy", "dp", "--set",
                               std::string("workload.dtype=") + dtype, "--set", "strategies.0.zero=1", "--json"});
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0);
  };
  const auto bf16 = run("bf16"), fp32 = run("fp32");
  const auto& a = bf16.at("memory_breakdown_bytes");
  const auto& b = fp32.at("memory_breakdown_bytes");
  CHECK(b.at("weights").get<double>() == Approx(2 * a.at("weights").get<double>()));
  CHECK(b.at("gradients").get<double>() == Approx(2 * a.at("gradients").get<double>()));
  CHECK(b.at("optimizer").get<double>() == Approx(a.at("optimizer").get<double>() * 8 / 12));
  CHECK(fp32.at("most_utilized_links").at(0).at("bytes").get<double>() ==
        Approx(2 * bf16.at("most_utilized_links").at(0).at("bytes").get<double>()));
}

TEST_CASE("with a pipeline, ZeRO-3's gather waits are data-parallel time, not pipeline time") {
  // Expected: the same interleaved pp 4 x tp 2 plan under ZeRO-1 and ZeRO-3. ZeRO-3
  // adds per-unit weight gathers the compute waits for, and which slow the compute beside
  // them; the step grows by them, and the breakdown puts most of that growth under
  // exposed data-parallel communication and the compute's interference (at least 60% of
  // it; the bubble, priced from each micro-batch's time, takes some),
  // while pipeline time stays under a quarter of it (before the gathers were told
  // apart, all of it but the bubble's share was pipeline time). The parts still add up: compute + tp + pp + dp + bubble = step.
  auto run = [](const char* zero) {
    const auto r = ddlsim_cmd({"run", "--network", "analytical", "--strategy", "ptd-p", "--set", "strategies.3.pp=4",
                               "--set", "strategies.3.tp=2", "--set", "strategies.3.global_batch=128", "--set",
                               "strategies.3.schedule=interleaved", "--set", "strategies.3.virtual_stages=2", "--set",
                               std::string("strategies.3.zero=") + zero, "--json"});
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0);
  };
  const auto z1 = run("1"), z3 = run("3");
  const double grown = z3.at("step_time_s").get<double>() - z1.at("step_time_s").get<double>();
  REQUIRE(grown > 0);
  const auto& e1 = z1.at("breakdown").at("exposed_comm_s");
  const auto& e3 = z3.at("breakdown").at("exposed_comm_s");
  const auto interference = [](const nlohmann::json& s) {
    return s.at("breakdown").at("compute_parts_s").at("interference").get<double>();
  };
  CHECK(interference(z3) > interference(z1));
  CHECK(e3.at("dp").get<double>() - e1.at("dp").get<double>() + interference(z3) - interference(z1) > 0.6 * grown);
  CHECK(e3.at("pp").get<double>() < 0.25 * grown);
  const auto& b = z3.at("breakdown");
  CHECK(b.at("compute_s").get<double>() + e3.at("tp").get<double>() + e3.at("pp").get<double>() + e3.at("dp").get<double>() +
            b.at("bubble_s").get<double>() ==
        Approx(z3.at("step_time_s").get<double>()).epsilon(1e-9));
}

TEST_CASE("an output that cannot be written is one line and status 2 before any work, and --trace/--dot must differ") {
  Scratch s;
  auto r = ddlsim_cmd({"run", "--strategy", "ptd-p", "--trace", "/nonexistent-dir/t.json"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --trace: cannot write /nonexistent-dir/t.json: no folder /nonexistent-dir\n");
  r = ddlsim_cmd({"validate", "--csv", "/nonexistent-dir/v.csv"});  // before its replays
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim validate: --csv: cannot write /nonexistent-dir/v.csv: no folder /nonexistent-dir\n");
  r = ddlsim_cmd({"topology", "--preset", "dgx-a100", "--dot", s.dir.string()});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --dot: cannot write " + s.dir.string() + ": it is a directory\n");
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  const std::string f = (s.dir / "x.json").string();
  r = ddlsim_cmd({"run", "--strategy", "ptd-p", "--trace", f, "--dot", f});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --trace and --dot name the same file, " + f + "; give them different names\n");
  CHECK(s.files() == 0);
  // One file however it is written: ./x beside x, or a file a link names, for every pair
  // of outputs (the second would silently replace the first).
  const std::string dot = (s.dir / "." / "x.json").string();
  r = ddlsim_cmd({"run", "--strategy", "ptd-p", "--trace", f, "--dot", dot});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --trace and --dot name the same file, " + f + "; give them different names\n");
  std::ofstream(s.dir / "real.csv") << "x";
  std::filesystem::create_symlink(s.dir / "real.csv", s.dir / "link.csv");
  r = ddlsim_cmd({"run", "--csv", (s.dir / "real.csv").string(), "--links", (s.dir / "link.csv").string()});
  CHECK(r.status == 2);
  CHECK(r.err.find("--csv and --links name the same file") != std::string::npos);
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--csv", f, "--record", dot});
  CHECK(r.status == 2);
  CHECK(r.err.find("--csv and --record name the same file") != std::string::npos);
  CHECK(s.files() == 2);  // real.csv and the link, untouched
  // An output that is one of the command's inputs would destroy it (run s.json --csv
  // s.json wrote the CSV over the scenario): refused, the input kept.
  const std::string scenario = s.write("s.json", kSmall);
  const std::string scenario_text = read_file(scenario);
  r = ddlsim_cmd({"run", scenario, "--csv", (s.dir / "." / "s.json").string()});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --csv: " + (s.dir / "." / "s.json").string() + " is this command's input too (" + scenario +
                     "); writing it would destroy it, so give the output another name\n");
  CHECK(read_file(scenario) == scenario_text);
  // '-' (standard output) where the report goes too is refused.
  r = ddlsim_cmd({"run", scenario, "--csv", "-"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --csv: '-' (standard output) would mix with the report printed there; give a file name\n");
}

TEST_CASE("concurrent transfers get their own trace lanes, so complete events on a track never overlap") {
  // Expected: in kSmall's "overlap" strategy the four bucket all-reduces overlap on the
  // network (each needs 15.7 ms, one starts every 2 ms), so the network needs several
  // lanes ("network #2", ...), and on every track the complete events, sorted by start,
  // each end no later than the next one starts.
  Scratch s;
  const std::string t = (s.dir / "t.json").string();
  REQUIRE(ddlsim_cmd({"run", s.write("s.json", kSmall), "--strategy", "overlap", "--trace", t}).status == 0);
  std::stringstream ss;
  ss << std::ifstream(t).rdbuf();
  const auto doc = nlohmann::json::parse(ss.str());
  std::map<int, std::vector<std::pair<double, double>>> spans;
  bool lane2 = false;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") spans[e.at("tid").get<int>()].emplace_back(e.at("ts").get<double>(),
                                                                      e.at("ts").get<double>() + e.at("dur").get<double>());
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("args").at("name") == "network #2") lane2 = true;
  }
  CHECK(lane2);
  for (auto& [tid, v] : spans) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) {
      INFO("track " << tid);
      CHECK(v[i - 1].second <= v[i].first + 1e-6);
    }
  }
}

TEST_CASE("ddlsim topology describes a preset") {
  // Expected: four DGX H100 (see test_topology for the closed forms): 32 accelerators,
  // 16 switches, 64 NDR cables, 500 GB/s injection, 4 hops, 800 GB/s bisection.
  auto r = ddlsim_cmd({"topology", "--preset", "dgx-h100", "--nodes", "4", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("nodes_by_kind").at("accelerator") == 32);
  CHECK(j.at("nodes_by_kind").at("switch") == 16);
  CHECK(j.at("links_by_kind").at("ib-ndr").at("cables") == 64);
  CHECK(j.at("injection_min_gbytes_per_s").get<double>() == Approx(500));
  CHECK(j.at("diameter_hops") == 4);
  CHECK(j.at("bisection_gbytes_per_s").get<double>() == Approx(800));
  r = ddlsim_cmd({"topology", "--preset", "dgx-h100", "--nodes", "4"});
  CHECK(r.status == 0);
  CHECK(r.out.find("\nnodes:      32 accelerators, 16 switches\n") != std::string::npos);
  CHECK(r.out.find("\n  ib-ndr               64 cables x 50 GB/s per direction\n") != std::string::npos);
  // An asymmetric cable (25 GB/s one way, 12.5 back) shows both rates (it showed 25 only).
  Scratch s;
  const std::string asym = s.write("a.json", R"({"nodes": [{"name": "g0", "kind": "accelerator", "model": "h100-sxm"},
    {"name": "g1", "kind": "accelerator", "model": "h100-sxm"}],
    "links": [{"a": "g0", "b": "g1", "gbytes_per_s": 25, "reverse_gbytes_per_s": 12.5}]})");
  r = ddlsim_cmd({"topology", asym});
  CHECK(r.out.find("\n  custom                1 cable  x 12.5 to 25 GB/s per direction\n") != std::string::npos);
  const auto a = nlohmann::json::parse(ddlsim_cmd({"topology", asym, "--json"}).out).at("links_by_kind").at("custom");
  CHECK(a.at("min_gbytes_per_s").get<double>() == 12.5);
  CHECK(a.at("max_gbytes_per_s").get<double>() == 25.0);
  // One accelerator: no links, no halves to cut (it printed 'cut: )').
  r = ddlsim_cmd({"topology", "--preset", "single-gpu-ethernet"});
  CHECK(r.out.find("\nlinks:      none\n") != std::string::npos);
  CHECK(r.out.find("\nbisection:  - (one accelerator: no halves to cut)\n") != std::string::npos);
  r = ddlsim_cmd({"topology", "--list"});
  CHECK(r.out.find("tpu-v4-pod") != std::string::npos);
  // --list lists the presets and the catalog; what else is given would be ignored (it exited 0).
  for (const auto& [extra, what] : std::vector<std::pair<std::string, std::string>>{
           {"--json", "--json"}, {"--preset", "--preset"}, {"--nodes", "--nodes"}}) {
    std::vector<std::string> a{"topology", "--list", extra};
    if (extra != "--json") a.push_back(extra == "--preset" ? "dgx-h100" : "2");
    r = ddlsim_cmd(a);
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim topology: --list: lists the presets and the catalog as text; not with " + what + "\n");
  }
}

TEST_CASE("ddlsim topology: bad input is one line and status 2") {
  // Expected: the exact line for each mistake.
  auto r = ddlsim_cmd({"topology", "--preset", "tpu-v4-pod", "--dims", "4xx4"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --dims: expected sizes from 1 to 4096 joined by 'x', like 4x4x8, got '4xx4'\n");
  r = ddlsim_cmd({"topology", "--preset", "dgx-h100", "--nic", "ib-ndrr"});
  CHECK(r.status == 2);
  CHECK(r.err.rfind("ddlsim topology: unknown link 'ib-ndrr' (did you mean 'ib-ndr'?)", 0) == 0);
  r = ddlsim_cmd({"topology", "--preset", "dgx-a100", "--nodes", "2", "--nics-per-node", "3"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --nics-per-node: expected 1, 2, 4 or 8 (NICs shared evenly by the 8 GPUs), got 3\n");
  r = ddlsim_cmd({"topology", "--preset", "tpu-v4-pod", "--nics-per-node", "4"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--nics-per-node: a TPU preset has no NICs") != std::string::npos);
  r = ddlsim_cmd({"topology"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --preset: required, or a topology file (see 'ddlsim topology --list' for the presets)\n");
  Scratch s;
  r = ddlsim_cmd({"topology", "--preset", "dgx-h100", "--catalog", s.write("c.json", R"({"links": {"ib-ndr": {"gbytes_per_s": 0}}})")});
  CHECK(r.status == 2);
  CHECK(r.err.find("links.ib-ndr.gbytes_per_s: expected a number from 1e-06 to 1e+06, got 0") != std::string::npos);
}

TEST_CASE("a scenario's catalog patches the hardware its cluster is built from") {
  // Expected: one DGX A100 joins its 8 GPUs by 12 NVLink 3 links of 25 GB/s each at the
  // catalog's 0.8 efficiency and ring overhead 0.195 (a phase of 8 ranks takes 7.195
  // steps' time), so a 1 GiB ring all-reduce reaches a bus bandwidth of
  // 12 x 25 x 0.8 / (1 + 0.195 / 7) = 233.5 GB/s less its latency (14 steps of 3.4 us
  // beside 4 ms: within 1.5%); the scenario's "catalog" doubling the link to 50 GB/s
  // doubles it to 467; --catalog FILE patches over the
  // scenario's (back to 25: 233.5). The patch written in place and the same patch as a
  // file beside the scenario give byte-identical runs; a patch restating the built-in
  // 25 GB/s changes nothing; a slower NVLink makes the tensor-parallel plan slower.
  Scratch s;
  const std::string scenario = R"({"name": "x", "cluster": {"preset": "dgx-a100", "nodes": 1},
    "workload": {"model": "megatron-1.7b"},
    "strategies": [{"name": "tp8", "tp": 8, "global_batch": 8}])";
  const std::string plain = s.write("plain.json", scenario + "}");
  std::filesystem::create_directories(s.dir / "sub");
  s.write("sub/nvlink.json", R"({"links": {"nvlink3": {"gbytes_per_s": 50}}})");
  const std::string by_file = s.write("sub/file.json", scenario + R"(, "catalog": "nvlink.json"})");
  const std::string in_place = s.write("in_place.json", scenario + R"(, "catalog": {"links": {"nvlink3": {"gbytes_per_s": 50}}}})");
  const std::string restore = s.write("restore.json", R"({"links": {"nvlink3": {"gbytes_per_s": 25}}})");
  auto busbw = [](const std::vector<std::string>& args) {
    auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("results").at(0).at("busbw_gbytes_per_s").get<double>();
  };
  const std::vector<std::string> ring{"-b", "1G", "-e", "1G", "--algorithm", "ring", "--json"};
  auto collective = [&](std::vector<std::string> head) {
    head.insert(head.begin(), "collective");
    head.insert(head.end(), ring.begin(), ring.end());
    return head;
  };
  const double overhead = 1.0 + 0.195 / 7.0;
  CHECK(busbw(collective({plain})) == Approx(240 / overhead).epsilon(0.015));
  CHECK(busbw(collective({plain})) < 240 / overhead);
  CHECK(busbw(collective({by_file})) == Approx(480 / overhead).epsilon(0.015));
  CHECK(busbw(collective({in_place})) == Approx(480 / overhead).epsilon(0.015));
  CHECK(busbw(collective({by_file, "--catalog", restore})) == Approx(busbw(collective({plain}))));

  const auto base = ddlsim_cmd({"run", plain, "--json"});
  REQUIRE(base.status == 0);
  const auto fast = ddlsim_cmd({"run", in_place, "--json"});
  REQUIRE(fast.status == 0);
  const auto fast_file = ddlsim_cmd({"run", by_file, "--json"});
  REQUIRE(fast_file.status == 0);
  CHECK(fast.out == fast_file.out);
  const auto same = ddlsim_cmd({"run", plain, "--json", "--set", "catalog.links.nvlink3.gbytes_per_s=25"});
  REQUIRE(same.status == 0);
  CHECK(same.out == base.out);
  const auto slow = ddlsim_cmd({"run", plain, "--json", "--set", "catalog.links.nvlink3.gbytes_per_s=12.5"});
  REQUIRE(slow.status == 0);
  auto step = [](const Run& r) { return nlohmann::json::parse(r.out).at("strategies").at(0).at("step_time_s").get<double>(); };
  CHECK(step(fast) < step(base));
  CHECK(step(base) < step(slow));

  // Mistakes name the field; a uniform cluster has no catalog to patch.
  const BadInputs bad{
      {{"run", plain, "--set", "catalog.links.nvlink3.gbytes_per_s=-1"},
       "ddlsim run: catalog.links.nvlink3.gbytes_per_s: expected a number from 1e-06 to 1e+06, got -1\n"},
      {{"run", plain, "--set", "catalog.link.x=1"}, "ddlsim run: catalog.link: unknown key (did you mean 'links'?)\n"},
      {{"run", plain, "--set", "catalog=5"},
       "ddlsim run: catalog: expected an object of \"accelerators\" and \"links\" to add or patch, or the name of such a "
       "JSON file, got number\n"},
      {{"run", plain, "--set", "catalog.links.mine.gbytes_per_s=5"}, "ddlsim run: catalog.links.mine.name: missing (a required field)\n"},
      {{"run", std::string(DDLSIM_SOURCE_DIR) + "/scenarios/synthetic-data-parallel.json", "--set", "catalog.links.nvlink3.gbytes_per_s=5"},
       "ddlsim run: catalog: patches the hardware catalog that preset clusters are built from; a uniform cluster gives its "
       "figures itself (cluster.device_tflops, ...)\n"},
  };
  expect_exact_errors(bad);
  // A file's name is relative to the scenario's folder.
  const auto r = ddlsim_cmd({"run", plain, "--set", "catalog=nofile.json"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: catalog: cannot read file " + (s.dir / "nofile.json").string() + ": no such file or not readable\n");
}

TEST_CASE("a scenario's calibration prices its operators") {
  // Expected: a calibration of one bf16 GEMM measured at 93.6 TFLOP/s (30% of the
  // A100's 312) with no launch time prices every GEMM at that rate whatever its shape
  // (the nearest measured shape is the only one) and adds no GEMM latency, so each linear
  // layer of the scenario's model takes its FLOPs / 93.6e12 s, forward and backward
  // (to 1e-9), in 'ddlsim workload' on the scenario. The replay prices with it too: the
  // default scenario's step is slower than uncalibrated (its GEMMs reach well over 30%)
  // and faster with a point at 90% (280.8). Inline and file forms replay identically;
  // --calibration on the workload replaces the scenario's; mistakes name the field.
  Scratch s;
  auto doc = nlohmann::json::parse(read_file(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/default.json"));
  auto calibration = [](double tflops) {
    return nlohmann::json{{"device", "a100-80gb"},
                          {"gemm", nlohmann::json::array({nlohmann::json{
                                       {"m", 4096}, {"n", 4096}, {"k", 4096}, {"dtype", "bf16"}, {"tflops", tflops}}})},
                          {"launch_us", 0}};
  };
  const std::string plain = s.write("plain.json", doc.dump());
  doc["calibration"] = calibration(93.6);
  const std::string slow = s.write("slow.json", doc.dump());
  s.write("fast-cal.json", calibration(280.8).dump());
  doc["calibration"] = "fast-cal.json";
  const std::string fast_file = s.write("fast.json", doc.dump());
  doc["calibration"] = calibration(280.8);
  const std::string fast_inline = s.write("fast-inline.json", doc.dump());

  auto w = ddlsim_cmd({"workload", slow, "--json"});
  REQUIRE(w.status == 0);
  int linears = 0;
  const auto report = nlohmann::json::parse(w.out);
  for (const auto& op : report.at("operators")) {
    if (op.at("kind") != "linear") continue;
    ++linears;
    CAPTURE(op.at("operator"));
    CHECK(op.at("forward_time_s").get<double>() == Approx(op.at("forward_flops").get<double>() / 93.6e12).epsilon(1e-9));
    CHECK(op.at("backward_time_s").get<double>() == Approx(op.at("backward_flops").get<double>() / 93.6e12).epsilon(1e-9));
  }
  CHECK(linears == 5);  // qkv, proj, fc1, fc2 and the output layer
  const auto replaced = ddlsim_cmd({"workload", slow, "--json", "--calibration", (s.dir / "fast-cal.json").string()});
  const auto fast_w = ddlsim_cmd({"workload", fast_file, "--json"});
  REQUIRE(replaced.status == 0);
  CHECK(nlohmann::json::parse(replaced.out).at("operators") == nlohmann::json::parse(fast_w.out).at("operators"));

  auto steps = [](const std::string& file) {
    const auto r = ddlsim_cmd({"run", file, "--json"});
    REQUIRE(r.status == 0);
    std::vector<double> out;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& t : j.at("strategies")) out.push_back(t.at("step_time_s").get<double>());
    return out;
  };
  const auto base = steps(plain), low = steps(slow), high = steps(fast_file);
  REQUIRE(base.size() == 4);
  for (std::size_t i = 0; i < base.size(); ++i) {
    CHECK(low[i] > base[i]);
    CHECK(high[i] < base[i]);
  }
  CHECK(ddlsim_cmd({"run", fast_file, "--json"}).out == ddlsim_cmd({"run", fast_inline, "--json"}).out);

  const BadInputs bad{
      {{"run", plain, "--set", "calibration.device=h100-sxm"},
       "ddlsim run: calibration.device: the file calibrates 'h100-sxm', not 'a100-80gb'\n"},
      {{"run", slow, "--set", "calibration.gemm.0.tflops=-1"},
       "ddlsim run: calibration.gemm.0.tflops: expected a number from 1e-06 to 1e+06, got -1\n"},
      {{"run", plain, "--set", "calibration=3"},
       "ddlsim run: calibration: expected a calibration object (\"device\", \"gemm\", ...), or the name of such a JSON file, "
       "got number\n"},
  };
  expect_exact_errors(bad);
}

TEST_CASE("a training scenario runs on an explicit topology file") {
  // Expected: 'topology --export' writes a preset's cluster as an explicit file that
  // reads back as the same cluster, so every strategy of the default scenario (4 DGX
  // A100) and of the DGX-1 SBP scenario replays to byte-identical JSON on
  // {"file": ...} as on the preset, on both network models, but for the cluster's title
  // (the file's name as given, relative to the scenario's folder). A file with two
  // accelerator models is refused for training (one model's compute prices every
  // device), as are preset options beside a file.
  Scratch s;
  std::filesystem::create_directories(s.dir / "sub");
  for (const auto& [scenario_file, preset, nodes] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"default.json", "dgx-a100", "4"},
                                                                     {"autoddl-vgg16-dgx1.json", "dgx1-v100", "2"}}) {
    CAPTURE(scenario_file);
    const std::string original = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/" + scenario_file;
    auto doc = nlohmann::json::parse(read_file(original));
    REQUIRE(doc.at("cluster") == nlohmann::json({{"preset", preset}, {"nodes", std::stoi(nodes)}}));
    const std::string topo = (s.dir / "sub" / "topo.json").string();
    REQUIRE(ddlsim_cmd({"topology", "--preset", preset, "--nodes", nodes, "--export", topo}).status == 0);
    doc["cluster"] = {{"file", "topo.json"}};
    const std::string on_file = s.write("sub/scenario.json", doc.dump());
    for (const char* network : {"flow", "analytical"}) {
      CAPTURE(network);
      const auto a = ddlsim_cmd({"run", original, "--json", "--network", network});
      const auto b = ddlsim_cmd({"run", on_file, "--json", "--network", network});
      REQUIRE(a.status == 0);
      REQUIRE(b.status == 0);
      auto ja = nlohmann::json::parse(a.out);
      auto jb = nlohmann::json::parse(b.out);
      CHECK(jb.at("cluster") == "topo.json");
      ja.erase("cluster");
      jb.erase("cluster");
      CHECK(ja.dump() == jb.dump());
    }
  }
  const std::string mixed = s.write("mixed.json", R"({"nodes": [
    {"name": "a", "kind": "accelerator", "model": "a100-80gb"},
    {"name": "b", "kind": "accelerator", "model": "h100-sxm"}],
    "links": [{"a": "a", "b": "b", "link": "nvlink3"}]})");
  const std::string head = R"({"name": "x", "workload": {"model": "megatron-1.7b"},
    "strategies": [{"name": "dp", "global_batch": 8}], "cluster": )";
  const BadInputs bad{
      {{"run", s.write("m.json", head + R"({"file": "mixed.json"}})")},
       "ddlsim run: cluster: the strategies need one accelerator model throughout, got a100-80gb and h100-sxm (b)\n"},
      {{"run", s.write("n.json", head + R"({"file": "mixed.json", "nodes": 2}})")},
       "ddlsim run: cluster.nodes: applies to presets, not to a topology file\n"},
      {{"run", s.write("p.json", head + R"({"file": "mixed.json", "preset": "dgx-a100"}})")},
       "ddlsim run: cluster: give either \"preset\" or \"file\" (an explicit topology), not both\n"},
      {{"run", s.write("e.json", head + R"({"file": ""}})")}, "ddlsim run: cluster.file: expected a file name, got \"\"\n"},
  };
  expect_exact_errors(bad);
  // A task graph takes mixed models: it gives each compute task's time itself.
  const auto graph = ddlsim_cmd({"run", s.write("g.json", R"({"name": "g", "cluster": {"file": "mixed.json"},
    "tasks": [{"name": "t", "kind": "transfer", "from": 0, "to": 1, "bytes": 1000}]})")});
  CHECK(graph.status == 0);
  CHECK(graph.out.find("cluster:    mixed.json (2 accelerators)") != std::string::npos);
}

TEST_CASE("ddlsim topology reads a scenario's preset cluster") {
  // Expected: a scenario whose cluster is {"preset": "tpu-v4-pod", "dims": [4, 4, 8]}
  // describes 128 chips with the 1440 GB/s bisection of test_topology; ddlsim run refuses
  // the synthetic workload on it with one line (that model runs on a uniform cluster); a
  // uniform cluster is not a graph to describe; a bad dims entry names its path.
  Scratch s;
  const std::string f = s.write("s.json", R"({"name": "x", "cluster": {"preset": "tpu-v4-pod", "dims": [4, 4, 8]},
    "workload": {"model": "synthetic", "layers": 1, "forward_gflop_per_layer": 1, "gradient_mib_per_layer": 1},
    "strategies": [{"name": "dp"}]})");
  auto r = ddlsim_cmd({"topology", f, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("nodes_by_kind").at("accelerator") == 128);
  CHECK(j.at("bisection_gbytes_per_s").get<double>() == Approx(1440));
  r = ddlsim_cmd({"run", f});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: workload.model: the synthetic model runs on a uniform cluster (cluster.devices, ...); "
                 "on a preset cluster, name a transformer (see 'ddlsim workload --list')\n");
  r = ddlsim_cmd({"topology", s.write("u.json", kSmall)});
  CHECK(r.status == 2);
  CHECK(r.err.find("cluster: a uniform cluster (devices, device_tflops, ...) is not a graph") != std::string::npos);
  r = ddlsim_cmd({"topology", s.write("d.json", R"({"cluster": {"preset": "tpu-v4-pod", "dims": [4, 0]}})")});
  CHECK(r.status == 2);
  CHECK(r.err.find("d.json: cluster.dims.1: expected up to 4 sizes from 1 to 4096, got 0") != std::string::npos);
}

TEST_CASE("ddlsim topology writes dot and explicit files, and refuses options a preset does not take") {
  // Expected: --dot writes an undirected GraphViz graph with one line per cable; --export
  // writes a file that `ddlsim topology FILE` describes identically; --dims on a GPU
  // preset and --pods with a file are one-line errors.
  Scratch s;
  const std::string dot = (s.dir / "c.dot").string(), exported = (s.dir / "c.json").string();
  auto r = ddlsim_cmd({"topology", "--preset", "tpu-v4-pod", "--dims", "2x2x4", "--pods", "2", "--dot", dot, "--export",
                       exported, "--json"});
  REQUIRE(r.status == 0);
  std::stringstream d;
  d << std::ifstream(dot).rdbuf();
  CHECK(d.str().rfind("graph cluster {", 0) == 0);
  std::size_t cables = 0;
  for (std::size_t at = d.str().find(" -- "); at != std::string::npos; at = d.str().find(" -- ", at + 1)) ++cables;
  const auto j = nlohmann::json::parse(r.out);
  std::size_t expected = 0;
  for (const auto& [kind, g] : j.at("links_by_kind").items()) expected += g.at("cables").get<std::size_t>();
  CHECK(cables == expected);
  auto again = ddlsim_cmd({"topology", exported, "--json"});
  REQUIRE(again.status == 0);
  auto k = nlohmann::json::parse(again.out);
  CHECK(k.at("file") == exported);
  k.erase("file");
  auto jj = j;
  jj.erase("preset");
  CHECK(k == jj);
  r = ddlsim_cmd({"topology", "--preset", "dgx-h100", "--dims", "4x4"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --dims: only TPU presets have a shape (GPU presets take a server count)\n");
  r = ddlsim_cmd({"topology", exported, "--pods", "2"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim topology: --pods: applies to presets, not to a topology file\n");
}

TEST_CASE("ddlsim collective prints nccl-tests columns for every size") {
  // Expected: sizes 1 MiB, 4 MiB, 16 MiB (factor 4); busbw = algbw x 2(n-1)/n for an
  // all-reduce over 8 ranks; algbw = size / time; with 'all', one row per algorithm that
  // runs (torus skipped on a switch, with its reason).
  auto r = ddlsim_cmd({"collective", "--preset", "dgx-h100", "-b", "1M", "-e", "16M", "-f", "4", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("ranks") == 8);
  const auto& rows = j.at("results");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].at("bytes") == 1048576.0);
  CHECK(rows[2].at("bytes") == 16777216.0);
  for (const auto& row : rows) {
    const double t = row.at("time_us").get<double>() * 1e-6;
    CHECK(row.at("algbw_gbytes_per_s").get<double>() == Approx(row.at("bytes").get<double>() / t / 1e9));
    CHECK(row.at("busbw_gbytes_per_s").get<double>() == Approx(row.at("algbw_gbytes_per_s").get<double>() * 14.0 / 8.0));
  }
  r = ddlsim_cmd({"collective", "--preset", "dgx-h100", "-b", "64K", "-e", "64K", "--algorithm", "all"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("# skipped torus: torus needs the group to be one whole torus") != std::string::npos);
  for (const char* a : {"ring", "tree", "halving-doubling", "direct"}) CHECK(r.out.find(a) != std::string::npos);
  // The same request twice gives the same bytes.
  CHECK(ddlsim_cmd({"collective", "--preset", "dgx-h100", "-b", "64K", "-e", "64K", "--algorithm", "all"}).out == r.out);
  // Each row carries the selector's estimate; 'auto' runs the all-reduce candidate (ring,
  // tree, hierarchical, torus) whose estimate is the smallest, on 2 servers at 8 B, 1 MiB
  // and 1 GiB.
  for (const char* size : {"8", "1M", "1G"}) {
    INFO(size);
    const std::vector<std::string> common{"collective", "--preset", "dgx-h100", "--nodes", "2", "-b", size, "-e", size, "--json"};
    auto all = common;
    all.insert(all.end(), {"--algorithm", "all"});
    const auto every = nlohmann::json::parse(ddlsim_cmd(all).out).at("results");
    const auto chosen = nlohmann::json::parse(ddlsim_cmd(common).out).at("results").at(0);
    double least = 1e300;
    for (const auto& row : every) {
      const std::string a = row.at("algorithm");
      CHECK(row.at("estimate_us").get<double>() > 0.0);
      if (a == "ring" || a == "tree" || a == "hierarchical" || a == "torus") least = std::min(least, row.at("estimate_us").get<double>());
    }
    CHECK(chosen.at("estimate_us").get<double>() == Approx(least));
  }
}

TEST_CASE("ddlsim collective: a rooted operation's header names its root, send-recv its two ranks") {
  // Expected: send-recv from position 0 to 9 of 2 DGX A100 is node0.gpu0 to node1.gpu1,
  // two of the 16 ranks (the header said "over 16 ranks"); a broadcast from position 3
  // names node0.gpu3.
  const auto first_line = [](const std::vector<std::string>& args) {
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return r.out.substr(0, r.out.find('\n'));
  };
  CHECK(first_line({"collective", "--preset", "dgx-a100", "--nodes", "2", "--op", "send-recv", "--peer", "9", "-b", "1M", "-e", "1M"}) ==
        "# ddlsim collective: send-recv from node0.gpu0 (position 0) to node1.gpu1 (position 9), 2 of 16 ranks of dgx-a100, "
        "2 nodes, network flow, algorithm auto");
  CHECK(first_line({"collective", "--preset", "dgx-a100", "--nodes", "2", "--op", "broadcast", "--root", "3", "-b", "1M", "-e", "1M"}) ==
        "# ddlsim collective: broadcast over 16 ranks from node0.gpu3 (position 3) of dgx-a100, 2 nodes, network flow, "
        "algorithm auto");
}

TEST_CASE("ddlsim collective on a scenario file runs the scenario's network model unless --network says otherwise") {
  // Expected: a scenario with simulation.network "analytical" times its collective on the
  // analytical model (it took flow, the option's default); --network flow overrides it.
  Scratch s;
  const std::string f = s.write("t.json", R"({"name": "t", "cluster": {"preset": "dgx-a100", "nodes": 2},
    "workload": {"model": "megatron-1.7b"}, "strategies": [{"name": "dp", "global_batch": 64, "micro_batch": 4}],
    "simulation": {"network": "analytical"}})");
  const auto r = ddlsim_cmd({"collective", f, "-b", "1M", "-e", "1M", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("network") == "analytical");
  const auto o = ddlsim_cmd({"collective", f, "-b", "1M", "-e", "1M", "--json", "--network", "flow"});
  REQUIRE(o.status == 0);
  CHECK(nlohmann::json::parse(o.out).at("network") == "flow");
}

TEST_CASE("ddlsim collective: auto with --channels prices rings and trees with that many") {
  // Expected on 4 DGX A100 servers (32 ranks), a 32 MiB all-reduce: a ring of 2 channels
  // crosses servers on 2 of each server's 8 HDR NICs (about 2 x 24 GB/s), over a
  // millisecond, while the hierarchical all-reduce uses all 8 (about half a millisecond);
  // auto with --channels 2 runs the candidate with the smallest estimate at 2 channels,
  // the hierarchical one (it took the 2-channel ring, priced with 8, about 3x slower);
  // without --channels, the ring of 8 channels.
  const std::vector<std::string> common{"collective", "--preset", "dgx-a100", "--nodes", "4", "-b", "32M", "-e", "32M", "--json"};
  auto all = common;
  all.insert(all.end(), {"--algorithm", "all", "--channels", "2"});
  const auto every = nlohmann::json::parse(ddlsim_cmd(all).out).at("results");
  double least = 1e300, ring = 0;
  for (const auto& row : every) {
    const std::string a = row.at("algorithm");
    if (a == "ring") ring = row.at("time_us").get<double>();
    if (a == "ring" || a == "tree" || a == "hierarchical") least = std::min(least, row.at("estimate_us").get<double>());
  }
  CHECK(ring > 1000.0);
  auto two = common;
  two.insert(two.end(), {"--channels", "2"});
  const auto chosen = nlohmann::json::parse(ddlsim_cmd(two).out).at("results").at(0);
  CHECK(chosen.at("algorithm") == "hierarchical");
  CHECK(chosen.at("estimate_us").get<double>() == Approx(least));
  CHECK(chosen.at("time_us").get<double>() < 0.5 * ring);
  const auto plain = nlohmann::json::parse(ddlsim_cmd(common).out).at("results").at(0);
  CHECK(plain.at("algorithm") == "ring");
  CHECK(plain.at("channels") == 8);
}

TEST_CASE("ddlsim collective: --chunks reaches the estimate as it reaches the replay") {
  // Expected on 2 DGX H100 servers (16 ranks), a 64 MiB collective:
  // - the hierarchical all-to-all in 1 chunk waits for its first phase before its
  //   second, in 8 (automatic) the second forwards pieces as they come: both the replay
  //   and the estimate are slower with 1 than automatic, and the estimate stays within
  //   10% of the replay either way (before, --chunks 1 kept the automatic estimate);
  // - auto on an all-reduce picks the ring; with --chunks 2 each of its 30 steps pays
  //   its latency twice: replay and estimate both longer than with --chunks 1, the
  //   estimate within 10% of the replay.
  const std::vector<std::string> common{"collective", "--preset", "dgx-h100", "--nodes", "2", "-b", "64M", "-e", "64M", "--json"};
  const auto row = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("results").at(0);
  };
  const auto one = row({"--op", "all-to-all", "--algorithm", "hierarchical", "--chunks", "1"});
  const auto eight = row({"--op", "all-to-all", "--algorithm", "hierarchical"});
  CHECK(eight.at("chunks") == 8);
  CHECK(one.at("time_us").get<double>() > eight.at("time_us").get<double>());
  CHECK(one.at("estimate_us").get<double>() > eight.at("estimate_us").get<double>());
  for (const auto* r : {&one, &eight}) {
    CHECK(r->at("estimate_us").get<double>() == Approx(r->at("time_us").get<double>()).epsilon(0.10));
  }
  const auto whole = row({"--op", "all-reduce", "--chunks", "1"}), halves = row({"--op", "all-reduce", "--chunks", "2"});
  CHECK(halves.at("algorithm") == "ring");
  CHECK(halves.at("time_us").get<double>() > whole.at("time_us").get<double>());
  CHECK(halves.at("estimate_us").get<double>() > whole.at("estimate_us").get<double>());
  CHECK(halves.at("estimate_us").get<double>() == Approx(halves.at("time_us").get<double>()).epsilon(0.10));
}

TEST_CASE("ddlsim collective: --protocol runs the protocol named, auto the cheaper, and each row says which") {
  // Expected on 2 DGX H100 servers (16 ranks), all-reduce: at 128 KiB a tree's
  // low-latency protocol is cheaper (its latencies, about 30 us across the two servers,
  // and its rate of 20 GB/s bus bandwidth across NICs on all 16 channels, 12.3 us for
  // 15/8 x 128 KiB, against the bandwidth protocol's 78 us of latency): auto runs LL, as
  // --protocol ll does, and --protocol simple is slower; so does a ring at 16 KiB (its
  // 16 KiB fills one channel of 4 KiB x 16 ranks: 24.6 us of rate beside its LL
  // latencies, against 30 steps of the bandwidth protocol's), while at 128 KiB a ring
  // fills 2 of the 16 channels, 98 us of rate, and runs Simple; at 4 MiB LL's rate alone
  // (368 us) loses, auto runs Simple and --protocol ll is slower. Each row's estimate is
  // its protocol's.
  const std::vector<std::string> common{"collective", "--preset", "dgx-h100", "--nodes", "2", "--json"};
  const auto row = [&](const std::string& size, std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"-b", size, "-e", size});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("results").at(0);
  };
  for (const std::string algorithm : {"auto", "tree", "ring"}) {
    INFO(algorithm);
    const std::string size = algorithm == "ring" ? "16K" : "128K";
    const auto small = row(size, {"--algorithm", algorithm}), small_ll = row(size, {"--algorithm", algorithm, "--protocol", "ll"}),
               small_simple = row(size, {"--algorithm", algorithm, "--protocol", "simple"});
    CHECK(small.at("protocol") == "LL");
    CHECK(small_ll.at("protocol") == "LL");
    CHECK(small_simple.at("protocol") == "Simple");
    CHECK(small.at("time_us") == small_ll.at("time_us"));
    CHECK(small_simple.at("time_us").get<double>() > small.at("time_us").get<double>());
    CHECK(small_simple.at("estimate_us").get<double>() > small.at("estimate_us").get<double>());
    if (algorithm == "ring") CHECK(row("128K", {"--algorithm", algorithm}).at("protocol") == "Simple");  // 2 of 16 channels
    const auto big = row("4M", {"--algorithm", algorithm}), big_ll = row("4M", {"--algorithm", algorithm, "--protocol", "ll"});
    CHECK(big.at("protocol") == "Simple");
    CHECK(big_ll.at("protocol") == "LL");
    CHECK(big_ll.at("time_us").get<double>() > big.at("time_us").get<double>() + 300.0);
    CHECK(big_ll.at("estimate_us").get<double>() > big.at("estimate_us").get<double>() + 300.0);
  }
  // The run's protocol option in the JSON; a rooted operation from another root, as named.
  for (const std::string p : {"auto", "ll"}) {
    const auto r = ddlsim_cmd({"collective", "--preset", "dgx-h100", "--nodes", "2", "-b", "64K", "-e", "64K", "--json", "--protocol", p});
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out).at("protocol") == p);
  }
  const auto rooted = [&](const std::string& p) {
    const auto r = ddlsim_cmd({"collective", "--preset", "dgx-h100", "--nodes", "2", "-b", "1M", "-e", "1M", "--json", "--op",
                               "broadcast", "--root", "9", "--protocol", p});
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("results").at(0);
  };
  const auto bcast_ll = rooted("ll"), bcast_simple = rooted("simple");
  CHECK(bcast_ll.at("protocol") == "LL");
  CHECK(bcast_simple.at("protocol") == "Simple");
  CHECK(bcast_ll.at("time_us").get<double>() != bcast_simple.at("time_us").get<double>());
  const auto text = ddlsim_cmd({"collective", "--preset", "dgx-h100", "--nodes", "2", "-b", "128K", "-e", "4M", "-f", "32", "--protocol", "simple"});
  REQUIRE(text.status == 0);
  CHECK(text.out.find("algorithm auto, protocol simple\n") != std::string::npos);
  CHECK(text.out.find("  protocol  channels") != std::string::npos);
  CHECK(text.out.find(" LL ") == std::string::npos);
}

TEST_CASE("ddlsim collective: on a TPU slice without wraparound auto prices the ring and the torus as they replay") {
  // Expected on a 2x2x4 TPU v4 slice (a mesh: no dimension a multiple of 4 in all three,
  // so no wraparound; ICI hops of about 1 us), a 1 KiB all-reduce: the ring runs along
  // the slice's direct ring, 2 (16 - 1) = 30 one-hop steps, about 30 us; the torus
  // algorithm's rings each close back along their whole line, so its 2 x 3 phases of 3
  // steps each wait for a 3-hop closing transfer, about 6 x 3 x 3 = 54 us. Each estimate
  // equals its replay within 1%, and auto takes the ring (it took the torus while the
  // torus was priced at one hop per step and the ring at its rank order's 5-hop closing
  // hop).
  const auto r = ddlsim_cmd({"collective", "--preset", "tpu-v4-pod", "--dims", "2x2x4", "-b", "1K", "-e", "1K", "--network",
                             "analytical", "--algorithm", "all", "--json"});
  REQUIRE(r.status == 0);
  std::map<std::string, std::pair<double, double>> got;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& x : doc.at("results")) {
    got[x.at("algorithm").get<std::string>()] = {x.at("time_us").get<double>(), x.at("estimate_us").get<double>()};
  }
  CHECK(got.at("ring").first == Approx(30).epsilon(0.01));
  CHECK(got.at("ring").second == Approx(got.at("ring").first).epsilon(0.01));
  CHECK(got.at("torus").first == Approx(54).epsilon(0.01));
  CHECK(got.at("torus").second == Approx(got.at("torus").first).epsilon(0.01));
  const auto a = ddlsim_cmd({"collective", "--preset", "tpu-v4-pod", "--dims", "2x2x4", "-b", "1K", "-e", "1K", "--network",
                             "analytical", "--json"});
  REQUIRE(a.status == 0);
  CHECK(nlohmann::json::parse(a.out).at("results").at(0).at("algorithm") == "ring");
}

TEST_CASE("ddlsim collective --rings streamed replays a 10,240-GPU ring that step by step exceeds the flow model") {
  // Expected: alone, a ring is paced by its slowest link whether replayed step by step or
  // streamed (one transfer per rank and phase), so on 2 DGX H100 servers both give the
  // same time (to 1e-9) for 1 MiB and 1 GiB; on 1,280 servers a 1 GiB ring all-reduce
  // step by step needs 2(p-1) p x 8 channels = 1,677,557,760 transfers, over the flow
  // model's 200 M limit (refused, naming --rings streamed), and streamed (p x 8 = 81,920
  // transfers) it takes the selector's closed form 2(p-1) (latency + S / (p x channels x
  // bandwidth)) to 1e-6, as nothing else shares its links.
  for (const char* size : {"1M", "1G"}) {
    INFO(size);
    std::vector<std::string> args{"collective", "--preset", "dgx-h100", "--nodes", "2", "--algorithm", "ring", "-b", size, "-e", size, "--json"};
    const auto steps = ddlsim_cmd(args);
    args.insert(args.end(), {"--rings", "streamed"});
    const auto streamed = ddlsim_cmd(args);
    REQUIRE(steps.status == 0);
    REQUIRE(streamed.status == 0);
    CHECK(nlohmann::json::parse(streamed.out).at("rings") == "streamed");
    CHECK(nlohmann::json::parse(streamed.out).at("results").at(0).at("time_us").get<double>() ==
          Approx(nlohmann::json::parse(steps.out).at("results").at(0).at("time_us").get<double>()).epsilon(1e-9));
  }
  std::vector<std::string> big{"collective", "--preset", "dgx-h100", "--nodes", "1280", "--algorithm", "ring", "-b", "1G", "-e", "1G", "--json"};
  const auto refused = ddlsim_cmd(big);
  CHECK(refused.status == 2);
  CHECK(refused.err == "ddlsim collective: the ring all-reduce over 10240 ranks needs 1677557760 transfers, more than the flow "
                       "model's limit of 200000000; use --network analytical, fewer --chunks or --channels, or --rings streamed\n");
  big.insert(big.end(), {"--rings", "streamed"});
  const auto r = ddlsim_cmd(big);
  REQUIRE(r.status == 0);
  const auto row = nlohmann::json::parse(r.out).at("results").at(0);
  CHECK(row.at("channels") == 8);
  CHECK(row.at("time_us").get<double>() == Approx(row.at("estimate_us").get<double>()).epsilon(1e-6));
}

TEST_CASE("ddlsim collective: bad input is one line and status 2") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--op", "al-reduce"}, "--op: unknown operation 'al-reduce' (did you mean 'all-reduce'?)"},
      {{"--algorithm", "rign"}, "--algorithm: unknown algorithm 'rign' (did you mean 'ring'?)"},
      {{"--algorithm", "torus"}, "--algorithm: torus needs the group to be one whole torus of the cluster, in its order"},
      {{"--ranks", "0-9"}, "--ranks: rank 9 does not exist (the cluster has 8 accelerators) in '0-9' (expected 'all' or a list like 0-7,16,18)"},
      {{"--ranks", "3"}, "--ranks: a collective needs at least 2 ranks"},
      {{"--ranks", "1,1"}, "--ranks: rank 1 is given twice in '1,1' (expected 'all' or a list like 0-7,16,18)"},
      {{"-e", "2T"}, "--maxbytes: 2T is outside 1 B to 1T (1 TiB)"},
      {{"-b", "1000000000000000"}, "--minbytes: expected a size like 8, 64K, 1M or 8G, got '1000000000000000'"},
      {{"-b", "8X"}, "--minbytes: expected a size like 8, 64K, 1M or 8G, got '8X'"},
      {{"-b", "1M", "-e", "1K"}, "--maxbytes: smaller than --minbytes"},
      {{"-f", "1"}, "--stepfactor: expected a number above 1 and at most 1024"},
      {{"--network", "packet"}, "--network: expected flow or analytical, got 'packet'"},
      {{"--rings", "pipelined"}, "--rings: expected steps or streamed, got 'pipelined'"},
      {{"--protocol", "LL128"}, "--protocol: expected auto, ll or simple, got 'LL128'"},
      {{"--op", "broadcast", "--root", "8"}, "--root: 8 is not a position in --ranks (0 to 7)"},
      {{"--op", "broadcast", "--root", "-1"}, "--root: -1 is not a position in --ranks (0 to 7)"},
      {{"--op", "send-recv", "--peer", "-1"}, "--peer: -1 is not a position in --ranks (0 to 7) other than --root (0)"},
      {{"--op", "send-recv", "--peer", "0"}, "--peer: 0 is not a position in --ranks (0 to 7) other than --root (0)"},
      {{"--algorithm", "halving-doubling", "--ranks", "0-5"}, "--algorithm: halving-doubling needs a power-of-two number of ranks, not 6"},
      // Options the operation or algorithm has no use for were accepted and ignored
      // (--channels 64 was even printed in the table of a direct all-reduce).
      {{"--root", "3"}, "--root: applies to broadcast, reduce and send-recv; all-reduce has no root"},
      {{"--op", "broadcast", "--peer", "3"}, "--peer: applies to send-recv only"},
      {{"--algorithm", "direct", "--channels", "64"}, "--channels: direct has no channels (ring and tree have)"},
      {{"--algorithm", "hierarchical", "--channels", "2"}, "--channels: hierarchical has no channels (ring and tree have)"},
      {{"--op", "all-to-all", "--rings", "streamed"}, "--rings: all-to-all runs direct transfers, no rings or chunked trees"},
      {{"--algorithm", "direct", "--rings", "streamed"}, "--rings: direct has no rings or chunked trees"},
      {{"--network", "analytical", "--rings", "streamed"}, "--rings: applies to the flow network; the analytical one prices each transfer whole"},
  };
  for (const auto& [extra, line] : cases) {
    std::vector<std::string> args{"collective", "--preset", "dgx-h100"};
    args.insert(args.end(), extra.begin(), extra.end());
    INFO(line);
    const auto r = ddlsim_cmd(args);
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim collective: " + line + "\n");
    CHECK(r.out.empty());
  }
}

TEST_CASE("ddlsim collective: a direct algorithm past the pairs the models can hold is refused up front") {
  // Expected: p ranks send between p(p - 1) pairs. The flow model holds 2^20 = 1,048,576
  // in flight at once: 129 DGX A100 servers' 1,032 GPUs make 1,063,992 (1,024 make
  // 1,047,552, which runs). The analytical model keeps 2^24 = 16,777,216 routes: 4,097
  // ranks make 16,781,312. Both are refused at once, before the selector routes every
  // pair (1,024 servers took minutes and gigabytes); --algorithm all skips direct alone.
  auto r = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--nodes", "129", "--op", "all-to-all"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim collective: the direct all-to-all over 1032 ranks sends between 1063992 pairs of ranks, more than "
                 "the flow model's limit of 1048576 in flight at once (about 1.7 KB of memory each); use --network "
                 "analytical or fewer --ranks\n");
  r = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--nodes", "513", "--ranks", "0-4096", "--op", "all-to-all",
                  "--network", "analytical"});
  CHECK(r.status == 2);
  const std::string analytical = "the direct all-to-all over 4097 ranks sends between 16781312 pairs of ranks, more than "
                                 "the limit of 16777216 routes kept (about 100 B of memory each); use fewer --ranks";
  CHECK(r.err == "ddlsim collective: " + analytical + "\n");
  r = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--nodes", "513", "--ranks", "0-4096", "--op", "all-gather",
                  "--algorithm", "all", "--network", "analytical", "-b", "1M", "-e", "1M", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::string all_gather = analytical;
  all_gather.replace(all_gather.find("all-to-all"), 10, "all-gather");
  CHECK(std::count(j.at("skipped").begin(), j.at("skipped").end(), "direct: " + all_gather) == 1);
  REQUIRE(j.at("results").size() == 1);
  CHECK(j.at("results").at(0).at("algorithm") == "ring");
}

TEST_CASE("ddlsim workload prints each operator and totals that add up") {
  // Expected: GPT-2 small has 124,439,808 parameters; the JSON rows add up to the total,
  // and the step time is the sum of the operators' forward and backward times.
  auto r = ddlsim_cmd({"workload", "--preset", "gpt2", "--batch", "8", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("total").at("parameters").get<double>() == 124439808.0);
  double params = 0, flops = 0;
  int count = 0;
  for (const auto& row : j.at("operators")) {
    params += row.at("parameters").get<double>();
    flops += row.at("forward_flops").get<double>();
    count += row.at("count").get<int>();
  }
  CHECK(params == 124439808.0);
  CHECK(flops == Approx(j.at("total").at("forward_flops").get<double>()));
  CHECK(count == j.at("total").at("count").get<int>());
  const auto& t = j.at("total");
  CHECK(j.at("step_compute_time_s").get<double>() ==
        Approx(t.at("forward_time_s").get<double>() + t.at("backward_time_s").get<double>()));
  r = ddlsim_cmd({"workload", "--preset", "resnet50", "--batch", "32"});
  CHECK(r.status == 0);
  CHECK(r.out.find("stage1.block1.conv1") != std::string::npos);
  CHECK(ddlsim_cmd({"workload", "--list"}).out.find("llama3-405b") != std::string::npos);
}

TEST_CASE("ddlsim workload: bad input is one line and status 2") {
  Scratch s;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--preset", "llama3-8"}, "unknown workload preset 'llama3-8' (did you mean 'llama3-8b'?) (see 'ddlsim workload --list')"},
      {{}, "--preset: required, or --hf-config or a scenario file (see --list for the presets)"},
      {{"--preset", "gpt2", "--seq", "2048"}, "--seq: 2048 tokens exceed gpt2's 1024 learned positions"},
      {{"--preset", "gpt2", "--seq", "0"}, "--seq: expected 1 to 10000000, got 0"},
      {{"--hf-config", s.write("gpt2.json", R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
          "n_positions": 1024, "vocab_size": 50257})"), "--seq", "4096"},
       "--seq: 4096 tokens exceed " + (s.dir / "gpt2.json").string() + "'s 1024 learned positions (n_positions)"},
      {{"--preset", "gpt2", "--batch", "0"}, "--batch: expected 1 to 1000000, got 0"},
      // The logits, batch x seq x vocab = 1e6 x 1e5 x 1e8, would overflow their element count.
      {{"--hf-config", s.write("wide.json", R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
          "num_attention_heads": 1, "intermediate_size": 64, "max_position_embeddings": 100000, "vocab_size": 100000000})"),
        "--seq", "100000", "--batch", "1000000"},
       "--batch: batch x seq x max(hidden, 2 ffn, vocab) = 1e+19, beyond the 1e18 ddlsim models"},
      {{"--preset", "llama3-8b", "--batch", "1000000", "--seq", "1000000"}, "--batch: batch x heads x seq^2 = 3.2e+19, beyond the 1e18 ddlsim models"},
      {{"--preset", "resnet50", "--seq", "10"}, "--seq: resnet50 is not a transformer"},
      {{"--preset", "gpt2", "--dtype", "int4"}, "--dtype: expected fp32, bf16, fp16 or fp8, got 'int4'"},
      {{"--preset", "gpt2", "--attention", "sparse"}, "--attention: expected plain or flash, got 'sparse'"},
      // --list lists every preset; what else is given would be ignored (it exited 0).
      {{"--list", "--preset", "gpt2"}, "--list: lists every preset as text; not with --preset"},
      {{"--list", "--json"}, "--list: lists every preset as text; not with --json"},
      {{"--list", "--batch", "8"}, "--list: lists every preset as text; not with --batch"},
      {{"--list", "--device", "h100-sxm"}, "--list: lists every preset as text; not with --device"},
      {{"--preset", "gpt2", "--device", "h100"}, "unknown accelerator 'h100' (did you mean 'h100-sxm'?)"},
      {{"--preset", "gpt2", "--dtype", "fp8", "--device", "a100-80gb"}, "accelerator 'a100-80gb' has no fp8 peak in the catalog; it runs fp32, bf16, fp16"},
      {{"--hf-config", s.write("moe.json", R"({"model_type": "mistral", "num_local_experts": 8})")},
       (s.dir / "moe.json").string() + ": num_local_experts: mixture-of-experts layers are modelled for model_type mixtral, qwen2_moe, qwen3_moe, glm4_moe, deepseek_v3 and kimi_k2, not mistral"},
      {{"--hf-config", s.write("bad.json", "{\"model_type\": ")}, ""},
  };
  expect_bad_workload(cases);
}

TEST_CASE("ddlsim workload --compare sets a calibration file's measurements beside the model's predictions") {
  // Expected on an A100 80GB (catalog: 312 TFLOP/s bf16, 2,039 GB/s; built-in efficiencies:
  // GEMM 0.8 x m/(m+256) x n/(n+256) x k/(k+32), memory 0.85, no GEMM latency): a 4096^3
  // bf16 GEMM's kernel takes 2 x 4096^3 / (312e12 x 0.8 x (4096/4352)^2 x 4096/4128) (its
  // 100.7 MB over 0.85 x 2,039 GB/s take less), 219.4 TFLOP/s against 250 measured:
  // -12.2%. A copy of 2^31 bytes takes 2^31 / (0.85 x 2039e9). Kernel times: without the
  // 3 us launch gap. The layer's four GEMMs (qkv 4096 x
  // 6144 x 4096, proj 4096^3, gate and up 4096 x 28672 x 4096, down 4096 x 4096 x 14336)
  // alone take less than the predicted forward; a file without GEMM or memory points
  // leaves the calibrated prediction equal to the model's. A top-2-of-8 mixture-of-experts
  // layer of the same shape (moe_layer) does twice the dense MLP's GEMM FLOPs in
  // 1,024-row expert GEMMs, less efficient than 4,096-row ones, so its forward exceeds
  // the dense layer's by more than the dense MLP's two GEMMs take.
  Scratch s;
  const std::string layer =
      R"("layer": {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "seq": 4096, "batch": 1, "dtype": "bf16",
                   "forward_ms": 9.5, "backward_ms": 21.0})";
  const std::string file = s.write("a100.json", R"({"device": "a100-80gb", "gpu": "A100", "software": "torch", "source": "test",
    "gemm": [{"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 250}],
    "memory": {"bytes": 2147483648, "gbytes_per_s": 1700}, )" + layer + R"(, "moe_layer": {"hidden": 4096, "heads": 32,
    "kv_heads": 8, "ffn": 14336, "experts": 8, "experts_per_token": 2, "seq": 4096, "batch": 1, "forward_ms": 16, "backward_ms": 30}})");
  auto r = ddlsim_cmd({"workload", "--compare", file, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const double f = 0.8 * 312e12;
  auto gemm_s = [&](double m, double n, double k) {
    return 2 * m * n * k / (f * m / (m + 256) * n / (n + 256) * k / (k + 32));
  };
  const double g4096 = 2.0 * 4096 * 4096 * 4096 / gemm_s(4096, 4096, 4096) / 1e12;
  CHECK(j["device"] == "a100-80gb");
  CHECK(j["gemm"][0]["predicted_tflops"].get<double>() == Approx(g4096));
  CHECK(g4096 == Approx(219.4).epsilon(1e-3));
  CHECK(j["gemm"][0]["error"].get<double>() == Approx(g4096 / 250 - 1));
  CHECK(j["gemm_mean_abs_error"].get<double>() == Approx(1 - g4096 / 250));
  const double copy_s = 2147483648.0 / (0.85 * 2039e9);
  CHECK(j["memory"]["predicted_gbytes_per_s"].get<double>() == Approx(2147483648.0 / copy_s / 1e9));
  const double gemms = gemm_s(4096, 6144, 4096) + gemm_s(4096, 4096, 4096) + gemm_s(4096, 28672, 4096) + gemm_s(4096, 4096, 14336);
  CHECK(j["layer"]["model_forward_s"].get<double>() > gemms);
  CHECK(j["layer"]["model_forward_s"].get<double>() < 1.5 * gemms);
  CHECK(j["layer"]["measured_backward_s"].get<double>() == Approx(0.021));
  CHECK(j["moe_layer"]["experts"] == 8);
  CHECK(j["moe_layer"]["experts_per_token"] == 2);
  CHECK(j["moe_layer"]["measured_forward_s"].get<double>() == Approx(0.016));
  CHECK(j["moe_layer"]["model_forward_s"].get<double>() - j["layer"]["model_forward_s"].get<double>() >
        gemm_s(4096, 28672, 4096) + gemm_s(4096, 4096, 14336));
  CHECK(!j["layer"].contains("experts"));

  const std::string bare = s.write("bare.json", R"({"device": "a100-80gb", "gemm": [], )" + layer + "}");
  r = ddlsim_cmd({"workload", "--compare", bare, "--json"});
  REQUIRE(r.status == 0);
  const auto k = nlohmann::json::parse(r.out);
  CHECK(k["layer"]["calibrated_forward_s"] == k["layer"]["model_forward_s"]);
  CHECK(k["layer"]["calibrated_backward_s"] == k["layer"]["model_backward_s"]);

  r = ddlsim_cmd({"workload", "--compare", file});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("GEMMs: 1 point, mean |error| 12.2%") != std::string::npos);

  const BadInputs bad = {
      {{"--compare", file, "--preset", "gpt2"}, "--preset: not with --compare, which takes its shapes from the file"},
      {{"--compare", file, "--device", "h100-sxm"}, "--device: " + file + " measures 'a100-80gb', not 'h100-sxm'"},
      {{"--compare", file, "--list"}, "--list: not with --compare, which takes its shapes from the file"},
      {{"--compare", s.write("c.json", R"({"device": "a100-80gb", "gemm": [], "memory": {"bytes": 1048576, "gbytes_per_s": 1000}})")},
       (s.dir / "c.json").string() + ": memory.bytes: expected a number from 2.68435e+08 to 1e+15, got 1048576"},
      {{"--compare", s.write("big.json", R"({"device": "a100-80gb", "gemm": [],
         "layer": {"hidden": 1000000, "heads": 1, "kv_heads": 1, "ffn": 10000000, "seq": 10000000, "batch": 500000,
                   "forward_ms": 1, "backward_ms": 1}})")},
       (s.dir / "big.json").string() + ": layer.batch: batch x heads x seq^2 = 5e+19, beyond the 1e18 ddlsim models"},
      {{"--compare", s.write("l.json", R"({"device": "a100-80gb", "gemm": [], "layer": {"hidden": 4096}})")},
       (s.dir / "l.json").string() + ": layer.heads: missing (a required field)"},
      {{"--compare", s.write("m.json", R"({"device": "a100-80gb", "gemm": [], "moe_layer": {"hidden": 4096, "heads": 32,
         "kv_heads": 8, "ffn": 14336, "seq": 4096, "batch": 1, "forward_ms": 1, "backward_ms": 1}})")},
       (s.dir / "m.json").string() + ": moe_layer.experts: missing (a required field)"},
      {{"--compare", s.write("k.json", R"({"device": "a100-80gb", "gemm": [], "moe_layer": {"hidden": 4096, "heads": 32,
         "kv_heads": 8, "ffn": 14336, "experts": 8, "experts_per_token": 9, "seq": 4096, "batch": 1, "forward_ms": 1,
         "backward_ms": 1}})")},
       (s.dir / "k.json").string() + ": moe_layer: experts_per_token must be 1 to experts (8), got 9"},
      {{"--compare", s.write("x.json", R"({"device": "a100-80gb", "gemm": [], "layer": {"hidden": 4096, "heads": 32,
         "kv_heads": 8, "ffn": 14336, "experts": 8, "seq": 4096, "batch": 1, "forward_ms": 1, "backward_ms": 1}})")},
       (s.dir / "x.json").string() + ": layer.experts: unknown key"},
  };
  expect_bad_workload(bad);
}

TEST_CASE("the compute model against published GEMM measurements (validation/compute)") {
  // Expected: the two best-shape throughputs (stas00/ml-engineering's MAMF table) that set
  // a device's GEMM max are reproduced within 1% (MI300X 668.4 TFLOP/s at 10240 x 15360 x
  // 8192; B200 1,745 at 1792 x 16128 x 3072, with its latency); over XLA's measured GEMM
  // kernels (m, n, k of 256 to 4096, the data the latencies were fitted to) the mean error
  // is within 8% on the H100 (7.5% when fitted; 394% without a latency) and 12% on the
  // B200 (11.3%; 938% without). These are regression guards of the data entries: the
  // MAMF points and the XLA tables are what the figures were set from. Out of sample, a
  // later measurement of the same H100 grid (h100-sxm-xla-2.json, 125 points, fitted to
  // nothing) is within 9% (8.5%). The H100's FP8 max was fitted to six published FP8
  // GEMMs (h100-sxm-fp8.json): within 5% (4.3%; 10.5% at the 16-bit max).
  const std::pair<const char*, double> files[] = {{"mi300x-mamf.json", 0.01},
                                                  {"b200-mamf.json", 0.01},
                                                  {"h100-sxm-xla.json", 0.08},
                                                  {"h100-sxm-xla-2.json", 0.09},
                                                  {"b200-xla.json", 0.12},
                                                  {"h100-sxm-fp8.json", 0.05}};
  for (const auto& [file, tolerance] : files) {
    INFO(file);
    const auto r = ddlsim_cmd({"workload", "--compare", std::string(DDLSIM_SOURCE_DIR) + "/validation/compute/" + file, "--json"});
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["gemm_mean_abs_error"].get<double>() < tolerance);
  }
}

TEST_CASE("the compute model against our H200 measurement (validation/compute/h200-measured.json)") {
  // Expected, as measured on 2026-12-04 (scripts/calibrate_compute.py, validation/compute/
  // SOURCES.md) and reported in the README: the built-in model is 17.3% off on average
  // over this H200's 47 GEMMs (those of 2,048 rows or more priced too fast, +1.5% to
  // +26.8%; smaller ones too slow: GEMM points are priced as bursts); it predicts the
  // 1 GiB memory kernel 4.8% slow. The layers, priced as a training step prices them (at
  // the H200's sustained 0.88 of the burst rates), come out too fast: dense forward
  // -10.9%, MoE forward -13.5% (-20.9% and -23.1% as bursts); with the file's GEMMs and
  // bandwidth applied, -9.8% and -19.3%. A regression guard of the figures reported,
  // each to its first decimal place.
  const auto r = ddlsim_cmd({"workload", "--compare", std::string(DDLSIM_SOURCE_DIR) + "/validation/compute/h200-measured.json", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["gemm"].size() == 47);
  CHECK(j["gemm_mean_abs_error"].get<double>() == Approx(0.173).epsilon(0.003));
  double fewest = 1, most = -1;
  for (const auto& g : j["gemm"]) {
    if (g["m"].get<int>() < 2048) continue;
    fewest = std::min(fewest, g["error"].get<double>());
    most = std::max(most, g["error"].get<double>());
  }
  CHECK(fewest == Approx(0.015).epsilon(0.04));
  CHECK(most == Approx(0.268).epsilon(0.002));
  CHECK(j["memory"]["error"].get<double>() == Approx(-0.048).epsilon(0.011));
  auto err = [&](const char* layer, const char* which) {
    return j[layer][std::string(which) + "_forward_s"].get<double>() / j[layer]["measured_forward_s"].get<double>() - 1;
  };
  CHECK(err("layer", "model") == Approx(-0.109).epsilon(0.005));
  CHECK(err("moe_layer", "model") == Approx(-0.135).epsilon(0.004));
  CHECK(err("layer", "calibrated") == Approx(-0.098).epsilon(0.005));
  CHECK(err("moe_layer", "calibrated") == Approx(-0.193).epsilon(0.003));
}

TEST_CASE("did-you-mean suggests typos, completions, short names and longer spellings") {
  // Expected (in any letter case): a typo within a third of the word ("ib-hdrr" -> "ib-hdr"); a prefix
  // ("h100" -> "h100-sxm"); the part after a dash ("ndr" -> "ib-ndr", DESIGN.md's
  // spelling); another tool's longer name of a field ("seq_len" -> "seq"); nothing for
  // a word unlike every candidate, or a one-letter one.
  const std::vector<std::string> links{"ib-hdr", "ib-ndr", "eth-100g"};
  CHECK(did_you_mean("ib-hdrr", links) == " (did you mean 'ib-hdr'?)");
  CHECK(did_you_mean("ndr", links) == " (did you mean 'ib-ndr'?)");
  CHECK(did_you_mean("100g", links) == " (did you mean 'eth-100g'?)");
  CHECK(did_you_mean("nvlink", links).empty());
  const std::vector<std::string> parts{"h100-sxm", "a100-80gb"};
  CHECK(did_you_mean("h100", parts) == " (did you mean 'h100-sxm'?)");
  const std::vector<std::string> keys{"seq", "vocab", "layers"};
  CHECK(did_you_mean("seq_len", keys) == " (did you mean 'seq'?)");
  CHECK(did_you_mean("vocab_size", keys) == " (did you mean 'vocab'?)");
  CHECK(did_you_mean("sequence", keys).empty());
  CHECK(did_you_mean("x", keys).empty());
  // Letter case is ignored in every pass: the same name, a prefix, a typo.
  CHECK(did_you_mean("NDR", links) == " (did you mean 'ib-ndr'?)");
  CHECK(did_you_mean("H100", parts) == " (did you mean 'h100-sxm'?)");
  CHECK(did_you_mean("IB-HDRR", links) == " (did you mean 'ib-hdr'?)");
  const std::vector<std::string> suites{"nccl", "all"};
  CHECK(did_you_mean("NCCL", suites) == " (did you mean 'nccl'?)");
}

TEST_CASE("a scenario's workload gives a gpt or llama by its shape, and one global batch for its strategies") {
  // Expected: Megatron's GPT of l layers, hidden h, vocabulary V and s learned positions
  // has 12 l h^2 + 13 l h + (V + s) h + 2 h parameters (per layer 4 h^2 + 4 h attention,
  // 8 h^2 + 5 h MLP, 4 h in two layer norms; tied embedding; final norm): 40, 5120, 51200,
  // 2048 give 12,858,214,400. A "llama" of Llama 3 8B's shape (32 layers, 4096, 32 heads,
  // 8 KV heads, ffn 14336, vocabulary 128256) has the preset's 8,030,261,248. Strategies
  // without a global_batch take the workload's (samples/s x step = 64); one with its own
  // keeps it (32).
  const double l = 40, h = 5120, v = 51200, seq = 2048;
  const double gpt = 12 * l * h * h + 13 * l * h + (v + seq) * h + 2 * h;
  CHECK(gpt == 12858214400.0);
  Scratch s;
  const std::string g = s.write("g.json", R"({"name": "g", "cluster": {"preset": "dgx-a100", "nodes": 1},
    "workload": {"model": "gpt", "layers": 40, "hidden": 5120, "heads": 40, "vocab": 51200, "seq": 2048, "global_batch": 64},
    "strategies": [{"name": "a", "tp": 8, "micro_batch": 1}, {"name": "b", "tp": 8, "global_batch": 32}],
    "simulation": {"network": "analytical"}})");
  auto r = ddlsim_cmd({"workload", g, "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("total").at("parameters").get<double>() == gpt);
  r = ddlsim_cmd({"run", g, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& a = j.at("strategies").at(0);
  const auto& b = j.at("strategies").at(1);
  CHECK(a.at("samples_per_s").get<double>() * a.at("step_time_s").get<double>() == Approx(64));
  CHECK(b.at("samples_per_s").get<double>() * b.at("step_time_s").get<double>() == Approx(32));

  const std::string ll = s.write("l.json", R"({"workload": {"model": "llama", "layers": 32, "hidden": 4096, "heads": 32,
    "kv_heads": 8, "ffn": 14336, "vocab": 128256, "seq": 8192}})");
  r = ddlsim_cmd({"workload", ll, "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("total").at("parameters").get<double>() == 8030261248.0);

  auto scenario = [&](const char* name, const std::string& workload, const std::string& strategy = R"({"name": "a", "global_batch": 8})") {
    return s.write(name, R"({"name": "x", "cluster": {"preset": "dgx-a100", "nodes": 1}, "workload": )" + workload +
                             R"(, "strategies": [)" + strategy + "]}");
  };
  const std::string shape = R"("layers": 2, "hidden": 64, "heads": 4, "vocab": 100)";
  const BadInputs bad = {
      {{"run", scenario("1.json", R"({"model": "gpt", )" + shape + "}")},
       "ddlsim run: workload.seq: missing (a \"gpt\" model's sequence length, in tokens)\n"},
      {{"run", scenario("2.json", R"({"model": "gpt", "seq_len": 128, )" + shape + "}")},
       "ddlsim run: workload.seq_len: unknown key (did you mean 'seq'?)\n"},
      {{"run", scenario("3.json", R"({"model": "gpt", "seq": 128, "kv_heads": 2, )" + shape + "}")},
       "ddlsim run: workload.kv_heads: only with model \"llama\" (a gpt has one key and value head per head)\n"},
      {{"run", scenario("4.json", R"({"model": "llama", "seq": 128, )" + shape + "}")},
       "ddlsim run: workload.ffn: missing (a required field)\n"},
      {{"run", scenario("5.json", R"({"model": "gpt", "seq": 128, "layers": 2, "hidden": 64, "heads": 5, "vocab": 100})")},
       "ddlsim run: workload: heads (5) must divide hidden (64)\n"},
      {{"run", scenario("6.json", R"({"model": "llama3-8b", "layers": 2})")},
       "ddlsim run: workload.layers: only with model \"gpt\" or \"llama\" (a preset has its shape)\n"},
      {{"run", scenario("7.json", R"({"hf_config": {"model_type": "gpt2"}, "hidden": 64})")},
       "ddlsim run: workload.hidden: only with model \"gpt\" or \"llama\" (a HuggingFace config has its shape)\n"},
      {{"run", scenario("8.json", R"({"model": "gpt", "seq": 128, )" + shape + "}", R"({"name": "a"})")},
       "ddlsim run: strategies.0.global_batch: missing (sequences per step; or give workload.global_batch for every strategy)\n"},
      {{"run", scenario("9.json", R"({"model": "gpt", "seq": 128, "global_batch": 0, )" + shape + "}")},
       "ddlsim run: workload.global_batch: expected a positive integer, got 0\n"},
      {{"run", scenario("10.json", R"({"model": "gpt", "seq": 128, "experts": 8, "experts_per_token": 2, )" + shape + "}")},
       "ddlsim run: workload.experts: only with model \"llama\" (its mixture-of-experts layers are gated MLPs)\n"},
      {{"run", scenario("11.json", R"({"model": "llama", "seq": 128, "ffn": 128, "experts": 8, )" + shape + "}")},
       "ddlsim run: workload.experts_per_token: missing (give both experts and experts_per_token)\n"},
      {{"run", scenario("12.json", R"({"model": "llama", "seq": 128, "ffn": 128, "experts": 1, "experts_per_token": 1, )" + shape + "}")},
       "ddlsim run: workload.experts: expected 2 or more, got 1\n"},
      {{"run", scenario("13.json", R"({"model": "llama", "seq": 128, "ffn": 128, "experts": 4, "experts_per_token": 5, )" + shape + "}")},
       "ddlsim run: workload.experts_per_token: expected 1 to experts (4), got 5\n"},
      {{"run", scenario("14.json", R"({"model": "llama", "seq": 128, "ffn": 128, "experts": 4, "experts_per_token": 0, )" + shape + "}")},
       "ddlsim run: workload.experts_per_token: expected a positive integer, got 0\n"},
      {{"run", scenario("15.json", R"({"model": "mixtral-8x7b", "experts": 4})")},
       "ddlsim run: workload.experts: only with model \"llama\" (a preset has its shape)\n"},
      {{"run", s.write("u.json", R"({"name": "x", "cluster": {"devices": 8, "device_tflops": 100, "device_memory_gib": 80,
         "link_gbytes_per_s": 25}, "workload": {"model": "gpt"}, "strategies": [{"name": "dp"}]})")},
       "ddlsim run: workload.model: a uniform cluster (cluster.devices, ...) runs the synthetic model only; to train a real "
       "model, name a cluster preset (\"cluster\": {\"preset\": \"dgx-a100\", \"nodes\": 4})\n"},
  };
  expect_exact_errors(bad);
}

TEST_CASE("an inline llama shape with experts is the grok-1 preset's model") {
  // Expected: xAI's Grok-1 (64 layers, hidden 6144, 48 heads in 8 groups of 128, 8 gated
  // experts of 32768, 2 per token, vocab 131072): per layer the attention's 6144 x (6144 +
  // 2 x 1024) + 6144 x 6144, 8 experts of 3 x 6144 x 32768, a router of 6144 x 8 and two
  // norms of 6144; the embedding and output layer 131072 x 6144 each and the final norm:
  // 316,489,340,928 parameters; the inline shape gives the same count.
  const double h = 6144, layer = h * (h + 2 * 1024) + h * h + 8 * 3 * h * 32768 + h * 8 + 2 * h;
  const double expected = 64 * layer + 2 * 131072 * h + h;
  CHECK(expected == 316489340928.0);
  auto r = ddlsim_cmd({"workload", "--preset", "grok-1", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("total").at("parameters").get<double>() == expected);
  Scratch s;
  const std::string f = s.write("g.json", R"({"name": "x", "cluster": {"preset": "dgx-h100"}, "workload": {"model": "llama",
    "layers": 64, "hidden": 6144, "heads": 48, "kv_heads": 8, "ffn": 32768, "vocab": 131072, "seq": 8192, "experts": 8,
    "experts_per_token": 2}, "strategies": [{"name": "dp", "global_batch": 8}]})");
  r = ddlsim_cmd({"workload", f, "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("total").at("parameters").get<double>() == expected);
}

TEST_CASE("ddlsim workload reads a scenario whose workload names a model; ddlsim run wants a preset cluster for it") {
  // Expected: the scenario's llama3-8b at batch 2 has the preset's 8,030,261,248
  // parameters; ddlsim run says a uniform cluster runs the synthetic model only; a misspelt model
  // gets a suggestion naming the JSON path.
  Scratch s;
  const std::string f = s.write("w.json", R"({"name": "x", "cluster": {"devices": 8, "device_tflops": 100,
    "device_memory_gib": 80, "link_gbytes_per_s": 25}, "workload": {"model": "llama3-8b", "batch": 2, "seq": 1024},
    "strategies": [{"name": "dp"}]})");
  auto r = ddlsim_cmd({"workload", f, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("batch") == 2);
  CHECK(j.at("total").at("parameters").get<double>() == 8030261248.0);
  r = ddlsim_cmd({"run", f});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: workload.model: a uniform cluster (cluster.devices, ...) runs the synthetic model only; "
                 "to train a real model, name a cluster preset (\"cluster\": {\"preset\": \"dgx-a100\", \"nodes\": 4})\n");
  const std::string bad = s.write("b.json", R"({"workload": {"model": "lama3-8b"}})");
  r = ddlsim_cmd({"workload", bad});
  CHECK(r.status == 2);
  CHECK(r.err.rfind("ddlsim workload: " + bad + ": workload.model: unknown model 'lama3-8b' (did you mean 'llama3-8b'?)", 0) == 0);
  r = ddlsim_cmd({"workload", s.write("c.json", kSmall)});
  CHECK(r.status == 2);
  CHECK(r.err.find("workload.model: the synthetic model has no operators to describe") != std::string::npos);
  // A scenario on a preset cluster is priced on its cluster's accelerator (it was
  // h100-sxm, the default for --preset, whatever the cluster): DGX A100s, or the
  // accelerator the cluster puts in them; --device still overrides.
  const std::string dgx = s.write("d.json", R"({"name": "x", "cluster": {"preset": "dgx-a100"},
    "workload": {"model": "llama3-8b", "batch": 2, "seq": 1024}, "strategies": [{"name": "dp", "global_batch": 8}]})");
  const auto device = [&](std::vector<std::string> args) {
    const auto run = ddlsim_cmd(args);
    REQUIRE(run.status == 0);
    return nlohmann::json::parse(run.out).at("device").get<std::string>();
  };
  CHECK(device({"workload", dgx, "--json"}) == "a100-80gb");
  CHECK(device({"workload", dgx, "--json", "--device", "h100-sxm"}) == "h100-sxm");
  const std::string swapped = s.write("e.json", R"({"name": "x", "cluster": {"preset": "dgx-a100", "accelerator": "a100-40gb"},
    "workload": {"model": "llama3-8b", "batch": 2, "seq": 1024}, "strategies": [{"name": "dp", "global_batch": 8}]})");
  CHECK(device({"workload", swapped, "--json"}) == "a100-40gb");
  // An option the scenario's workload leaves out applies (--batch 3 on a workload with
  // no batch: batch 3, where it was refused as if the scenario set it); one it sets is a
  // conflict, one line naming the key and its value; a bad value names the option.
  const std::string unset = s.write("u.json", R"({"name": "x", "cluster": {"preset": "dgx-a100"},
    "workload": {"model": "llama3-8b", "seq": 1024}, "strategies": [{"name": "dp", "global_batch": 8}]})");
  r = ddlsim_cmd({"workload", unset, "--batch", "3", "--attention", "plain", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("batch") == 3);
  r = ddlsim_cmd({"workload", dgx, "--batch", "3"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim workload: --batch: the scenario's workload sets \"batch\": 2; edit the scenario, or leave out --batch\n");
  r = ddlsim_cmd({"workload", unset, "--batch", "0"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim workload: --batch: expected 1 to 1000000, got 0\n");
}

namespace {
// A --set replacing the strategies by one data-parallel SBP plan over `devices` (batch devices).
std::string sbp_data_parallel(int devices) {
  const std::string n = std::to_string(devices);
  return R"J(strategies=[{"name": "sbp", "global_batch": )J" + n + R"J(, "sbp": {"mesh": [)J" + n +
         R"J(], "signatures": {"*": "S(0) x B -> S(0)"}}}])J";
}
// The bundled CNN scenario (VGG-16 on DGX-1s, SBP strategies only).
std::string vgg16_scenario() { return std::string(DDLSIM_SOURCE_DIR) + "/scenarios/autoddl-vgg16-dgx1.json"; }

const char* kTraining = R"({"name": "t", "cluster": {"preset": "dgx-a100", "nodes": 2},
  "workload": {"model": "megatron-1.7b", "seq": 1024},
  "strategies": [{"name": "dp", "global_batch": 64, "micro_batch": 2, "recompute": "full"},
                 {"name": "tp-pp", "tp": 4, "pp": 2, "global_batch": 64, "micro_batch": 2, "zero": 1}]})";
}  // namespace

TEST_CASE("a pipeline without data parallelism waits only for its tied embedding's gradients") {
  // Expected: tp 8 x pp 2 on the 16 GPUs (dp 1) has no gradient to reduce across replicas
  // and no weights to gather; its only gradient wait is the tied embedding's: each tp
  // rank's copy on the first stage (server 0) and on the last (server 1) summed, V h / 8 x
  // 2 bytes (V 51,200, h 2,304) between GPU k of each server, the 8 pairs on their own
  // NICs: the time 'ddlsim collective' gives that all-reduce over ranks 0 and 8. The
  // critical stage's wait for the other to drain the pipeline at the end of the step is
  // bubble (or pipeline) time, and the parts still add up to the step.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto r = ddlsim_cmd({"run", f, "--json", "--strategy", "tp-pp", "--set", "strategies.1.tp=8", "--set",
                             "strategies.1.global_batch=256"});
  REQUIRE(r.status == 0);
  const auto st = nlohmann::json::parse(r.out).at("strategies").at(0);
  CHECK(st.at("plan") == "dp 1 x tp 8 x pp 2");
  const auto c = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--nodes", "2", "--ranks", "0,8", "-b", "29491200",
                             "-e", "29491200", "--json"});
  REQUIRE(c.status == 0);
  const double pair = nlohmann::json::parse(c.out).at("results").at(0).at("time_us").get<double>() * 1e-6;
  const auto& b = st.at("breakdown");
  const auto& x = b.at("exposed_comm_s");
  CHECK(x.at("dp").get<double>() == Approx(pair).epsilon(1e-9));
  CHECK(b.at("bubble_s").get<double>() > 0.0);
  CHECK(st.at("step_time_s").get<double>() ==
        Approx(b.at("compute_s").get<double>() + x.at("tp").get<double>() + x.at("pp").get<double>() +
               x.at("dp").get<double>() + b.at("bubble_s").get<double>()));
}

TEST_CASE("simulation.collective_algorithm and channels choose the algorithm of a training step's collectives") {
  // Expected: as in the test above, tp 8 x pp 2 waits only for its tied embedding's
  // all-reduce over GPU k of each server; with "collective_algorithm": "tree" that wait
  // is what 'ddlsim collective --algorithm tree --rings streamed' gives for it (a double
  // binary tree of 2 channels streamed as training replays do: 1,317.7 us, its first
  // chunk's way paying the NICs' transport up and down, 28 us; against the ring's
  // 1,285.3, two steps of 14 us each), and the tensor-parallel
  // all-reduces are trees too, so the step differs from the automatic one. An object
  // names an algorithm per operation, with "auto" for the selector's; a name that
  // cannot run an operation is refused for it, by path; channels run 1 to 64.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const std::vector<std::string> plan{"run", f, "--json", "--strategy", "tp-pp", "--set", "strategies.1.tp=8",
                                      "--set", "strategies.1.global_batch=256"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = plan;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
  };
  auto pair = [](const char* algorithm) {
    const auto c = ddlsim_cmd({"collective", "--preset", "dgx-a100", "--nodes", "2", "--ranks", "0,8", "-b", "29491200",
                               "-e", "29491200", "--algorithm", algorithm, "--rings", "streamed", "--json"});
    REQUIRE(c.status == 0);
    return nlohmann::json::parse(c.out).at("results").at(0).at("time_us").get<double>() * 1e-6;
  };
  const double tree_pair = pair("tree"), ring_pair = pair("ring");
  CHECK(tree_pair == Approx(1317.7e-6).epsilon(1e-4));
  CHECK(ring_pair == Approx(1285.3e-6).epsilon(1e-4));
  const auto automatic = with({});
  const auto tree = with({"--set", "simulation.collective_algorithm=tree"});
  const auto by_op = with({"--set", R"(simulation.collective_algorithm={"all-reduce": "tree", "all-gather": "auto"})"});
  CHECK_FALSE(automatic.contains("collectives"));
  CHECK(tree.at("collectives") == "all-reduce tree (the rest as the selector picks)");
  auto dp_wait = [](const nlohmann::json& j) {
    return j.at("strategies").at(0).at("breakdown").at("exposed_comm_s").at("dp").get<double>();
  };
  auto step = [](const nlohmann::json& j) { return j.at("strategies").at(0).at("step_time_s").get<double>(); };
  CHECK(dp_wait(automatic) == Approx(ring_pair).epsilon(1e-9));
  CHECK(dp_wait(tree) == Approx(tree_pair).epsilon(1e-9));
  CHECK(step(tree) != step(automatic));
  CHECK(step(by_op) == step(tree));
  // Channels: data parallelism over the 16 GPUs (strategy dp) all-reduces on rings, one
  // per NIC by default (8 per DGX A100), which is what the selector picks here; "ring"
  // with 8 channels is that same step. One channel puts every gradient byte between the
  // servers through one NIC: 8 times less bandwidth, and the exposed reduction grows
  // more than 8-fold as it no longer hides behind the backward. Left to choose, the
  // selector prices the ring with one channel too and picks another algorithm instead.
  auto dp_run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"run", f, "--json", "--strategy", "dp"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto dp_auto = dp_run({}), ring = dp_run({"--set", "simulation.collective_algorithm=ring"});
  const auto ring8 = dp_run({"--set", "simulation.collective_algorithm=ring", "--set", "simulation.channels=8"});
  const auto ring1 = dp_run({"--set", "simulation.collective_algorithm=ring", "--set", "simulation.channels=1"});
  const auto auto1 = dp_run({"--set", "simulation.channels=1"});
  CHECK(ring8.at("collectives") == "all-reduce ring, reduce-scatter ring, all-gather ring, broadcast ring, reduce ring; "
                                   "8 channels for rings and trees (the rest as the selector picks)");
  CHECK(step(ring) == step(dp_auto));
  CHECK(step(ring8) == step(dp_auto));
  CHECK(dp_wait(ring1) > 8 * dp_wait(ring8));
  CHECK(dp_wait(auto1) < dp_wait(ring1));

  expect_exact_errors(
      {{{"run", f, "--set", "simulation.collective_algorithm=rng"},
        "ddlsim run: simulation.collective_algorithm: expected one of \"auto\", \"ring\", \"tree\", \"halving-doubling\", "
        "\"direct\", \"hierarchical\", \"torus\", got \"rng\" (did you mean 'ring'?)\n"},
       {{"run", f, "--set", R"(simulation.collective_algorithm={"all-gather": "tree"})"},
        "ddlsim run: simulation.collective_algorithm.all-gather: tree does not implement all-gather (NCCL's trees serve "
        "all-reduce only)\n"},
       {{"run", f, "--set", R"(simulation.collective_algorithm={"allgather": "ring"})"},
        "ddlsim run: simulation.collective_algorithm.allgather: unknown key (did you mean 'all-gather'?)\n"},
       {{"run", f, "--set", "simulation.channels=65"},
        "ddlsim run: simulation.channels: expected 1 to 64 rings or trees (NCCL's most), got 65\n"},
       {{"run", f, "--set", "simulation.channels=0"},
        "ddlsim run: simulation.channels: expected a positive integer, got 0\n"}});
}

TEST_CASE("a training report lists the collectives that ran, with their algorithm, count and bytes") {
  // Expected on kTraining (megatron-1.7b, seq 1024, two DGX A100): strategy dp (dp 16)
  // all-reduces its 16-bit gradients over the 16 ranks, 2 bytes per parameter in all
  // (the parameters 'ddlsim workload' counts). tp-pp (tp 4 x pp 2 x dp 2, ZeRO-1, micro-
  // batch 2, 16 micro-batches per replica) all-reduces each layer's attention and MLP
  // output in both passes, plus the embedding's forward and the output layer's backward:
  // (12 x 4 + 1) per stage and micro-batch, 2 x 2 x 49 x 16 = 3,136 over 4 ranks, each
  // micro-batch x seq x hidden x 2 bytes (2 x 1024 x 2304 x 2); its pipeline sends
  // activations forward and gradients back between its 2 stages, each tp rank a quarter
  // of that tensor: 2 replicas x 16 micro-batches x 2 ways x 4 = 256; it reduce-scatters
  // gradients and all-gathers weights over the 2 replicas and sums the tied embedding's
  // two copies over 2 ranks. Forcing "hierarchical" shows where it could not run: the
  // 16-rank all-reduce spans two servers (hierarchical), the tp groups and the copies'
  // pair sit in one server (the selector's ring), and reduce-scatter and all-gather have
  // no hierarchical form (the selector's).
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto w = ddlsim_cmd({"workload", "--preset", "megatron-1.7b", "--seq", "1024", "--json"});
  REQUIRE(w.status == 0);
  const double params = nlohmann::json::parse(w.out).at("total").at("parameters").get<double>();
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"run", f, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies");
  };
  // (dim, op, ranks) -> (algorithm, count, bytes) of one strategy's list.
  using Uses = std::map<std::tuple<std::string, std::string, int>, std::tuple<std::string, double, double>>;
  auto uses = [](const nlohmann::json& st) {
    Uses u;
    for (const auto& x : st.at("collectives")) {
      u[{x.at("dim"), x.at("op"), x.at("ranks")}] = {x.at("algorithm"), x.at("count"), x.at("bytes")};
    }
    return u;
  };
  const auto plain = run({});
  const Uses dp = uses(plain.at(0)), tp_pp = uses(plain.at(1));
  REQUIRE(dp.size() == 1);
  const auto& [dp_algorithm, dp_count, dp_bytes] = dp.at({"dp", "all-reduce", 16});
  CHECK(dp_algorithm == "ring");
  CHECK(dp_bytes == Approx(2 * params).epsilon(1e-12));
  REQUIRE(tp_pp.size() == 5);
  const auto& [pp_algorithm, pp_count, pp_bytes] = tp_pp.at({"pp", "send-recv", 2});
  CHECK(pp_count == 256);
  CHECK(pp_bytes == Approx(256.0 * 2 * 1024 * 2304 * 2 / 4).epsilon(1e-12));
  const auto& [tp_algorithm, tp_count, tp_bytes] = tp_pp.at({"tp", "all-reduce", 4});
  CHECK(tp_count == 3136);
  CHECK(tp_bytes == Approx(3136.0 * 2 * 1024 * 2304 * 2).epsilon(1e-12));
  CHECK(tp_pp.count({"dp", "reduce-scatter", 2}) == 1);
  CHECK(tp_pp.count({"dp", "all-gather", 2}) == 1);
  CHECK(tp_pp.count({"copies", "all-reduce", 2}) == 1);

  const auto hier = run({"--set", "simulation.collective_algorithm=hierarchical"});
  CHECK(std::get<0>(uses(hier.at(0)).at({"dp", "all-reduce", 16})) == "hierarchical");
  const Uses h = uses(hier.at(1));
  CHECK(std::get<0>(h.at({"tp", "all-reduce", 4})) == "ring");
  CHECK(std::get<0>(h.at({"copies", "all-reduce", 2})) == "ring");
  CHECK(std::get<0>(h.at({"dp", "reduce-scatter", 2})) == std::get<0>(tp_pp.at({"dp", "reduce-scatter", 2})));
}

TEST_CASE("ddlsim run: the zero-bubble schedule does 1F1B's work in a shorter step") {
  // Expected: tp-pp (tp 4, pp 2, ZeRO-1) with "schedule": "zero-bubble" computes the same
  // forward, backward and optimizer seconds as under 1F1B (its backwards only split), has
  // a smaller bubble and a shorter step; with ZeRO-3 it is refused with the field named.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  auto tp_pp = [&](const char* schedule) {
    const auto r = ddlsim_cmd({"run", f, "--json", "--strategy", "tp-pp", "--set", std::string("strategies.1.schedule=") + schedule});
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0);
  };
  const auto one = tp_pp("1f1b"), zb = tp_pp("zero-bubble");
  for (const char* part : {"forward", "backward", "recompute", "optimizer"}) {
    CAPTURE(part);
    CHECK(zb.at("breakdown").at("compute_parts_s").at(part).get<double>() ==
          Approx(one.at("breakdown").at("compute_parts_s").at(part).get<double>()).epsilon(1e-9));
  }
  CHECK(zb.at("breakdown").at("bubble_s").get<double>() < one.at("breakdown").at("bubble_s").get<double>());
  CHECK(zb.at("step_time_s").get<double>() < one.at("step_time_s").get<double>());
  const auto bad = ddlsim_cmd({"run", f, "--set", "strategies.1.schedule=zero-bubble", "--set", "strategies.1.zero=3"});
  CHECK(bad.status == 2);
  CHECK(bad.err ==
        "ddlsim run: strategies.1: the zero-bubble schedule is not modelled with ZeRO-3 (use zero 0, 1 or 2, or another schedule)\n");
}

TEST_CASE("ddlsim search --schedules sets the grid's pipeline schedules") {
  // Expected: with --schedules zero-bubble every grid plan (all replayed) with pp > 1 runs it
  // (and a plan without a pipeline says 1f1b); the default grid tries 1f1b and
  // interleaved only. (Bad lists: the next test case.)
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  auto schedules = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"search", f, "--json", "--replay", "10000", "--network", "analytical"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    std::set<std::string> seen;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& plan : j.at("ranked")) {
      if (plan.at("baseline").get<bool>()) continue;
      seen.insert(plan.at("pp").get<int>() > 1 ? plan.at("schedule").get<std::string>() : "pp1:" + plan.at("schedule").get<std::string>());
    }
    return seen;
  };
  const auto zb = schedules({"--schedules", "zero-bubble"});
  CHECK(zb.count("zero-bubble") == 1);
  CHECK(zb.count("1f1b") == 0);
  CHECK(zb.count("interleaved") == 0);
  for (const std::string& x : zb) CHECK((x == "zero-bubble" || x == "pp1:1f1b"));
  CHECK(schedules({}).count("zero-bubble") == 0);
  // --orders tp-dp-pp: every replayed grid plan with a pipeline and data parallelism
  // takes that order, and says so in its JSON.
  const auto o = ddlsim_cmd({"search", f, "--json", "--replay", "10000", "--network", "analytical", "--orders", "tp-dp-pp"});
  REQUIRE(o.status == 0);
  std::size_t ordered = 0;
  const auto ordered_plans = nlohmann::json::parse(o.out);
  for (const auto& plan : ordered_plans.at("ranked")) {
    if (plan.at("baseline").get<bool>() || plan.at("pp").get<int>() == 1 || plan.at("dp").get<int>() == 1) continue;
    CHECK(plan.at("order") == nlohmann::json::array({"tp", "dp", "pp"}));
    ++ordered;
  }
  CHECK(ordered > 0);
  // With --virtual-stages 3 the interleaved plans replayed have v = 3 (megatron-1.7b's
  // 24 layers: pp 2 x 3 chunks divide them), none v = 2.
  const auto r = ddlsim_cmd({"search", f, "--json", "--replay", "10000", "--network", "analytical", "--virtual-stages", "3"});
  REQUIRE(r.status == 0);
  std::set<int> chunks;
  const auto ranked = nlohmann::json::parse(r.out);
  for (const auto& plan : ranked.at("ranked")) {
    if (!plan.at("baseline").get<bool>() && plan.at("schedule") == "interleaved") chunks.insert(plan.at("virtual_stages").get<int>());
  }
  CHECK(chunks == std::set<int>{3});
}

TEST_CASE("search's list options refuse a bad list in one line: --schedules --virtual-stages --orders --cp") {
  // Expected: each bad list or misplaced option is refused with one line naming the option
  // and the value at fault, status 2, before any plan is priced. (Apart from the whole grids
  // above, so that the sanitizer build, which leaves those out, runs these.)
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  expect_exact_errors({
      {{"search", f, "--schedules", "1f1b,zb"},
       "ddlsim search: --schedules: expected a comma-separated list of 1f1b, interleaved, zero-bubble and gpipe, got 'zb'\n"},
      {{"search", f, "--schedules", "1f1b,1f1b"}, "ddlsim search: --schedules: '1f1b' given twice\n"},
      {{"search", f, "--schedules", ""},
       "ddlsim search: --schedules: expected a comma-separated list of 1f1b, interleaved, zero-bubble and gpipe, got ''\n"},
      {{"search", f, "--method", "mcmc", "--schedules", "gpipe"},
       "ddlsim search: --schedules: applies to --method grid, not mcmc\n"},
      {{"search", f, "--virtual-stages", "2,1"},
       "ddlsim search: --virtual-stages: expected a comma-separated list of model chunks per device, 2 to 64, got '1'\n"},
      {{"search", f, "--virtual-stages", "3x"},
       "ddlsim search: --virtual-stages: expected a comma-separated list of model chunks per device, 2 to 64, got '3x'\n"},
      {{"search", f, "--virtual-stages", "3,3"}, "ddlsim search: --virtual-stages: 3 given twice\n"},
      {{"search", f, "--schedules", "1f1b", "--virtual-stages", "3"},
       "ddlsim search: --virtual-stages: applies to the interleaved schedule, which --schedules leaves out\n"},
      {{"search", f, "--method", "autoddl", "--virtual-stages", "3"},
       "ddlsim search: --virtual-stages: applies to --method grid, not autoddl\n"},
      {{"search", f, "--orders", "tp-dp"},
       "ddlsim search: --orders: expected a comma-separated list of rank orders, each tp, pp and dp (and cp, if named) once "
       "joined by '-', innermost first (tp-pp-dp, tp-dp-pp, ...), got 'tp-dp'\n"},
      {{"search", f, "--orders", "tp-pp-dp,tp-pp-tp"},
       "ddlsim search: --orders: expected a comma-separated list of rank orders, each tp, pp and dp (and cp, if named) once "
       "joined by '-', innermost first (tp-pp-dp, tp-dp-pp, ...), got 'tp-pp-tp'\n"},
      {{"search", f, "--orders", "tp-cp-dp"},
       "ddlsim search: --orders: expected a comma-separated list of rank orders, each tp, pp and dp (and cp, if named) once "
       "joined by '-', innermost first (tp-pp-dp, tp-dp-pp, ...), got 'tp-cp-dp'\n"},
      {{"search", f, "--cp", "1,0"},
       "ddlsim search: --cp: expected a comma-separated list of context-parallel degrees, 1 to 64, got '0'\n"},
      {{"search", f, "--cp", "2x"},
       "ddlsim search: --cp: expected a comma-separated list of context-parallel degrees, 1 to 64, got '2x'\n"},
      {{"search", f, "--cp", "2,2"}, "ddlsim search: --cp: 2 given twice\n"},
      {{"search", f, "--method", "autoddl", "--cp", "2"}, "ddlsim search: --cp: applies to --method grid, not autoddl\n"},
      {{"search", f, "--orders", "dp-pp-tp,dp-pp-tp"}, "ddlsim search: --orders: 'dp-pp-tp' given twice\n"},
      {{"search", f, "--method", "mcmc", "--orders", "tp-dp-pp"}, "ddlsim search: --orders: applies to --method grid, not mcmc\n"},
  });
}

TEST_CASE("ddlsim run trains a transformer on a preset cluster and reports throughput, MFU and memory") {
  // Expected: samples/s x step time = the global batch; tokens/s = samples/s x seq;
  // MFU = model TFLOP/s per device / the A100's 312 TFLOP/s bf16 peak; full
  // recomputation makes HFU exceed MFU; the same run twice prints the same bytes.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto r = ddlsim_cmd({"run", f, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("accelerators") == 16);
  for (const auto& st : j.at("strategies")) {
    const double step = st.at("step_time_s").get<double>();
    CHECK(st.at("samples_per_s").get<double>() * step == Approx(64));
    CHECK(st.at("tokens_per_s").get<double>() == Approx(st.at("samples_per_s").get<double>() * 1024));
    CHECK(st.at("mfu").get<double>() == Approx(st.at("model_tflops_per_device").get<double>() / 312.0));
    CHECK(st.at("devices") == 16);
  }
  const auto& dp = j.at("strategies").at(0);
  CHECK(dp.at("hfu").get<double>() > dp.at("mfu").get<double>());
  // The critical device's step adds up: compute + exposed tp, pp and dp + the bubble; a
  // plan without tp or pp has neither tp time nor a bubble. Its compute splits into
  // forward, backward, recomputation (dp recomputes every layer in full: between half
  // and all of its forward's time, 0 elsewhere), optimizer and interference (what
  // communication beside the compute added: the data-parallel plan's gradient buckets
  // reduce beside its backward), which add up to it.
  for (const auto& st : j.at("strategies")) {
    const auto& b = st.at("breakdown");
    const auto& x = b.at("exposed_comm_s");
    CHECK(st.at("step_time_s").get<double>() ==
          Approx(b.at("compute_s").get<double>() + x.at("tp").get<double>() + x.at("pp").get<double>() +
                 x.at("dp").get<double>() + b.at("bubble_s").get<double>()));
    const auto& parts = b.at("compute_parts_s");
    CHECK(b.at("compute_s").get<double>() ==
          Approx(parts.at("forward").get<double>() + parts.at("backward").get<double>() +
                 parts.at("recompute").get<double>() + parts.at("optimizer").get<double>() +
                 parts.at("interference").get<double>())
              .epsilon(1e-12));
    CHECK(parts.at("interference").get<double>() >= 0.0);
    CHECK(parts.at("backward").get<double>() > parts.at("forward").get<double>());
    CHECK(parts.at("optimizer").get<double>() > 0.0);
  }
  const auto& dp_parts = dp.at("breakdown").at("compute_parts_s");
  CHECK(dp_parts.at("recompute").get<double>() > 0.5 * dp_parts.at("forward").get<double>());
  CHECK(dp_parts.at("recompute").get<double>() < dp_parts.at("forward").get<double>());
  CHECK(j.at("strategies").at(1).at("breakdown").at("compute_parts_s").at("recompute") == 0.0);
  CHECK(dp.at("breakdown").at("exposed_comm_s").at("tp") == 0.0);
  // tp-pp (ZeRO-1, dp 2) waits for its reduce-scatter and its weight all-gather.
  CHECK(j.at("strategies").at(1).at("breakdown").at("exposed_comm_s").at("dp").get<double>() > 0.0);
  CHECK(dp.at("breakdown").at("bubble_s") == 0.0);
  CHECK(dp.at("breakdown").at("exposed_comm_s").at("dp").get<double>() > 0.0);
  CHECK(j.at("strategies").at(1).at("breakdown").at("bubble_s").get<double>() > 0.0);
  CHECK(j.at("strategies").at(1).at("plan") == "dp 2 x tp 4 x pp 2");
  CHECK(ddlsim_cmd({"run", f, "--json"}).out == r.out);
  CHECK(ddlsim_cmd({"run", f, "--network", "analytical", "--strategy", "tp-pp"}).status == 0);
  // The most utilized links: at most 5, by utilization = bytes / (line rate x step);
  // the DP all-reduce of 16 ranks over 2 servers crosses the HDR NICs (25 GB/s).
  const auto& links = dp.at("most_utilized_links");
  REQUIRE(links.size() == 5);
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (i > 0) CHECK(links[i - 1].at("utilization").get<double>() >= links[i].at("utilization").get<double>());
    if (links[i].at("kind") == "ib-hdr") {
      CHECK(links[i].at("utilization").get<double>() ==
            Approx(links[i].at("bytes").get<double>() / (25e9 * dp.at("step_time_s").get<double>())));
    }
  }
  // --csv: a header and one row per strategy, the step time as in the JSON.
  const std::string csv = (s.dir / "r.csv").string();
  REQUIRE(ddlsim_cmd({"run", f, "--csv", csv}).status == 0);
  std::stringstream text;
  text << std::ifstream(csv).rdbuf();
  const std::string all = text.str();
  CHECK(all.rfind("name,plan,devices,step_time_s,", 0) == 0);
  CHECK(std::count(all.begin(), all.end(), '\n') == 3);
  const std::string row = all.substr(all.find('\n') + 1);
  // As many columns in every row as in the header (no name here holds a comma).
  const std::string header = all.substr(0, all.find('\n'));
  CHECK(std::count(header.begin(), header.end(), ',') == std::count(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(row.find('\n')), ','));
  CHECK(row.rfind("\"dp\",\"dp 16 x tp 1 x pp 1\",16,", 0) == 0);
  const std::size_t at = std::string("\"dp\",\"dp 16 x tp 1 x pp 1\",16,").size();
  CHECK(std::stod(row.substr(at)) == Approx(dp.at("step_time_s").get<double>()));
  // The synthetic format has no CSV yet: one line, status 2, no file.
  const auto bad = ddlsim_cmd({"run", s.write("small.json", kSmall), "--csv", (s.dir / "x.csv").string()});
  CHECK(bad.status == 2);
  CHECK(bad.err == "ddlsim run: --csv: available for training scenarios (a preset cluster or topology file and a real model) only\n");
  CHECK_FALSE(fs::exists(s.dir / "x.csv"));
}

TEST_CASE("tp_comm_overlap: Transformer Engine's settings, read and refused in one line") {
  // Expected: the tp 4 strategy with sequence parallelism runs with TE's defaults (true)
  // and with an object of settings per overlapped GEMM in TE's form; the collectives
  // hide beside the GEMMs (less exposed tensor-parallel time), which for this small model
  // (GEMMs of 2,048 rows, run in pieces of 512, each a kernel of its own, slowed beside
  // the collectives) costs about what it hides: the step stays within 1% of the plain
  // one (slower until NVLink hops cost NCCL's 3.4 us, now 0.1% faster).
  // search --out writes the settings back as given. Bad settings are one line naming the
  // field, status 2.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const std::string sp = "strategies.1.sequence_parallel=true";
  const auto step = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run", f, "--json", "--strategy", "tp-pp", "--set", sp};
    for (const std::string& e : extra) args.insert(args.end(), {"--set", e});
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0);
  };
  const auto plain = step({}), te = step({"strategies.1.tp_comm_overlap=true"});
  const auto cfg = step({R"J(strategies.1.tp_comm_overlap={"proj_fprop": {"method": "pipeline", "num_sm": 24, "cga_size": 2,
                         "num_splits": 4, "set_sm_margin": 1}, "qkv_fprop": {"method": "ring_exchange", "aggregate": 0}})J"});
  CHECK(te.at("step_time_s").get<double>() == Approx(plain.at("step_time_s").get<double>()).epsilon(0.01));
  CHECK(te.at("breakdown").at("exposed_comm_s").at("tp").get<double>() <
        plain.at("breakdown").at("exposed_comm_s").at("tp").get<double>());
  CHECK(cfg.at("step_time_s").get<double>() != te.at("step_time_s").get<double>());
  {
    // plan_json writes the places set otherwise than TE's defaults (fp8_buf for a
    // pipelined reduce-scatter only), and the scenario it writes replays the same step.
    ParallelPlan p;
    p.dp = 2, p.tp = 4, p.pp = 2, p.global_batch = 64, p.micro_batch = 2, p.dp_mode = DataParallelMode::kZero1;
    p.sequence_parallel = true;
    p.tp_comm_overlap.on = true;
    p.tp_comm_overlap.site[kQkvWgrad].num_sm = 8;
    p.tp_comm_overlap.site[kProjFprop] = {UbMethod::kPipeline, 24, 4, true, true};
    const auto j = plan_json(p, "tp-pp");
    CHECK(nlohmann::json::parse(j.at("tp_comm_overlap").dump()) == nlohmann::json::parse(R"J({"qkv_wgrad": {"method": "bulk", "num_sm": 8, "set_sm_margin": false},
        "proj_fprop": {"method": "pipeline", "num_sm": 24, "num_splits": 4, "set_sm_margin": true, "fp8_buf": true}})J"));
    const auto given = step({R"J(strategies.1.tp_comm_overlap={"qkv_wgrad": {"num_sm": 8}, "proj_fprop": {"num_sm": 24,
                            "set_sm_margin": 1, "fp8_buf": 1}})J"});
    nlohmann::json doc = nlohmann::json::parse(kTraining);
    doc["strategies"] = nlohmann::json::array({doc["strategies"][0], nlohmann::json::parse(j.dump())});
    const std::string g = s.write("written.json", doc.dump());
    const auto r = ddlsim_cmd({"run", g, "--json", "--strategy", "tp-pp"});
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out).at("strategies").at(0).at("step_time_s").get<double>() ==
          given.at("step_time_s").get<double>());
    // A search whose first strategy (kept, though unfit) carries both tp_comm_overlap and
    // overlap_tp_backward still grids the sequence-parallel plans: they take the first.
    const auto count = [&](bool both) {
      std::vector<std::string> args = {"search", f, "--json", "--network", "analytical", "--replay", "1", "--set", "strategies.0.tp=2",
                                       "--set", "strategies.0.sequence_parallel=true", "--set", "strategies.0.tp_comm_overlap=true"};
      if (both) args.insert(args.end(), {"--set", "strategies.0.overlap_tp_backward=true"});
      const auto q = ddlsim_cmd(args);
      REQUIRE(q.status == 0);
      return nlohmann::json::parse(q.out).at("enumerated").get<int>();
    };
    CHECK(count(true) == count(false));
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"strategies.1.tp_comm_overlap=1"},
       "strategies.1.tp_comm_overlap: expected true, false or an object of Transformer Engine's settings per overlapped GEMM "
       "(qkv_fprop, proj_fprop, ...), got 1"},
      {{"strategies.1.sequence_parallel=false", "strategies.1.tp_comm_overlap=true"},
       "strategies.1: tp_comm_overlap needs sequence parallelism (sequence_parallel, tp > 1)"},
      {{"strategies.1.tp_comm_overlap=true", "strategies.1.overlap_tp_backward=true"},
       "strategies.1: tp_comm_overlap already overlaps the backward's collectives: leave out overlap_tp_backward"},
      {{R"J(strategies.1.tp_comm_overlap={"proj_fprop": {"method": "bulk"}})J"},
       "strategies.1.tp_comm_overlap.proj_fprop.method: expected one of \"pipeline\", \"ring_exchange\", got \"bulk\""},
      {{R"J(strategies.1.tp_comm_overlap={"qkv_wgrad": {"num_sm": 108}})J"},
       "strategies.1.tp_comm_overlap.qkv_wgrad.num_sm: expected fewer than the a100-80gb's 108 SMs, got 108"},
      {{R"J(strategies.1.tp_comm_overlap={"qkv_fprop": {"num_splits": 2}})J"},
       "strategies.1.tp_comm_overlap.qkv_fprop.num_splits: applies to the pipeline method only"},
      {{R"J(strategies.1.tp_comm_overlap={"fc2_fprop": {"set_sm_margin": 2}})J"},
       "strategies.1.tp_comm_overlap.fc2_fprop.set_sm_margin: expected true, false, 0 or 1, got 2"},
      {{R"J(strategies.1.tp_comm_overlap={"qkv_fprp": {}})J"},
       "strategies.1.tp_comm_overlap.qkv_fprp: unknown key (did you mean 'qkv_fprop'?)"},
      {{R"J(catalog={"accelerators": {"a100-80gb": {"sms": 8}}})J", "strategies.1.tp_comm_overlap=true"},
       "strategies.1.tp_comm_overlap.proj_fprop.num_sm: expected fewer than the a100-80gb's 8 SMs, got 16"},
      {{R"J(strategies.1.tp_comm_overlap={"proj_fprop": {"num_splits": 4294967297}})J"},
       "strategies.1.tp_comm_overlap.proj_fprop.num_splits: at most 1024, got 4294967297"},
      {{R"J(strategies.1.tp_comm_overlap={"qkv_wgrad": {"num_sm": 4294967304}})J"},
       "strategies.1.tp_comm_overlap.qkv_wgrad.num_sm: expected fewer than the a100-80gb's 108 SMs, got 4294967304"},
      {{R"J(strategies.1.tp_comm_overlap={"qkv_fprop": {"fp8_buf": 0}})J"},
       "strategies.1.tp_comm_overlap.qkv_fprop.fp8_buf: applies to the pipeline method's reduce-scatters only (Transformer "
       "Engine's all-gathers move FP8 under FP8 GEMMs whatever it says)"},
      {{R"J(cluster={"preset": "tpu-v4-pod", "dims": [4, 4, 1]})J", "strategies.1.tp_comm_overlap=true"},
       "strategies.1.tp_comm_overlap: the accelerator 'tpu-v4' has no SM count in the catalog (Transformer Engine's "
       "userbuffers run on NVIDIA GPUs)"},
  };
  for (const auto& [sets, line] : cases) {
    INFO(sets.back());
    std::vector<std::string> args = {"run", f, "--set", sp};
    for (const std::string& e : sets) args.insert(args.end(), {"--set", e});
    const auto r = ddlsim_cmd(args);
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim run: " + line + "\n");
    CHECK(r.out.empty());
  }
}

TEST_CASE("training scenarios: bad input is one line naming the JSON path, status 2") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"strategies.1.tp=5", "strategies.1: tp (5) must divide the attention heads (24)"},
      {"cluster.nodes=125000000", "cluster.nodes: expected 1 to 4096, got 125000000"},  // 10^9 GPUs
      {"strategies.0.global_batch=65", "strategies.0: the global batch (65) must be divisible by dp x micro_batch (32)"},
      {"strategies.0.schedule=1f1", "strategies.0.schedule: expected one of \"1f1b\", \"gpipe\", \"interleaved\", \"zero-bubble\", got \"1f1\" (did you mean '1f1b'?)"},
      {"strategies.0.zero=1.5", "strategies.0.zero: expected 0, 1, 2 or 3"},
      {"strategies.0.t_p=2", "strategies.0.t_p: unknown key (did you mean 'tp'?)"},
      {"workload.batch=8", "workload.batch: the strategies set the batch (global_batch, micro_batch)"},
      {"workload.model=resnet50", "workload.seq: resnet50 is not a transformer; it has no sequence"},
      {"strategies.1.pp=32", "strategies.1: dp x tp x pp = 128 devices, but the cluster has 16"},
      {"strategies.1.stage_layers=[]", "strategies.1.stage_layers: expected the layers of each of the 2 stages, got []"},
      {"strategies.1.stage_layers=[12.5,11.5]", "strategies.1.stage_layers.0: expected a count of layers (0 or more), got 12.5"},
      {"strategies.1.stage_layers=[25,-1]", "strategies.1.stage_layers.1: expected a count of layers (0 or more), got -1"},
      {"strategies.1.microbatch_group=0", "strategies.1.microbatch_group: expected a positive integer, got 0"},
      {"strategies.1.cp=0", "strategies.1.cp: expected a positive integer, got 0"},
      {"strategies.1.cp=2", "strategies.1: cp > 1 needs flash attention (workload attention \"flash\"): context parallelism runs in its kernels"},
      {"strategies.1.cp=3", "strategies.1: cp (3) needs the sequence (1024) to split into 2 x cp = 6 equal chunks"},
      {"strategies.1.microbatch_group=4", "strategies.1: microbatch_group applies to the interleaved schedule only"},
      // Names are printed in tables, CSV and terminals: an escape or a newline broke them.
      {"strategies.0.name=\"a\\u001bb\"", "strategies.0.name: a control character (U+001B) in the name; use printable characters"},
      {"name=\"x\\ny\"", "name: a control character (U+000A) in the name; use printable characters"},
      {"strategies.1.order=[\"tp\",\"dp\"]", "strategies.1.order: expected tp, pp and dp once each (and cp at most once; left out, it sits just inside dp), innermost first, e.g. [\"tp\", \"pp\", \"dp\"] or [\"tp\", \"cp\", \"dp\", \"pp\"]"},
      {"strategies.1.overlap_p2p=1", "strategies.1.overlap_p2p: expected true or false, got 1"},
      {"strategies.1.overlap_tp_backward=1", "strategies.1.overlap_tp_backward: expected true or false, got 1"},
      {"strategies.1.overlap_param_gather=1", "strategies.1.overlap_param_gather: expected true or false, got 1"},
      {"strategies.1.align_param_gather=1", "strategies.1.align_param_gather: expected true or false, got 1"},
      {"strategies.1.align_param_gather=true", "strategies.1: align_param_gather needs overlap_param_gather (the gathers it dispatches)"},
      {"strategies.0.overlap_param_gather=true", "strategies.0: overlap_param_gather applies to zero 1 (Megatron-Core's distributed optimizer: the all-gather of the updated weights)"},
      {"workload.parallel_layers=1", "workload.parallel_layers: expected true or false, got 1"},
      {"strategies.1.recompute_layers=2", "strategies.1.recompute_layers: applies to full recomputation only (set \"recompute\": \"full\")"},
      {"strategies.0.recompute_layers=30", "strategies.0: recompute_layers (30) exceeds the layers (24)"},
      {"strategies.1.shard=2", "strategies.1.shard: applies to ZeRO-3 only (set \"zero\": 3)"},
      {"strategies.0.recompute_layers=0", "strategies.0.recompute_layers: expected a positive integer, got 0"},
      {"strategies.1.order=[\"tp\",\"pp\",\"xp\"]", "strategies.1.order.2: expected one of \"tp\", \"pp\", \"dp\", \"cp\", got \"xp\" (did you mean 'tp'?)"},
      {"strategies.0.grad_accumulation=fp16", "strategies.0.grad_accumulation: expected one of \"fused\", \"add\", \"fp32\", got \"fp16\""},
      {"strategies.0.grad_reduce_fp32=2", "strategies.0.grad_reduce_fp32: expected true or false, got 2"},
      // dp left out fills the cluster, which 16 GPUs cannot do by tp 4 x pp 3 (it left 4 idle).
      {"strategies.1.pp=3", "strategies.1.dp: left out, it fills the cluster, but its 16 accelerators are not a multiple of tp x pp = 12; give dp"},
      // The same fault came second: the batch check ran first on the dp it implied (16 / 3 =
      // 5) and asked for a global batch divisible by 10, which fixed nothing.
      {"strategies.0.tp=3", "strategies.0.dp: left out, it fills the cluster, but its 16 accelerators are not a multiple of tp x pp = 3; give dp"},
      // dp x micro_batch overflowed 64 bits and divided by zero (SIGFPE).
      {"strategies.0.micro_batch=4611686018427387904", "strategies.0.micro_batch: 4611686018427387904 is more than the global batch (64)"},
  };
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  for (const auto& [set, line] : cases) {
    INFO(set);
    const auto r = ddlsim_cmd({"run", f, "--set", set});
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim run: " + line + "\n");
    CHECK(r.out.empty());
  }
}

TEST_CASE("training scenarios: interleaving with uneven chunks and micro-batch groups") {
  // Expected: 24 layers on pp 2 x v 5 (10 chunks of 3 or 2 layers) run, with the 16
  // micro-batches in groups of pp or of 8; the larger groups warm up with more forwards
  // ((v - 1) g more), so the peak memory grows while the compute stays the same; groups
  // that leave a last one shorter than pp are refused with a group that fits, and a
  // partition per chunk must list every chunk.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const std::vector<std::string> interleaved{"run", f, "--json", "--strategy", "tp-pp", "--set",
                                             "strategies.1.schedule=\"interleaved\"", "--set", "strategies.1.virtual_stages=5"};
  std::vector<nlohmann::json> runs;
  for (const char* group : {"2", "8"}) {
    std::vector<std::string> args = interleaved;
    args.insert(args.end(), {"--set", std::string("strategies.1.microbatch_group=") + group});
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    runs.push_back(nlohmann::json::parse(r.out).at("strategies").at(0));
  }
  CHECK(runs[1].at("peak_memory_bytes").get<double>() > runs[0].at("peak_memory_bytes").get<double>());
  CHECK(runs[1].at("breakdown").at("compute_s").get<double>() ==
        Approx(runs[0].at("breakdown").at("compute_s").get<double>()).epsilon(1e-12));
  std::vector<std::string> odd = interleaved, partition = interleaved;
  odd.insert(odd.end(), {"--set", "strategies.1.microbatch_group=3"});
  partition.insert(partition.end(), {"--set", "strategies.1.stage_layers=[12,12]"});
  expect_exact_errors({
      {odd, "ddlsim run: strategies.1: the 16 micro-batches per step in groups of 3 (microbatch_group) leave a "
            "last group of 1, fewer than pp (2): make them a multiple of the group, or set microbatch_group to e.g. 2\n"},
      {partition, "ddlsim run: strategies.1: the layer partition has 2 entries, pp x virtual_stages is 10 (one per model "
                  "chunk, in model order)\n"},
  });
}

TEST_CASE("training scenarios: a whole-valued number is an integer in lists too") {
  // Expected: as the README says of every integer, stage_layers [12.0, 12] is the split
  // [12, 12] (it was refused: "expected a positive number of layers, got 12.0"); the
  // same report, byte for byte.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto a = ddlsim_cmd({"run", f, "--strategy", "tp-pp", "--json", "--set", "strategies.1.stage_layers=[12,12]"});
  const auto b = ddlsim_cmd({"run", f, "--strategy", "tp-pp", "--json", "--set", "strategies.1.stage_layers=[12.0,12]"});
  REQUIRE(a.status == 0);
  CHECK(b.status == 0);
  CHECK(b.out == a.out);
  // The cluster's title says the node count as read: 4.0 nodes is 4 (it echoed "4.0
  // nodes"), and one is one node.
  const auto four = ddlsim_cmd({"run", f, "--strategy", "dp", "--json", "--set", "cluster.nodes=4.0"});
  REQUIRE(four.status == 0);
  CHECK(nlohmann::json::parse(four.out).at("cluster") == "dgx-a100, 4 nodes");
  const auto one = ddlsim_cmd({"run", f, "--strategy", "dp", "--json", "--set", "cluster.nodes=1"});
  REQUIRE(one.status == 0);
  CHECK(nlohmann::json::parse(one.out).at("cluster") == "dgx-a100, 1 node");
}

TEST_CASE("training scenarios: a micro-batch's tensors stay within what the workload command models") {
  // Expected: as 'ddlsim workload --batch' refuses, a micro-batch of 1,000 sequences of
  // 8,000,000 tokens on Llama 3 8B (32 heads) makes 1000 x 32 x 8e6^2 = 2.05e18 attention
  // scores, past 1e18 (the run accepted it), and a micro-batch past 1,000,000 is refused
  // whatever the sequence.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  auto r = ddlsim_cmd({"run", f, "--set", "workload.model=llama3-8b", "--set", "workload.seq=8000000", "--set",
                       "strategies.0.global_batch=16000", "--set", "strategies.0.micro_batch=1000"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: strategies.0.micro_batch: batch x heads x seq^2 = 2.05e+18, beyond the 1e18 ddlsim models\n");
  r = ddlsim_cmd({"run", f, "--set", "strategies.0.global_batch=32000000", "--set", "strategies.0.micro_batch=2000000"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: strategies.0.micro_batch: expected 1 to 1000000, got 2000000\n");
}

TEST_CASE("parallel layers: a transformer option, and no SBP chain") {
  // Expected: workload.parallel_layers on a CNN, and an SBP strategy on a model whose
  // attention and MLP run side by side, are one line each and status 2; on a GPT it runs.
  Scratch s;
  const std::string cnn = s.write("cnn.json", R"J({"name": "v", "cluster": {"preset": "single-gpu-ethernet", "nodes": 4},
    "workload": {"model": "vgg16", "parallel_layers": true},
    "strategies": [{"name": "dp", "global_batch": 64, "sbp": {"mesh": [4], "signatures": {"*": "S(0) x B -> S(0)"}}}]})J");
  const auto v = ddlsim_cmd({"run", cnn});
  CHECK(v.status == 2);
  CHECK(v.err == "ddlsim run: workload.parallel_layers: vgg16 is not a transformer; it has no layers to run side by side\n");
  const std::string gpt = s.write("gpt.json", R"J({"name": "p", "cluster": {"preset": "dgx-a100", "nodes": 1},
    "workload": {"model": "megatron-1.7b", "seq": 1024, "parallel_layers": true},
    "strategies": [{"name": "tp8", "tp": 8, "global_batch": 8, "micro_batch": 8},
                   {"name": "sbp", "global_batch": 8, "sbp": {"mesh": [8], "signatures": {"*": "S(0) x B -> S(0)"}}}],
    "simulation": {"network": "analytical"}})J");
  const auto g = ddlsim_cmd({"run", gpt});
  CHECK(g.status == 2);
  CHECK(g.err.find("ddlsim run: sbp: megatron-1.7b runs attention and MLP side by side (parallel layers)") == 0);
  const auto ok = ddlsim_cmd({"run", gpt, "--set", "strategies=[{\"name\": \"tp8\", \"tp\": 8, \"global_batch\": 8, \"micro_batch\": 8}]"});
  CHECK(ok.status == 0);
}

TEST_CASE("training scenarios write a trace and a task graph of one strategy") {
  // Expected: --trace with two strategies is refused (one line, status 2, no file);
  // with --strategy it writes a JSON trace whose tracks include the compute streams and
  // the network, and --dot a digraph.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const std::string trace = (s.dir / "step.json").string(), dot = (s.dir / "step.dot").string();
  auto r = ddlsim_cmd({"run", f, "--trace", trace});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim run: --trace: the scenario has 2 strategies; choose one with --strategy NAME\n");
  CHECK_FALSE(fs::exists(trace));
  r = ddlsim_cmd({"run", f, "--strategy", "tp-pp", "--trace", trace, "--dot", dot});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(std::ifstream(trace));
  std::set<std::string> tracks;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("name") == "thread_name") tracks.insert(e.at("args").at("name").get<std::string>());
  }
  CHECK(tracks.count("dp0.pp1.compute") == 1);
  CHECK(tracks.count("dp1.pp0.tp") == 1);
  CHECK(tracks.count("network") == 1);
  std::ifstream d(dot);
  std::string first;
  std::getline(d, first);
  CHECK(first.rfind("digraph", 0) == 0);
}

TEST_CASE("validate: --check fails (status 3) when a figure is worse than recorded") {
  // Expected: recording a suite and checking against that record passes, with one job or
  // two; a record claiming a smaller mean error for one kind of point fails with one line
  // naming it; an unknown suite is bad input. (The NCCL suite: the mechanism is the same
  // for every suite, and it runs in milliseconds, also under the sanitizers.)
  Scratch s;
  const std::string rec = (s.dir / "acc.json").string();
  auto r = ddlsim_cmd({"validate", "--suite", "nccl", "--record", rec, "--jobs", "1"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("nccl           all ") != std::string::npos);
  // The cases' columns are named (which figure is measured, which predicted).
  CHECK(r.out.rfind("nccl:\n     #  model ", 0) == 0);
  CHECK(r.out.find("  measured  predicted unit    error  case\n     1  ") != std::string::npos);
  CHECK(r.out.find("\nnetwork model: each case's own (flow for vTrain and NCCL cases") != std::string::npos);
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec, "--jobs", "2"});
  CHECK(r.status == 0);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(rec));
  const std::string model = j["nccl"].begin().key();
  // No two NCCL points compare (each is its own machine): no pairs, and no tau (null, not 0).
  CHECK(j["nccl"]["all"]["pairs"] == 0);
  CHECK(j["nccl"]["all"]["kendall_tau"].is_null());
  j["nccl"][model]["mean_abs_error"] = j["nccl"][model]["mean_abs_error"].get<double>() - 0.01;
  std::ofstream(rec) << j.dump();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err.find("worse than recorded: nccl / " + model + ": mean_abs_error") != std::string::npos);
  // A malformed record stops with one line naming it, before any table is printed.
  std::ofstream(rec) << R"({"nccl": {"all": {"mean_abs_error": "x"}}})";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "ddlsim validate: " + rec + ": nccl.all.mean_abs_error: expected a number of at least 0, got \"x\"\n");
  std::ofstream(rec) << "[1]";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "ddlsim validate: " + rec + ": expected an object of suites\n");
  // Another kind of file (a scenario), or a record with a key --record never writes, is
  // bad input too (a scenario came out as four regressions, status 3).
  std::ofstream(rec) << R"({"name": "s", "cluster": {"preset": "dgx-a100"}})";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "ddlsim validate: " + rec + ": cluster: unknown suite (a record from 'ddlsim validate --record' has "
                 "vtrain-single, vtrain-multi, nccl, public-runs or measured)\n");
  std::ofstream(rec) << R"({"nccl": {"all": {"mean_abs_error": 0.1, "worst_abs_error": 0.3, "bogus": 1}}})";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim validate: " + rec + ": nccl.all.bogus: unknown key\n");
  // A record that holds none of a suite run (another suite's, an empty one) compares
  // nothing: bad input, one line naming what it records, before any replay.
  std::ofstream(rec) << R"({"vtrain-single": {}})";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "ddlsim validate: --check: " + rec + " records no figures for suite 'nccl' (it records vtrain-single); "
                 "check against a record of the suites run, or --record one\n");
  std::ofstream(rec) << "{}";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.err.find("records no figures for suite 'nccl' (it records none)") != std::string::npos);
  // A suite recorded without one of the models run: that model compares nothing, and a
  // check that compares nothing fails.
  std::ofstream(rec) << R"({"nccl": {}})";
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err.find("nccl / all: not in " + rec + " (record it with --record)") != std::string::npos);
  r = ddlsim_cmd({"validate", "--suite", "vtrain"});
  CHECK(r.status == 2);
  CHECK(r.err ==
        "ddlsim validate: --suite: unknown suite 'vtrain' (did you mean 'vtrain-single'?); suites: vtrain-single, "
        "vtrain-multi, nccl, public-runs, all\n");
}

TEST_CASE("validate: the cases within 10% of their measurement, counted per model and held by --check") {
  // Expected: per model (and per suite, "all"), within_10pct is the number of cases whose
  // |predicted - measured| / measured is at most 0.10, as the CSV's error column gives
  // them for the cases that ran (counted here from the CSV, its quoted fields read as
  // quoted, a refused case's error column 0 and not counted); the table prints
  // it beside the cases; a record claiming one case more within 10% fails --check with
  // one line naming the model.
  Scratch s;
  const std::string rec = (s.dir / "acc.json").string(), csv = (s.dir / "nccl.csv").string();
  auto r = ddlsim_cmd({"validate", "--suite", "nccl", "--record", rec, "--csv", csv, "--jobs", "1"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("  cases within 10%  mean |err| %") != std::string::npos);
  const auto fields = [](const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char ch = line[i];
      if (ch == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') out.back() += ch, ++i;
      else if (ch == '"') quoted = !quoted;
      else if (ch == ',' && !quoted) out.emplace_back();
      else out.back() += ch;
    }
    return out;
  };
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  const auto header = fields(line);
  const auto column = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t model_at = column("model"), error_at = column("error"), refused_at = column("refused");
  REQUIRE(error_at < header.size());
  REQUIRE(refused_at < header.size());
  std::map<std::string, int> within;
  int rows = 0;
  while (std::getline(in, line)) {
    const auto f = fields(line);
    REQUIRE(f.size() == header.size());
    ++rows;
    within[f[model_at]] += 0;
    if (f[refused_at].empty() && std::abs(std::stod(f[error_at])) <= 0.10) ++within[f[model_at]], ++within["all"];
  }
  CHECK(rows == 45);
  nlohmann::json j = nlohmann::json::parse(read_file(rec));
  for (const auto& [model, n] : within) CHECK(j["nccl"][model]["within_10pct"] == n);
  CHECK(j["nccl"].size() == within.size());
  const int all = j["nccl"]["all"]["within_10pct"];
  // The table's row: suite, model, cases, within 10%, ...
  const std::size_t at = r.out.find("\nnccl           all ");
  REQUIRE(at != std::string::npos);
  std::istringstream row(r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1));
  std::string suite, name;
  int cases = 0, shown = -1;
  row >> suite >> name >> cases >> shown;
  CHECK(cases == 45);
  CHECK(shown == all);
  CHECK(ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec}).status == 0);
  j["nccl"]["all"]["within_10pct"] = all + 1;
  std::ofstream(rec) << j.dump();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err == "ddlsim validate: worse than recorded: nccl / all: " + std::to_string(all) + " cases within 10%, recorded " +
                 std::to_string(all + 1) + " in " + rec + "\n");
}

TEST_CASE("validate --record adds to a record and --check holds every model of it") {
  // Expected: recording one suite into a record of others keeps theirs, byte for byte in
  // their figures; a record that is --check's own file is left as it was when the check
  // fails (else the worse figures would pass the next check); --record to a file that is
  // no record is refused before any work; a recorded model the run no longer produces, or
  // a count that is not whole, fails the check.
  Scratch s;
  const std::string rec = (s.dir / "acc.json").string();
  const std::string other = R"({"vtrain-multi": {"all": {"cases": 109, "mean_abs_error": 0.07, "worst_abs_error": 0.5}}})";
  std::ofstream(rec) << other;
  auto r = ddlsim_cmd({"validate", "--suite", "nccl", "--record", rec});
  REQUIRE(r.status == 0);
  nlohmann::json j = nlohmann::json::parse(read_file(rec));
  CHECK(j["vtrain-multi"] == nlohmann::json::parse(other)["vtrain-multi"]);
  CHECK(j["nccl"]["all"]["cases"] == 45);
  CHECK(nlohmann::ordered_json::parse(read_file(rec)).begin().key() == "vtrain-multi");  // its place kept, the new suite after
  // Recorded again: only the suite run is replaced.
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--record", rec});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(read_file(rec)) == j);
  // The same file checked and recorded, the check failing: the record stays.
  j["nccl"]["all"]["mean_abs_error"] = 0.001;
  std::ofstream(rec) << j.dump(2);
  const std::string tight = read_file(rec);
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec, "--record", rec});
  CHECK(r.status == 3);
  CHECK(read_file(rec) == tight);
  CHECK(r.err.find("worse than recorded: nccl / all: mean_abs_error") != std::string::npos);
  CHECK(r.err.find("ddlsim validate: --record: " + rec + " left as it was, since the check against it failed\n") !=
        std::string::npos);
  // ... also when the two name it differently.
  const std::string dotted = (s.dir / "." / "acc.json").string();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec, "--record", dotted});
  CHECK(r.status == 3);
  CHECK(read_file(rec) == tight);
  // Another record file takes the figures even when the check fails.
  const std::string fresh = (s.dir / "fresh.json").string();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec, "--record", fresh});
  CHECK(r.status == 3);
  CHECK(nlohmann::json::parse(read_file(fresh))["nccl"]["all"]["cases"] == 45);
  // A model recorded that the run does not produce: its cases are gone.
  j = nlohmann::json::parse(read_file(fresh));
  j["nccl"]["gone"] = j["nccl"]["all"];
  std::ofstream(rec) << j.dump();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err == "ddlsim validate: worse than recorded: nccl / gone: recorded in " + rec +
                 " but no longer produced (its cases are gone)\n");
  j["nccl"].erase("gone");
  j["nccl"]["all"]["cases"] = 13.5;
  std::ofstream(rec) << j.dump();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", rec});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim validate: " + rec + ": nccl.all.cases: expected a whole number, got 13.5\n");
  // Figures replayed on another network model are no baseline: --network is recorded
  // where given, and a check on another model is refused.
  const std::string analytical = (s.dir / "analytical.json").string();
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--network", "analytical", "--record", analytical});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(read_file(analytical))["nccl"]["all"]["network"] == "analytical");
  CHECK(ddlsim_cmd({"validate", "--suite", "nccl", "--network", "analytical", "--check", analytical}).status == 0);
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", analytical});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("with the network model analytical, and this run uses each case's own (give --network analytical)\n") !=
        std::string::npos);
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--network", "analytical", "--check", fresh});
  CHECK(r.status == 2);
  CHECK(r.err.find("with the network model each case's own, and this run uses analytical (leave --network out)\n") !=
        std::string::npos);
  // Nor does one record keep suites of two network models: every later --check of it
  // would fail one way or the other.
  const std::string mixed = (s.dir / "mixed.json").string();
  std::ofstream(mixed) << other;
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--network", "analytical", "--record", mixed});
  CHECK(r.status == 2);
  CHECK(read_file(mixed) == other);
  CHECK(r.err.find("--record: " + mixed + " keeps vtrain-multi / all recorded with the network model each case's own, "
                   "and this run uses analytical;") != std::string::npos);
  // --csv may not overwrite --check's record (--record may: it is read first).
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--check", fresh, "--csv", fresh});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim validate: --csv: " + fresh + " is --check's record too; writing the CSV there would destroy it, "
                 "so give the CSV another name\n");
  // An empty file takes a record as a missing one does.
  const std::string empty = s.write("empty.json", "");
  CHECK(ddlsim_cmd({"validate", "--suite", "nccl", "--record", empty}).status == 0);
  CHECK(nlohmann::json::parse(read_file(empty))["nccl"]["all"]["cases"] == 45);
  // A file that is no record is not replaced.
  const std::string junk = s.write("junk.json", "not json");
  r = ddlsim_cmd({"validate", "--suite", "nccl", "--record", junk});
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(read_file(junk) == "not json");
  CHECK(r.err.rfind("ddlsim validate: --record: " + junk + " is there and is no record that --record could add to (", 0) == 0);
}

TEST_CASE("a report that does not reach standard output fails with status 1") {
  // Expected: status 1 and one line on stderr when the report's stream fails (a full
  // disk: the stream drops every write after the first failed one), for any command; a
  // bad command line keeps its status 2.
  struct Full : std::streambuf {
    int overflow(int) override { return traits_type::eof(); }
  } full;
  std::ostream out(&full);
  std::ostringstream err;
  CHECK(ddlsim::cli_main({"validate", "--suite", "nccl", "--json"}, out, err) == 1);
  CHECK(err.str() == "ddlsim: writing standard output failed (a full disk, a closed pipe or descriptor?): the report "
                     "is incomplete\n");
  std::ostream out2(&full);
  std::ostringstream err2;
  CHECK(ddlsim::cli_main({"topology", "--preset", "dgx-a100"}, out2, err2) == 1);
  std::ostream out3(&full);
  std::ostringstream err3;
  CHECK(ddlsim::cli_main({"validate", "--suite", "nope"}, out3, err3) == 2);
  CHECK(err3.str().find("writing standard output") == std::string::npos);  // one line: the bad input's
}

TEST_CASE("validate: an argument without an option is named, and suites match in any letter case") {
  // Expected: the stray argument named in one line (boost's own message named none), and
  // 'NCCL' suggested as 'nccl'; --case a whole number; --cost-model's file: an empty name
  // is no default, a CSV is the estimates' place.
  expect_exact_errors({
      {{"validate", "c5.json", "--cost-model"},
       "ddlsim validate: unexpected argument 'c5.json': it takes none without an option; every other file follows the "
       "option it is for (see 'ddlsim validate --help')\n"},
      {{"run", "a.json", "b.json"},
       "ddlsim run: unexpected argument 'b.json': one more than the scenario it takes; every other file follows the "
       "option it is for (see 'ddlsim run --help')\n"},
      {{"validate", "--suite", "nccl", "--case", "1.5"},
       "ddlsim validate: --case: expected a whole number from 1 to 45 (the cases of nccl), got '1.5'\n"},
      {{"validate", "--cost-model", ""},
       "ddlsim validate: --cost-model: an empty file name (leave the value out for the embedded default scenario)\n"},
      {{"validate", "--cost-model", "mine.csv"},
       "ddlsim validate: --cost-model: mine.csv is a CSV; --cost-model takes a training scenario (JSON), and your "
       "estimates go in --estimates FILE.csv beside it\n"},
  });
  auto r = ddlsim_cmd({"search", "a.json", "b.json"});
  CHECK(r.status == 2);
  CHECK(r.err.rfind("ddlsim search: unexpected argument 'b.json': one more than the scenario it takes;", 0) == 0);
  r = ddlsim_cmd({"validate", "--suite", "NCCL"});
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown suite 'NCCL' (did you mean 'nccl'?)") != std::string::npos);
}

TEST_CASE("validate: the nccl and public-runs cases hold the published figures, converted as stated") {
  // Expected, from the sources (validation/nccl/cases.csv, validation/public_runs/cases.json):
  // 45 NCCL points, 21 bus bandwidths in GB/s and 24 times in us (9 of the bandwidths
  // vTrain's A100 server at 2, 4 and 8 GPUs and 64 MiB, 256 MiB and 1 GiB: 2 GPUs at 64 MiB
  // 165.81 GB/s, 8 at 1 GiB 229.35, its lookup tables' out-of-place figures; 23 of the
  // times the 2-server all-reduces of dstack's Nebius H100 and Crusoe A100 examples at 1 KiB,
  // 4, 16 and 64 KiB, 128 KiB, 256 KiB (the H100s' only) and 512 KiB, and 1-256 MiB, NCCL's
  // algorithm left to NCCL: 31.36 us at 1 KiB, 58.59 us at 256 KiB and 87.08 us at 1 MiB
  // on the H100s, 49.43 us at 64 KiB, 68.02 us at 512 KiB and 2,700.36 us at 256 MiB on
  // the A100s; one nccl issue 1244's 47 us); 124 runs. A run published
  // as TFLOP/s per GPU becomes a step time by Narayanan et al.'s count, F = 96 B s l h^2
  // (1 + s/(6h) + V/(16 l h)) / (TFLOP/s x GPUs): the 174.6B GPT (96 layers, hidden
  // 12288, vocabulary 51200, sequence 2048) at batch 1536 on 384 GPUs and 153 TFLOP/s is
  // 76.78 s; Table 1's 1T GPT (128 layers, hidden 25600) at batch 3072 on 3072 GPUs and
  // 163 TFLOP/s is 102.6 s. BLOOM's 104.7 s stays; PaLM's 238.3K tokens/s at 2048 x 2048
  // tokens per step is 17.60 s. NVIDIA's NeMo GPT-3 175B rows are step times as published,
  // 5 in BF16 and 5 in FP8 on 128 to 2,048 H100s: 8.309 s on 128 GPUs in BF16, 5.96 s on
  // 2,048 in FP8. Its Llama 3.1 rows too, 5 per precision for 8B (8-128 GPUs: 12.91 s on 8
  // in BF16), 6 for 70B (64-2,048: 11.39 s on 2,048 in FP8), 6 for 405B (32-2,304, with
  // NVIDIA's proxies of 7, 21 and 42 layers below 576 GPUs: 8.75 s on 96 in BF16, printed
  // '8.7  5' in the README's table; 12.35 s on 2,304 in FP8).
  const auto nccl = ddlsim::validation_cases("nccl");
  REQUIRE(nccl.size() == 45);
  CHECK(std::count_if(nccl.begin(), nccl.end(), [](const auto& c) { return c.unit == "GB/s"; }) == 21);
  const auto point = [&](const std::string& label) {
    for (const auto& c : nccl) {
      if (c.label.rfind(label, 0) == 0) return c;
    }
    FAIL("no NCCL point " << label);
    return nccl.front();
  };
  CHECK(point("2 x A100 SXM (vTrain's server: NVLink 3 + NVSwitch): ring all-reduce of 64M").measured == 165.81);
  CHECK(point("8 x A100 SXM (vTrain's server: NVLink 3 + NVSwitch): ring all-reduce of 1G").measured == 229.35);
  CHECK(std::count_if(nccl.begin(), nccl.end(), [](const auto& c) { return c.unit == "us"; }) == 24);
  CHECK(point("2 x 8 H100 (Nebius; 8 InfiniBand NICs per node): auto all-reduce of 256K").measured == 58.59);
  CHECK(point("2 x 8 A100 80GB SXM (Crusoe; 8 InfiniBand NICs per node): auto all-reduce of 512K").measured == 68.02);
  CHECK(point("2 x 8 H100 (Nebius; 8 InfiniBand NICs per node): auto all-reduce of 1M").measured == 87.08);
  CHECK(point("2 x 8 A100 80GB SXM (Crusoe; 8 InfiniBand NICs per node): auto all-reduce of 256M").measured == 2700.36);
  CHECK(point("2 x 8 H100 (Nebius; 8 InfiniBand NICs per node): auto all-reduce of 1K").measured == 31.36);
  CHECK(point("2 x 8 A100 80GB SXM (Crusoe; 8 InfiniBand NICs per node): auto all-reduce of 64K").measured == 49.43);
  const auto runs = ddlsim::validation_cases("public-runs");
  REQUIRE(runs.size() == 124);
  const auto find = [&](const std::string& model, const std::string& label) {
    for (const auto& c : runs) {
      if (c.model == model && c.label.rfind(label, 0) == 0) return c;
    }
    FAIL("no case " << model << " / " << label);
    return runs.front();
  };
  const double l = 96, h = 12288, seq = 2048, V = 51200, B = 1536;
  const double flops = 96 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (16 * l * h));
  const auto ptdp = find("Megatron-LM 174.6B (Table 2)", "PTD-P tp 8 x pp 12 x dp 4");
  CHECK(ptdp.gpus == 384);
  CHECK(ptdp.measured == ddlsim::test::Approx(flops / (153e12 * 384)));
  CHECK(ptdp.measured == ddlsim::test::Approx(76.78).epsilon(1e-3));
  const auto trillion = find("Megatron-LM 1.7B-1T (Table 1)", "1008B: tp 8 x pp 64 x dp 6");
  CHECK(trillion.gpus == 3072);
  CHECK(trillion.measured == ddlsim::test::Approx(102.6).epsilon(1e-3));
  CHECK(find("BLOOM 176B", "tp 4").measured == 104.7);
  CHECK(find("PaLM 540B", "tp 12").measured == ddlsim::test::Approx(2048.0 * 2048 / 238300));
  for (const char* run : {"NeMo GPT-3 175B BF16, DGX H100", "NeMo GPT-3 175B FP8, DGX H100"}) {
    CHECK(std::count_if(runs.begin(), runs.end(), [&](const auto& c) { return c.model == run; }) == 5);
  }
  // Each NeMo row: tp 4 x pp 8 x dp GPUs / 32, micro-batch 1, 2 sequences per GPU of 2048
  // tokens, the 175B shape (96 layers, hidden 12288, 96 heads).
  for (const auto& c : runs) {
    if (c.model.rfind("NeMo GPT-3 175B", 0) != 0) continue;
    INFO(c.label);
    CHECK(c.tp * c.pp * c.dp == c.gpus);
    CHECK(c.tp == 4);
    CHECK(c.pp == 8);
    CHECK(c.micro_batch == 1);
    CHECK(c.global_batch == 2 * c.gpus);
    CHECK(c.layers == 96);
    CHECK(c.hidden == 12288);
    CHECK(c.heads == 96);
    CHECK(c.seq == 2048);
  }
  // Each Llama 3.1 row: context parallelism 2, micro-batch 1, sequence 8192; 8B: tp 1,
  // pp 1, dp GPUs / 2, 16 sequences per GPU; 70B: tp 4, pp 4, dp GPUs / 32, 2 per GPU.
  for (const auto& [run, rows, tp, pp, per_gpu] : {std::tuple{"NeMo Llama 3.1 8B BF16, DGX H100", 5, 1, 1, 16},
                                                   std::tuple{"NeMo Llama 3.1 8B FP8, DGX H100", 5, 1, 1, 16},
                                                   std::tuple{"NeMo Llama 3.1 70B BF16, DGX H100", 6, 4, 4, 2},
                                                   std::tuple{"NeMo Llama 3.1 70B FP8, DGX H100", 6, 4, 4, 2}}) {
    CHECK(std::count_if(runs.begin(), runs.end(), [&](const auto& c) { return c.model == run; }) == rows);
    for (const auto& c : runs) {
      if (c.model != run) continue;
      INFO(c.label);
      CHECK(c.cp == 2);
      CHECK(c.tp == tp);
      CHECK(c.pp == pp);
      CHECK(c.tp * c.pp * c.dp * c.cp == c.gpus);
      CHECK(c.micro_batch == 1);
      CHECK(c.global_batch == per_gpu * c.gpus);
      CHECK(c.seq == 8192);
    }
  }
  CHECK(find("NeMo Llama 3.1 8B BF16, DGX H100", "cp 2 x dp 4, 8 GPUs").measured == 12.91);
  // 405B: tp 8, cp 2, micro-batch 1; layers 7 / 21 / 42 / 126 on pp 1 / 3 / 3 / 9 (v 7
  // with a pipeline), global batch 126 / 126 / 252 / 252 x GPUs / 576.
  for (const char* run : {"NeMo Llama 3.1 405B BF16, DGX H100", "NeMo Llama 3.1 405B FP8, DGX H100"}) {
    CHECK(std::count_if(runs.begin(), runs.end(), [&](const auto& c) { return c.model == run; }) == 6);
    for (const auto& c : runs) {
      if (c.model != run) continue;
      INFO(c.label);
      CHECK(c.tp == 8);
      CHECK(c.cp == 2);
      CHECK(c.tp * c.pp * c.dp * c.cp == c.gpus);
      CHECK(c.hidden == 16384);
      const std::map<std::int64_t, std::pair<int, std::int64_t>> proxy{{7, {1, 126}}, {21, {3, 126}}, {42, {3, 252}}};
      if (c.layers == 126) {
        CHECK(c.pp == 9);
        CHECK(c.global_batch * 576 == 252 * c.gpus);
      } else {
        REQUIRE(proxy.count(c.layers) == 1);
        CHECK(c.pp == proxy.at(c.layers).first);
        CHECK(c.global_batch == proxy.at(c.layers).second);
      }
    }
  }
  // Grok-1 314B (README_314b's table): tp 4 everywhere; by GPUs the layers, sequence, pp,
  // cp, ep and global batch (8: 2 layers, 4096, pp 1, cp 1, ep 2, 1024; 16: 4, ep 4; 32:
  // 4, ep 8; 64: 8 layers, 8192, cp 2, ep 8; 128 / 256 / 512: 16 / 32 / 64 layers on pp 2 /
  // 4 / 8; 1,024 and 2,048: 64 layers, pp 8, batch 2048 and 4096), 9 rows per precision.
  const std::map<int, std::tuple<std::int64_t, std::int64_t, int, int, int, std::int64_t>> grok{
      {8, {2, 4096, 1, 1, 2, 1024}},    {16, {4, 4096, 1, 1, 4, 1024}},   {32, {4, 4096, 1, 1, 8, 1024}},
      {64, {8, 8192, 1, 2, 8, 1024}},   {128, {16, 8192, 2, 2, 8, 1024}}, {256, {32, 8192, 4, 2, 8, 1024}},
      {512, {64, 8192, 8, 2, 8, 1024}}, {1024, {64, 8192, 8, 2, 8, 2048}}, {2048, {64, 8192, 8, 2, 8, 4096}}};
  for (const char* run : {"NeMo Grok-1 314B BF16, DGX H100", "NeMo Grok-1 314B FP8, DGX H100"}) {
    CHECK(std::count_if(runs.begin(), runs.end(), [&](const auto& c) { return c.model == run; }) == 9);
    for (const auto& c : runs) {
      if (c.model != run) continue;
      INFO(c.label);
      REQUIRE(grok.count(static_cast<int>(c.gpus)) == 1);
      const auto& [layers, seq, pp, cp, ep, batch] = grok.at(static_cast<int>(c.gpus));
      CHECK(c.tp == 4);
      CHECK(c.tp * c.pp * c.dp * c.cp == c.gpus);
      CHECK(c.hidden == 6144);
      CHECK(c.layers == layers);
      CHECK(c.seq == seq);
      CHECK(c.pp == pp);
      CHECK(c.cp == cp);
      CHECK(c.label.find("x ep " + std::to_string(ep) + ",") != std::string::npos);
      CHECK(c.global_batch == batch);
    }
  }
  // Nemotron-4 (README_15b's and README_340b's tables): 15B on 16 to 2,048 GPUs, tp 4,
  // pp 1, micro-batch 4, 4 sequences per GPU, 8 rows per precision; 340B on 128 to 2,048,
  // tp 8, pp 8 with 12 chunks, micro-batch 1, 2 sequences per node of 8, 5 rows each;
  // sequence 4096 both. 2.812 s on 16 GPUs (15B BF16), 3.49 s on 2,048 (340B FP8).
  for (const auto& [run, rows, tp, pp, hidden, per_8] : {std::tuple{"NeMo Nemotron-4 15B BF16, DGX H100", 8, 4, 1, 6144, 32},
                                                         std::tuple{"NeMo Nemotron-4 15B FP8, DGX H100", 8, 4, 1, 6144, 32},
                                                         std::tuple{"NeMo Nemotron-4 340B BF16, DGX H100", 5, 8, 8, 18432, 2},
                                                         std::tuple{"NeMo Nemotron-4 340B FP8, DGX H100", 5, 8, 8, 18432, 2}}) {
    CHECK(std::count_if(runs.begin(), runs.end(), [&](const auto& c) { return c.model == run; }) == rows);
    for (const auto& c : runs) {
      if (c.model != run) continue;
      INFO(c.label);
      CHECK(c.tp == tp);
      CHECK(c.pp == pp);
      CHECK(c.tp * c.pp * c.dp == c.gpus);
      CHECK(c.hidden == hidden);
      CHECK(c.seq == 4096);
      CHECK(c.micro_batch == (tp == 4 ? 4 : 1));
      CHECK(c.global_batch * 8 == per_8 * c.gpus);
    }
  }
  CHECK(find("NeMo Nemotron-4 15B BF16, DGX H100", "tp 4 x pp 1 x dp 4, 16 GPUs").measured == 2.812);
  CHECK(find("NeMo Nemotron-4 340B FP8, DGX H100", "tp 8 x pp 8 (12 chunks) x dp 32, 2048 GPUs").measured == 3.49);
  CHECK(find("NeMo Grok-1 314B BF16, DGX H100", "8 layers, tp 4 x cp 2 x pp 1 x dp 8 x ep 8, 64 GPUs").measured == 20.64);
  CHECK(find("NeMo Grok-1 314B FP8, DGX H100", "tp 4 x cp 2 x pp 8 (8 chunks) x dp 32 x ep 8, 2048 GPUs").measured == 17.04);
  CHECK(find("NeMo Llama 3.1 405B BF16, DGX H100", "21 layers, tp 8 x cp 2 x pp 3 (7 chunks) x dp 2, 96 GPUs").measured == 8.75);
  CHECK(find("NeMo Llama 3.1 405B FP8, DGX H100", "126 layers, tp 8 x cp 2 x pp 9 (7 chunks) x dp 16, 2304 GPUs").measured ==
        12.35);
  CHECK(find("NeMo Llama 3.1 70B FP8, DGX H100", "tp 4 x cp 2 x pp 4 (5 chunks) x dp 64, 2048 GPUs").measured == 11.39);
  const auto nemo = find("NeMo GPT-3 175B BF16, DGX H100", "tp 4 x pp 8 (12 chunks) x dp 4, 128 GPUs");
  CHECK(nemo.gpus == 128);
  CHECK(nemo.measured == 8.309);
  CHECK(find("NeMo GPT-3 175B FP8, DGX H100", "tp 4 x pp 8 (12 chunks) x dp 64, 2048 GPUs").measured == 5.96);
  // The cheapest point replayed: a ring all-reduce between two nodes over one EDR link
  // each is that link's bandwidth, 12.5 GB/s x the catalog's InfiniBand efficiency 0.94 =
  // 11.75 GB/s, to within its latency (8 GiB: far below 0.1%).
  for (auto c : nccl) {
    if (c.label.find("one V100 and one EDR") == std::string::npos) continue;
    CHECK(c.predict(c, std::nullopt) == ddlsim::test::Approx(11.75).epsilon(1e-3));
    CHECK(c.gpus == 2);
  }
  // And the one-link MI300X point: two GPUs joined by one xGMI link of 64 GB/s x the
  // catalog's efficiency 0.8 = 51.2 GB/s (4 GiB: latency far below 0.1%).
  int mi300x = 0;
  for (auto c : nccl) {
    if (c.label.find("2 x MI300X") == std::string::npos) continue;
    CHECK(c.predict(c, std::nullopt) == ddlsim::test::Approx(51.2).epsilon(1e-3));
    CHECK(c.measured == 47.671);
    ++mi300x;
  }
  CHECK(mi300x == 1);
}

TEST_CASE("run: several data-parallel groups per server all-reduce at the NICs' rate on the flow network too") {
  // Expected: 16 DGX A100 with tp 4 hold 4 data-parallel groups of 32 ranks, 2 per server
  // (GPUs r and r + 4), all reducing their gradients at once after the backward
  // (overlap_grad_reduce false). Each group's ring runs over its 2 GPUs' own HDR NICs in
  // each server (2 x 25 x 0.94 = 47 GB/s of bus bandwidth) and the 4 groups use 8
  // different NICs, so the flow network, where they share the fabric, gives the data-
  // parallel wait the analytical network gives each group alone (within 5%). Before the
  // rings kept their hops between servers on one rail, every hop changed rail and the
  // groups' flows collided on the spine switches: twice as long.
  Scratch s;
  const std::string f = s.write("dp.json", R"({"name": "dp", "cluster": {"preset": "dgx-a100", "nodes": 16},
    "workload": {"model": "megatron-1.7b"},
    "strategies": [{"name": "tp4", "tp": 4, "global_batch": 128, "micro_batch": 4, "overlap_grad_reduce": false}]})");
  double dp[2] = {0, 0};
  int i = 0;
  for (const char* network : {"flow", "analytical"}) {
    const auto r = ddlsim_cmd({"run", f, "--json", "--set", std::string("simulation.network=") + network});
    REQUIRE(r.status == 0);
    dp[i++] = nlohmann::json::parse(r.out).at("strategies").at(0).at("breakdown").at("exposed_comm_s").at("dp").get<double>();
  }
  CHECK(dp[1] > 0);
  CHECK(dp[0] == ddlsim::test::Approx(dp[1]).epsilon(0.05));
}

TEST_CASE("validate: a replayed step's breakdown adds up to it, and --csv writes it beside each case") {
  // Expected: the critical device's step is its compute, the communication it waits for
  // (tensor-, pipeline-, data-parallel, other) and the pipeline's bubble, so those sum to
  // the predicted step (the 1.7B GPT of Table 1, plain data parallelism: no tp, pp or
  // bubble time). A collective has no step: its breakdown columns and its estimate stay
  // empty, 8 of them after 'refused'.
  auto runs = ddlsim::validation_cases("public-runs");
  int seen = 0;
  for (auto& c : runs) {
    if (c.label.rfind("1.7B:", 0) != 0) continue;
    ++seen;
    c.predicted = c.predict(c, ddlsim::NetworkModelKind::kAnalytical);
    const auto& b = c.breakdown;
    REQUIRE(b.step);
    CHECK(b.compute_s > 0);
    CHECK(b.exposed_tp_s == 0);
    CHECK(b.exposed_pp_s == 0);
    CHECK(b.bubble_s == 0);
    CHECK(b.compute_s + b.exposed_tp_s + b.exposed_pp_s + b.exposed_dp_s + b.exposed_other_s + b.bubble_s ==
          ddlsim::test::Approx(c.predicted).epsilon(1e-9));
    CHECK(b.peak_memory_bytes > 0);
  }
  CHECK(seen == 1);
  Scratch s;
  const std::string csv = (s.dir / "nccl.csv").string();
  const auto r = ddlsim_cmd({"validate", "--suite", "nccl", "--csv", csv, "--jobs", "1"});
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  CHECK(header.find(",refused,compute_s,exposed_tp_s,exposed_pp_s,exposed_dp_s,exposed_other_s,bubble_s,peak_memory_gib") !=
        std::string::npos);
  CHECK(row.size() > 11);
  CHECK(row.substr(row.size() - 11) == ",\"\",,,,,,,,");  // refused empty, then 8 empty columns
}

TEST_CASE("validate --case: what it prints reproduces the case's prediction outside validate") {
  // Expected: for a training case, the printed scenario replayed by 'ddlsim run' gives
  // the step time validate predicts for the case (the same replay: validate runs that
  // very text), on the case's own network and on the one --network names; for an NCCL
  // case, the printed 'ddlsim collective' command gives the case's bus bandwidth. Cases
  // are numbered from 1 within their suite, as the list and the CSV's index say.
  Scratch s;
  auto step_of_run = [&](const std::string& text) {
    const auto r = ddlsim_cmd({"run", s.write("case.json", text), "--json"});
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0).at("step_time_s").get<double>();
  };
  struct Pick {
    std::string suite;
    int index;
    std::optional<NetworkModelKind> network;
  };
  for (const Pick& p : {Pick{"vtrain-single", 7, std::nullopt}, Pick{"vtrain-multi", 12, NetworkModelKind::kAnalytical},
                        Pick{"public-runs", 13, std::nullopt}}) {
    INFO(p.suite << " " << p.index);
    auto cases = validation_cases(p.suite);
    ValidationCase& c = cases.at(static_cast<std::size_t>(p.index - 1));
    CHECK(c.index == p.index);
    const double predicted = c.predict(c, p.network);
    std::vector<std::string> args{"validate", "--suite", p.suite, "--case", std::to_string(p.index)};
    if (p.network) args.insert(args.end(), {"--network", "analytical"});
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    const auto doc = nlohmann::json::parse(r.out);
    CHECK(doc.at("strategies").size() == 1);
    // vTrain cases run on the flow network; Table 1's published runs on the analytical one.
    CHECK(doc.at("simulation").at("network") == (p.network || p.suite == "public-runs" ? "analytical" : "flow"));
    CHECK(doc.at("description").get<std::string>().find(p.suite == "public-runs" ? "Published" : "measured") !=
          std::string::npos);
    CHECK(step_of_run(r.out) == Approx(predicted).epsilon(1e-12));
  }
  // An NCCL case: the command's bus bandwidth.
  auto nccl = validation_cases("nccl");
  ValidationCase& c = nccl.at(6);  // 4 DGX A100, ring all-reduce of 8G
  const double busbw = c.predict(c, std::nullopt);
  const auto r = ddlsim_cmd({"validate", "--suite", "nccl", "--case", "7"});
  REQUIRE(r.status == 0);
  REQUIRE(r.out.rfind("ddlsim collective ", 0) == 0);
  std::istringstream words(r.out);
  std::vector<std::string> args;
  for (std::string w; words >> w;) args.push_back(w);
  args.erase(args.begin());  // "ddlsim"
  args.push_back("--json");
  const auto t = ddlsim_cmd(args);
  REQUIRE(t.status == 0);
  CHECK(nlohmann::json::parse(t.out).at("results").at(0).at("busbw_gbytes_per_s").get<double>() ==
        Approx(busbw).epsilon(1e-12));
  // One line and exit 2 for what cannot be printed.
  for (const auto& [extra, line] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--case", "3"},
            "--case: name its suite too (--suite vtrain-multi --case 12, or --measured FILE): cases are numbered within "
            "their suite"},
           {{"--suite", "nccl", "--case", "0"}, "--case: expected a whole number from 1 to 45 (the cases of nccl), got '0'"},
           {{"--suite", "vtrain-multi", "--case", "110"},
            "--case: expected a whole number from 1 to 109 (the cases of vtrain-multi), got '110'"},
           {{"--suite", "nccl", "--case", "1", "--csv", "x.csv"}, "--csv: not with --case (which replays nothing)"},
           {{"--cases", "--json"},
            "--cases: prints every case in the text table; --json has the accuracy table only (--csv FILE writes every case)"},
           {{"--cost-model", "--cases"}, "--cases: not with --cost-model"}}) {
    std::vector<std::string> a{"validate"};
    a.insert(a.end(), extra.begin(), extra.end());
    const auto e = ddlsim_cmd(a);
    CHECK(e.status == 2);
    CHECK(e.err == "ddlsim validate: " + line + "\n");
    CHECK(e.out.empty());
  }
}

TEST_CASE("validate: every replayed plan's search estimate against its replay, as --cost-model gives it") {
  // Expected: for each measured step (here two strategies of a scenario of one's own),
  // the table's estimate section, --json and --record hold the mean and worst
  // |estimate - replay| / replay computed from the very figures 'validate --cost-model'
  // prints for the same scenario, and the CSV's estimate_s is that estimate; a record
  // whose estimate figures are better than the run fails --check with one line naming
  // the figure; a record without them checks nothing of the estimate.
  Scratch s;
  s.write("t.json", R"({"name": "mine", "cluster": {"preset": "dgx-a100", "nodes": 2}, "workload": {"model": "gpt2-large"},
    "strategies": [{"name": "dp", "global_batch": 32, "micro_batch": 2},
                   {"name": "ptdp", "tp": 4, "pp": 2, "global_batch": 32, "micro_batch": 1}],
    "simulation": {"network": "analytical"}})");
  const auto cm = ddlsim_cmd({"validate", "--cost-model", (s.dir / "t.json").string(), "--json"});
  REQUIRE(cm.status == 0);
  const auto rows = nlohmann::json::parse(cm.out).at("strategies");
  REQUIRE(rows.size() == 2);
  const double e0 = rows[0].at("estimate_s"), r0 = rows[0].at("replay_s"), e1 = rows[1].at("estimate_s"), r1 = rows[1].at("replay_s");
  const double d0 = std::abs(e0 - r0) / r0, d1 = std::abs(e1 - r1) / r1;
  char text[256];
  std::snprintf(text, sizeof text, "scenario_file,strategy,measured_step_s\nt.json,dp,%.17g\nt.json,ptdp,%.17g\n", r0, r1);
  const std::string m = s.write("m.csv", text), rec = (s.dir / "rec.json").string(), out = (s.dir / "cases.csv").string();
  auto r = ddlsim_cmd({"validate", "--measured", m, "--json"});
  REQUIRE(r.status == 0);
  const auto all = nlohmann::json::parse(r.out).at("measured").at("all");
  CHECK(all.at("estimated") == 2);
  CHECK(all.at("estimate_mean_abs_error").get<double>() == Approx((d0 + d1) / 2).epsilon(1e-9));
  CHECK(all.at("estimate_worst_abs_error").get<double>() == Approx(std::max(d0, d1)).epsilon(1e-9));
  r = ddlsim_cmd({"validate", "--measured", m});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("the searches' estimate of each case's plan against its replay") != std::string::npos);
  REQUIRE(ddlsim_cmd({"validate", "--measured", m, "--csv", out, "--record", rec}).status == 0);
  std::ifstream csv(out);
  std::string header, first;
  std::getline(csv, header);
  std::getline(csv, first);
  CHECK(header.size() > 11);
  CHECK(header.substr(header.size() - 11) == ",estimate_s");
  CHECK(std::stod(first.substr(first.rfind(',') + 1)) == Approx(e0).epsilon(1e-12));
  CHECK(ddlsim_cmd({"validate", "--measured", m, "--check", rec}).status == 0);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(rec));
  REQUIRE(j["measured"]["all"].contains("estimate_worst_abs_error"));
  j["measured"]["all"]["estimate_worst_abs_error"] = j["measured"]["all"]["estimate_worst_abs_error"].get<double>() - 0.01;
  if (j["measured"]["all"]["estimate_worst_abs_error"].get<double>() < 0) j["measured"]["all"]["estimate_worst_abs_error"] = 0.0;
  std::ofstream(rec) << j.dump();
  r = ddlsim_cmd({"validate", "--measured", m, "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err.find("worse than recorded: measured / all: estimate_worst_abs_error") != std::string::npos);
  for (auto& [model, figures] : j["measured"].items()) {
    figures.erase("estimated"), figures.erase("estimate_mean_abs_error"), figures.erase("estimate_worst_abs_error");
  }
  std::ofstream(rec) << j.dump();
  CHECK(ddlsim_cmd({"validate", "--measured", m, "--check", rec}).status == 0);
}

TEST_CASE("validate --set: a what-if on every training case's scenario") {
  // Expected: steps "measured" as 'ddlsim run --set simulation.compute_speed_cv=0.015'
  // replays them are met exactly (0 error) by validate with the same --set, and missed
  // by the plain replay, faster by at most the straggler factor 1 + 0.015 x E[max of 8]
  // = 1.0214 (one server) and, its step nearly all compute, by at least 1.5%; --case
  // prints the scenario with the override; the NCCL suite alone, --record and --check
  // refuse it, as does a value the cases' scenarios refuse, each in one line.
  Scratch s;
  s.write("t.json", R"({"name": "mine", "cluster": {"preset": "dgx-a100"},
    "workload": {"hf_config": {"model_type": "gpt2", "n_layer": 4, "n_embd": 4096, "n_head": 32, "n_positions": 2048,
                               "vocab_size": 32000}},
    "strategies": [{"name": "dp", "global_batch": 16, "micro_batch": 2},
                   {"name": "tp4", "tp": 4, "global_batch": 16, "micro_batch": 2}],
    "simulation": {"network": "analytical"}})");
  const std::string cv = "simulation.compute_speed_cv=0.015";
  const auto run = ddlsim_cmd({"run", (s.dir / "t.json").string(), "--json", "--set", cv});
  REQUIRE(run.status == 0);
  const auto steps = nlohmann::json::parse(run.out).at("strategies");
  char text[256];
  std::snprintf(text, sizeof text, "scenario_file,strategy,measured_step_s\nt.json,dp,%.17g\nt.json,tp4,%.17g\n",
                steps.at(0).at("step_time_s").get<double>(), steps.at(1).at("step_time_s").get<double>());
  const std::string m = s.write("m.csv", text);
  auto r = ddlsim_cmd({"validate", "--measured", m, "--json", "--set", cv});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("measured").at("all").at("worst_abs_error").get<double>() < 1e-12);
  r = ddlsim_cmd({"validate", "--measured", m, "--json"});
  REQUIRE(r.status == 0);
  const double plain = nlohmann::json::parse(r.out).at("measured").at("all").at("mean_abs_error").get<double>();
  CHECK(plain <= 1.0 - 1.0 / (1.0 + 0.015 * ComputeModel::expected_max_normal(8)));
  CHECK(plain >= 0.015);
  r = ddlsim_cmd({"validate", "--measured", m, "--set", cv});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("\n--set: simulation.compute_speed_cv=0.015 on 2 training cases\n") != std::string::npos);
  r = ddlsim_cmd({"validate", "--measured", m, "--case", "1", "--set", cv});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("simulation").at("compute_speed_cv").get<double>() == 0.015);
  CHECK(r.out.rfind("{\n  \"name\"", 0) == 0);  // the scenario's own key order: its name first
  // The embedded suites' cases take it too.
  r = ddlsim_cmd({"validate", "--suite", "vtrain-single", "--case", "1", "--set", cv});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("simulation").at("compute_speed_cv").get<double>() == 0.015);
  // Refused, each in one line with status 2 (and nothing written).
  const std::string rec = (s.dir / "rec.json").string(), out_csv = (s.dir / "c.csv").string();
  const std::string what_if = " (a record holds the cases as they stand; run the what-if without it)";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--measured", m, "--set", "simulation.network=flow", "--network", "analytical"},
       "--set simulation.network=flow: not with --network, which sets every case's network model too"},
      {{"--measured", m, "--set", "oops"}, "--set 'oops': expected PATH=VALUE, e.g. strategies.0.bucket_layers=4"},
      {{"--suite", "nccl", "--set", cv}, "--set: the nccl suite's cases are collectives timed alone, without a scenario to set"},
      {{"--measured", m, "--set", cv, "--record", rec, "--csv", out_csv}, "--set: not with --record" + what_if},
      {{"--measured", m, "--set", cv, "--check", rec}, "--set: not with --check" + what_if},
      {{"--measured", m, "--set", "simulation.compute_speed_cv=0.9"},
       "--set: simulation.compute_speed_cv: expected a number from 0 to 0.5, got 0.9"},
  };
  for (const auto& [args, message] : refused) {
    std::vector<std::string> full{"validate"};
    full.insert(full.end(), args.begin(), args.end());
    r = ddlsim_cmd(full);
    INFO(message);
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim validate: " + message + "\n");
  }
  CHECK(!fs::exists(rec));
  CHECK(!fs::exists(out_csv));
}

TEST_CASE("validate --measured: your own steps, tabled like a suite") {
  // Expected: steps "measured" at 1.25 x ddlsim's own replay of each strategy are each
  // -20% off (1/1.25 - 1, the closed form), in the replay's order (tau 1); the same
  // figures swapped between the two strategies reverse that order (tau -1). A scenario
  // in a subfolder, whose HuggingFace file sits beside it, is found from the CSV's folder,
  // and --case prints it with that strategy alone and the file written in place, which
  // 'ddlsim run' replays to the same step from anywhere.
  Scratch s;
  fs::create_directories(s.dir / "sub");
  s.write("sub/gpt.json",
          R"({"model_type": "gpt2", "n_layer": 4, "n_embd": 512, "n_head": 8, "n_positions": 512, "vocab_size": 32000})");
  s.write("sub/t.json", R"({"name": "mine", "cluster": {"preset": "dgx-a100"}, "workload": {"hf_config": "gpt.json"},
    "strategies": [{"name": "dp", "global_batch": 32, "micro_batch": 2},
                   {"name": "tp4", "tp": 4, "global_batch": 32, "micro_batch": 2}],
    "simulation": {"network": "analytical"}})");
  const auto run = ddlsim_cmd({"run", (s.dir / "sub/t.json").string(), "--json"});
  REQUIRE(run.status == 0);
  const auto steps = nlohmann::json::parse(run.out).at("strategies");
  const double dp = steps.at(0).at("step_time_s").get<double>(), tp4 = steps.at(1).at("step_time_s").get<double>();
  REQUIRE(dp != tp4);
  auto csv = [&](double a, double b) {
    char text[256];
    std::snprintf(text, sizeof text, "scenario_file,strategy,measured_step_s\nsub/t.json,dp,%.17g\n\"sub/t.json\",tp4,%.17g\n", a, b);
    return s.write("m.csv", text);
  };
  auto r = ddlsim_cmd({"validate", "--measured", csv(1.25 * dp, 1.25 * tp4), "--json"});
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out).at("measured");
  CHECK(j.at("sub/t.json").at("cases") == 2);
  CHECK(j.at("sub/t.json").at("mean_abs_error").get<double>() == Approx(0.2).epsilon(1e-12));
  CHECK(j.at("all").at("worst_abs_error").get<double>() == Approx(0.2).epsilon(1e-12));
  CHECK(j.at("all").at("kendall_tau").get<double>() == 1.0);
  r = ddlsim_cmd({"validate", "--measured", csv(1.25 * tp4, 1.25 * dp), "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("measured").at("all").at("kendall_tau").get<double>() == -1.0);
  // Recorded, then checked: the same figures pass.
  const std::string rec = (s.dir / "mine.json").string(), m = csv(1.25 * dp, 1.25 * tp4);
  REQUIRE(ddlsim_cmd({"validate", "--measured", m, "--record", rec}).status == 0);
  CHECK(ddlsim_cmd({"validate", "--measured", m, "--check", rec}).status == 0);
  // Kendall's tau-b: the dp row measured twice alike is predicted alike, a pair tied in
  // both rankings; of the three pairs the other two agree, so tau-b = 2 / sqrt((3 - 1)
  // x (3 - 1)) = 1 (tau-a, which counts the tie against the order, would be 2/3).
  char three[256];
  std::snprintf(three, sizeof three, "scenario_file,strategy,measured_step_s\nsub/t.json,dp,%.17g\nsub/t.json,tp4,%.17g\nsub/t.json,dp,%.17g\n",
                1.25 * dp, 1.25 * tp4, 1.25 * dp);
  const std::string m3 = s.write("m3.csv", three);
  r = ddlsim_cmd({"validate", "--measured", m3, "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("measured").at("all").at("kendall_tau").get<double>() == Approx(1.0).epsilon(1e-12));
  // The dp row twice and nothing else: one pair, tied in both figures, so tau-b is 0/0,
  // undefined: null and "-", not 0 (which would read as no correlation).
  char tied[256];
  std::snprintf(tied, sizeof tied, "scenario_file,strategy,measured_step_s\nsub/t.json,dp,%.17g\nsub/t.json,dp,%.17g\n", 1.25 * dp,
                1.25 * dp);
  const std::string m2 = s.write("m2.csv", tied);
  r = ddlsim_cmd({"validate", "--measured", m2, "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("measured").at("all").at("pairs") == 1);
  CHECK(nlohmann::json::parse(r.out).at("measured").at("all").at("kendall_tau").is_null());
  r = ddlsim_cmd({"validate", "--measured", m2});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("0.000") == std::string::npos);
  // A record with a tau does not pass a check where it is undefined.
  r = ddlsim_cmd({"validate", "--measured", m2, "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err.find("kendall_tau is undefined now") != std::string::npos);
  // A record of three rows does not pass a check of two: a dropped row is no progress.
  const std::string rec3 = (s.dir / "three.json").string();
  REQUIRE(ddlsim_cmd({"validate", "--measured", m3, "--record", rec3}).status == 0);
  r = ddlsim_cmd({"validate", "--measured", m, "--check", rec3});
  CHECK(r.status == 3);
  CHECK(r.err.find("measured / all: cases is 2, recorded 3 in " + rec3) != std::string::npos);
  // The second case as a scenario of its own.
  r = ddlsim_cmd({"validate", "--measured", m, "--case", "2"});
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("strategies").size() == 1);
  CHECK(doc.at("strategies").at(0).at("name") == "tp4");
  CHECK(doc.at("workload").at("hf_config").at("n_layer") == 4);
  CHECK(doc.at("description").get<std::string>().find("Measured: ") != std::string::npos);
  const auto again = ddlsim_cmd({"run", s.write("elsewhere.json", r.out), "--json"});
  REQUIRE(again.status == 0);
  CHECK(nlohmann::json::parse(again.out).at("strategies").at(0).at("step_time_s").get<double>() == Approx(tp4).epsilon(1e-12));
  // One line and exit 2 for each kind of bad file.
  const std::string bad = (s.dir / "bad.csv").string(), t = (s.dir / "sub").string();
  s.write("sub/g.json", R"({"name": "g", "cluster": {"preset": "dgx-a100"}, "tasks": []})");
  for (const auto& [text, line] : std::vector<std::pair<std::string, std::string>>{
           {"scenario,strategy,measured_step_s\n", ":1: expected the header scenario_file,strategy,measured_step_s"},
           {"scenario_file,strategy,measured_step_s\n", ": no measurement (a row per measured step after the header)"},
           {"scenario_file,strategy,measured_step_s\nsub/t.json,dp\n", ":2: expected 3 fields, got 2"},
           {"scenario_file,strategy,measured_step_s\nsub/t.json,dp,0\n",
            ":2: measured_step_s: expected seconds from 1e-06 to 1e+07, got '0'"},
           {"scenario_file,strategy,measured_step_s\nsub/t.json,dp,1e-300\n",
            ":2: measured_step_s: expected seconds from 1e-06 to 1e+07, got '1e-300'"},
           {"scenario_file,strategy,measured_step_s\nsub/t.json,dp,2e7\n",
            ":2: measured_step_s: expected seconds from 1e-06 to 1e+07, got '2e7'"},
           {"scenario_file,strategy,measured_step_s\nsub/t.json,tp8,1\n",
            ":2: strategy: " + t + "/t.json has no strategy 'tp8' (did you mean 'tp4'?) (its strategies: dp, tp4)"},
           {"scenario_file,strategy,measured_step_s\nsub/none.json,dp,1\n", ":2: cannot read scenario " + t + "/none.json"},
           {"scenario_file,strategy,measured_step_s\n\"sub/t.json,dp,1\n", ":2: a quote is not closed"},
           {"scenario_file,strategy,measured_step_s\nsub/g.json,dp,1\n",
            ":2: " + t + "/g.json: a task graph (it lists \"tasks\"), which only 'ddlsim run' replays; --measured needs a "
            "training scenario, whose strategies it replays"},
           {"scenario_file,strategy,measured_step_s\nsub/t.json,dp,+1\n",
            ":2: measured_step_s: expected seconds from 1e-06 to 1e+07, got '+1'"},
           {"\xEF\xBB\xBFscenario_file;strategy;measured_step_s\n", ":1: expected the header scenario_file,strategy,measured_step_s"}}) {
    s.write("bad.csv", text);
    const auto e = ddlsim_cmd({"validate", "--measured", bad});
    CHECK(e.status == 2);
    CHECK(e.err.rfind("ddlsim validate: " + bad + line, 0) == 0);
    CHECK(std::count(e.err.begin(), e.err.end(), '\n') == 1);
  }
  CHECK(ddlsim_cmd({"validate", "--measured", m, "--suite", "nccl"}).err ==
        "ddlsim validate: --suite: not with --measured (your measurements are their own suite)\n");
  // A spreadsheet's byte-order mark is no part of the header; a step ddlsim cannot
  // replay (beyond its transfer limit on the flow network) is that row's refusal, the
  // other rows replayed; a long strategy name prints whole.
  s.write("sub/big.json", R"({"name": "big", "cluster": {"preset": "dgx-a100", "nodes": 512},
    "workload": {"model": "megatron-1.7b"}, "strategies": [{"name": "dp", "global_batch": 4096, "micro_batch": 1}],
    "simulation": {"network": "flow", "rings": "steps"}})");
  const std::string name(80, 'x');
  s.write("sub/long.json", R"({"name": "long", "cluster": {"preset": "dgx-a100"}, "workload": {"hf_config": "gpt.json"},
    "strategies": [{"name": ")" + name + R"(", "global_batch": 32, "micro_batch": 2}], "simulation": {"network": "analytical"}})");
  r = ddlsim_cmd({"validate", "--measured",
                  s.write("mixed.csv", "\xEF\xBB\xBFscenario_file,strategy,measured_step_s\nsub/big.json,dp,3\nsub/long.json," +
                                           name + ",1\n"),
                  "--jobs", "2"});
  REQUIRE(r.status == 0);
  // The case (the strategy) comes last, after the figures: a long one misaligns nothing.
  CHECK(r.out.find("     1  sub/big.json   ") != std::string::npos);
  CHECK(r.out.find(" refused  dp (refused: the step needs more than 20000000 transfers") != std::string::npos);
  CHECK(r.out.find("     2  sub/long.json                         1 ") != std::string::npos);
  CHECK(r.out.find("%  " + name + "\n") != std::string::npos);
  // A measurement of a microsecond, the least taken, of the default scenario's data
  // parallelism (about 3 s a step) is an error in the millions: --record writes it and
  // --check takes the record back (it refused errors above 1e6 until the thirty-sixth
  // session).
  const std::string tiny = s.write("tiny.csv", "scenario_file,strategy,measured_step_s\n\"" DDLSIM_SOURCE_DIR
                                               "/scenarios/default.json\",dp,1e-6\n"),
                    tiny_rec = (s.dir / "tiny-record.json").string();
  REQUIRE(ddlsim_cmd({"validate", "--measured", tiny, "--record", tiny_rec}).status == 0);
  CHECK(nlohmann::json::parse(std::ifstream(tiny_rec)).at("measured").at("all").at("mean_abs_error").get<double>() > 1e6);
  const auto checked = ddlsim_cmd({"validate", "--measured", tiny, "--check", tiny_rec});
  CHECK(checked.status == 0);
  CHECK(checked.err.empty());
  // The CSV cells as csv_quoted writes them read back as they were; a number is decimal.
  CHECK(!positive_number(" 1"));
  CHECK(!positive_number("0x1p1"));
  CHECK(!positive_number("inf"));
  CHECK(positive_number("2.5e-3") == 2.5e-3);
  CHECK(csv_fields("\"a,b\",\"say \"\"hi\"\"\",c\r") == std::vector<std::string>{"a,b", "say \"hi\"", "c"});
  CHECK(csv_fields(csv_quoted("x, \"y\"") + ",") == std::vector<std::string>{"x, \"y\"", ""});
}

TEST_CASE("printed errors never read -0.0") {
  // Expected: -0.04 % rounds to +0 (printed "+0.0"), -0.05 to -0.1, 0.26 to 0.3.
  CHECK(printf_string("%+.1f", rounded_for_print(-0.04, 1)) == "+0.0");
  CHECK(printf_string("%+.1f", rounded_for_print(-0.06, 1)) == "-0.1");
  CHECK(rounded_for_print(0.26, 1) == Approx(0.3));
  CHECK(printf_string("%+.2f", rounded_for_print(-0.004, 2)) == "+0.00");
}

TEST_CASE("run: a HuggingFace config written in the scenario is the same model as the file") {
  // Expected: workload.hf_config as an object gives the very report its file gives (the
  // same step, to the byte); a config that is neither a file name nor an object, or one
  // with a bad field, is one line naming the path.
  Scratch s;
  const std::string config =
      R"({"model_type": "gpt2", "n_layer": 4, "n_embd": 512, "n_head": 8, "n_positions": 512, "vocab_size": 32000})";
  s.write("gpt.json", config);
  auto scenario = [](const std::string& hf) {
    return R"({"name": "hf", "cluster": {"preset": "dgx-a100"}, "workload": {"hf_config": )" + hf +
           R"(}, "strategies": [{"name": "tp2", "tp": 2, "global_batch": 32, "micro_batch": 2}]})";
  };
  const auto file = ddlsim_cmd({"run", s.write("a.json", scenario("\"gpt.json\"")), "--json"});
  const auto inline_ = ddlsim_cmd({"run", s.write("b.json", scenario(config)), "--json"});
  REQUIRE(file.status == 0);
  REQUIRE(inline_.status == 0);
  CHECK(inline_.out == file.out);
  CHECK(nlohmann::json::parse(inline_.out).at("strategies").at(0).at("step_time_s").get<double>() > 0);
  for (const auto& [hf, line] : std::vector<std::pair<std::string, std::string>>{
           {"5", "workload.hf_config: expected a file name or a config object, got 5"},
           {R"({"model_type": "gpt2", "n_layer": "x", "n_embd": 512, "n_head": 8, "n_positions": 512, "vocab_size": 32000})",
            "workload.hf_config: n_layer: expected a positive integer, got \"x\""},
           {R"({"model_type": "gpt2", "n_layer": 4, "n_embd": 512, "n_head": 8, "n_positions": 512, "vocab_size": 32000, "num_experts": 8})",
            "workload.hf_config: num_experts: mixture-of-experts layers are modelled for model_type mixtral, qwen2_moe, qwen3_moe, glm4_moe, deepseek_v3 and kimi_k2, not gpt2"}}) {
    const auto e = ddlsim_cmd({"run", s.write("c.json", scenario(hf))});
    CHECK(e.status == 2);
    CHECK(e.err == "ddlsim run: " + line + "\n");
  }
}

TEST_CASE("search: the best plan is never worse than the scenario's own, and --out runs") {
  // Expected: on kTraining (16 A100s), the grid's best replayed plan is at most the best
  // baseline's step time (baselines are replayed alongside); --out writes a scenario
  // whose first strategy is "search-best" and that 'ddlsim run' replays to the same step,
  // for the grid and for autoddl (an SBP strategy); same input, same output.
  Scratch s;
  const std::string f = s.write("t.json", kTraining), best = (s.dir / "best.json").string();
  auto r = ddlsim_cmd({"search", f, "--json", "--replay", "4", "--out", best, "--network", "analytical"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("enumerated").get<int>() >= j.at("estimated").get<int>());
  double best_baseline = 1e300, best_found = 1e300;
  for (const auto& e : j.at("ranked")) {
    best_found = std::min(best_found, e.at("step_time_s").get<double>());
    if (e.at("baseline").get<bool>()) best_baseline = std::min(best_baseline, e.at("step_time_s").get<double>());
  }
  CHECK(best_baseline < 1e300);
  CHECK(best_found <= best_baseline);
  CHECK(j.at("ranked").at(0).at("step_time_s").get<double>() == best_found);
  const auto written = nlohmann::json::parse(std::ifstream(best));
  CHECK(written.at("strategies").at(0).at("name") == "search-best");
  const auto run = ddlsim_cmd({"run", best, "--json", "--strategy", "search-best", "--network", "analytical"});
  REQUIRE(run.status == 0);
  CHECK(nlohmann::json::parse(run.out).at("strategies").at(0).at("step_time_s").get<double>() == Approx(best_found).epsilon(1e-12));
  CHECK(ddlsim_cmd({"search", f, "--json", "--replay", "4", "--network", "analytical"}).out == r.out);
  CHECK(r.err.rfind("ddlsim search: ", 0) == 0);  // the search time
  r = ddlsim_cmd({"search", f, "--method", "autoddl", "--json", "--out", best, "--network", "analytical"});
  REQUIRE(r.status == 0);
  const auto sbp = nlohmann::json::parse(r.out);
  const auto again = nlohmann::json::parse(std::ifstream(best));
  CHECK(again.at("strategies").at(0) == sbp.at("best"));
  const auto rerun = ddlsim_cmd({"run", best, "--json", "--strategy", "search-best", "--network", "analytical"});
  REQUIRE(rerun.status == 0);
  CHECK(nlohmann::json::parse(rerun.out).at("strategies").at(0).at("step_time_s").get<double>() ==
        Approx(sbp.at("ranked").at(0).at("step_time_s").get<double>()).epsilon(1e-12));
  r = ddlsim_cmd({"search", f, "--method", "anneal"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim search: --method: expected grid, autoddl or mcmc, got 'anneal'\n");
  r = ddlsim_cmd({"search", f, "--method", "mcmc", "--seed", "-1"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim search: --seed: expected a whole number from 0 to 18446744073709551615, got '-1'\n");
  // An option the method does not use is refused, not ignored; a budget must be finite.
  for (const auto& [args, line] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--iterations", "5"}, "--iterations: applies to --method mcmc, not grid"},
           {{"--method", "autoddl", "--seed", "3"}, "--seed: applies to --method mcmc, not autoddl"},
           {{"--method", "mcmc", "--replay", "3"}, "--replay: applies to --method grid, not mcmc"},
           {{"--method", "autoddl", "--budget", "4"}, "--budget: applies to --method grid and mcmc, not autoddl"},
           {{"--budget", "inf"}, "--budget: expected a positive number of seconds"},
           {{"--top", "3", "--json"}, "--top: prints the best K in the table; --json has every replayed plan"}}) {
    std::vector<std::string> full{"search", f};
    full.insert(full.end(), args.begin(), args.end());
    r = ddlsim_cmd(full);
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim search: " + line + "\n");
  }
  const std::string small = s.write("small.json", kSmall);
  r = ddlsim_cmd({"search", small});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim search: " + small + ": the scenario must train a model on a cluster preset or topology file (\"cluster\": {\"preset\": "
                 "...} or {\"file\": ...}) to search plans\n");
  // A task graph on a cluster preset is named as such (it said 'workload: missing').
  const std::string graph = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/custom-task-graph.json";
  r = ddlsim_cmd({"sweep", graph, "--vary", "cluster.nodes=1,2"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim sweep: " + graph + ": a task graph (it lists \"tasks\"), which only 'ddlsim run' replays; the scenario must "
                 "train a model on a cluster preset or topology file (\"cluster\": {\"preset\": ...} or {\"file\": ...}) to "
                 "sweep it\n");
}


TEST_CASE("search --budget covers the estimates and says when it ran out") {
  // Expected: a budget of a nanosecond runs out before the first estimate: the scenario's
  // strategies still replay (ranked alone), the grid line says how far the search got
  // (0 estimated of the plans that fit, 0 of --replay 4 grid replays), JSON says
  // out_of_budget; a budget too short for a batch no strategy has is one line, status 2;
  // a budget the search stays within says nothing of it.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  auto r = ddlsim_cmd({"search", f, "--budget", "1e-9", "--replay", "4", "--network", "analytical"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(ddlsim_cmd({"search", f, "--budget", "1e-9", "--json", "--network", "analytical"}).out);
  CHECK(j.at("out_of_budget").get<bool>());
  CHECK(j.at("estimated").get<int>() == 0);
  CHECK(j.at("replayed").get<std::size_t>() == j.at("ranked").size());
  for (const auto& e : j.at("ranked")) CHECK(e.at("baseline").get<bool>());
  const std::size_t fitting = j.at("enumerated").get<std::size_t>() - j.at("pruned_by_memory").get<std::size_t>();
  REQUIRE(fitting >= 4);
  CHECK(r.out.find("      --budget 1e-09 s ran out: 0 of the " + std::to_string(fitting) +
                   " plans that fit estimated, 0 of 4 grid replays made\n") != std::string::npos);
  r = ddlsim_cmd({"search", f, "--budget", "1e-9", "--global-batch", "48", "--network", "analytical"});
  CHECK(r.status == 2);
  CHECK(r.err.starts_with("ddlsim search: no plan to replay: --budget 1e-09 s ran out before any of the "));
  CHECK(r.err.ends_with(" plans that fit was estimated, and no strategy has this global batch\n"));
  r = ddlsim_cmd({"search", f, "--budget", "1000", "--replay", "2", "--json", "--network", "analytical"});
  REQUIRE(r.status == 0);
  CHECK_FALSE(nlohmann::json::parse(r.out).at("out_of_budget").get<bool>());
}

TEST_CASE("search: a strategy that cannot run on the cluster after --set is no baseline, said in a line") {
  // Expected: kTraining on 3 servers (24 GPUs): 'dp' fills them (dp 24 x micro-batch 2 =
  // 48 does not divide the batch of 64) and 'tp-pp' leaves dp 3 (6 does not divide 64), so
  // 'run' refuses the scenario, but the search goes on without them as baselines: a line
  // each naming the strategy and plan_problem's reason, JSON unfit_strategies, no baseline
  // ranked, and --out writes a scenario without them that 'run' takes.
  Scratch s;
  const std::string f = s.write("t.json", kTraining), best = (s.dir / "best.json").string();
  CHECK(ddlsim_cmd({"run", f, "--set", "cluster.nodes=3"}).status == 2);
  auto r = ddlsim_cmd({"search", f, "--set", "cluster.nodes=3", "--replay", "2", "--network", "analytical", "--out", best});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("      strategy dp is no baseline: strategies.0: the global batch (64) must be divisible by dp x "
                   "micro_batch (48)\n") != std::string::npos);
  CHECK(r.out.find("      strategy tp-pp is no baseline: strategies.1: the global batch (64) must be divisible by dp x "
                   "micro_batch (6)\n") != std::string::npos);
  CHECK(r.out.find("(0 baselines)") != std::string::npos);
  const auto written = nlohmann::json::parse(std::ifstream(best));
  REQUIRE(written.at("strategies").size() == 1);
  CHECK(written.at("strategies").at(0).at("name") == "search-best");
  CHECK(ddlsim_cmd({"run", best, "--network", "analytical"}).status == 0);
  r = ddlsim_cmd({"search", f, "--set", "cluster.nodes=3", "--replay", "2", "--network", "analytical", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("unfit_strategies").size() == 2);
  CHECK(j.at("unfit_strategies").at(1).at("name") == "tp-pp");
  CHECK(j.at("unfit_strategies").at(1).at("reason") == "strategies.1: the global batch (64) must be divisible by dp x micro_batch (6)");
  for (const auto& e : j.at("ranked")) CHECK_FALSE(e.at("baseline").get<bool>());
  // The same for the SBP methods; without the --set nothing is unfit.
  r = ddlsim_cmd({"search", f, "--set", "cluster.nodes=3", "--method", "autoddl", "--network", "analytical"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("      strategy tp-pp is no baseline: ") != std::string::npos);
  r = ddlsim_cmd({"search", f, "--replay", "1", "--network", "analytical", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("unfit_strategies").empty());
}

TEST_CASE("search: plans that fit in memory rank before faster ones that do not") {
  // Expected: the default scenario's strategies on Llama 3 8B (32 A100s of 80 GB) keep
  // whole replicas of its 8 billion weights; plain data parallelism and ZeRO-3 at 4
  // sequences per micro-batch are faster than every grid plan but need more than 80 GB
  // (as the memory model prices them), so they are shown after the plans that fit, and
  // the best plan, the one --out writes, fits. (They ranked first, and --out wrote
  // ZeRO-3, until the thirty-sixth session.)
  Scratch s;
  const std::string best = (s.dir / "best.json").string();
  auto r = ddlsim_cmd({"search", "--set", "workload.model=llama3-8b", "--json", "--replay", "3", "--out", best});
  REQUIRE(r.status == 0);
  const auto ranked = nlohmann::json::parse(r.out).at("ranked");
  bool oom_seen = false, oom_faster = false;
  double fastest_fit = 1e300;
  for (const auto& e : ranked) {
    const bool fits = e.at("fits_in_memory").get<bool>();
    CHECK(!(fits && oom_seen));  // no plan that fits after one that does not
    if (fits) fastest_fit = std::min(fastest_fit, e.at("step_time_s").get<double>());
    if (!fits) {
      oom_seen = true;
      oom_faster = oom_faster || e.at("step_time_s").get<double>() < fastest_fit;
    }
  }
  CHECK(oom_seen);
  CHECK(oom_faster);  // the case the order matters for
  CHECK(ranked.at(0).at("fits_in_memory").get<bool>());
  const auto written = nlohmann::json::parse(std::ifstream(best)).at("strategies").at(0);
  CHECK(written.at("dp") == ranked.at(0).at("dp"));
  CHECK(written.at("micro_batch") == ranked.at(0).at("micro_batch"));
  CHECK(written.at("zero") == ranked.at(0).at("zero"));
  r = ddlsim_cmd({"search", "--set", "workload.model=llama3-8b", "--replay", "3"});
  CHECK(r.out.find(", OUT OF MEMORY: no plan replayed fits") == std::string::npos);
  // Llama 3 405B: every grid plan is pruned and no baseline fits; the best says so.
  r = ddlsim_cmd({"search", "--set", "workload.model=llama3-405b"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find(" s per step, OUT OF MEMORY: no plan replayed fits\n") != std::string::npos);
}
TEST_CASE("search: a baseline's rank order and overlap settings survive in its ranked entry") {
  // Expected: the scenario's tp-pp strategy, given the Megatron rank order (tp, dp, pp),
  // overlapping sends and no overlapped gradient reduction, is listed among the ranked
  // plans with those fields as given (a plan written back replays as the one ranked),
  // and a default plan's entry carries none of them.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto r = ddlsim_cmd({"search", f, "--json", "--replay", "2", "--network", "analytical", "--set",
                             "strategies.1.order=[\"tp\",\"dp\",\"pp\"]", "--set", "strategies.1.overlap_p2p=true",
                             "--set", "strategies.1.overlap_grad_reduce=false"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  bool seen = false;
  for (const auto& e : j.at("ranked")) {
    if (e.at("name") == "tp-pp") {
      seen = true;
      CHECK(e.at("order") == nlohmann::json::array({"tp", "dp", "pp"}));
      CHECK(e.at("overlap_p2p") == true);
      CHECK(e.at("overlap_grad_reduce") == false);
    } else if (e.at("name") == "dp") {
      CHECK_FALSE(e.contains("order"));
      CHECK_FALSE(e.contains("overlap_p2p"));
    }
  }
  CHECK(seen);
}

TEST_CASE("search: the grid's plans keep the framework settings of the scenario's first strategy") {
  // Expected: with the first strategy given gradient accumulation "add", Megatron's rank
  // order, no overlapped gradient reduction, fp32 reduction and master weights kept as
  // remainders, every ranked plan that is not a baseline carries those five as given (so --out replays what was ranked), but
  // for overlap_grad_reduce under ZeRO-2/3, which reduce-scatter per layer (the
  // scenario format refuses the field there); without them, no grid plan carries any.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  for (const bool framework : {true, false}) {
    std::vector<std::string> args{"search", f, "--json", "--replay", "24", "--network", "analytical"};
    if (framework) {
      for (const char* set : {"strategies.0.grad_accumulation=add", "strategies.0.order=[\"tp\",\"dp\",\"pp\"]",
                              "strategies.0.overlap_grad_reduce=false", "strategies.0.grad_reduce_fp32=true",
                              "strategies.0.master_weights=\"remainders\""}) {
        args.push_back("--set");
        args.push_back(set);
      }
    }
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    int grid = 0, with_buckets = 0;
    for (const auto& e : j.at("ranked")) {
      if (e.at("baseline") == true) continue;
      ++grid;
      INFO(e.dump());
      CHECK(e.contains("grad_accumulation") == framework);
      CHECK(e.contains("order") == framework);
      const bool buckets = e.at("zero").get<int>() <= 1;
      with_buckets += buckets;
      CHECK(e.contains("overlap_grad_reduce") == (framework && buckets));
      CHECK(e.contains("grad_reduce_fp32") == framework);
      CHECK(e.contains("master_weights") == framework);
      if (framework) {
        CHECK(e.at("master_weights") == "remainders");
        CHECK(e.at("grad_reduce_fp32") == true);
        CHECK(e.at("grad_accumulation") == "add");
        CHECK(e.at("order") == nlohmann::json::array({"tp", "dp", "pp"}));
        if (buckets) CHECK(e.at("overlap_grad_reduce") == false);
      }
    }
    CHECK(grid >= 2);
    CHECK(with_buckets >= 1);
  }
}

TEST_CASE("align_grad_reduce: a strategy's, the grid keeps it, and without overlap it changes nothing") {
  // Expected: on kTraining (16 A100s, analytical network) tp 4 x pp 2 x dp 2 runs with
  // the setting (1f1b: stage 1's buckets after its last backward); with
  // overlap_grad_reduce false it gives exactly the step without it (every bucket after
  // the whole backward either way); a search from a first strategy that sets it carries
  // it on every grid plan it applies to (zero 0 and 1 with a 1f1b or interleaved
  // pipeline) and on no other; a setting that is no boolean is refused, naming the field.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto step = [&](std::vector<std::string> sets) {
    std::vector<std::string> args{"run", f, "--json", "--network", "analytical"};
    for (const std::string& x : sets) args.insert(args.end(), {"--set", x});
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(1).at("step_time_s").get<double>();
  };
  CHECK(step({"strategies.1.align_grad_reduce=true"}) > 0.0);
  CHECK(step({"strategies.1.overlap_grad_reduce=false", "strategies.1.align_grad_reduce=true"}) ==
        step({"strategies.1.overlap_grad_reduce=false"}));
  const auto r = ddlsim_cmd({"search", f, "--json", "--replay", "120", "--network", "analytical", "--set",
                             "strategies.0.align_grad_reduce=true"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  int with_buckets = 0;
  for (const auto& e : j.at("ranked")) {
    if (e.at("baseline") == true) continue;
    INFO(e.dump());
    const std::string sched = e.at("schedule");
    const bool applies = e.at("zero").get<int>() <= 1 && e.at("pp").get<int>() > 1 && (sched == "1f1b" || sched == "interleaved");
    with_buckets += applies;
    CHECK(e.contains("align_grad_reduce") == applies);
    if (applies) CHECK(e.at("align_grad_reduce") == true);
  }
  CHECK(with_buckets >= 1);
  const auto bad = ddlsim_cmd({"run", f, "--set", "strategies.1.align_grad_reduce=\"yes\""});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("strategies.1.align_grad_reduce") != std::string::npos);
}

TEST_CASE("search --method autoddl and mcmc rank whole-model SBP plans against the baselines") {
  // Expected: on kTraining (16 A100s, analytical network) both replay the found plan,
  // data parallelism and Megatron in SBP terms (when they can run) and the scenario's
  // two strategies, those that fit first, fastest first; the best is written as
  // "search-best"; mcmc's plan replays no slower than SBP data parallelism with as many
  // micro-batches when that fits (its walk starts there and keeps the best); autoddl's
  // estimate of data parallelism is the cost model's; the same seed gives the same output.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  for (const char* method : {"autoddl", "mcmc"}) {
    INFO(method);
    std::vector<std::string> args{"search", f, "--method", method, "--json", "--network", "analytical"};
    if (std::string(method) == "mcmc") args.insert(args.end(), {"--iterations", "60"});
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& ranked = j.at("ranked");
    REQUIRE(ranked.size() >= 3);
    double found = 0, dp = 0, previous = 0;
    bool dp_fits = false, fitting = true;
    std::set<std::string> names;
    for (const auto& e : ranked) {
      names.insert(e.at("name").get<std::string>());
      const bool fits = e.at("fits_in_memory").get<bool>();
      CHECK((fitting || !fits));  // no plan that fits after one that does not
      if (fits != fitting) previous = 0;
      fitting = fits;
      const double t = e.at("step_time_s").get<double>();
      CHECK(t >= previous);
      previous = t;
      if (e.at("name") == method) found = t;
      if (e.at("name") == "sbp-data-parallel") {
        dp = t;
        dp_fits = fits;
      }
    }
    CHECK(names.count("dp") == 1);
    CHECK(names.count("tp-pp") == 1);
    // Megatron over tp of 2, 4 or 8 (dividing the 24 heads), data parallelism over the rest.
    CHECK(names.count("sbp-megatron") == 1);
    CHECK(j.at("skipped_baselines").empty());
    CHECK(found > 0);
    if (std::string(method) == "mcmc" && dp_fits) CHECK(found <= dp);
    CHECK(j.at("best").at("name") == "search-best");
    CHECK(ddlsim_cmd(args).out == r.out);
  }
  // A model of 3 heads on 16 devices: no tp dividing 16 divides the heads, so Megatron is
  // no baseline, and a line says why.
  const std::string odd = s.write("odd.json", R"({"name": "odd", "cluster": {"preset": "dgx-a100", "nodes": 2},
    "workload": {"hf_config": {"model_type": "gpt2", "n_embd": 192, "n_layer": 2, "n_head": 3, "n_positions": 128,
    "vocab_size": 1000}}, "strategies": [{"name": "dp", "global_batch": 64, "micro_batch": 4}]})");
  const auto r = ddlsim_cmd({"search", odd, "--method", "autoddl", "--network", "analytical"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("sbp-megatron   ") == std::string::npos);
  CHECK(r.out.find("\n      sbp-megatron is no baseline: no tp dividing the 16 devices splits every layer (tp 2, layer0.qkv: "
                   "splits its columns 2 ways, which its 3 column groups (key-value heads) do not divide)\n") != std::string::npos);
}

TEST_CASE("search's SBP baselines take the fewest micro-batches with which they fit") {
  // Expected: on 16 A100 40GB (40 GiB each), SBP data parallelism of the 1.7B model with a
  // global batch of 64 holds 16 bytes per parameter (bf16 weights and gradients, fp32
  // Adam) plus its saved activations: with 1 micro-batch over 40 GiB (ddlsim run of that
  // plan says so), with 2 under. The autoddl search's sbp-data-parallel baseline is that
  // plan with 2 micro-batches and fits, whatever the found plan's count.
  Scratch s;
  const char* cluster = R"("cluster": {"preset": "dgx-a100", "nodes": 2, "accelerator": "a100-40gb"},
    "workload": {"model": "megatron-1.7b", "seq": 1024}, "simulation": {"network": "analytical"})";
  const std::string one = s.write("one.json", std::string(R"J({"name": "t", )J") + cluster + R"J(,
    "strategies": [{"name": "sbp-dp", "global_batch": 64, "sbp": {"mesh": [16], "signatures": {"*": "S(0) x B -> S(0)"}}},
                   {"name": "sbp-dp2", "global_batch": 64, "sbp": {"mesh": [16], "micro_batches": 2,
                    "signatures": {"*": "S(0) x B -> S(0)"}}}]})J");
  const auto run = ddlsim_cmd({"run", one, "--json"});
  REQUIRE(run.status == 0);
  const auto runs = nlohmann::json::parse(run.out).at("strategies");
  CHECK_FALSE(runs.at(0).at("fits_in_memory").get<bool>());
  CHECK(runs.at(1).at("fits_in_memory").get<bool>());
  // Its compute splits into forward, backward, the optimizer (no recomputation) and
  // interference (the gradient all-reduces beside the backward) as a Megatron-style
  // plan's does, adding up to compute_s.
  for (const auto& st : runs) {
    const auto& b = st.at("breakdown");
    const auto& parts = b.at("compute_parts_s");
    CHECK(parts.at("recompute") == 0.0);
    CHECK(parts.at("optimizer").get<double>() > 0.0);
    CHECK(parts.at("backward").get<double>() > parts.at("forward").get<double>());
    CHECK(b.at("compute_s").get<double>() == Approx(parts.at("forward").get<double>() + parts.at("backward").get<double>() +
                                                    parts.at("optimizer").get<double>() + parts.at("interference").get<double>())
                                                 .epsilon(1e-12));
    CHECK(parts.at("interference").get<double>() > 0.0);
  }
  const std::string f = s.write("t.json", std::string(R"J({"name": "t", )J") + cluster + R"J(,
    "strategies": [{"name": "dp", "global_batch": 64, "micro_batch": 2, "recompute": "full"}]})J");
  const auto r = ddlsim_cmd({"search", f, "--method", "autoddl", "--json"});
  REQUIRE(r.status == 0);
  bool seen = false;
  const auto searched = nlohmann::json::parse(r.out);
  for (const auto& e : searched.at("ranked")) {
    if (e.at("name") != "sbp-data-parallel") continue;
    seen = true;
    CHECK(e.at("plan") == "sbp on mesh 16, 2 micro-batches");
    CHECK(e.at("fits_in_memory").get<bool>());
    CHECK(e.at("peak_memory_bytes") == runs.at(1).at("peak_memory_bytes"));
  }
  CHECK(seen);
}

TEST_CASE("SBP strategies in scenarios: data parallelism and Megatron agree with the Megatron-style lowering") {
  // Expected: on kTraining's model and cluster (analytical network), SBP data parallelism
  // over 16 devices in one pass and the Megatron-style dp strategy with micro-batch 4 (one
  // micro-batch of 64 / 16 per replica) describe the same training, as do Megatron tensor
  // parallelism over 8 with data parallelism over 2 and its SBP form on a 2 x 8 mesh:
  // their replayed step times agree within 3% and their memory within 1% (two lowerings
  // and two memory models written apart).
  // A CNN takes SBP strategies only ("*" covers every role not named), and mistakes are
  // one line naming the JSON path.
  Scratch s;
  const std::string f = s.write("sbp.json", R"J({"name": "t", "cluster": {"preset": "dgx-a100", "nodes": 2},
    "workload": {"model": "megatron-1.7b", "seq": 1024},
    "strategies": [
      {"name": "dp", "global_batch": 64, "micro_batch": 4},
      {"name": "sbp-dp", "global_batch": 64, "sbp": {"mesh": [16], "signatures": {"*": "S(0) x B -> S(0)"}}},
      {"name": "tp8", "tp": 8, "global_batch": 64, "micro_batch": 32},
      {"name": "sbp-tp8", "global_batch": 64, "sbp": {"mesh": [2, 8], "signatures": {
        "layer*.qkv": "[S(0), B] x [B, S(1)] -> [S(0), S(1)]", "layer*.proj": "[S(0), S(1)] x [B, S(0)] -> [S(0), P]",
        "layer*.fc1": "[S(0), B] x [B, S(1)] -> [S(0), S(1)]", "layer*.fc2": "[S(0), S(1)] x [B, S(0)] -> [S(0), P]",
        "output": "[S(0), B] x [B, S(1)] -> [S(0), S(1)]"}}}],
    "simulation": {"network": "analytical"}})J");
  const auto r = ddlsim_cmd({"run", f, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out).at("strategies");
  for (int pair : {0, 2}) {
    INFO(pair);
    const auto& a = j.at(pair);
    const auto& b = j.at(pair + 1);
    CHECK(b.at("step_time_s").get<double>() == Approx(a.at("step_time_s").get<double>()).epsilon(0.03));
    CHECK(b.at("peak_memory_bytes").get<double>() == Approx(a.at("peak_memory_bytes").get<double>()).epsilon(0.01));
    CHECK(b.at("plan").get<std::string>().rfind("sbp on mesh ", 0) == 0);
  }
  const std::string cnn = s.write("cnn.json", R"J({"name": "v", "cluster": {"preset": "single-gpu-ethernet", "nodes": 4},
    "workload": {"model": "vgg16"},
    "strategies": [{"name": "dp", "global_batch": 64, "sbp": {"mesh": [4], "micro_batches": 2, "signatures": {"*": "S(0) x B -> S(0)"}}}]})J");
  const auto v = ddlsim_cmd({"run", cnn, "--json"});
  REQUIRE(v.status == 0);
  CHECK(nlohmann::json::parse(v.out).at("strategies").at(0).at("plan") == "sbp on mesh 4, 2 micro-batches");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"strategies.0.sbp.mesh=[8]", "strategies.0.sbp.mesh: the mesh has 8 devices; the cluster has 4 accelerators"},
      {"strategies.0.sbp.micro_batches=3", "strategies.0.sbp.micro_batches: 3 does not divide the global batch (64)"},
      // It was cut to 1,000,000 without a word.
      {"strategies.0.sbp.micro_batches=2000000", "strategies.0.sbp.micro_batches: expected at most 1000000, got 2000000"},
      {"strategies.0.sbp.signatures.fc9=\"B x B -> B\"",
       "strategies.0.sbp.signatures.fc9: the model has no layer role 'fc9' (did you mean 'fc1'?); its roles: stage1.conv1, "
       "stage1.conv2, stage2.conv1, stage2.conv2, stage3.conv1, stage3.conv2, stage3.conv3, stage4.conv1, stage4.conv2, "
       "stage4.conv3, stage5.conv1, stage5.conv2, stage5.conv3, fc1, fc2, fc3"},
      {"strategies.0.sbp.signatures.fc1=\"S(0) x S(0) -> S(0)\"",
       "strategies.0.sbp.signatures.fc1: 'S(0) x S(0) -> S(0)' computes no matmul: along each mesh dimension A x B -> C must "
       "be one of S(0) x B -> S(0), B x S(1) -> S(1), S(1) x S(0) -> P, P x B -> P, B x P -> P, B x B -> B"},
      {"strategies.0.sbp.signatures.fc1=\"S(2) x B -> S(2)\"",
       "strategies.0.sbp.signatures.fc1: 'S(2)' is not an SBP of a matrix (S(0), S(1), B or P)"},
      {"strategies.0.tp=2", "strategies.0.tp: unknown key"},
  };
  for (const auto& [set, line] : bad) {
    INFO(set);
    const auto e = ddlsim_cmd({"run", cnn, "--set", set});
    CHECK(e.status == 2);
    CHECK(e.err.rfind("ddlsim run: " + line, 0) == 0);
    CHECK(e.out.empty());
  }
  const auto g = ddlsim_cmd({"search", cnn, "--method", "grid"});
  CHECK(g.status == 2);
  CHECK(g.err == "ddlsim search: --method grid: the grid holds Megatron-style plans of transformers; vgg16 is not one (use --method autoddl or mcmc)\n");
}

TEST_CASE("search --method mcmc: a batch that no plan it reaches can run is one line and status 2") {
  // Expected: a global batch of 5 on the default scenario's 32 GPUs: SBP data parallelism
  // and Megatron's split cannot divide it, the scenario has no strategy of that batch,
  // and 3 MCMC steps from (infeasible) data parallelism reach no feasible plan; the
  // search says so (it crashed on the empty list of candidates).
  const auto r = ddlsim_cmd({"search", "--method", "mcmc", "--iterations", "3", "--global-batch", "5"});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim search: --global-batch: no plan runs a global batch of 5 on 32 devices: the MCMC search's 3 "
                 "iterations from data parallelism found none (try more --iterations), data parallelism and Megatron's "
                 "split cannot divide it, and no strategy of the scenario has that batch\n");
  CHECK(r.out.empty());
}

TEST_CASE("search: plans too large to replay are skipped and the next estimates replayed in their place") {
  // Expected: the default scenario (a 24-layer model on 32 GPUs) at a global batch of
  // 1,300,000. A plan needs about dp x pp x micro-batches x (2 + 8 x 24 / pp) compute
  // tasks: dp 32 x pp 1 at micro-batch 4, 1300000 / 4 x 194 = 63 million, over the limit
  // of 60 million, so the best estimates are skipped (they used to be replayed past the
  // limit, into gigabytes) until one that fits the limit replays: its name is grid-(k+1)
  // after k skipped, and the report counts them. At 10,000,000 no plan is under the
  // limit: one line naming the first plan and why, status 2. (On the flow network, which
  // replays every replica; the analytical network replays one of identical replicas, and
  // these plans' replicas are.)
  auto r = ddlsim_cmd({"search", "--global-batch", "1300000", "--network", "flow", "--replay", "1", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto skipped = j.at("too_large_to_replay").get<int>();
  CHECK(skipped > 0);
  REQUIRE(j.at("ranked").size() == 1);
  CHECK(j.at("ranked").at(0).at("name") == "grid-" + std::to_string(skipped + 1));
  r = ddlsim_cmd({"search", "--global-batch", "1300000", "--network", "flow", "--replay", "1"});
  CHECK(r.out.find(std::to_string(skipped) + " skipped as too large to replay (the first, grid-1: this plan would replay "
                   "about") != std::string::npos);
  r = ddlsim_cmd({"search", "--global-batch", "10000000", "--network", "flow"});
  CHECK(r.status == 2);
  CHECK(r.err.rfind("ddlsim search: no plan to replay: all ", 0) == 0);
  CHECK(r.err.find(" plans tried are too large to replay (the first, grid-1: this plan would replay about ") != std::string::npos);
  CHECK(r.err.find("compute tasks, more than the limit of 60000000; use fewer micro-batches or data-parallel replicas (the analytical "
                   "network replays one of identical replicas))\n") !=
        std::string::npos);
  CHECK(r.out.empty());
}

TEST_CASE("AutoDDL-style results: the bundled scenarios' searches are never worse than the best baseline") {
  // Expected (issue 7, item 4): for each bundled autoddl-* scenario, 'ddlsim search
  // --method autoddl' ranks first a plan no slower than every baseline it replays (the
  // scenario's expert strategies, SBP data parallelism and Megatron). On VGG-16 over
  // 25 GbE single-GPU nodes the found plan beats data parallelism by at least 25% (AutoDDL
  // reports up to 71.5% for VGG), keeps every convolution's weights broadcast and splits
  // the largest fully connected layer's (fc1: 103M of the 138M weights; fc2's 17M and
  // fc3's 4M either way: their all-reduces hide beside the convolutions' backward), and
  // the report's why shows the gradient synchronization it removed. The plan the search finds replays within 5% of the plan
  // stored in the scenario as its "autoddl" strategy (what the search found when the file
  // was written), so a search that stops short of it fails here (the ranking above holds
  // by construction: the list is sorted by replayed time).
  const std::string dir = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/";
  for (const char* name : {"autoddl-vgg16-single-gpu-nodes", "autoddl-vgg16-dgx1", "autoddl-gpt2-large-single-gpu-nodes",
                           "autoddl-gpt2-large-dgx1"}) {
    INFO(name);
    const auto r = ddlsim_cmd({"search", dir + name + ".json", "--method", "autoddl", "--json"});
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& ranked = j.at("ranked");
    const double best = ranked.at(0).at("step_time_s").get<double>();
    CHECK(ranked.at(0).at("fits_in_memory").get<bool>());
    for (const auto& e : ranked) {
      if (e.at("fits_in_memory").get<bool>()) CHECK(best <= e.at("step_time_s").get<double>());
    }
    double found = -1, stored = -1;
    for (const auto& e : ranked) {
      if (e.at("name") == "autoddl") found = e.at("step_time_s").get<double>();
      if (e.at("name") == "autoddl (scenario)") stored = e.at("step_time_s").get<double>();
    }
    REQUIRE(found > 0);
    REQUIRE(stored > 0);
    CHECK(found <= 1.05 * stored);
    if (std::string(name) != "autoddl-vgg16-single-gpu-nodes") continue;
    CHECK(ranked.at(0).at("name") == "autoddl");
    double dp = 0;
    for (const auto& e : ranked) {
      if (e.at("name") == "sbp-data-parallel") dp = e.at("step_time_s").get<double>();
    }
    CHECK(best <= 0.75 * dp);
    for (const auto& [role, sig] : j.at("found").at("sbp").at("signatures").items()) {
      INFO(role);
      // The weights' layout, between "x " and " ->": broadcast on every mesh dimension?
      const std::string text = sig.get<std::string>();
      const std::size_t from = text.find(" x [") + 4, to = text.find("] ->");
      REQUIRE(to != std::string::npos);
      std::string w = text.substr(from, to - from);
      std::erase(w, ' ');
      bool all_b = true;
      for (std::size_t p = 0; p < w.size(); p += 2) all_b = all_b && w[p] == 'B' && (p + 1 == w.size() || w[p + 1] == ',');
      if (role == "fc2" || role == "fc3") continue;  // 17M and 4M of the 138M weights: either way
      CHECK(all_b != (role == "fc1"));
    }
    const auto text = ddlsim_cmd({"search", dir + name + ".json", "--method", "autoddl"});
    CHECK(text.out.find("why, against SBP data parallelism") != std::string::npos);
  }
}

TEST_CASE("validate --cost-model: estimates against replays, the built-in ones or the user's CSV") {
  // Expected: on kTraining (analytical network) every strategy is estimated by
  // estimate_step, each error is (estimate - replay) / replay, and the summary is their
  // mean and worst absolute value; a user's CSV predicting 1.1 x each replay shows +10%
  // for each and Kendall tau 1 (same order), one estimate alone has no tau; mistakes in the CSV are one line naming the
  // file and line, status 2; --cost-model takes none of the suite options.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto r = ddlsim_cmd({"validate", "--cost-model", f, "--network", "analytical", "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("strategies").size() == 2);
  double worst = 0, sum = 0;
  std::string csv = "scenario,strategy,predicted_step_s\n";
  for (const auto& e : j.at("strategies")) {
    CHECK(e.at("source") == "estimate_step");
    const double est = e.at("estimate_s").get<double>(), rep = e.at("replay_s").get<double>();
    CHECK(e.at("error").get<double>() == Approx((est - rep) / rep));
    worst = std::max(worst, std::abs((est - rep) / rep));
    sum += std::abs((est - rep) / rep);
    char row[160];
    std::snprintf(row, sizeof row, "t,%s,%.17g\n", e.at("strategy").get<std::string>().c_str(), 1.1 * rep);
    csv += row;
  }
  CHECK(j.at("worst_abs_error").get<double>() == Approx(worst));
  CHECK(j.at("mean_abs_error").get<double>() == Approx(sum / 2));
  csv += "other-scenario,dp,1.0\n";  // rows of other scenarios are skipped
  const std::string mine = s.write("mine.csv", csv);
  const auto u = ddlsim_cmd({"validate", "--cost-model", f, "--network", "analytical", "--estimates", mine, "--json"});
  REQUIRE(u.status == 0);
  const auto k = nlohmann::json::parse(u.out);
  for (const auto& e : k.at("strategies")) {
    CHECK(e.at("source") == mine);
    CHECK(e.at("error").get<double>() == Approx(0.1).epsilon(1e-9));
  }
  CHECK(k.at("kendall_tau").get<double>() == 1.0);
  // One estimated plan: no pair to rank, so the text says so instead of printing tau 0.
  s.write("mine.csv", "scenario,strategy,predicted_step_s\nt,dp,1.0\n");
  const auto one = ddlsim_cmd({"validate", "--cost-model", f, "--network", "analytical", "--estimates", mine});
  REQUIRE(one.status == 0);
  CHECK(one.out.find("Kendall tau - (no two plans compare) over 0 pairs") != std::string::npos);
  // The strategy without a row is named, not dropped without a word.
  CHECK(one.out.find("\nnot estimated (no row for them, so in none of the figures above): tp-pp\n") != std::string::npos);
  const auto one_json = ddlsim_cmd({"validate", "--cost-model", f, "--network", "analytical", "--estimates", mine, "--json"});
  CHECK(nlohmann::json::parse(one_json.out).at("not_estimated") == nlohmann::json::array({"tp-pp"}));
  CHECK(k.at("not_estimated").empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"scenario,strategy,predicted\n", mine + ":1: expected the header scenario,strategy,predicted_step_s"},
      {"scenario,strategy,predicted_step_s\nt,xp,1.0\n", mine + ":2: scenario 't' has no strategy 'xp'"},
      {"scenario,strategy,predicted_step_s\nt,dp,-1\n", mine + ":2: predicted_step_s: expected seconds from 1e-06 to 1e+07, got '-1'"},
      // Milliseconds by mistake, or a figure no step takes: a misplaced unit, as --measured's.
      {"scenario,strategy,predicted_step_s\nt,dp,1e30\n", mine + ":2: predicted_step_s: expected seconds from 1e-06 to 1e+07, got '1e30'"},
      {"scenario,strategy,predicted_step_s\nt,dp,1e-300\n", mine + ":2: predicted_step_s: expected seconds from 1e-06 to 1e+07, got '1e-300'"},
      {"scenario,strategy,predicted_step_s\nt,dp\n", mine + ":2: expected 3 fields, got 2"},
      {"scenario,strategy,predicted_step_s\nu,dp,1\nt.json,dp,1\n",
       mine + ": no row for scenario 't' (the scenario column holds a scenario's \"name\"; its rows name 'u', 't.json')"},
      {"scenario,strategy,predicted_step_s\n", mine + ": no row for scenario 't' (the scenario column holds a scenario's \"name\"; the file has no rows)"},
      {"scenario,strategy,predicted_step_s\nt,dp,1\nt,tp-pp,2\nt,dp,3\n", mine + ":4: strategy 'dp' has an estimate already, on line 2"},
  };
  for (const auto& [text, line] : bad) {
    INFO(text);
    s.write("mine.csv", text);
    const auto e = ddlsim_cmd({"validate", "--cost-model", f, "--estimates", mine});
    CHECK(e.status == 2);
    CHECK(e.err == "ddlsim validate: " + line + "\n");
  }
  auto e = ddlsim_cmd({"validate", "--estimates", mine});
  CHECK(e.status == 2);
  CHECK(e.err == "ddlsim validate: --estimates: only with --cost-model\n");
  e = ddlsim_cmd({"validate", "--cost-model", f, "--csv", mine});
  CHECK(e.status == 2);
  CHECK(e.err == "ddlsim validate: --csv: not with --cost-model\n");
}

TEST_CASE("busiest links: the analytical model's leave out links between switches, which it times as balanced") {
  // Expected: OPT-175B on 124 DGX A100s in a three-tier fat tree (the bundled scenario,
  // analytical network): its 124-rank rings all take the first route between pods, so
  // --links puts more bytes on one spine-to-core cable than it carries in the step
  // (utilization above 1: the model times links between switches as balanced and never
  // charges that). The busiest links it reports (--json, at most 5, and the table's
  // heading, which says so) leave such links out, so none is above 1; the flow model,
  // which does spread transfers, keeps them in the ranking.
  Scratch s;
  const std::string f = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/opt-175b.json";
  const std::string csv = (s.dir / "links.csv").string();
  auto r = ddlsim_cmd({"run", f, "--json", "--links", csv});
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string line, top;
  std::getline(in, line);
  REQUIRE(line == "strategy,link,kind,bytes,utilization");
  std::getline(in, top);  // most utilized first
  CHECK(top.find("spine") != std::string::npos);
  CHECK(std::stod(top.substr(top.rfind(',') + 1)) > 1.0);
  const auto links = nlohmann::json::parse(r.out).at("strategies").at(0).at("most_utilized_links");
  REQUIRE(links.size() == 5);
  for (const auto& l : links) {
    CHECK(l.at("utilization").get<double>() <= 1.0);
    const std::string name = l.at("link").get<std::string>();
    CHECK((name.find("node") != std::string::npos));  // one end is a server's GPU or NIC
  }
  r = ddlsim_cmd({"run", f});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("links between switches left out: the analytical model times them as balanced") != std::string::npos);
  r = ddlsim_cmd({"run", f, "--network", "flow"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("left out") == std::string::npos);
}

TEST_CASE("the README's sample of 'ddlsim run' is what the default scenario prints") {
  // Expected: the first code block under "What `ddlsim run` prints" in README.md is,
  // byte for byte, what 'ddlsim run' with no arguments prints (it had drifted: a peak of
  // 61.68 GiB where the run said 62.25).
  std::ifstream in(std::string(DDLSIM_SOURCE_DIR) + "/README.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const std::size_t section = readme.find("## What `ddlsim run` prints");
  REQUIRE(section != std::string::npos);
  const std::size_t open = readme.find("```\n", section);
  REQUIRE(open != std::string::npos);
  const std::size_t close = readme.find("```\n", open + 4);
  REQUIRE(close != std::string::npos);
  const auto r = ddlsim_cmd({"run"});
  REQUIRE(r.status == 0);
  CHECK(readme.substr(open + 4, close - open - 4) == r.out);
}

TEST_CASE("run: a mixture of experts trains under tp, pp and ep, its model FLOPs those of the experts a token uses") {
  // Expected: a Mixtral-type config (4 layers, hidden 512, 8 heads, 8 experts of 1024, 2
  // per token, vocab 32000, seq 512) runs; its model FLOPs per token are 6 N + 12 l h s
  // with N the parameters a token's matmuls use: per layer Q, K, V and the output
  // projection 4 x 512^2, the router 512 x 8, two experts 2 x 3 x 512 x 1024 and two
  // norms 2 x 512; the final norm 512 and the output layer 32000 x 512 (the untied input
  // embedding is a lookup). An SBP plan of it is refused in one line.
  Scratch s;
  const std::string config = R"({"model_type": "mixtral", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
    "num_key_value_heads": 8, "intermediate_size": 1024, "num_local_experts": 8, "num_experts_per_tok": 2,
    "max_position_embeddings": 4096, "vocab_size": 32000})";
  const std::string f = s.write("moe.json", R"({"name": "moe", "cluster": {"preset": "dgx-a100"}, "workload": {"hf_config": )" +
                                                config + R"(, "seq": 512}, "strategies": [
      {"name": "tp2-pp2", "tp": 2, "pp": 2, "global_batch": 16, "micro_batch": 2},
      {"name": "dp8", "global_batch": 16, "micro_batch": 2, "zero": 1},
      {"name": "ep4", "ep": 4, "global_batch": 16, "micro_batch": 2, "zero": 1}]})");
  const auto r = ddlsim_cmd({"run", f, "--json"});
  REQUIRE(r.status == 0);
  const double n = 4 * (4 * 512.0 * 512 + 512 * 8 + 2 * 3 * 512 * 1024.0 + 2 * 512) + 512 + 32000 * 512.0;
  const double per_token = 6 * n + 12 * 4 * 512 * 512.0;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& st : j.at("strategies")) {
    CHECK(st.at("step_time_s").get<double>() > 0);
    CHECK(st.at("model_tflops_per_device").get<double>() ==
          Approx(per_token * st.at("tokens_per_s").get<double>() / 8 / 1e12).epsilon(1e-9));
  }
  // Expert parallelism (ep 4 of dp 8): per layer 2 all-to-alls in the forward and 2 in the
  // backward of the one micro-batch, in each of the 2 ep groups: 4 x 4 x 2 = 32, each of a
  // rank's 8 experts x ceil(2 x 512 x 2 / 8) = 256 rows x 512 x 2 bytes.
  const auto& ep = j.at("strategies").at(2);
  CHECK(ep.at("plan") == "dp 8 x tp 1 x pp 1 x ep 4");
  // A strategy's all-to-alls over its ep groups of 4: how many, and their bytes.
  const auto ep_a2a = [](const nlohmann::json& strategy) {
    std::pair<double, double> n{0, 0};
    for (const auto& c : strategy.at("collectives")) {
      if (c.at("dim") == "ep" && c.at("op") == "all-to-all" && c.at("ranks") == 4) {
        n = {n.first + c.at("count").get<double>(), n.second + c.at("bytes").get<double>()};
      }
    }
    return n;
  };
  const auto [a2a, a2a_bytes] = ep_a2a(ep);
  CHECK(a2a == 32);
  CHECK(a2a_bytes == 32 * 8 * 256 * 512 * 2.0);
  // Routing imbalance 1.5 (workload moe_imbalance): the busiest rank's experts take
  // ceil(2 x 512 x 2 x 1.5 / 8) = 384 rows each, the all-to-alls carry 1.5 times the
  // bytes, the step is longer, and the model FLOPs a token counts are the same.
  const auto skewed = ddlsim_cmd({"run", f, "--json", "--set", "workload.moe_imbalance=1.5"});
  REQUIRE(skewed.status == 0);
  const nlohmann::json sk = nlohmann::json::parse(skewed.out).at("strategies").at(2);
  const auto [skewed_count, skewed_bytes] = ep_a2a(sk);
  CHECK(skewed_count == 32);
  CHECK(skewed_bytes == 32 * 8 * 384 * 512 * 2.0);
  CHECK(sk.at("plan") == "dp 8 x tp 1 x pp 1 x ep 4, expert rows x1.5");
  const auto skewed_text = ddlsim_cmd({"run", f, "--set", "workload.moe_imbalance=1.5"});
  CHECK(skewed_text.out.find("workload: mixtral, 4 layers, hidden 512, seq 512, 8 experts (2 per token), routing imbalance 1.5\n") != std::string::npos);
  CHECK(sk.at("step_time_s").get<double>() > ep.at("step_time_s").get<double>());
  CHECK(sk.at("model_tflops_per_device").get<double>() ==
        Approx(per_token * sk.at("tokens_per_s").get<double>() / 8 / 1e12).epsilon(1e-9));
  // Their waits are reported apart (ep), and the breakdown still adds up to the step.
  const auto& b = ep.at("breakdown");
  const auto& x = b.at("exposed_comm_s");
  CHECK(x.at("ep").get<double>() > 0);
  CHECK(j.at("strategies").at(1).at("breakdown").at("exposed_comm_s").at("ep") == 0);
  CHECK(b.at("compute_s").get<double>() + x.at("tp").get<double>() + x.at("pp").get<double>() + x.at("dp").get<double>() +
            x.at("ep").get<double>() + x.at("other").get<double>() + b.at("bubble_s").get<double>() ==
        Approx(ep.at("step_time_s").get<double>()).epsilon(1e-12));
  // The experts one after another (moe_grouped_gemm false) take longer; a search from a
  // first strategy that sets it carries it on every plan it ranks (every one has experts).
  const auto sequential = ddlsim_cmd({"run", f, "--json", "--set", "strategies.2.moe_grouped_gemm=false"});
  REQUIRE(sequential.status == 0);
  CHECK(nlohmann::json::parse(sequential.out).at("strategies").at(2).at("step_time_s").get<double>() >
        ep.at("step_time_s").get<double>());
  const auto searched = ddlsim_cmd({"search", f, "--json", "--replay", "4", "--network", "analytical", "--set",
                                    "strategies.0.moe_grouped_gemm=false"});
  REQUIRE(searched.status == 0);
  const nlohmann::json found = nlohmann::json::parse(searched.out);
  int ranked = 0;
  for (const auto& e : found.at("ranked")) {
    if (e.at("baseline") == true) continue;
    INFO(e.dump());
    CHECK(e.at("moe_grouped_gemm") == false);
    ++ranked;
  }
  CHECK(ranked > 0);
  expect_exact_errors({
      {{"run", f, "--set", "strategies.2.ep=3"}, "ddlsim run: strategies.2: ep (3) must divide the experts (8)\n"},
      {{"run", f, "--set", "strategies.2.ep=0"}, "ddlsim run: strategies.2.ep: expected a positive integer, got 0\n"},
      {{"run", f, "--set", "strategies.2.zero=3"},
       "ddlsim run: strategies.2: ep > 1 is modelled with zero 0 or 1 only (ZeRO-2/3 would shard expert states over dp / ep)\n"},
      {{"run", f, "--set", "strategies.2.overlap_ep_comm=1"}, "ddlsim run: strategies.2.overlap_ep_comm: expected true or false, got 1\n"},
      {{"run", f, "--set", "strategies.2.overlap_ep_comm=true", "--set", "strategies.2.schedule=\"gpipe\""},
       "ddlsim run: strategies.2: overlap_ep_comm pairs each forward with a backward: it needs the 1f1b or interleaved "
       "schedule, not gpipe\n"},
      {{"run", f, "--set", "strategies.2.moe_dispatcher=\"flex\""},
       "ddlsim run: strategies.2.moe_dispatcher: expected one of \"alltoall\", \"deepep\", got \"flex\"\n"},
      {{"run", f, "--set", "strategies.2.fp8_dispatch=1"}, "ddlsim run: strategies.2.fp8_dispatch: expected true or false, got 1\n"},
      {{"run", f, "--set", "strategies.2.fp8_dispatch=true"},
       "ddlsim run: strategies.2: fp8_dispatch needs moe_dispatcher \"deepep\" (DeepEP's kernels dispatch FP8)\n"},
      {{"run", f, "--set", "strategies.2.fp8_dispatch=true", "--set", "strategies.2.moe_dispatcher=\"deepep\""},
       "ddlsim run: strategies.2: fp8_dispatch needs FP8 GEMMs (workload gemm_dtype \"fp8\"): the experts take the FP8 "
       "tokens as they come\n"},
      {{"run", f, "--set", "workload.moe_imbalance=0.5"}, "ddlsim run: workload.moe_imbalance: expected a number of at least 1, got 0.5\n"},
      {{"run", f, "--set", "workload.moe_imbalance=5"},
       "ddlsim run: workload.moe_imbalance: expected 1 (balanced) to experts / experts_per_token (4: one expert taking every "
       "token), got 5\n"},
      {{"run", "--set", "workload.moe_imbalance=1.2"}, "ddlsim run: workload.moe_imbalance: needs a mixture-of-experts model (experts); megatron-1.7b is dense\n"},
      {{"run", f, "--set", "strategies.2.moe_capacity_factor=0"},
       "ddlsim run: strategies.2.moe_capacity_factor: expected a number above 0 (leave it out for no capacity), got 0\n"},
      {{"run", f, "--set", "strategies.2.moe_capacity_factor=\"1.25\""},
       "ddlsim run: strategies.2.moe_capacity_factor: expected a number above 0 (leave it out for no capacity), got \"1.25\"\n"},
      {{"run", f, "--set", "strategies.2.moe_capacity_factor=4.5"},
       "ddlsim run: strategies.2: moe_capacity_factor must be above 0 and at most experts / experts_per_token (4: an expert "
       "taking every token), got 4.5\n"},
      {{"run", f, "--set", "strategies.2.moe_pad_to_capacity=true"},
       "ddlsim run: strategies.2: moe_pad_to_capacity needs moe_capacity_factor (the capacity to pad to)\n"},
      {{"run", f, "--set", "strategies.2.moe_pad_to_capacity=true", "--set", "strategies.2.moe_capacity_factor=1.25", "--set",
        "strategies.2.moe_dispatcher=\"deepep\""},
       "ddlsim run: strategies.2: moe_pad_to_capacity is not modelled with moe_dispatcher \"deepep\" (Megatron-Core's flex "
       "dispatcher does not pad to capacity)\n"},
      {{"run", "--set", "strategies.0.moe_pad_to_capacity=true"},
       "ddlsim run: strategies.0: moe_pad_to_capacity needs a mixture-of-experts model (experts), this one is dense\n"},
      {{"run", f, "--set", "strategies.2.moe_grouped_gemm=\"no\""},
       "ddlsim run: strategies.2.moe_grouped_gemm: expected true or false, got \"no\"\n"},
      {{"run", "--set", "strategies.0.moe_grouped_gemm=false"},
       "ddlsim run: strategies.0: moe_grouped_gemm needs a mixture-of-experts model (experts), this one is dense\n"},
      {{"run", "--set", "strategies.0.moe_capacity_factor=1.25"},
       "ddlsim run: strategies.0: moe_capacity_factor needs a mixture-of-experts model (experts), this one is dense\n"},
      {{"run", "--set", "strategies.0.moe_dispatcher=\"deepep\""},
       "ddlsim run: strategies.0: moe_dispatcher \"deepep\" needs a mixture-of-experts model (experts), this one is dense\n"},
      {{"run", "--set", "strategies.0.overlap_ep_comm=true"},
       "ddlsim run: strategies.0: overlap_ep_comm needs a mixture-of-experts model (experts), this one is dense\n"},
      {{"run", f, "--set", "simulation.collective_algorithm={\"all-to-all\": \"hierarchical\"}"},
       "ddlsim run: simulation.collective_algorithm.all-to-all: hierarchical all-to-alls are what a strategy's "
       "moe_dispatcher \"deepep\" runs; the policy's all-to-alls take direct (or auto)\n"},
  });
  // DeepEP's dispatch inside the one server: each token once per GPU holding any of its
  // experts, 4 (1 - C(6, 2) / C(8, 2)) = 13/7 GPUs of its 2 copies: the all-to-alls carry
  // 13/14 of the bytes, directly, and the step is no longer.
  const auto deep = ddlsim_cmd({"run", f, "--json", "--set", "strategies.2.moe_dispatcher=\"deepep\""});
  REQUIRE(deep.status == 0);
  const nlohmann::json dj = nlohmann::json::parse(deep.out).at("strategies").at(2);
  double deep_bytes = 0;
  for (const auto& c : dj.at("collectives")) {
    if (c.at("dim") == "ep") {
      CHECK(c.at("algorithm") == "direct");
      deep_bytes += c.at("bytes").get<double>();
    }
  }
  CHECK(deep_bytes == Approx(a2a_bytes * 13 / 14).epsilon(1e-12));
  CHECK(dj.at("step_time_s").get<double>() <= ep.at("step_time_s").get<double>());
  // overlap_ep_comm (combined 1F1B) with 4 micro-batches: the same compute, a shorter
  // step, less exposed expert-parallel time, and a breakdown that still adds up.
  std::vector<nlohmann::json> runs;
  for (const char* overlap : {"false", "true"}) {
    const auto o = ddlsim_cmd({"run", f, "--json", "--set", "strategies.2.global_batch=64", "--set",
                               std::string("strategies.2.overlap_ep_comm=") + overlap});
    REQUIRE(o.status == 0);
    runs.push_back(nlohmann::json::parse(o.out).at("strategies").at(2));
  }
  const auto& ob = runs[1].at("breakdown");
  const auto work = [](const nlohmann::json& b) {  // (the compute less what communication beside it added)
    return b.at("compute_s").get<double>() - b.at("compute_parts_s").at("interference").get<double>();
  };
  CHECK(work(ob) == Approx(work(runs[0].at("breakdown"))).epsilon(1e-12));
  CHECK(runs[1].at("step_time_s").get<double>() < runs[0].at("step_time_s").get<double>());
  CHECK(ob.at("exposed_comm_s").at("ep").get<double>() < runs[0].at("breakdown").at("exposed_comm_s").at("ep").get<double>());
  const auto& ox = ob.at("exposed_comm_s");
  CHECK(ob.at("compute_s").get<double>() + ox.at("tp").get<double>() + ox.at("pp").get<double>() + ox.at("dp").get<double>() +
            ox.at("ep").get<double>() + ox.at("other").get<double>() + ob.at("bubble_s").get<double>() ==
        Approx(runs[1].at("step_time_s").get<double>()).epsilon(1e-12));
  // With tp 2 and an interleaved pipeline (dp 2 x tp 2 x pp 2, v 2, ep 2, 4 micro-batches):
  // a pass's tensor-parallel all-reduces may run while the paired pass computes, and only
  // what the compute stream spends idle counts as exposed: no more tensor-parallel time
  // than without the overlap, and parts that still add up to the step.
  std::vector<nlohmann::json> tp_runs;
  for (const char* overlap : {"false", "true"}) {
    const auto o = ddlsim_cmd({"run", f, "--json", "--set", "strategies.0.ep=2", "--set", "strategies.0.schedule=\"interleaved\"",
                               "--set", "strategies.0.virtual_stages=2", "--set",
                               std::string("strategies.0.overlap_ep_comm=") + overlap});
    REQUIRE(o.status == 0);
    tp_runs.push_back(nlohmann::json::parse(o.out).at("strategies").at(0));
  }
  const auto& tb = tp_runs[1].at("breakdown");
  const auto& tx = tb.at("exposed_comm_s");
  CHECK(tp_runs[1].at("step_time_s").get<double>() < tp_runs[0].at("step_time_s").get<double>());
  CHECK(tx.at("tp").get<double>() <= tp_runs[0].at("breakdown").at("exposed_comm_s").at("tp").get<double>());
  CHECK(tb.at("compute_s").get<double>() + tx.at("tp").get<double>() + tx.at("pp").get<double>() + tx.at("dp").get<double>() +
            tx.at("ep").get<double>() + tx.at("other").get<double>() + tb.at("bubble_s").get<double>() ==
        Approx(tp_runs[1].at("step_time_s").get<double>()).epsilon(1e-12));
  const auto sbp = ddlsim_cmd({"run", f, "--set",
                               sbp_data_parallel(8)});
  CHECK(sbp.status == 2);
  CHECK(sbp.err == "ddlsim run: sbp: mixtral is a mixture of experts, whose experts' grouped GEMMs SBP does not "
                   "shard; plan it with tp/pp/dp strategies\n");
}

TEST_CASE("run: multi-head latent attention trains under tp with sequence parallelism and ep, its model FLOPs closed form") {
  // Expected: a DeepSeek-V3-type config (2 layers, hidden 512, 8 heads, query latent 192,
  // key-value latent 128, heads of 64 + 32 for queries and keys and 64 for values, the
  // first layer a dense MLP of 1024, the second 8 experts of 256 with 2 per token and a
  // shared expert, vocab 32000, seq 512) runs; its model FLOPs per token are 6 N + 12 l s
  // x 8 x (96 + 64)/2 with N the parameters a token's matmuls use: per layer q_down 512 x
  // 192 and its norm 192, q_up 192 x 8 x 96, kv_down 512 x (128 + 32) and its norm 128,
  // kv_up 128 x 8 x (64 + 64), the output projection 8 x 64 x 512 and two norms 2 x 512;
  // the dense MLP 3 x 512 x 1024; the router 512 x 8, two experts and the shared one 3 x
  // 3 x 512 x 256; the final norm 512 and the output layer 32000 x 512. An SBP plan of it
  // is refused in one line (as a mixture of experts, which every deepseek_v3 model is).
  Scratch s;
  const std::string config = R"({"model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 512,
    "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1024, "moe_intermediate_size": 256,
    "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
    "q_lora_rank": 192, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64,
    "max_position_embeddings": 4096, "vocab_size": 32000})";
  const std::string f = s.write("mla.json", R"({"name": "mla", "cluster": {"preset": "dgx-a100"}, "workload": {"hf_config": )" +
                                                config + R"(, "seq": 512}, "strategies": [
      {"name": "tp2-sp", "tp": 2, "pp": 2, "global_batch": 16, "micro_batch": 2, "sequence_parallel": true},
      {"name": "ep4", "ep": 4, "global_batch": 16, "micro_batch": 2, "zero": 1, "recompute": "full"}]})");
  const auto r = ddlsim_cmd({"run", f, "--json"});
  REQUIRE(r.status == 0);
  const double attention = 512 * 192.0 + 192 + 192 * 8 * 96.0 + 512 * 160.0 + 128 + 128 * 8 * 128.0 + 8 * 64 * 512.0 + 2 * 512;
  const double n = 2 * attention + 3 * 512 * 1024.0 + 512 * 8 + 3 * 3 * 512 * 256.0 + 512 + 32000 * 512.0;
  const double per_token = 6 * n + 12 * 2 * 512 * 8 * (96 + 64) / 2.0;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& st : j.at("strategies")) {
    CHECK(st.at("step_time_s").get<double>() > 0);
    CHECK(st.at("model_tflops_per_device").get<double>() ==
          Approx(per_token * st.at("tokens_per_s").get<double>() / 8 / 1e12).epsilon(1e-9));
  }
  const auto sbp = ddlsim_cmd({"run", f, "--set",
                               sbp_data_parallel(8)});
  CHECK(sbp.status == 2);
  CHECK(sbp.err == "ddlsim run: sbp: deepseek_v3 is a mixture of experts, whose experts' grouped GEMMs SBP does not "
                   "shard; plan it with tp/pp/dp strategies\n");
}

TEST_CASE("recompute_modules: hardware FLOPs, the plan's name and errors") {
  // Expected: the default scenario's 'dp' strategy (megatron-1.7b: 24 layers, hidden
  // 2304, GPT MLP of 4 h) with selective recomputation of the MLPs alone recomputes
  // both MLP linears' forward, 2 x (h x 4h + 4h x h) = 16 h^2 FLOPs per token and
  // layer: hardware FLOPs per token exceed the model's by 24 x 16 x 2304^2, read back
  // from the report as (hardware - model TFLOP/s) x devices / tokens per second.
  const auto r = ddlsim_cmd({"run", "--json", "--strategy", "dp", "--set", "strategies.0.recompute=selective", "--set",
                             "strategies.0.recompute_modules=[\"mlp\"]"});
  REQUIRE(r.status == 0);
  const auto st = nlohmann::json::parse(r.out).at("strategies").at(0);
  const double extra = (st.at("hardware_tflops_per_device").get<double>() - st.at("model_tflops_per_device").get<double>()) *
                       1e12 * st.at("devices").get<double>() / st.at("tokens_per_s").get<double>();
  CHECK(extra == Approx(24 * 16 * 2304.0 * 2304.0).epsilon(1e-9));
  // Recomputing the MLPs costs time and saves memory against keeping everything.
  const auto plain = nlohmann::json::parse(ddlsim_cmd({"run", "--json", "--strategy", "dp"}).out).at("strategies").at(0);
  CHECK(st.at("step_time_s").get<double>() > plain.at("step_time_s").get<double>());
  CHECK(st.at("peak_memory_bytes").get<double>() < plain.at("peak_memory_bytes").get<double>());

  const std::vector<std::string> sel{"run", "--set", "strategies.0.recompute=selective", "--set"};
  const auto with = [&sel](const std::string& modules) {
    std::vector<std::string> a = sel;
    a.push_back("strategies.0.recompute_modules=" + modules);
    return a;
  };
  const BadInputs bad{
      {with(R"(["attn"])"),
       "ddlsim run: strategies.0.recompute_modules.0: expected one of \"core_attn\", \"layernorm\", \"mla_up_proj\", "
       "\"moe_act\", \"mlp\", \"shared_experts\", got \"attn\"\n"},
      {with(R"(["layernorm", "layernorm"])"), "ddlsim run: strategies.0.recompute_modules.1: 'layernorm' given twice\n"},
      {with("[]"), "ddlsim run: strategies.0.recompute_modules: expected at least one module, got []\n"},
      {with("\"layernorm\""), "ddlsim run: strategies.0.recompute_modules: expected an array, got \"layernorm\"\n"},
      {with(R"(["moe_act"])"), "ddlsim run: strategies.0: recompute_modules: moe_act needs a mixture of experts\n"},
      {{"run", "--set", "strategies.0.recompute_modules=[\"layernorm\"]"},
       "ddlsim run: strategies.0.recompute_modules: applies to selective recomputation only (set \"recompute\": \"selective\", "
       "or leave recompute_modules out)\n"},
  };
  expect_exact_errors(bad);
}

TEST_CASE("workload gemm_dtype fp8: runs on H100s, refused where it cannot be priced") {
  // Expected: the 'dp' strategy of the two-server training scenario moved to DGX H100s
  // (without recomputation, micro-batches of 8 sequences: GEMMs long past the host's
  // dispatch time) runs faster with fp8 GEMMs (its linear layers at twice the bf16 peak) and keeps
  // fewer activation bytes (fp8 copies of the linear layers' inputs) but more weight
  // bytes (fp8 weight copies); the rest of the report stays bf16 (MFU against the bf16
  // peak). On A100s (no fp8 peak), with a 32-bit model, another 16-bit GEMM type, a CNN,
  // ZeRO-3 or an SBP plan it is refused with one line.
  Scratch s;
  std::string on_h100 = kTraining;
  on_h100.replace(on_h100.find("dgx-a100"), 8, "dgx-h100");
  const std::string h100 = s.write("h.json", on_h100);
  const auto run = [&](bool fp8) {
    std::vector<std::string> a{"run", h100, "--json", "--strategy", "dp", "--set", "strategies.0.recompute=none", "--set",
                               "strategies.0.global_batch=128", "--set", "strategies.0.micro_batch=8"};
    if (fp8) a.insert(a.end(), {"--set", "workload.gemm_dtype=fp8"});
    const auto r = ddlsim_cmd(a);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0);
  };
  const auto bf16 = run(false), fp8 = run(true);
  CHECK(fp8.at("step_time_s").get<double>() < bf16.at("step_time_s").get<double>());
  const auto mem = [](const nlohmann::json& st, const char* part) { return st.at("memory_breakdown_bytes").at(part).get<double>(); };
  CHECK(mem(fp8, "activations") < mem(bf16, "activations"));
  CHECK(mem(fp8, "weights") > mem(bf16, "weights"));
  CHECK(mem(fp8, "optimizer") == mem(bf16, "optimizer"));

  // 'ddlsim workload' too: Llama 3 8B at batch 1 (32 layers, seq 8192, hidden 4096, FFN
  // 14336) keeps per layer s h (1 + FFN / h) bytes less under --gemm-dtype fp8 (the QKV's,
  // the MLP's and the down projection's inputs in 1 byte instead of 2; the output
  // projection's 1-byte copy beside flash attention's output).
  const auto activations = [](const std::vector<std::string>& extra) {
    std::vector<std::string> a{"workload", "--preset", "llama3-8b", "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    const auto r = ddlsim_cmd(a);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("total").at("activation_bytes").get<double>();
  };
  CHECK(activations({}) - activations({"--gemm-dtype", "fp8"}) ==
        Approx(32 * 8192.0 * 4096 * (1 + 14336.0 / 4096)).epsilon(1e-12));
  const std::string a100 = s.write("a.json", kTraining);
  const BadInputs bad{
      {{"workload", "--preset", "llama3-8b", "--gemm-dtype", "fp16"},
       "ddlsim workload: --gemm-dtype: expected \"fp8\" (fp8 linear layers in a bf16 or fp16 model) or the dtype (bf16), "
       "got \"fp16\"\n"},
      {{"run", a100, "--set", "workload.gemm_dtype=fp8"},
       "ddlsim run: workload.gemm_dtype: accelerator 'a100-80gb' has no fp8 peak in the catalog; it runs fp32, bf16, fp16\n"},
      {{"run", h100, "--set", "workload.gemm_dtype=fp16"},
       "ddlsim run: workload.gemm_dtype: expected \"fp8\" (fp8 linear layers in a bf16 or fp16 model) or the dtype (bf16), "
       "got \"fp16\"\n"},
      {{"run", h100, "--set", "workload.gemm_dtype=fp8", "--set", "workload.dtype=fp32"},
       "ddlsim run: workload.gemm_dtype: fp8 GEMMs need a bf16 or fp16 model; the dtype is fp32\n"},
      {{"workload", "--preset", "llama3-8b", "--gemm-dtype", "fp8", "--device", "a100-80gb"},
       "ddlsim workload: --gemm-dtype: accelerator 'a100-80gb' has no fp8 peak in the catalog; it runs fp32, bf16, fp16\n"},
      {{"workload", "--preset", "resnet50", "--gemm-dtype", "fp8"},
       "ddlsim workload: --gemm-dtype: resnet50 is not a transformer (its dtype sets its GEMMs')\n"},
      {{"run", h100, "--set", "workload.gemm_dtype=fp8", "--set", "strategies.1.zero=3"},
       "ddlsim run: strategies.1: fp8 GEMMs (workload gemm_dtype) under ZeRO-3 are not modelled (zero 0, 1 or 2)\n"},
      {{"run", vgg16_scenario(), "--set", "workload.gemm_dtype=fp8"},
       "ddlsim run: workload.gemm_dtype: vgg16 is not a transformer (its dtype sets its GEMMs')\n"},
      {{"run", h100, "--set", "workload.gemm_dtype=fp8", "--set",
        sbp_data_parallel(16)},
       "ddlsim run: sbp: SBP plans price every GEMM in the model's dtype; plan fp8 GEMMs (workload.gemm_dtype) with tp/pp/dp "
       "strategies\n"},
  };
  expect_exact_errors(bad);
}

TEST_CASE("search writes a baseline's recompute_modules, and the written plan replays alike") {
  // Expected: a scenario strategy with selective recomputation of the norms and the MLPs
  // is replayed by 'search' as a baseline; its ranked entry names the same modules, and
  // that entry, run as a strategy, gives the same step time as the baseline's row.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const std::vector<std::string> sets{"--set", "strategies=[{\"name\": \"dp\", \"global_batch\": 64, \"micro_batch\": 2, "
                                      "\"recompute\": \"selective\", \"recompute_modules\": [\"layernorm\", \"mlp\"]}]"};
  std::vector<std::string> args{"search", f, "--json", "--replay", "1"};
  args.insert(args.end(), sets.begin(), sets.end());
  const auto r = ddlsim_cmd(args);
  REQUIRE(r.status == 0);
  nlohmann::json baseline;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  for (const auto& e : doc.at("ranked")) {
    if (e.at("baseline").get<bool>()) baseline = e;
  }
  REQUIRE(baseline.is_object());
  CHECK(baseline.at("recompute_modules") == nlohmann::json::array({"layernorm", "mlp"}));
  nlohmann::json strategy = baseline;
  for (const char* k : {"baseline", "estimate_s", "step_time_s", "mfu", "peak_memory_bytes", "fits_in_memory"}) strategy.erase(k);
  const auto run = ddlsim_cmd({"run", f, "--json", "--set", "strategies=[" + strategy.dump() + "]"});
  REQUIRE(run.status == 0);
  CHECK(nlohmann::json::parse(run.out).at("strategies").at(0).at("step_time_s").get<double>() ==
        baseline.at("step_time_s").get<double>());
}

TEST_CASE("workload mtp_layers: a multi-token prediction depth's model FLOPs, and bad values refused") {
  // Expected: one depth on megatron-1.7b (GPT: h 2304, V 51200, seq 1024) adds to the
  // model FLOPs per token 6 x (a layer's 12 h^2 + 13 h parameters, the projection's
  // 2 h^2, three layer norms' 6 h, the output layer's V h again) + 12 h s for its
  // attention: 1,182,269,952 (the report's TFLOP/s x devices / tokens per second). The
  // report's header names the depth. Bad values, a CNN and an SBP plan are refused with
  // one line.
  Scratch s;
  const std::string f = s.write("t.json", kTraining);
  const auto per_token = [&](int depths) {
    const auto r = ddlsim_cmd({"run", f, "--json", "--strategy", "tp-pp", "--set", "workload.mtp_layers=" + std::to_string(depths)});
    REQUIRE(r.status == 0);
    const auto st = nlohmann::json::parse(r.out).at("strategies").at(0);
    return st.at("model_tflops_per_device").get<double>() * 1e12 * st.at("devices").get<double>() /
           st.at("tokens_per_s").get<double>();
  };
  const double h = 2304, V = 51200, seq = 1024;
  CHECK(per_token(1) - per_token(0) ==
        Approx(6 * (12 * h * h + 13 * h + 2 * h * h + 6 * h + V * h) + 12 * h * seq).epsilon(1e-9));
  // Under full recomputation ('dp') the depth's layer recomputes too: the hardware FLOPs
  // per token beyond the model's grow by one layer's forward, 2 x (12 h^2 + 13 h) + 4 h s
  // (within 0.1%: the report prices recomputation at the average layer's parameters).
  const auto recomputed = [&](int depths) {
    const auto r = ddlsim_cmd({"run", f, "--json", "--strategy", "dp", "--set", "workload.mtp_layers=" + std::to_string(depths)});
    REQUIRE(r.status == 0);
    const auto st = nlohmann::json::parse(r.out).at("strategies").at(0);
    return (st.at("hardware_tflops_per_device").get<double>() - st.at("model_tflops_per_device").get<double>()) * 1e12 *
           st.at("devices").get<double>() / st.at("tokens_per_s").get<double>();
  };
  CHECK(recomputed(1) - recomputed(0) == Approx(2 * (12 * h * h + 13 * h) + 4 * h * seq).epsilon(1e-3));
  const auto text = ddlsim_cmd({"run", f, "--strategy", "dp", "--set", "workload.mtp_layers=2"});
  REQUIRE(text.status == 0);
  CHECK(text.out.find("workload: megatron-1.7b, 24 layers and 2 multi-token prediction depths, hidden 2304, seq 1024\n") !=
        std::string::npos);
  const std::string depths = "ddlsim run: workload.mtp_layers: expected a whole number of multi-token prediction depths from 0 to 16, got ";
  const BadInputs bad{
      {{"run", f, "--set", "workload.mtp_layers=-1"}, depths + "-1\n"},
      {{"run", f, "--set", "workload.mtp_layers=1.5"}, depths + "1.5\n"},
      {{"run", f, "--set", "workload.mtp_layers=17"}, depths + "17\n"},
      {{"run", f, "--set", "workload.mtp_layers=\"one\""}, depths + "\"one\"\n"},
      {{"run", vgg16_scenario(), "--set", "workload.mtp_layers=1"},
       "ddlsim run: workload.mtp_layers: vgg16 is not a transformer\n"},
      {{"run", f, "--set", "workload.mtp_layers=1", "--set",
        sbp_data_parallel(16)},
       "ddlsim run: sbp: megatron-1.7b has multi-token prediction, whose depths branch off the model's last hidden state, not "
       "one chain of GEMMs; plan it with tp/pp/dp strategies, or set workload.mtp_layers to 0\n"},
  };
  expect_exact_errors(bad);
}

TEST_CASE("run: a context-parallel plan from a scenario, its plan named, its breakdown adding up") {
  // Expected: Llama 3 8B at sequence 4096 on one DGX H100, cp 2 x dp 4 against dp 8: the
  // plan column names cp, 8 devices; the rings listed as collectives of dim cp (below); samples/s x step = the global batch; the breakdown
  // adds up; the cp plan holds half the activations, so its peak is lower; on one server
  // (NVSwitch: every pair alike) Megatron's order (tp, cp, dp, pp) and the default (cp
  // just inside dp) give the same step.
  const char* scenario = R"({"name": "cp", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "workload": {"model": "llama3-8b", "seq": 4096},
    "strategies": [{"name": "cp", "cp": 2, "dp": 4, "global_batch": 16, "zero": 1, "order": ["tp", "cp", "dp", "pp"]},
                   {"name": "cp-default-order", "cp": 2, "global_batch": 16, "zero": 1},
                   {"name": "dp", "global_batch": 16, "zero": 1}],
    "simulation": {"network": "analytical"}})";
  Scratch s;
  const std::string f = s.write("cp.json", scenario);
  const auto r = ddlsim_cmd({"run", f, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& st = j.at("strategies");
  CHECK(st.at(0).at("plan") == "dp 4 x cp 2 x tp 1 x pp 1");
  CHECK(st.at(1).at("plan") == "dp 4 x cp 2 x tp 1 x pp 1");
  CHECK(st.at(2).at("plan") == "dp 8 x tp 1 x pp 1");
  for (const auto& x : st) {
    CHECK(x.at("devices") == 8);
    const double step = x.at("step_time_s").get<double>();
    CHECK(x.at("samples_per_s").get<double>() * step == Approx(16));
    const auto& b = x.at("breakdown");
    const auto& e = b.at("exposed_comm_s");
    CHECK(step == Approx(b.at("compute_s").get<double>() + e.at("tp").get<double>() + e.at("pp").get<double>() +
                         e.at("dp").get<double>() + b.at("bubble_s").get<double>()));
  }
  CHECK(st.at(0).at("step_time_s").get<double>() == st.at(1).at("step_time_s").get<double>());
  // The key-value rings in the collectives: per replica (4), tp rank (1), layer (32) and
  // micro-batch (16 / 4 = 4) one forward all-gather of cp x 1 x 2048 x 8 x 256 x 2 =
  // 2 x 8 MiB and one backward of twice that: 1,024 all-gathers over 2 ranks,
  // 512 x (16 + 32) MiB; none in the plan without cp.
  double rings = 0, ring_bytes = 0;
  for (const auto& c : st.at(0).at("collectives")) {
    if (c.at("dim") != "cp") continue;
    CHECK(c.at("op") == "all-gather");
    CHECK(c.at("ranks") == 2);
    rings += c.at("count").get<double>();
    ring_bytes += c.at("bytes").get<double>();
  }
  CHECK(rings == 1024);
  CHECK(ring_bytes == 512.0 * 48 * 1024 * 1024);
  for (const auto& c : st.at(2).at("collectives")) CHECK(c.at("dim") != "cp");
  const auto activations = [&](int i) { return st.at(i).at("memory_breakdown_bytes").at("activations").get<double>(); };
  CHECK(activations(0) == Approx(activations(2) / 2));
  CHECK(st.at(0).at("peak_memory_bytes").get<double>() < st.at(2).at("peak_memory_bytes").get<double>());
}

TEST_CASE("search --cp: the grid's context-parallel plans carry cp in their JSON and replay from --out as ranked") {
  // Expected: Llama 3 8B at sequence 4096 on one DGX H100, --cp 2 alone: every grid plan
  // has cp 2 (dp x tp x pp x 2 = 8 GPUs), its JSON says "cp": 2, and the best, written
  // by --out, replays with 'ddlsim run' to the step time the search ranked it by.
  const char* scenario = R"({"name": "cp", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "workload": {"model": "llama3-8b", "seq": 4096},
    "strategies": [{"name": "cp", "cp": 2, "dp": 4, "global_batch": 16, "zero": 1, "order": ["tp", "cp", "dp", "pp"]}],
    "simulation": {"network": "analytical"}})";
  Scratch s;
  const std::string f = s.write("cp.json", scenario), best = (s.dir / "best.json").string();
  const auto r = ddlsim_cmd({"search", f, "--cp", "2", "--replay", "20", "--json", "--out", best});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::size_t grid = 0;
  for (const auto& plan : j.at("ranked")) {
    CHECK(plan.at("cp") == 2);
    CHECK(plan.at("tp").get<int>() * plan.at("pp").get<int>() * plan.at("dp").get<int>() * 2 == 8);
    grid += !plan.at("baseline").get<bool>();
  }
  CHECK(grid == 20);
  const auto run = ddlsim_cmd({"run", best, "--json", "--strategy", "search-best"});
  REQUIRE(run.status == 0);
  CHECK(nlohmann::json::parse(run.out).at("strategies").at(0).at("step_time_s").get<double>() ==
        j.at("ranked").at(0).at("step_time_s").get<double>());
}

TEST_CASE("a plan written as JSON replays: ZeRO-2/3 plans leave out the bucket settings a scenario refuses for them") {
  // Expected: plan_json of a ZeRO-1 plan with 125 MiB buckets and no overlap keeps both
  // fields; of the same plan under ZeRO-2 or 3 neither (the scenario format refuses
  // bucket_mib and overlap_grad_reduce there: those stages reduce-scatter per layer), so
  // that 'ddlsim search --out' of such a plan runs.
  ddlsim::ParallelPlan p;
  p.dp = 8, p.global_batch = 16, p.bucket_bytes = 125.0 * 1024 * 1024, p.overlap_grad_reduce = false;
  p.dp_mode = ddlsim::DataParallelMode::kZero1;
  const auto one = ddlsim::plan_json(p, "x");
  CHECK(one.at("bucket_mib") == 125.0);
  CHECK(one.at("overlap_grad_reduce") == false);
  for (auto mode : {ddlsim::DataParallelMode::kZero2, ddlsim::DataParallelMode::kZero3}) {
    p.dp_mode = mode;
    const auto j = ddlsim::plan_json(p, "x");
    CHECK_FALSE(j.contains("bucket_mib"));
    CHECK_FALSE(j.contains("overlap_grad_reduce"));
    Scratch s;
    nlohmann::json doc = nlohmann::json::parse(kTraining);
    doc["strategies"] = nlohmann::json::array({nlohmann::json::parse(j.dump())});
    const std::string f = s.write("z.json", doc.dump());
    const auto r = ddlsim_cmd({"run", f});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
  }
}

TEST_CASE("master_weights \"remainders\": 10 bytes of optimizer state per parameter, and Nemotron-4 340B fits as NVIDIA ran it") {
  // Expected: NVIDIA's Nemotron-4 340B recipe on 128 H100 (public-runs case 115: tp 8 x
  // pp 8 x dp 2, ZeRO-1) runs Apex's distributed Adam, which keeps each fp32 master weight
  // as the 16 bits its bf16 weight lacks (the case says so): against a whole fp32 copy the
  // optimizer states shrink from 12 to 10 bytes per parameter (to 10/12), the peak by that
  // difference, the step time does not move, and the plan fits the H100 it ran on
  // (ddlsim's 81.8 GiB with the fp32 copy is over the 79.6 GiB the part has).
  const auto c = ddlsim_cmd({"validate", "--suite", "public-runs", "--case", "115"});
  REQUIRE(c.status == 0);
  REQUIRE(nlohmann::json::parse(c.out).at("name") == "nemo-nemotron4-340b-bf16-128-h100");
  Scratch s;
  const std::string f = s.write("nemotron.json", c.out);
  REQUIRE(nlohmann::json::parse(c.out).at("strategies").at(0).at("master_weights") == "remainders");
  const auto fp32 = ddlsim_cmd({"run", f, "--json", "--set", "strategies.0.master_weights=\"fp32\""});
  const auto rem = ddlsim_cmd({"run", f, "--json"});
  REQUIRE(fp32.status == 0);
  REQUIRE(rem.status == 0);
  const auto a = nlohmann::json::parse(fp32.out).at("strategies").at(0), b = nlohmann::json::parse(rem.out).at("strategies").at(0);
  const double opt_a = a.at("memory_breakdown_bytes").at("optimizer").get<double>();
  const double opt_b = b.at("memory_breakdown_bytes").at("optimizer").get<double>();
  CHECK(opt_b == Approx(opt_a * 10 / 12).epsilon(1e-12));
  CHECK(b.at("peak_memory_bytes").get<double>() == Approx(a.at("peak_memory_bytes").get<double>() - (opt_a - opt_b)).epsilon(1e-9));
  CHECK(b.at("step_time_s").get<double>() == a.at("step_time_s").get<double>());
  CHECK(a.at("fits_in_memory") == false);
  CHECK(b.at("fits_in_memory") == true);
  expect_exact_errors({
      {{"run", f, "--set", "strategies.0.master_weights=\"bf16\""},
       "ddlsim run: strategies.0.master_weights: expected one of \"fp32\", \"remainders\", got \"bf16\"\n"},
      {{"run", f, "--set", "strategies.0.master_weights=\"remainders\"", "--set", "workload.dtype=\"fp16\""},
       "ddlsim run: strategies.0: master_weights \"remainders\" needs a bf16 model (the remainders complete bf16 weights to "
       "fp32), this one is fp16\n"},
  });
}

TEST_CASE("fp8_params: FP8 layers' weights in FP8 alone, gathered in 1 byte, and the grid keeps it") {
  // Expected: NVIDIA's Nemotron-4 340B FP8 recipe on 128 H100 (public-runs case 120:
  // tp 8 x pp 8 x dp 2, ZeRO-1, fp8_params as the recipe sets it). A device's FP8 layers
  // hold 12 layers x (Q and O h^2, K and V 2 x 8 x 192 x h, MLP 8 h^2) / tp 8 =
  // 5,181,014,016 weights (h 18432). Without fp8_params each keeps a bf16 copy beside its
  // FP8 copy and transpose: the weights take 2 bytes more each, 10,362,028,032 bytes, and
  // the dp all-gathers of the updated weights (8 stages x 8 tp ranks) carry 1 byte more
  // each, 64 x 5,181,014,016 bytes; the step is slower for it, and the plan does not fit
  // the H100 (87.0 GiB) where with fp8_params it does.
  const auto c = ddlsim_cmd({"validate", "--suite", "public-runs", "--case", "120"});
  REQUIRE(c.status == 0);
  REQUIRE(nlohmann::json::parse(c.out).at("name") == "nemo-nemotron4-340b-fp8-128-h100");
  REQUIRE(nlohmann::json::parse(c.out).at("strategies").at(0).at("fp8_params") == true);
  Scratch s;
  const std::string f = s.write("nemotron-fp8.json", c.out);
  const auto on = ddlsim_cmd({"run", f, "--json"});
  const auto off = ddlsim_cmd({"run", f, "--json", "--set", "strategies.0.fp8_params=false"});
  REQUIRE(on.status == 0);
  REQUIRE(off.status == 0);
  const auto a = nlohmann::json::parse(on.out).at("strategies").at(0), b = nlohmann::json::parse(off.out).at("strategies").at(0);
  const double w8 = 12.0 * (10.0 * 18432 * 18432 + 2.0 * 8 * 192 * 18432) / 8;
  CHECK(w8 == 5181014016.0);
  CHECK(b.at("memory_breakdown_bytes").at("weights").get<double>() - a.at("memory_breakdown_bytes").at("weights").get<double>() ==
        Approx(2 * w8).epsilon(1e-12));
  const auto gathered = [](const nlohmann::json& st) {
    for (const auto& x : st.at("collectives")) {
      if (x.at("dim") == "dp" && x.at("op") == "all-gather") return x.at("bytes").get<double>();
    }
    FAIL("no dp all-gather");
    return 0.0;
  };
  CHECK(gathered(b) - gathered(a) == Approx(64 * w8).epsilon(1e-12));
  CHECK(a.at("step_time_s").get<double>() < b.at("step_time_s").get<double>());
  CHECK(a.at("fits_in_memory") == true);
  CHECK(b.at("fits_in_memory") == false);
  expect_exact_errors({
      {{"run", f, "--set", "strategies.0.fp8_params=1"}, "ddlsim run: strategies.0.fp8_params: expected true or false, got 1\n"},
      {{"run", f, "--set", "workload.gemm_dtype=null"},
       "ddlsim run: strategies.0: fp8_params needs FP8 GEMMs (workload gemm_dtype \"fp8\"): it keeps their weights in FP8\n"},
      {{"run", f, "--set", "strategies.0.zero=3", "--set", "strategies.0.overlap_grad_reduce=null", "--set",
        "strategies.0.bucket_mib=null", "--set", "strategies.0.overlap_param_gather=null", "--set",
        "strategies.0.align_param_gather=null"},
       "ddlsim run: strategies.0: fp8 GEMMs (workload gemm_dtype) under ZeRO-3 are not modelled (zero 0, 1 or 2)\n"},
      {{"run", f, "--set", "strategies.0.master_weights=\"remainders\""},
       "ddlsim run: strategies.0: master_weights \"remainders\" completes bf16 weights to fp32; with fp8_params the weights "
       "are FP8 (leave master_weights \"fp32\")\n"},
  });
  // The grid (Nemotron-4 15B FP8 on 16 GPUs, case 107) gives every plan the scenario's
  // fp8_params (it has no ZeRO-3 plans: FP8 GEMMs are modelled with zero 0 to 2).
  const auto c15 = ddlsim_cmd({"validate", "--suite", "public-runs", "--case", "107"});
  REQUIRE(c15.status == 0);
  const auto r = ddlsim_cmd({"search", s.write("n15.json", c15.out), "--json", "--replay", "40", "--network", "analytical"});
  REQUIRE(r.status == 0);
  const auto searched = nlohmann::json::parse(r.out);
  int grid = 0;
  for (const auto& e : searched.at("ranked")) {
    if (e.at("baseline") == true) continue;
    ++grid;
    CHECK(e.at("fp8_params") == true);
    CHECK(e.at("zero") != 3);
  }
  CHECK(grid == 40);
}

TEST_CASE("validate: a measured step that ddlsim finds over its accelerators' memory counts as unfit, and --check fails on it") {
  // Expected: NVIDIA ran Nemotron-4 340B on 128 H100 (public-runs case 115), so its plan
  // fit; with a whole fp32 master copy (master_weights "fp32") ddlsim's peak is 81.8 GiB,
  // over the H100's 79.6: as a measured step that is one unfit case, named under the
  // table and in the JSON, and a record of it does not pass --check. As the recipe runs
  // it (remainders) it fits: unfit 0, and the check passes.
  const auto c = ddlsim_cmd({"validate", "--suite", "public-runs", "--case", "115"});
  REQUIRE(c.status == 0);
  Scratch s;
  const std::string fits = s.write("fits.json", c.out);
  auto doc = nlohmann::json::parse(c.out);
  doc["strategies"][0]["master_weights"] = "fp32";
  const std::string over = s.write("over.json", doc.dump());
  const std::string m = s.write("m.csv", "scenario_file,strategy,measured_step_s\nover.json,tp8-pp8-v12,4.61\n");
  auto r = ddlsim_cmd({"validate", "--measured", m});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("  (1 cases that ran do not fit in memory by ddlsim's model; see --csv's peak_memory_gib)\n") !=
        std::string::npos);
  r = ddlsim_cmd({"validate", "--measured", m, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("measured").at("all").at("unfit") == 1);
  CHECK(j.at("measured").at("over.json").at("unfit") == 1);
  const std::string rec = (s.dir / "rec.json").string();
  REQUIRE(ddlsim_cmd({"validate", "--measured", m, "--record", rec}).status == 0);
  r = ddlsim_cmd({"validate", "--measured", m, "--check", rec});
  CHECK(r.status == 3);
  CHECK(r.err.find("measured / over.json: 1 cases that ran do not fit in memory by ddlsim's model (see --csv's peak_memory_gib)") !=
        std::string::npos);
  const std::string ok = s.write("ok.csv", "scenario_file,strategy,measured_step_s\nfits.json,tp8-pp8-v12,4.61\n");
  r = ddlsim_cmd({"validate", "--measured", ok, "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("measured").at("all").at("unfit") == 0);
  const std::string rec_ok = (s.dir / "rec-ok.json").string();
  REQUIRE(ddlsim_cmd({"validate", "--measured", ok, "--record", rec_ok}).status == 0);
  CHECK(ddlsim_cmd({"validate", "--measured", ok, "--check", rec_ok}).status == 0);
}

TEST_CASE("tp_only_amax_red: FP8 amax reductions are the breakdown's other communication, among the stage or its tp ranks") {
  // Expected: NVIDIA's Nemotron-4 15B FP8 recipe on 16 H100 (public-runs case 107: tp 4 x
  // dp 4, one stage of 32 layers, 4 micro-batches). Each micro-batch's forward ends with
  // an all-reduce of 32 layers x 4 FP8 linear layers x 3 fp32 amaxes = 1,536 bytes and
  // its backward with one of 1,024 bytes, each with two kernels' launches (3 us each on
  // the H100), all in line: the breakdown's exposed "other" communication is 4 x (t(1536)
  // + t(1024) + 12 us), t the all-reduce's analytical time among the stage's ranks, all
  // 16 GPUs of the two servers ('ddlsim collective', auto); with tp_only_amax_red among
  // the tp group's 4 GPUs of one server. The step is shorter with the smaller group.
  // DeepSeek-V3's FP8 scenario (pp 16; one strategy under combined 1F1B, where only what
  // falls outside the paired pass's compute counts): every strategy's breakdown still
  // adds up to its step, with some amax time in "other".
  Scratch s;
  const auto c = ddlsim_cmd({"validate", "--suite", "public-runs", "--case", "107"});
  REQUIRE(c.status == 0);
  const std::string f = s.write("n15.json", c.out);
  const auto ar_us = [](std::vector<std::string> where, const char* bytes) {
    where.insert(where.end(), {"--network", "analytical", "-b", bytes, "-e", bytes, "--json"});
    const auto r = ddlsim_cmd(where);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("results").at(0).at("time_us").get<double>();
  };
  const std::vector<std::string> stage{"collective", "--preset", "dgx-h100", "--nodes", "2"};
  const std::vector<std::string> tp{"collective", "--preset", "dgx-h100", "--ranks", "0-3"};
  const double whole = 4 * (ar_us(stage, "1536") + ar_us(stage, "1024") + 12) * 1e-6;
  const double tp_only = 4 * (ar_us(tp, "1536") + ar_us(tp, "1024") + 12) * 1e-6;
  REQUIRE(whole > tp_only);
  const auto run = [&](std::vector<std::string> more) {
    std::vector<std::string> args{"run", f, "--json"};
    args.insert(args.end(), more.begin(), more.end());
    const auto r = ddlsim_cmd(args);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies").at(0);
  };
  const auto a = run({}), b = run({"--set", "strategies.0.tp_only_amax_red=true"});
  CHECK(a.at("breakdown").at("exposed_comm_s").at("other").get<double>() == Approx(whole).epsilon(1e-9));
  CHECK(b.at("breakdown").at("exposed_comm_s").at("other").get<double>() == Approx(tp_only).epsilon(1e-9));
  CHECK(a.at("step_time_s").get<double>() > b.at("step_time_s").get<double>());
  const auto ds = ddlsim_cmd({"run", std::string(DDLSIM_SOURCE_DIR) + "/scenarios/deepseek-v3-h800.json", "--json"});
  REQUIRE(ds.status == 0);
  const auto ds_doc = nlohmann::json::parse(ds.out);
  for (const auto& st : ds_doc.at("strategies")) {
    const auto& br = st.at("breakdown");
    double parts = br.at("compute_s").get<double>() + br.at("bubble_s").get<double>();
    for (const auto& [k, x] : br.at("exposed_comm_s").items()) parts += x.get<double>();
    CHECK(parts == Approx(st.at("step_time_s").get<double>()).epsilon(1e-9));
    CHECK(br.at("exposed_comm_s").at("other").get<double>() > 0.0);
  }
  // A search keeps it (the framework's setting), and writes it back with --out.
  const auto out = (s.dir / "best.json").string();
  REQUIRE(ddlsim_cmd({"search", f, "--set", "strategies.0.tp_only_amax_red=true", "--replay", "1", "--network", "analytical",
                      "--out", out})
              .status == 0);
  CHECK(read_file(out).find("\"tp_only_amax_red\": true") != std::string::npos);
  expect_exact_errors({
      {{"run", f, "--set", "strategies.0.tp_only_amax_red=1"},
       "ddlsim run: strategies.0.tp_only_amax_red: expected true or false, got 1\n"},
      {{"run", f, "--set", "strategies.0.tp_only_amax_red=true", "--set", "workload.gemm_dtype=null", "--set",
        "strategies.0.fp8_params=null"},
       "ddlsim run: strategies.0: tp_only_amax_red needs FP8 GEMMs (workload gemm_dtype \"fp8\"): it chooses the ranks that "
       "reduce their amaxes\n"},
  });
}

TEST_CASE("simulation.interference: communication beside the compute slows it unless switched off") {
  // Expected on the default scenario: each of its four strategies runs some communication
  // beside its compute (gradient buckets beside the backward, ZeRO-3's gathers, the
  // pipeline's overlapped sends), so with interference (the default) its compute has a
  // part "interference" above 0 and its step is longer than with simulation.interference
  // false, whose compute has none. A value that is not a boolean is one line naming the
  // field, exit 2.
  const auto run = [](const char* on) {
    const auto r = ddlsim_cmd({"run", "--json", "--set", std::string("simulation.interference=") + on});
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("strategies");
  };
  const auto with = run("true"), without = run("false");
  REQUIRE(with.size() == 4);
  REQUIRE(without.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(with.at(i).at("name").get<std::string>());
    CHECK(with.at(i).at("breakdown").at("compute_parts_s").at("interference").get<double>() > 0.0);
    CHECK(without.at(i).at("breakdown").at("compute_parts_s").at("interference").get<double>() == 0.0);
    CHECK(with.at(i).at("step_time_s").get<double>() > without.at(i).at("step_time_s").get<double>());
  }
  expect_exact_errors({{{"run", "--set", "simulation.interference=1"},
                        "ddlsim run: simulation.interference: expected true or false, got 1\n"}});
}
