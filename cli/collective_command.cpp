// `ddlsim collective`: nccl-tests for a simulated cluster.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>

#include "cli/cli.hpp"
#include "cli/cluster_options.hpp"
#include "cli/commands.hpp"
#include "sim/collectives.hpp"
#include "sim/core/engine.hpp"
#include "sim/flow_network.hpp"
#include "sim/network_fabric.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

constexpr double kMaxBytes = 1024.0 * 1024 * 1024 * 1024;  // 1 TiB
constexpr std::uint64_t kMaxTransfers = 200'000'000;       // about 13 GB of task graph

constexpr const char* kCollectiveHelp = R"(Usage: ddlsim collective --preset NAME [OPTIONS]
       ddlsim collective FILE.json [OPTIONS]    (an explicit topology)

Times one collective over a range of message sizes on a simulated cluster, in the style
of nccl-tests: the collective is lowered to point-to-point transfers (ring, tree, ...)
and replayed on a network model. For each size it prints the time, the algorithm
bandwidth algbw = size / time and the bus bandwidth busbw = algbw x factor, with
nccl-tests' factors: 2(n-1)/n for all-reduce; (n-1)/n for reduce-scatter, all-gather
and all-to-all; 1 for broadcast, reduce and send-recv (n ranks).

Size is nccl-tests' size: the all-reduce, broadcast or reduce buffer; the reduce-scatter
input and all-gather output (n pieces); an all-to-all rank's send buffer; the message.
GB/s are 10^9 bytes per second; sizes take K, M, G, T suffixes (powers of 1024).

Network models:
  flow        every directed link shared max-min fairly by the transfers crossing it
              (congestion, adaptive routing over equal-cost paths)
  analytical  each transfer alone: route latency + bytes / bottleneck bandwidth
Link bandwidths count the catalog's efficiency per link kind (the fraction of line rate
NCCL reaches); see 'ddlsim topology --list' and topology/data/catalog.json.

Algorithms: ring, tree (all-reduce; NCCL's double binary tree), halving-doubling
(power-of-two ranks), direct, hierarchical (all-reduce over scale-up domains), torus
(rings per dimension; the ranks must be a whole torus); 'auto' picks by size and
topology like NCCL's tuner, 'all' prints every one that can run the operation.

Examples:
  ddlsim collective --preset dgx-h100                       # 8 GPUs, all-reduce, 8 B - 8 GiB
  ddlsim collective --preset dgx-a100 --nodes 4 --algorithm all -b 1M -e 1G
  ddlsim collective --preset tpu-v4-pod --dims 4x4x4 --algorithm torus --network analytical
  ddlsim collective --preset dgx-h100 --nodes 2 --op all-to-all --ranks 0-3,8-11 --json

Options)";

double parse_size(const std::string& option, const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string suffix = text.substr(digits);
  double unit = 0;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "K" || suffix == "KiB") unit = 1024.0;
  else if (suffix == "M" || suffix == "MiB") unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") unit = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB") unit = 1024.0 * 1024 * 1024 * 1024;
  if (digits == 0 || digits > 12 || unit == 0) {
    throw InputError(option + ": expected a size like 8, 64K, 1M or 8G, got '" + text + "'");
  }
  const double bytes = std::stod(text.substr(0, digits)) * unit;
  if (bytes < 1 || bytes > kMaxBytes) {
    throw InputError(option + ": " + text + " is outside 1 B to 1T (1 TiB)");
  }
  return bytes;
}

std::vector<std::size_t> parse_ranks(const std::string& text, std::size_t accelerators) {
  std::vector<std::size_t> ranks;
  if (text == "all") {
    for (std::size_t i = 0; i < accelerators; ++i) ranks.push_back(i);
    return ranks;
  }
  const auto bad = [&](const std::string& why) {
    return InputError("--ranks: " + why + " in '" + text + "' (expected 'all' or a list like 0-7,16,18)");
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t dash = part.find('-');
    const auto number = [&](const std::string& s) {
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) throw bad("'" + part + "' is not a rank or a range");
      return static_cast<std::size_t>(std::stoul(s));
    };
    const std::size_t lo = number(part.substr(0, dash));
    const std::size_t hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw bad("the range '" + part + "' runs backwards");
    if (hi >= accelerators) throw bad("rank " + std::to_string(hi) + " does not exist (the cluster has " + std::to_string(accelerators) + " accelerators)");
    for (std::size_t r = lo; r <= hi; ++r) ranks.push_back(r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::set<std::size_t> seen;
  for (std::size_t r : ranks) {
    if (!seen.insert(r).second) throw bad("rank " + std::to_string(r) + " is given twice");
  }
  return ranks;
}

struct Row {
  double bytes;
  std::string algorithm;
  int channels;
  int chunks;
  double seconds;
  double algbw;  // B/s
  double busbw;  // B/s
};

}  // namespace

int collective_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kCollectiveHelp);
  d.add_options()("help,h", "show this help");
  add_cluster_options(d);
  d.add_options()
      ("op", po::value<std::string>()->value_name("NAME")->default_value("all-reduce"),
       "all-reduce, reduce-scatter, all-gather, broadcast, reduce, all-to-all or send-recv")
      ("algorithm", po::value<std::string>()->value_name("NAME")->default_value("auto"),
       "auto, all, ring, tree, halving-doubling, direct, hierarchical or torus")
      ("network", po::value<std::string>()->value_name("MODEL")->default_value("flow"), "flow or analytical")
      ("ranks", po::value<std::string>()->value_name("LIST")->default_value("all"),
       "the accelerators taking part, by rank: 'all' or a list like 0-7,16,18")
      ("minbytes,b", po::value<std::string>()->value_name("SIZE")->default_value("8"), "smallest size")
      ("maxbytes,e", po::value<std::string>()->value_name("SIZE")->default_value("8G"), "largest size")
      ("stepfactor,f", po::value<double>()->value_name("F")->default_value(2.0), "multiply the size by F each step (> 1)")
      ("chunks", po::value<int>()->value_name("N")->default_value(0), "pieces per transfer (0: automatic)")
      ("channels", po::value<int>()->value_name("N")->default_value(0), "rings, or trees for tree (0: automatic)")
      ("root", po::value<std::size_t>()->value_name("R")->default_value(0), "root of broadcast/reduce, sender of send-recv (a position in --ranks)")
      ("peer", po::value<std::size_t>()->value_name("R")->default_value(1), "receiver of send-recv (a position in --ranks)")
      ("json", "print the results as JSON");
  po::variables_map vm;
  if (const auto stop = parse_cluster_command(args, d, "collective", vm, out, err)) return *stop;
  try {
    const std::string op_text = vm["op"].as<std::string>();
    const auto op = parse_op(op_text);
    if (!op) {
      std::vector<std::string> names;
      for (CollectiveOp o : kCollectiveOps) names.emplace_back(op_name(o));
      throw InputError("--op: unknown operation '" + op_text + "'" + did_you_mean(op_text, names));
    }
    const std::string algo_text = vm["algorithm"].as<std::string>();
    std::vector<CollectiveAlgorithm> forced;
    const bool automatic = algo_text == "auto";
    if (algo_text == "all") {
      forced.assign(std::begin(kCollectiveAlgorithms), std::end(kCollectiveAlgorithms));
    } else if (!automatic) {
      const auto a = parse_algorithm(algo_text);
      if (!a) {
        std::vector<std::string> names{"auto", "all"};
        for (CollectiveAlgorithm x : kCollectiveAlgorithms) names.emplace_back(algorithm_name(x));
        throw InputError("--algorithm: unknown algorithm '" + algo_text + "'" + did_you_mean(algo_text, names));
      }
      forced.push_back(*a);
    }
    const std::string network = vm["network"].as<std::string>();
    if (network != "flow" && network != "analytical") {
      throw InputError("--network: expected flow or analytical, got '" + network + "'");
    }
    const double lo = parse_size("--minbytes", vm["minbytes"].as<std::string>());
    const double hi = parse_size("--maxbytes", vm["maxbytes"].as<std::string>());
    const double factor = vm["stepfactor"].as<double>();
    if (hi < lo) throw InputError("--maxbytes: smaller than --minbytes");
    if (!(factor > 1.0 && factor <= 1024.0)) throw InputError("--stepfactor: expected a number above 1 and at most 1024");
    const int chunks = vm["chunks"].as<int>(), channels = vm["channels"].as<int>();
    if (chunks < 0 || chunks > 4096) throw InputError("--chunks: expected 0 (automatic) to 4096");
    if (channels < 0 || channels > 64) throw InputError("--channels: expected 0 (automatic) to 64");

    LoadedCluster loaded = load_cluster(vm);
    NetworkFabric fabric(loaded.cluster, loaded.catalog);
    const auto accelerators = loaded.cluster.accelerators();
    std::vector<NodeId> members;
    for (std::size_t r : parse_ranks(vm["ranks"].as<std::string>(), accelerators.size())) members.push_back(accelerators[r]);
    if (members.size() < 2) throw InputError("--ranks: a collective needs at least 2 ranks");
    const CollectiveGroup group = CollectiveGroup::of(fabric, members);

    CollectiveSpec base;
    base.op = *op;
    base.chunks = chunks;
    base.channels = channels;
    base.root = vm["root"].as<std::size_t>();
    base.peer = vm["peer"].as<std::size_t>();
    if (base.root >= members.size()) throw InputError("--root: " + std::to_string(base.root) + " is not a position in --ranks (0 to " + std::to_string(members.size() - 1) + ")");
    if (*op == CollectiveOp::kSendRecv && (base.peer >= members.size() || base.peer == base.root)) {
      throw InputError("--peer: send-recv needs a position in --ranks other than --root");
    }

    // Which algorithms run; a forced one that cannot is an error, 'all' skips (and says so).
    std::vector<std::string> skipped;
    std::vector<CollectiveAlgorithm> algorithms;
    for (CollectiveAlgorithm a : forced) {
      const std::string why = unsupported_reason(group, *op, a);
      if (why.empty()) algorithms.push_back(a);
      else if (forced.size() == 1) throw InputError("--algorithm: " + why);
      else skipped.push_back(std::string(algorithm_name(a)) + ": " + why);
    }
    if (base.channels > 2) {
      for (CollectiveAlgorithm a : algorithms) {
        if (a == CollectiveAlgorithm::kTree) throw InputError("--channels: tree takes 1 (one tree) or 2 (double binary tree)");
      }
    }

    std::vector<double> sizes;
    for (double s = lo; s <= hi * (1 + 1e-12); s = std::max(s * factor, s + 1)) sizes.push_back(std::round(s));
    ReplayEngine engine;
    std::vector<Row> rows;
    for (double bytes : sizes) {
      std::vector<std::pair<CollectiveAlgorithm, int>> runs;
      if (automatic) {
        const CollectiveChoice pick = choose_algorithm(fabric, group, *op, bytes);
        runs.emplace_back(pick.algorithm, base.channels > 0 ? base.channels : pick.channels);
      } else {
        for (CollectiveAlgorithm a : algorithms) runs.emplace_back(a, base.channels);
      }
      for (const auto& [a, ch] : runs) {
        CollectiveSpec spec = base;
        spec.algorithm = a;
        spec.bytes = bytes;
        spec.channels = (a == CollectiveAlgorithm::kTree && ch > 2) ? 2 : ch;
        double seconds = 0;
        if (network == "analytical") {
          seconds = analytical_collective_time(fabric, group, spec);
        } else {
          const std::uint64_t transfers = collective_transfer_count(group, spec);
          if (transfers > kMaxTransfers) {
            throw InputError("the " + std::string(algorithm_name(a)) + " " + op_text + " over " + std::to_string(members.size()) +
                             " ranks needs " + std::to_string(transfers) + " transfers, more than the flow model's limit of " +
                             std::to_string(kMaxTransfers) + "; use --network analytical, fewer --chunks or --channels");
          }
          TaskGraph g;
          lower_collective(g, ResourceId(0), group, spec);
          FlowNetwork net("network", fabric);
          ResourceModel* models[] = {&net};
          seconds = engine.run(g, models).makespan.value();
        }
        const double algbw = bytes / seconds;
        rows.push_back(Row{bytes, std::string(algorithm_name(a)), effective_channels(group, spec), effective_chunks(spec),
                           seconds, algbw, algbw * busbw_factor(*op, members.size())});
      }
    }

    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["cluster"] = loaded.title();
      j["op"] = op_text;
      j["ranks"] = members.size();
      j["network"] = network;
      j["algorithm"] = algo_text;
      j["skipped"] = skipped;
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const Row& r : rows) {
        list.push_back({{"bytes", r.bytes}, {"algorithm", r.algorithm}, {"channels", r.channels}, {"chunks", r.chunks},
                        {"time_us", r.seconds * 1e6}, {"algbw_gbytes_per_s", r.algbw / 1e9},
                        {"busbw_gbytes_per_s", r.busbw / 1e9}});
      }
      j["results"] = list;
      out << j.dump(2) << "\n";
      return kExitOk;
    }
    out << "# ddlsim collective: " << op_text << " over " << members.size() << " ranks of " << loaded.title()
        << ", network " << network << ", algorithm " << algo_text << "\n";
    for (const std::string& s : skipped) out << "# skipped " << s << "\n";
    out << "#        size (B)  algorithm         channels  chunks      time (us)  algbw (GB/s)  busbw (GB/s)\n";
    for (const Row& r : rows) {
      char line[192];
      std::snprintf(line, sizeof line, "%17.0f  %-16s  %8d  %6d  %13.2f  %12.2f  %12.2f\n", r.bytes, r.algorithm.c_str(),
                    r.channels, r.chunks, r.seconds * 1e6, r.algbw / 1e9, r.busbw / 1e9);
      out << line;
    }
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("collective", err);
  }
}

}  // namespace ddlsim
