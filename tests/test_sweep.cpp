// `ddlsim sweep` and `ddlsim merge`: rows in the product's order whatever the threads,
// failing points as rows, shards merged byte for byte, bad input refused with one line;
// and the files figures are drawn from (`run --links`, search convergence).
#include <doctest/doctest.h>

#include "approx.hpp"

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli_fixtures.hpp"

using namespace ddlsim_test;
namespace fs = std::filesystem;

namespace {

// 8 to 16 A100s, analytical network: a point replays in milliseconds.
const char* kScenario = R"({"name": "t", "cluster": {"preset": "dgx-a100", "nodes": 2},
  "workload": {"model": "megatron-1.7b", "seq": 1024},
  "strategies": [{"name": "dp", "global_batch": 64, "micro_batch": 2, "recompute": "full"},
                 {"name": "tp", "tp": 8, "global_batch": 64, "micro_batch": 2}],
  "simulation": {"network": "analytical"}})";

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) cells.push_back(std::exchange(cell, {}));
      else cell += c;
    }
    cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("sweep: one row per point and strategy in the product's order, failing points as rows") {
  // Expected: nodes 1, 2 (slowest) x tp 8, 16 -> 4 points x 2 strategies = 8 rows after the
  // header, points 0,0,1,1,2,2,3,3. tp 16 is an invalid plan on one 8-GPU server (16
  // devices) and on two (16 does not divide the model's 24 heads): that strategy's row is
  // "failed" with the scenario's own one-line reason, the other strategy of the point
  // still runs. A point's
  // numbers are those of `ddlsim run` with the same --set (the same text in the CSV).
  Scratch s;
  const std::string f = s.write("t.json", kScenario);
  const std::string csv = (s.dir / "a.csv").string();
  auto r = ddlsim_cmd({"sweep", f, "--vary", "cluster.nodes=1,2", "--vary", "strategies.1.tp=8,16", "--csv", csv, "--jobs", "2"});
  REQUIRE(r.status == 0);
  CHECK(r.out.empty());
  const auto rows = csv_rows(read_file(csv));
  REQUIRE(rows.size() == 9);
  CHECK(rows[0][0] == "point");
  CHECK(rows[0][1] == "cluster.nodes");
  CHECK(rows[0][2] == "strategies.1.tp");
  CHECK(rows[0][3] == "strategy");
  CHECK(rows[0][4] == "status");
  CHECK(rows[0][5] == "reason");
  CHECK(rows[0][6] == "plan");
  CHECK(rows[0][8] == "step_time_s");
  CHECK(rows[0].size() == 38);  // point, the 2 varied fields, strategy, status, reason + run --csv's 32 after its name
  const std::vector<std::string> points{"0", "0", "1", "1", "2", "2", "3", "3"};
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(rows[i + 1][0] == points[i]);
    CHECK(rows[i + 1][3] == (i % 2 == 0 ? "dp" : "tp"));
  }
  CHECK(rows[2][1] == "1");
  CHECK(rows[2][2] == "8");
  CHECK(rows[2][4] == "ok");
  CHECK(rows[4][2] == "16");
  CHECK(rows[4][4] == "failed");
  CHECK(rows[4][5] == "strategies.1: dp x tp x pp = 16 devices, but the cluster has 8");
  CHECK(rows[8][5] == "strategies.1: tp (16) must divide the attention heads (24)");
  CHECK(rows[4][8].empty());
  CHECK(rows[3][4] == "ok");  // dp at the same point
  // Point 2 (two nodes, tp 8) against ddlsim run.
  const std::string run_csv = (s.dir / "run.csv").string();
  r = ddlsim_cmd({"run", f, "--set", "cluster.nodes=2", "--csv", run_csv});
  REQUIRE(r.status == 0);
  const auto run_rows = csv_rows(read_file(run_csv));
  REQUIRE(run_rows.size() == 3);
  for (std::size_t c = 1; c < run_rows[0].size(); ++c) {
    CHECK(run_rows[0][c] == rows[0][c + 5]);
    CHECK(run_rows[1][c] == rows[5][c + 5]);  // dp
    CHECK(run_rows[2][c] == rows[6][c + 5]);  // tp
  }
  // The same sweep on one thread: the same bytes.
  const std::string one = (s.dir / "one.csv").string();
  r = ddlsim_cmd({"sweep", f, "--vary", "cluster.nodes=1,2", "--vary", "strategies.1.tp=8,16", "--csv", one, "--jobs", "1"});
  REQUIRE(r.status == 0);
  CHECK(read_file(one) == read_file(csv));
  // Whole numbers written as floats are those integers, in the scenario and the columns.
  const std::string floats = (s.dir / "floats.csv").string();
  r = ddlsim_cmd({"sweep", f, "--vary", "cluster.nodes=1e0,2.0", "--vary", "strategies.1.tp=8,16", "--csv", floats});
  REQUIRE(r.status == 0);
  CHECK(read_file(floats) == read_file(csv));
}

TEST_CASE("sweep: a point whose scenario is invalid as a whole is one row without a strategy") {
  // Expected: 0 nodes is refused by the cluster's own check; the row names no strategy and
  // says why; the valid point runs both strategies.
  Scratch s;
  const std::string f = s.write("t.json", kScenario);
  const std::string json = (s.dir / "a.json").string();
  const auto r = ddlsim_cmd({"sweep", f, "--vary", "cluster.nodes=0,1", "--json", json});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(read_file(json));
  REQUIRE(j["rows"].size() == 3);
  CHECK(j["rows"][0]["point"] == 0);
  CHECK(j["rows"][0]["strategy"] == "");
  CHECK(j["rows"][0]["status"] == "failed");
  CHECK(j["rows"][0]["reason"].get<std::string>().rfind("cluster.nodes: ", 0) == 0);
  CHECK(j["rows"][1]["status"] == "ok");
  CHECK(j["points"] == 2);
  CHECK(j["vary"][0]["path"] == "cluster.nodes");
  CHECK_FALSE(j.contains("shard"));
}

TEST_CASE("sweep --shard K/N and merge: the parts joined are the single run, byte for byte") {
  // Expected: 3 x 2 points split in 4 parts (a part may be empty); merging them in any
  // order gives the CSV and JSON of the unsplit sweep. A part missing, given twice or from
  // another sweep is refused with one line and no file.
  Scratch s;
  const std::string f = s.write("t.json", kScenario);
  const std::vector<std::string> sweep{"sweep", f, "--vary", "cluster.nodes=1,2,3", "--vary", "strategies.0.micro_batch=1,2"};
  auto args = sweep;
  for (const char* a : {"--csv", "full.csv", "--json", "full.json"}) args.push_back(a[0] == '-' ? a : (s.dir / a).string());
  REQUIRE(ddlsim_cmd(args).status == 0);
  std::vector<std::string> parts;
  for (int k = 1; k <= 4; ++k) {
    args = sweep;
    parts.push_back((s.dir / ("p" + std::to_string(k) + ".json")).string());
    for (const std::string& a : {std::string("--shard"), std::to_string(k) + "/4", std::string("--json"), parts.back()}) {
      args.push_back(a);
    }
    REQUIRE(ddlsim_cmd(args).status == 0);
  }
  const std::string mcsv = (s.dir / "m.csv").string(), mjson = (s.dir / "m.json").string();
  auto r = ddlsim_cmd({"merge", parts[2], parts[0], parts[3], parts[1], "--csv", mcsv, "--json", mjson});
  REQUIRE(r.status == 0);
  CHECK(read_file(mcsv) == read_file((s.dir / "full.csv").string()));
  CHECK(read_file(mjson) == read_file((s.dir / "full.json").string()));

  const std::string out = (s.dir / "x.csv").string();
  r = ddlsim_cmd({"merge", parts[0], parts[1], parts[2], "--csv", out});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim merge: part 4/4 is missing\n");
  r = ddlsim_cmd({"merge", parts[0], parts[0], "--csv", out});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim merge: " + parts[0] + ": part 1/4 is given twice\n");
  args = {"sweep", f, "--vary", "cluster.nodes=1,2", "--shard", "2/4", "--json", (s.dir / "other.json").string()};
  REQUIRE(ddlsim_cmd(args).status == 0);
  r = ddlsim_cmd({"merge", parts[0], (s.dir / "other.json").string(), "--csv", out});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim merge: " + (s.dir / "other.json").string() + ": vary: differs from the first part's; not the same sweep\n");
  r = ddlsim_cmd({"merge", (s.dir / "full.json").string(), "--csv", out});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim merge: " + (s.dir / "full.json").string() +
                     ": shard: missing; parts come from 'ddlsim sweep --shard K/N --json FILE'\n");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("merge: a damaged or edited part is refused with one line naming the part, field and point") {
  // Expected: 3 x 2 points in 2 parts (part 1: points 0, 2, 4; 2 strategies each, so 6
  // rows). Each damage below, done to part 1, is refused with the line given and no file:
  // merging used to accept rows duplicated or removed, empty rows, unknown fields, a
  // status of no meaning and a figure of the wrong type, and wrote them out.
  Scratch s;
  const std::string f = s.write("t.json", kScenario), out = (s.dir / "m.csv").string();
  std::vector<std::string> parts;
  for (int k = 1; k <= 2; ++k) {
    parts.push_back((s.dir / ("p" + std::to_string(k) + ".json")).string());
    REQUIRE(ddlsim_cmd({"sweep", f, "--vary", "cluster.nodes=1,2,3", "--vary", "strategies.0.micro_batch=1,2", "--shard",
                        std::to_string(k) + "/2", "--json", parts.back()})
                .status == 0);
  }
  REQUIRE(ddlsim_cmd({"merge", parts[0], parts[1], "--csv", out}).status == 0);
  fs::remove(out);
  // The merge written over a part would destroy that part: refused, the part kept.
  const std::string part1_text = read_file(parts[0]);
  auto over = ddlsim_cmd({"merge", parts[0], parts[1], "--json", parts[0]});
  CHECK(over.status == 2);
  CHECK(over.err == "ddlsim merge: --json: " + parts[0] +
                        " is this command's input too; writing it would destroy it, so give the output another name\n");
  CHECK(read_file(parts[0]) == part1_text);
  const nlohmann::json good = nlohmann::json::parse(read_file(parts[0]));
  REQUIRE(good.at("rows").size() == 6);
  const std::size_t fields = good.at("columns").size();
  using Edit = std::function<void(nlohmann::json&)>;
  const std::vector<std::pair<Edit, std::string>> cases{
      {[](nlohmann::json& j) { for (std::size_t i = 0; i < 6; ++i) j["rows"].push_back(j["rows"][i]); },
       "rows: point 0: its rows are not together, in order"},
      {[](nlohmann::json& j) { j["rows"].erase(5); j["rows"].erase(4); }, "rows: point 4: missing"},
      {[](nlohmann::json& j) { j["rows"] = nlohmann::json::array(); }, "rows: point 0: missing"},
      {[](nlohmann::json& j) { j["rows"][0]["x"] = 1; },
       "rows: point 0: " + std::to_string(fields + 1) + " fields, where a replayed row has " + std::to_string(fields)},
      {[](nlohmann::json& j) { j["rows"][0]["status"] = "weird"; },
       "rows: point 0: status: expected ok, out_of_memory or failed, got 'weird'"},
      {[](nlohmann::json& j) { j["rows"][0]["plan"] = nlohmann::json::object(); }, "rows: point 0: plan: missing or not a string"},
      {[](nlohmann::json& j) { j["rows"][2]["cluster.nodes"] = 7; },
       "rows: point 2: cluster.nodes: not the value the point's index gives"},
      {[](nlohmann::json& j) { j["extra"] = 1; }, "extra: not a field of a sweep part"},
      {[](nlohmann::json& j) { j["points"] = 7; }, "points: 7, where the values of vary make 6"},
      // Figures no sweep writes (a negative or zero step, negative bytes) were merged.
      {[](nlohmann::json& j) { j["rows"][0]["step_time_s"] = -1; },
       "rows: point 0: step_time_s: -1 is not a figure a sweep writes (a positive time)"},
      {[](nlohmann::json& j) { j["rows"][1]["step_time_s"] = 0; },
       "rows: point 0: step_time_s: 0 is not a figure a sweep writes (a positive time)"},
      {[](nlohmann::json& j) { j["rows"][0]["peak_memory_bytes"] = -3; },
       "rows: point 0: peak_memory_bytes: -3 is not a figure a sweep writes (never negative)"},
      {[](nlohmann::json& j) { j["rows"][2]["breakdown.compute_s"] = -0.5; },
       "rows: point 2: breakdown.compute_s: -0.5 is not a figure a sweep writes (never negative)"},
      // A fractional count, a utilization over the peak, and a status its own figures
      // contradict were merged too.
      {[](nlohmann::json& j) { j["rows"][0]["tasks"] = 1.5; },
       "rows: point 0: tasks: 1.5 is not a figure a sweep writes (a whole number)"},
      {[](nlohmann::json& j) { j["rows"][0]["mfu"] = 2.5; },
       "rows: point 0: mfu: 2.5 is not a figure a sweep writes (a fraction of the peak, at most 1)"},
      {[](nlohmann::json& j) { j["rows"][0]["fits_in_memory"] = false; },
       "rows: point 0: status ok with fits_in_memory false and a peak of " +
           std::to_string(good.at("rows").at(0).at("peak_memory_bytes").get<std::int64_t>()) + " of " +
           std::to_string(good.at("rows").at(0).at("device_memory_bytes").get<std::int64_t>()) + " bytes: not what a sweep writes"},
  };
  const std::string damaged = (s.dir / "d.json").string();
  for (const auto& [edit, message] : cases) {
    CAPTURE(message);
    nlohmann::json j = good;
    edit(j);
    std::ofstream(damaged) << j.dump(2) << "\n";
    const auto r = ddlsim_cmd({"merge", damaged, parts[1], "--csv", out});
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim merge: " + damaged + ": " + message + "\n");
    CHECK_FALSE(fs::exists(out));
  }
  // A row of point 2 removed leaves its part in order: the strategies of the merged points
  // differ.
  nlohmann::json j = good;
  j["rows"].erase(2);
  std::ofstream(damaged) << j.dump(2) << "\n";
  const auto r = ddlsim_cmd({"merge", damaged, parts[1], "--csv", out});
  CHECK(r.status == 2);
  CHECK(r.err == "ddlsim merge: rows: point 2: its strategies are not point 0's (2, in order): rows duplicated, removed or moved\n");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("sweep: bad input is one line, exit status 2, no file") {
  Scratch s;
  const std::string f = s.write("t.json", kScenario);
  const std::string out = (s.dir / "o.csv").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"sweep", f, "--csv", out}, "--vary: give at least one field to vary, e.g. --vary cluster.nodes=1,2,4"},
      {{"sweep", f, "--vary", "cluster.nodes", "--csv", out}, "--vary: expected PATH=V1,V2,..., got 'cluster.nodes'"},
      {{"sweep", f, "--vary", "cluster.nodes=1,,2", "--csv", out}, "--vary cluster.nodes: an empty value in '1,,2'"},
      {{"sweep", f, "--vary", "cluster.dims=[1,2", "--csv", out}, "--vary cluster.dims: unbalanced quotes or brackets in '[1,2'"},
      {{"sweep", f, "--vary", "cluster.nodes=1", "--vary", "cluster.nodes=2", "--csv", out}, "--vary cluster.nodes: given twice"},
      // --set of what --vary sets at every point was dropped without a word
      {{"sweep", f, "--vary", "cluster.nodes=1", "--set", "cluster.nodes=2", "--csv", out},
       "--set cluster.nodes: --vary cluster.nodes sets it at every point; give its value in --vary"},
      {{"sweep", f, "--vary", "strategies.0=1", "--set", "strategies.0.tp=2", "--csv", out},
       "--set strategies.0.tp: --vary strategies.0 sets it at every point; give its value in --vary"},
      {{"sweep", f, "--vary", "status=1,2", "--csv", out}, "--vary status: not a scenario field (it names an output column)"},
      {{"sweep", f, "--vary", "cluster.nodes=1", "--shard", "3/2", "--json", out}, "--shard: expected K/N with 1 <= K <= N <= 100000, got '3/2'"},
      {{"sweep", f, "--vary", "cluster.nodes=1", "--shard", "1/2", "--csv", out}, "--shard: give --json PART.json too; 'ddlsim merge' joins the parts from their JSON"},
      {{"sweep", f, "--vary", "cluster.nodes=1", "--strategy", "dq", "--csv", out}, "--strategy dq: the scenario has no such strategy (did you mean 'dp'?); it has: dp, tp"},
      {{"sweep", f, "--vary", "name.x=1", "--csv", out}, "--vary name.x: name is a string, not an object or array"},
      {{"sweep", f, "--vary", "cluster.nodes=1", "--jobs", "0", "--csv", out}, "--jobs: expected 1 to 1024, got 0"},
      {{"sweep", f, "--vary", "cluster.nodez=1,2", "--csv", out}, "--vary cluster.nodez: unknown key (did you mean 'nodes'?)"},
      {{"sweep", f, "--vary", "name=a," + std::string(100000, '[') + std::string(100000, ']'), "--csv", out},
       "--vary name: nested more than 64 levels deep"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(message);
    const auto r = ddlsim_cmd(args);
    CHECK(r.status == 2);
    CHECK(r.err == "ddlsim sweep: " + message + "\n");
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("run --links: every link that carried bytes, its utilization as the report defines it") {
  // Expected: header strategy,link,kind,bytes,utilization; rows of strategy "dp" only with
  // --strategy dp; the first row is the report's most utilized link, bytes and utilization
  // equal; utilization falls down the rows.
  Scratch s;
  const std::string f = s.write("t.json", kScenario);
  const std::string links = (s.dir / "l.csv").string();
  const auto r = ddlsim_cmd({"run", f, "--strategy", "dp", "--network", "flow", "--links", links, "--json"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto rows = csv_rows(read_file(links));
  REQUIRE(rows.size() > 2);
  CHECK(rows[0] == std::vector<std::string>{"strategy", "link", "kind", "bytes", "utilization"});
  const auto& top = j["strategies"][0]["most_utilized_links"][0];
  CHECK(rows[1][0] == "dp");
  CHECK(rows[1][1] == top["link"].get<std::string>());
  CHECK(std::stod(rows[1][3]) == ddlsim::test::Approx(top["bytes"].get<double>()));
  CHECK(std::stod(rows[1][4]) == ddlsim::test::Approx(top["utilization"].get<double>()));
  for (std::size_t i = 2; i < rows.size(); ++i) CHECK(std::stod(rows[i][4]) <= std::stod(rows[i - 1][4]));
}

TEST_CASE("search --json: convergence, the lowest estimate so far at each new lowest and at the end") {
  // Expected: evaluations rise and best estimates fall strictly, but for a last point at
  // the end of the search (every plan estimated) that repeats the lowest; that lowest is
  // the lowest estimate of any plan the grid estimated, which is the first non-baseline
  // plan's in estimate order (the grid replays the best estimates).
  Scratch s;
  const std::string f = s.write("t.json", kScenario);
  const auto r = ddlsim_cmd({"search", f, "--json", "--replay", "2"});
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& c = j["convergence"];
  REQUIRE(c.size() >= 1);
  for (std::size_t i = 1; i < c.size(); ++i) {
    CHECK(c[i]["evaluations"].get<int>() > c[i - 1]["evaluations"].get<int>());
    if (i + 1 < c.size()) CHECK(c[i]["best_estimate_s"].get<double>() < c[i - 1]["best_estimate_s"].get<double>());
  }
  CHECK(c.back()["evaluations"].get<int>() == j["estimated"].get<int>());
  double lowest = 1e300;
  for (const auto& e : j["ranked"]) {
    if (!e["baseline"].get<bool>()) lowest = std::min(lowest, e["estimate_s"].get<double>());
  }
  CHECK(c.back()["best_estimate_s"].get<double>() == lowest);
}
