// `ddlsim sweep`: one training scenario over the cartesian product of field values, each
// point replayed like `ddlsim run`, on several threads, rows in a fixed order; and
// `ddlsim merge`, which joins the parts of a sweep split with --shard.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <map>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <new>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <thread>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/scenario.hpp"
#include "cli/sweep.hpp"
#include "cli/training.hpp"
#include "sim/core/errors.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/json_set.hpp"
#include "support/strings.hpp"

namespace po = boost::program_options;
using Json = nlohmann::ordered_json;

namespace ddlsim {
namespace {

constexpr const char* kSweepHelp = R"(Usage: ddlsim sweep [SCENARIO.json] --vary PATH=V1,V2,... [--vary ...] [OPTIONS]

Replays a training scenario (the embedded default without a file) at every point of
the cartesian product of the --vary values, each point like 'ddlsim run' with those
fields set (PATH and values as --set takes them). Points run in parallel on --jobs
threads; the rows come out in the same order whatever the threads: the first --vary
changes slowest, then the scenario's strategies in their order.

Each row is one strategy at one point: `point` (0-based index in the product), one
column per --vary PATH with its value, `strategy`, `status` and `reason`, then the
columns of 'ddlsim run --csv' (step_time_s in seconds, tokens_per_s, mfu as a fraction,
peak_memory_bytes in bytes, ...; README "Training scenarios" lists them with units).
status: ok; out_of_memory (replayed, but the fullest device exceeds its memory);
failed (nothing replayed: `reason` says why, e.g. an invalid plan; a point whose
scenario is invalid as a whole is one row without a strategy). A failing point never
stops the sweep.

A sweep too big for one machine: --shard K/N runs the points with index mod N = K-1
(K = 1..N), disjoint parts that together cover the sweep; give each part --json, then
'ddlsim merge' joins the parts into the CSV and JSON a single run would have written,
byte for byte. A Slurm job array, for one:
  #SBATCH --array=1-16
  ddlsim sweep my.json --vary cluster.nodes=4,8,16,32 --vary strategies.0.tp=1,2,4,8 \
      --shard ${SLURM_ARRAY_TASK_ID}/16 --json part-${SLURM_ARRAY_TASK_ID}.json
  # then, once all have finished:
  ddlsim merge part-*.json --csv sweep.csv --json sweep.json

Examples:
  ddlsim sweep --vary cluster.nodes=1,2,4,8,16 --csv scaling.csv
  ddlsim sweep my.json --vary cluster.nic=ib-hdr,ib-ndr --vary simulation.network=analytical,flow
  ddlsim sweep --vary catalog.links.nvlink3.gbytes_per_s=12.5,25,50   # NVLink half, as is, twice
  ddlsim sweep --vary catalog.accelerators.a100-80gb.tflops.bf16=312,624    # a GPU twice as fast
  ddlsim sweep --vary strategies.3.micro_batch=1,2,4,8 --strategy ptd-p --json mb.json
  ddlsim sweep --vary 'cluster.preset=dgx-a100,dgx-h100' --jobs 2

Without --csv or --json, a table goes to standard output. Progress and the time left
go to standard error: a bar when it is a terminal, otherwise (a log) a line at each
tenth of the points once the sweep has run for 10 s.

Exit status: 0 done (whatever the points' status); 1 an output failed while being
written (a full disk); 2 bad input (an output path that cannot be written too).

Options)";

constexpr const char* kMergeHelp = R"(Usage: ddlsim merge PART.json... [--csv FILE] [--json FILE]

Joins the parts of a sweep run with 'ddlsim sweep ... --shard K/N --json PART.json'
into the output one 'ddlsim sweep' without --shard writes (byte for byte). Every part
of the same sweep (scenario, --set, --vary) must be given, each once.

Examples:
  ddlsim merge part-*.json --csv sweep.csv --json sweep.json

Options)";

constexpr std::size_t kMaxPoints = 1'000'000;

// A value as --set reads it: JSON when it parses, else the text as a string; JSON with
// the checks of a file (nesting depth, a key given twice).
Json value_json(const std::string& text, const std::string& where) {
  if (!check_json(text, where)) return Json(text);
  Json value = Json::parse(text);
  whole_numbers_as_integers(value);  // 1e2 is 100, as --set reads it
  return value;
}

// The columns of a row, in order: point, the varied paths, strategy, status, reason,
// then those of a report (the keys of training_report_row).
std::vector<std::string> sweep_columns(const std::vector<Vary>& varies) {
  std::vector<std::string> c{"point"};
  for (const Vary& v : varies) c.push_back(v.path);
  for (const char* k : {"strategy", "status", "reason"}) c.emplace_back(k);
  const Json report = training_report_row(TrainingReport{});
  for (const auto& [key, value] : report.items()) c.push_back(key);
  return c;
}

// k of a message about "strategies.k" or a field of it.
std::optional<std::size_t> strategy_index(const std::string& message) {
  const std::string prefix = "strategies.";
  if (message.rfind(prefix, 0) != 0) return std::nullopt;
  std::size_t i = prefix.size(), k = 0;
  if (i >= message.size() || !std::isdigit(static_cast<unsigned char>(message[i]))) return std::nullopt;
  for (; i < message.size() && std::isdigit(static_cast<unsigned char>(message[i])) && i < prefix.size() + 6; ++i) {
    k = k * 10 + static_cast<std::size_t>(message[i] - '0');
  }
  if (i < message.size() && (message[i] == '.' || message[i] == ':')) return k;
  return std::nullopt;
}

// Which value of each vary point `point` takes (the first vary's changing slowest).
std::vector<std::size_t> value_indices(const std::vector<Vary>& varies, std::size_t point) {
  std::size_t stride = 1;
  for (const Vary& v : varies) stride *= v.values.size();
  std::vector<std::size_t> out;
  for (const Vary& v : varies) {
    stride /= v.values.size();
    out.push_back(point / stride);
    point %= stride;
  }
  return out;
}

// The rows of one point.
std::vector<Json> run_point(const nlohmann::json& base, const std::string& base_dir, const std::vector<Vary>& varies,
                            std::size_t point, const std::optional<std::string>& only) {
  Json head;
  head["point"] = point;
  nlohmann::json doc = base;
  const std::vector<std::size_t> which = value_indices(varies, point);
  for (std::size_t i = 0; i < varies.size(); ++i) {
    head[varies[i].path] = value_json(varies[i].values[which[i]], "--vary " + varies[i].path);
  }
  auto failed = [&](const std::string& strategy, const std::string& why) {
    Json row = head;
    row["strategy"] = strategy;
    row["status"] = "failed";
    row["reason"] = why;
    return row;
  };
  // The message of the exception in flight, as `ddlsim run` would say it.
  auto reason = [] {
    try {
      throw;
    } catch (const InputError& e) {
      return std::string(e.what());
    } catch (const ReplayError& e) {
      return "the replay failed: " + std::string(e.what());
    } catch (const std::bad_alloc&) {
      return std::string("out of memory: the point needs more memory than this machine can give");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  // A strategy the point makes invalid (tp not dividing the heads, too few devices)
  // fails alone: it leaves the scenario and the others still run.
  std::vector<std::string> names;
  std::vector<std::size_t> kept;  // indices into names of the strategies still in doc
  std::map<std::size_t, std::string> invalid;
  TrainingScenario s;
  try {
    for (const Vary& v : varies) apply_set(doc, v.path + "=" + head[v.path].dump());
    if (doc.contains("strategies") && doc["strategies"].is_array()) {
      for (const auto& t : doc["strategies"]) {
        names.push_back(t.is_object() && t.contains("name") && t["name"].is_string() ? t["name"].get<std::string>() : "");
        kept.push_back(names.size() - 1);
      }
    }
    while (!kept.empty()) {
      try {
        s = read_training_scenario(doc, base_dir);
        break;
      } catch (const InputError& e) {
        const std::string message = e.what();
        const std::optional<std::size_t> k = strategy_index(message);
        if (!k || *k >= kept.size()) throw;
        // Said with the strategy's position in the scenario, not in what is left of it.
        const std::string digits = std::to_string(*k);
        invalid[kept[*k]] = "strategies." + std::to_string(kept[*k]) + message.substr(11 + digits.size());
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(*k));
        doc["strategies"].erase(*k);
      }
    }
  } catch (...) {
    return {failed("", reason())};
  }
  std::vector<Json> rows;
  std::size_t next_run = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (only && names[i] != *only) {
      if (!invalid.count(i)) ++next_run;
      continue;
    }
    if (invalid.count(i)) {
      rows.push_back(failed(names[i], invalid[i]));
      continue;
    }
    const TrainingStrategy& t = s.strategies[next_run++];
    try {
      const TrainingReport r = run_training_strategy(s, t);
      Json row = head;
      row["strategy"] = t.plan.name;
      row["status"] = r.fits_in_memory ? "ok" : "out_of_memory";
      row["reason"] = r.fits_in_memory ? "" : "the fullest device needs more than its memory";
      const Json report = training_report_row(r);
      for (const auto& [key, value] : report.items()) row[key] = value;
      rows.push_back(std::move(row));
    } catch (...) {
      rows.push_back(failed(t.plan.name, reason()));
    }
  }
  if (rows.empty()) rows.push_back(failed("", "the point has no strategy named " + *only));
  return rows;
}

// Writes the requested files (each whole or not at all), or the table.
void emit(const Json& doc, const po::variables_map& vm, std::ostream& out) {
  std::optional<AtomicFile> csv, json;
  if (vm.count("csv")) {
    csv.emplace(vm["csv"].as<std::string>());
    write_sweep_csv(csv->stream(), doc);
  }
  if (vm.count("json")) {
    json.emplace(vm["json"].as<std::string>());
    json->stream() << doc.dump(2) << "\n";
  }
  if (csv) csv->commit();
  if (json) json->commit();
  if (!csv && !json) print_sweep_table(out, doc);
}

// How long a sweep runs before a log (standard error not a terminal) hears of its progress.
constexpr double kQuietSeconds = 10.0;

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, std::round(seconds)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace

// PATH=V1,V2,...: the values split at the commas outside brackets, braces and quotes,
// so that a JSON array or object stays one value.
Vary parse_vary(const std::string& expression) {
  const auto eq = expression.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--vary: expected PATH=V1,V2,..., got '" + expression + "'");
  }
  Vary v{expression.substr(0, eq), {}};
  const std::string list = expression.substr(eq + 1);
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '"' && (i == 0 || list[i - 1] != '\\')) quoted = !quoted;
    if (!quoted && (c == '[' || c == '{')) ++depth;
    if (!quoted && (c == ']' || c == '}')) --depth;
    if (c == ',' && depth == 0 && !quoted) {
      if (cur.empty()) throw InputError("--vary " + v.path + ": an empty value in '" + list + "'");
      v.values.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quoted || depth != 0) throw InputError("--vary " + v.path + ": unbalanced quotes or brackets in '" + list + "'");
  return v;
}

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto bad = [&] { return InputError("--shard: expected K/N with 1 <= K <= N <= 100000, got '" + text + "'"); };
  if (slash == std::string::npos) throw bad();
  const std::string a = text.substr(0, slash), b = text.substr(slash + 1);
  for (const std::string& s : {a, b}) {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) throw bad();
  }
  Shard s{std::stoul(a), std::stoul(b)};
  if (s.k < 1 || s.n < 1 || s.k > s.n || s.n > 100000) throw bad();
  return s;
}

void write_sweep_csv(std::ostream& o, const Json& doc) {
  const Json& columns = doc.at("columns");
  for (std::size_t i = 0; i < columns.size(); ++i) o << (i ? "," : "") << columns[i].get<std::string>();
  o << "\n";
  for (const Json& row : doc.at("rows")) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const auto it = row.find(columns[i].get<std::string>());
      o << (i ? "," : "") << (it == row.end() ? std::string() : csv_cell(*it));
    }
    o << "\n";
  }
}

void print_sweep_table(std::ostream& out, const Json& doc) {
  std::vector<Vary> varies;
  for (const Json& v : doc.at("vary")) varies.push_back({v.at("path").get<std::string>(), {}});
  auto text = [](const Json& x) { return x.is_string() ? x.get<std::string>() : x.dump(); };
  // Each varied column as wide as its path and its widest value.
  std::vector<std::size_t> width;
  for (const Vary& v : varies) {
    std::size_t w = display_width(v.path);
    for (const Json& row : doc.at("rows")) w = std::max(w, display_width(text(row.at(v.path))));
    width.push_back(std::min<std::size_t>(w, 60));
  }
  std::size_t sw = 8;
  for (const Json& row : doc.at("rows")) sw = std::max(sw, display_width(row.at("strategy").get<std::string>()));
  std::string line;
  const std::size_t points = doc.at("points").get<std::size_t>();
  out << "scenario: " << doc.at("scenario").get<std::string>() << ", " << points << (points == 1 ? " point\n" : " points\n");
  line = printf_string("%6s", "point");
  out << line;
  for (std::size_t i = 0; i < varies.size(); ++i) {
    out << "  " << padded(varies[i].path, width[i]);
  }
  out << "  " << padded("strategy", sw) << printf_string("  %-13s %10s %7s %11s\n", "status", "step (s)", "MFU %", "peak (GiB)");
  for (const Json& row : doc.at("rows")) {
    line = printf_string("%6zu", row.at("point").get<std::size_t>());
    out << line;
    for (std::size_t i = 0; i < varies.size(); ++i) {
      out << "  " << padded(text(row.at(varies[i].path)), width[i]);
    }
    const std::string status = row.at("status").get<std::string>();
    out << "  " << padded(row.at("strategy").get<std::string>(), sw) << printf_string("  %-13s", status.c_str());
    if (status == "failed") {
      out << " " << row.at("reason").get<std::string>() << "\n";
      continue;
    }
    line = printf_string(" %10.3f %7.1f %11.2f\n", row.at("step_time_s").get<double>(),
                  row.at("mfu").get<double>() * 100, row.at("peak_memory_bytes").get<double>() / kGiB);
    out << line;
  }
}

// A sweep part checked against what 'ddlsim sweep --json' writes, so that a damaged
// or edited part is refused rather than merged: the header fields' types; the columns
// those of its --vary paths; every row's point below `points`, its varied values those
// of its point, its status ok, out_of_memory or failed, only known columns, and the
// report's figures, each of the type a report gives it, unless it failed (then none).
static void check_sweep_shape(const Json& part, const std::string& path) {
  const auto bad = [&](const std::string& what) { return InputError(path + ": " + what); };
  if (!part["scenario"].is_string()) throw bad("scenario: expected a string");
  if (!part["points"].is_number_unsigned()) throw bad("points: expected a count");
  if (!part["vary"].is_array() || part["vary"].empty()) throw bad("vary: expected a list");
  std::vector<Vary> varies;
  std::vector<std::vector<Json>> values;  // each vary's values as a row holds them
  std::size_t product = 1;
  for (const Json& v : part["vary"]) {
    if (!v.is_object() || !v.contains("path") || !v["path"].is_string() || !v.contains("values") ||
        !v["values"].is_array() || v["values"].empty() || v.size() != 2) {
      throw bad("vary: expected objects with a path and its values");
    }
    varies.push_back(Vary{v["path"].get<std::string>(), {}});
    for (const Json& value : v["values"]) {
      if (!value.is_string()) throw bad("vary: " + varies.back().path + ": expected its values as strings");
      varies.back().values.push_back(value.get<std::string>());
    }
    values.emplace_back();
    for (const std::string& value : varies.back().values) values.back().push_back(value_json(value, "--vary " + varies.back().path));
    product = product > kMaxPoints ? product : product * varies.back().values.size();
  }
  const std::size_t points = part["points"].get<std::size_t>();
  if (points != product) throw bad("points: " + std::to_string(points) + ", where the values of vary make " + std::to_string(product));
  const std::vector<std::string> columns = sweep_columns(varies);
  if (part["columns"] != Json(columns)) throw bad("columns: not those a sweep of these vary paths writes");
  const Json report = training_report_row(TrainingReport{});
  const std::size_t head = columns.size() - report.size();  // point, the varied paths, strategy, status, reason
  if (!part["rows"].is_array()) throw bad("rows: expected an array");
  for (const Json& r : part["rows"]) {
    if (!r.is_object() || !r.contains("point") || !r["point"].is_number_unsigned() || !r.contains("strategy") ||
        !r["strategy"].is_string() || !r.contains("status") || !r["status"].is_string() || !r.contains("reason") ||
        !r["reason"].is_string()) {
      throw bad("rows: expected objects with point, strategy, status and reason");
    }
    const std::size_t point = r["point"].get<std::size_t>();
    const std::string at = "rows: point " + std::to_string(point);
    if (point >= points) throw bad(at + ": beyond the sweep's " + std::to_string(points) + " points");
    const std::vector<std::size_t> which = value_indices(varies, point);
    for (std::size_t i = 0; i < varies.size(); ++i) {
      const std::string& key = varies[i].path;
      if (!r.contains(key)) throw bad(at + ": no " + key);
      if (r[key] != values[i][which[i]]) throw bad(at + ": " + key + ": not the value the point's index gives");
    }
    const std::string status = r["status"].get<std::string>();
    if (status != "ok" && status != "out_of_memory" && status != "failed") {
      throw bad(at + ": status: expected ok, out_of_memory or failed, got '" + status + "'");
    }
    const bool failed = status == "failed";
    if (r.size() != (failed ? head : columns.size())) {
      throw bad(at + ": " + std::to_string(r.size()) + " fields, where a " + (failed ? "failed" : "replayed") + " row has " +
                std::to_string(failed ? head : columns.size()));
    }
    if (failed) continue;
    for (const auto& [key, value] : report.items()) {
      if (!r.contains(key) || r[key].type() != value.type()) {
        const bool number = value.is_number() && r.contains(key) && r[key].is_number();
        if (!number) throw bad(at + ": " + key + ": missing or not a " + value.type_name());
      }
      // Every figure of a report is a time, a rate, a fraction, bytes or a count: not
      // negative (a breakdown's share, a difference of times, may round a little below
      // zero), and a step takes time.
      if (!value.is_number()) continue;
      const double x = r[key].get<double>();
      const double least = key.rfind("breakdown.", 0) == 0 ? -1e-6 : 0.0;
      if (!std::isfinite(x) || x < least || (key == "step_time_s" && x <= 0)) {
        throw bad(at + ": " + key + ": " + printf_string("%g", x) + " is not a figure a sweep writes" +
                  (key == "step_time_s" ? " (a positive time)" : " (never negative)"));
      }
      // Counts and bytes are whole; a utilization is at most the peak.
      if (value.is_number_integer() && !r[key].is_number_integer()) {
        throw bad(at + ": " + key + ": " + printf_string("%g", x) + " is not a figure a sweep writes (a whole number)");
      }
      if ((key == "mfu" || key == "hfu") && x > 1) {
        throw bad(at + ": " + key + ": " + printf_string("%g", x) + " is not a figure a sweep writes (a fraction of the peak, at most 1)");
      }
    }
    // The status says what the figures say.
    const bool fits = r["fits_in_memory"].get<bool>();
    if (fits != (status == "ok") || fits != (r["peak_memory_bytes"].get<double>() <= r["device_memory_bytes"].get<double>())) {
      throw bad(at + ": status " + status + " with fits_in_memory " + (fits ? "true" : "false") + " and a peak of " +
                printf_string("%.0f", r["peak_memory_bytes"].get<double>()) + " of " +
                printf_string("%.0f", r["device_memory_bytes"].get<double>()) + " bytes: not what a sweep writes");
    }
  }
}

// The rows of part k of n (1-based), in a part whose shape is checked: every point of
// the part (its index mod n is k-1) there, in order, its rows together.
static void check_part_rows(const Json& part, const std::string& path, std::size_t k, std::size_t n) {
  const auto bad = [&](const std::string& what) { return InputError(path + ": " + what); };
  const std::size_t points = part["points"].get<std::size_t>();
  std::size_t expected = k - 1;  // the next point the part should hold
  std::optional<std::size_t> current;
  for (const Json& r : part["rows"]) {
    const std::size_t point = r["point"].get<std::size_t>();
    if (point % n != k - 1) {
      throw bad("rows: point " + std::to_string(point) + " does not belong to part " + std::to_string(k) + "/" +
                std::to_string(n));
    }
    if (current && point == *current) continue;
    if (point != expected) {
      throw bad("rows: point " + std::to_string(std::min(point, expected)) +
                (point < expected ? ": its rows are not together, in order" : ": missing"));
    }
    current = point;
    expected += n;
  }
  if (expected < points) throw bad("rows: point " + std::to_string(expected) + ": missing");
}

// Every point of a sweep replays the same strategies (a row each, in the scenario's
// order), unless the whole point failed (one row) or --vary changes the strategies or
// their names; merged rows that break this were duplicated or removed.
static void check_point_strategies(const Json& merged) {
  for (const Json& v : merged["vary"]) {
    const std::string p = v["path"].get<std::string>();
    const std::string prefix = "strategies.";
    if (p + "." == prefix) return;
    if (p.rfind(prefix, 0) != 0) continue;
    const std::size_t field = p.find('.', prefix.size());  // after strategies.K
    if (field == std::string::npos || p.substr(field) == ".name") return;
  }
  std::optional<std::vector<std::string>> first;
  std::size_t first_point = 0;
  const Json& rows = merged["rows"];
  for (std::size_t i = 0; i < rows.size();) {
    const std::size_t point = rows[i]["point"].get<std::size_t>();
    std::vector<std::string> names;
    for (; i < rows.size() && rows[i]["point"].get<std::size_t>() == point; ++i) names.push_back(rows[i]["strategy"].get<std::string>());
    if (names == std::vector<std::string>{""}) continue;  // the whole point failed
    if (!first) {
      first = names;
      first_point = point;
    }
    if (names != *first) {
      throw InputError("rows: point " + std::to_string(point) + ": its strategies are not point " +
                       std::to_string(first_point) + "'s (" + std::to_string(first->size()) +
                       ", in order): rows duplicated, removed or moved");
    }
  }
}

Json merge_sweep_parts(const std::vector<std::pair<std::string, std::string>>& parts) {
  if (parts.empty()) throw InputError("give the parts: ddlsim merge part-*.json --csv sweep.csv");
  Json merged;
  std::vector<Json> rows;
  std::vector<bool> seen;
  std::size_t n = 0;
  for (const auto& [path, text] : parts) {
    if (!check_json(text, path)) throw InputError(path + ": not JSON that 'ddlsim sweep --json' wrote");
    Json part = Json::parse(text);
    if (!part.is_object()) throw InputError(path + ": not JSON that 'ddlsim sweep --json' wrote");
    const std::vector<std::string> keys{"scenario", "source", "sets", "vary", "strategy", "points", "shard", "columns", "rows"};
    for (const std::string& key : keys) {
      if (!part.contains(key)) {
        throw InputError(path + ": " + key + ": missing; parts come from 'ddlsim sweep --shard K/N --json FILE'");
      }
    }
    for (const auto& [key, value] : part.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        throw InputError(path + ": " + key + ": not a field of a sweep part");
      }
    }
    Shard s;
    try {
      s = parse_shard(part["shard"].is_string() ? part["shard"].get<std::string>() : part["shard"].dump());
    } catch (const InputError& e) {
      throw InputError(path + ": shard: " + std::string(e.what()).substr(std::string("--shard: ").size()));
    }
    check_sweep_shape(part, path);
    if (seen.empty()) {
      n = s.n;
      seen.assign(n, false);
      merged = part;
      merged.erase("shard");
      merged["rows"] = Json::array();
    }
    for (const char* key : {"scenario", "source", "sets", "vary", "strategy", "points", "columns"}) {
      if (part[key] != merged[key]) throw InputError(path + ": " + key + ": differs from the first part's; not the same sweep");
    }
    if (s.n != n) throw InputError(path + ": shard " + part["shard"].get<std::string>() + " is not one of " + std::to_string(n) + " parts");
    if (seen[s.k - 1]) throw InputError(path + ": part " + part["shard"].get<std::string>() + " is given twice");
    seen[s.k - 1] = true;
    check_part_rows(part, path, s.k, n);
    for (Json& r : part["rows"]) rows.push_back(std::move(r));
  }
  for (std::size_t k = 0; k < n; ++k) {
    if (!seen[k]) throw InputError("part " + std::to_string(k + 1) + "/" + std::to_string(n) + " is missing");
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Json& a, const Json& b) { return a["point"].get<std::size_t>() < b["point"].get<std::size_t>(); });
  Json all = Json::array();
  for (Json& r : rows) all.push_back(std::move(r));
  merged["rows"] = std::move(all);
  check_point_strategies(merged);
  return merged;
}

int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kSweepHelp);
  d.add_options()("help,h", "show this help")
      ("scenario", po::value<std::string>()->value_name("FILE"), "training scenario (default: the embedded one)")
      ("vary", po::value<std::vector<std::string>>()->composing()->value_name("PATH=V1,V2,..."),
       "a field and its values; repeatable (the product of all is swept)")
      ("set", po::value<std::vector<std::string>>()->composing()->value_name("PATH=VALUE"),
       "override a field at every point; repeatable (VALUE null removes it)")
      ("strategy", po::value<std::string>()->value_name("NAME"), "replay only this strategy of the scenario")
      ("jobs,j", po::value<int>()->value_name("N"), "threads (default: the machine's cores)")
      ("shard", po::value<std::string>()->value_name("K/N"), "run only part K of N (for a cluster; see above)")
      ("csv", po::value<std::string>()->value_name("FILE"), "write the rows as CSV")
      ("json", po::value<std::string>()->value_name("FILE"), "write the sweep and its rows as JSON");
  po::variables_map vm;
  if (const auto done = parse_command_options(args, d, "scenario", "sweep", vm, out, err)) return *done;
  try {
    if (!vm.count("vary")) throw InputError("--vary: give at least one field to vary, e.g. --vary cluster.nodes=1,2,4");
    std::vector<Vary> varies;
    std::size_t points = 1;
    std::set<std::string> paths;
    for (const std::string& e : vm["vary"].as<std::vector<std::string>>()) {
      varies.push_back(parse_vary(e));
      if (!paths.insert(varies.back().path).second) throw InputError("--vary " + varies.back().path + ": given twice");
      const std::vector<std::string> reserved = sweep_columns({});
      if (std::find(reserved.begin(), reserved.end(), varies.back().path) != reserved.end()) {
        throw InputError("--vary " + varies.back().path + ": not a scenario field (it names an output column)");
      }
      points *= varies.back().values.size();
      if (points > kMaxPoints) {
        throw InputError("--vary: the product has more than " + std::to_string(kMaxPoints) + " points");
      }
    }
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (vm.count("jobs")) {
      jobs = vm["jobs"].as<int>();
      if (jobs < 1 || jobs > 1024) throw InputError("--jobs: expected 1 to 1024, got " + std::to_string(jobs));
    }
    const Shard shard = vm.count("shard") ? parse_shard(vm["shard"].as<std::string>()) : Shard{};
    if (vm.count("shard") && !vm.count("json")) {
      throw InputError("--shard: give --json PART.json too; 'ddlsim merge' joins the parts from their JSON");
    }
    // Nothing else goes to standard output when --csv or --json is given: '-' may be it.
    check_outputs(vm, {"csv", "json"},
                  vm.count("scenario") ? std::vector<std::string>{vm["scenario"].as<std::string>()} : std::vector<std::string>{},
                  /*to_stdout=*/true);
    const std::vector<std::string> sets = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
    // Every point sets what --vary names, over --set: a --set of it (or inside it) would
    // be dropped without a word.
    for (const std::string& e : sets) {
      const std::string path = e.substr(0, e.find('='));
      for (const std::string& v : paths) {
        if (path == v || path.rfind(v + ".", 0) == 0) {
          throw InputError("--set " + path + ": --vary " + v + " sets it at every point; give its value in --vary");
        }
      }
    }
    const std::optional<std::string> file =
        vm.count("scenario") ? std::optional<std::string>(vm["scenario"].as<std::string>()) : std::nullopt;
    // The scenario as given (with --set) must be valid on its own; the points may not be.
    nlohmann::json base;
    const TrainingScenario s0 = load_training_scenario(
        file, sets, "the scenario must train a model on a cluster preset or topology file (\"cluster\": {\"preset\": ...} or {\"file\": "
        "...}) to sweep it", &base);
    std::optional<std::string> only;
    if (vm.count("strategy")) {
      only = vm["strategy"].as<std::string>();
      std::vector<std::string> names;
      for (const auto& t : s0.strategies) names.push_back(t.plan.name);
      if (std::find(names.begin(), names.end(), *only) == names.end()) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        throw InputError("--strategy " + *only + ": the scenario has no such strategy" + did_you_mean(*only, names) +
                         "; it has: " + list);
      }
    }
    // A path that cannot be set (through a number or a string) is bad input, up front.
    for (const Vary& v : varies) {
      nlohmann::json probe = base;
      for (const std::string& value : v.values) (void)value_json(value, "--vary " + v.path);  // depth, repeated keys
      try {
        apply_set(probe, v.path + "=" + value_json(v.values.front(), "--vary " + v.path).dump());
      } catch (const InputError& e) {
        const std::string said = e.what(), prefix = "--set " + v.path + ": ";
        throw InputError("--vary " + v.path + ": " + (said.rfind(prefix, 0) == 0 ? said.substr(prefix.size()) : said));
      }
      // A key the scenario format does not have (a misspelt path) would fail every point.
      try {
        (void)read_training_scenario(probe, file ? std::filesystem::path(*file).parent_path().string() : std::string());
      } catch (const InputError& e) {
        const std::string said = e.what();
        if (said.rfind(v.path + ": unknown key", 0) == 0) throw InputError("--vary " + said);
      }
    }
    const std::string base_dir = file ? std::filesystem::path(*file).parent_path().string() : std::string();

    std::vector<std::size_t> mine;
    for (std::size_t i = shard.k - 1; i < points; i += shard.n) mine.push_back(i);
    std::vector<std::vector<Json>> results(mine.size());
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> done{0};
    std::mutex progress_mutex;
    const bool tty = &err == &std::cerr && ::isatty(2);
    const auto start = std::chrono::steady_clock::now();
    auto work = [&] {
      for (std::size_t i = next++; i < mine.size(); i = next++) {
        results[i] = run_point(base, base_dir, varies, mine[i], only);
        const std::size_t d = ++done;
        // A log (standard error not a terminal) gets a line at each tenth of the points,
        // once the sweep has run for kQuietSeconds: a short sweep stays silent.
        const bool tenth = 10 * d / mine.size() != 10 * (d - 1) / mine.size();
        if (tty || (tenth && &err == &std::cerr)) {
          const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const double left = elapsed / static_cast<double>(d) * static_cast<double>(mine.size() - d);
          std::lock_guard<std::mutex> lock(progress_mutex);
          if (tty) {
            const int width = 30, filled = static_cast<int>(width * d / mine.size());
            err << "\rddlsim sweep: [" << std::string(static_cast<std::size_t>(filled), '#')
                << std::string(static_cast<std::size_t>(width - filled), '.') << "] " << d << "/" << mine.size()
                << " points, " << clock_text(left) << " left   " << std::flush;
          } else if (elapsed >= kQuietSeconds) {
            err << "ddlsim sweep: " << d << "/" << mine.size() << " points, " << clock_text(elapsed) << " so far, "
                << clock_text(left) << " left" << std::endl;
          }
        }
      }
    };
    std::vector<std::thread> threads;
    for (int j = 1; j < std::min<int>(jobs, static_cast<int>(mine.size())); ++j) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
    if (tty) err << "\r" << std::string(72, ' ') << "\r" << std::flush;

    Json doc;
    doc["scenario"] = s0.name;
    doc["source"] = file ? *file : std::string("(embedded default)");
    doc["sets"] = sets;
    Json vary_list = Json::array();
    for (const Vary& v : varies) vary_list.push_back({{"path", v.path}, {"values", v.values}});
    doc["vary"] = vary_list;
    doc["strategy"] = only ? Json(*only) : Json(nullptr);
    doc["points"] = points;
    if (vm.count("shard")) doc["shard"] = std::to_string(shard.k) + "/" + std::to_string(shard.n);
    doc["columns"] = sweep_columns(varies);
    Json rows = Json::array();
    for (auto& point_rows : results) {
      for (Json& r : point_rows) rows.push_back(std::move(r));
    }
    doc["rows"] = std::move(rows);
    emit(doc, vm, out);
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("sweep", err);
  }
}

int merge_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kMergeHelp);
  d.add_options()("help,h", "show this help")
      ("part", po::value<std::vector<std::string>>()->value_name("PART.json"), "a part of the sweep; give every one")
      ("csv", po::value<std::string>()->value_name("FILE"), "write the rows as CSV")
      ("json", po::value<std::string>()->value_name("FILE"), "write the sweep and its rows as JSON");
  po::variables_map vm;
  if (const auto done = parse_command_options(args, d, "part", "merge", vm, out, err, -1)) return *done;
  try {
    if (!vm.count("part")) throw InputError("give the parts: ddlsim merge part-*.json --csv sweep.csv");
    check_outputs(vm, {"csv", "json"}, vm["part"].as<std::vector<std::string>>(), /*to_stdout=*/true);
    std::vector<std::pair<std::string, std::string>> parts;
    for (const std::string& path : vm["part"].as<std::vector<std::string>>()) {
      parts.emplace_back(path, read_input_file(path, "sweep part"));
    }
    emit(merge_sweep_parts(parts), vm, out);
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("merge", err);
  }
}

}  // namespace ddlsim
