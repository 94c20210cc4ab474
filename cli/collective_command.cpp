// `ddlsim collective`: nccl-tests for a simulated cluster.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <unistd.h>

#include "cli/cli.hpp"
#include "cli/cluster_options.hpp"
#include "cli/collective_support.hpp"
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


constexpr const char* kCollectiveHelp = R"(Usage: ddlsim collective --preset NAME [OPTIONS]
       ddlsim collective FILE.json [OPTIONS]    (an explicit topology)

Times one collective over a range of message sizes on a simulated cluster, in the style
of nccl-tests: the collective is lowered to point-to-point transfers (ring, tree, ...)
and replayed on a network model. For each size it prints the time, the algorithm
bandwidth algbw = size / time and the bus bandwidth busbw = algbw x factor, with
nccl-tests' factors: 2(n-1)/n for all-reduce; (n-1)/n for reduce-scatter, all-gather
and all-to-all; 1 for broadcast, reduce and send-recv (n ranks); and the selector's
closed-form estimate for that algorithm, channel count, protocol and --chunks (what 'auto'
compares, with automatic chunks; given --channels, rings and trees compete with that
many), beside the replayed time.

Size is nccl-tests' size: the all-reduce, broadcast or reduce buffer; the reduce-scatter
input and all-gather output (n pieces); an all-to-all rank's send buffer; the message.
GB/s are 10^9 bytes per second; sizes take K, M, G, T suffixes (powers of 1024).

Network models:
  flow        every directed link shared max-min fairly by the transfers crossing it
              (congestion, adaptive routing over equal-cost paths)
  analytical  each transfer alone: route latency + bytes / bottleneck bandwidth, the
              collective's own transfers at once sharing the links next to servers
              (two rings through one NIC: half of it each; a tree's transfers, those
              of their step of the pipelines)
Rings (also those of hierarchical and torus) and chunked trees (--rings): 'steps'
replays a transfer per ring step and chunk (exact, nccl-tests' reference); 'streamed'
one transfer per rank and ring phase carrying all its steps' bytes, paying the route
latency once per step, and one per tree edge and direction for all the chunks, as
training replays do (simulation.rings). Alone a streamed ring takes the step-by-step
time and a streamed tree about the same (faster by up to its pipeline's fill, slower
by a little at small sizes, every edge waiting the fill's NIC transport), with far fewer flows
(a 2(p-1)-step ring: 2(p-1) x chunks times fewer), so thousands of ranks fit the flow
model. The analytical model ignores it.
Link bandwidths count the catalog's efficiency per link kind (the fraction of line rate
NCCL reaches); a hop through an NVSwitch costs NCCL's 3.4 us (two NVLink 3-5 links of
1.7 us), a transfer between servers 14 us through InfiniBand and RoCE NICs (NCCL's
Simple protocol; the catalog's transport_latency_us; a ring's steps: its mean over the
ring's hops; a pipeline of chunks: its first chunk). Small sizes run NCCL's
low-latency protocol (LL): 0.894 us an NVSwitch hop and 7.45 us through those NICs (the
catalog's ll_latency_us and ll_transport_latency_us), its bus bytes at no more than the
group's LL bus bandwidth (ll_bus_gbytes_per_s: 20 GB/s across NICs, 141 inside an H100
server), across servers at the share of NCCL's channels (two per NIC) that a collective
fills at 4 KiB each (a ring's: 4 KiB x its ranks; at least one); each size runs the
protocol whose estimate is cheaper, as NCCL's tuner picks (2 x 8 H100: LL up to 256
KiB; ddlsim's estimate counts the channels launched, NCCL's tuner all of them, so a
ring turns to Simple sooner: at 128 KiB there); a ring phase inside an A100 server waits the
catalog's ring_overhead of NVLink 3 (p - 1 + 0.195 steps' time); see 'ddlsim topology
--list' and topology/data/catalog.json.

Algorithms: ring, tree (all-reduce; NCCL's: a chain in each server, a binary tree across
servers, one per channel, the channels alternating between the two trees of a double
binary tree and heading their chains at different GPUs, so every NIC carries one),
halving-doubling (power-of-two ranks), direct, hierarchical (all-reduce over scale-up
domains; all-to-all between same-index ranks of the domains, then inside each domain,
pipelined), torus (rings per dimension, every dimension both ways at once; the ranks must
be a whole torus); a ring of direct links (a torus dimension) runs both ways; 'auto'
picks by size and topology like NCCL's tuner, among what a collective library offers
(ring, tree, hierarchical all-reduce, torus; direct all-to-all; halving-doubling only by
name), taking a tree for its latency but never for bandwidth a ring has (NCCL's tuner
prices a tree's bandwidth below a ring's even on two servers, where the tree replays
faster), 'all' prints every one that can run the operation.

Examples:
  ddlsim collective --preset dgx-h100                       # 8 GPUs, all-reduce, 8 B - 8 GiB
  ddlsim collective --preset dgx-a100 --nodes 4 --algorithm all -b 1M -e 1G
  ddlsim collective --preset tpu-v4-pod --dims 4x4x4 --algorithm torus --network analytical
  ddlsim collective --preset dgx-h100 --nodes 2 --op all-to-all --ranks 0-3,8-11 --json
  ddlsim collective --preset dgx-h100 --nodes 1280 --algorithm ring --rings streamed -b 1G -e 1G

Options)";

struct Row {
  double bytes;
  std::string algorithm;
  bool low_latency;  // the protocol run: NCCL's LL, else its Simple
  int channels;
  int chunks;
  double seconds;
  double algbw;  // B/s
  double busbw;  // B/s
  double estimate;  // s: the selector's closed form for this algorithm and channel count
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
      ("network", po::value<std::string>()->value_name("MODEL")->default_value("flow"),
       "flow or analytical (for a scenario file, its simulation.network when it gives one)")
      ("ranks", po::value<std::string>()->value_name("LIST")->default_value("all"),
       "the accelerators taking part, by rank: 'all' or a list like 0-7,16,18")
      ("minbytes,b", po::value<std::string>()->value_name("SIZE")->default_value("8"), "smallest size")
      ("maxbytes,e", po::value<std::string>()->value_name("SIZE")->default_value("8G"), "largest size")
      ("stepfactor,f", po::value<double>()->value_name("F")->default_value(2.0), "multiply the size by F each step (> 1)")
      ("chunks", po::value<int>()->value_name("N")->default_value(0), "pieces per transfer (0: automatic)")
      ("channels", po::value<int>()->value_name("N")->default_value(0), "rings for ring, trees for tree; the other algorithms have none (0: automatic; with auto, rings and trees compete with N)")
      ("protocol", po::value<std::string>()->value_name("NAME")->default_value("auto"),
       "auto (the cheaper estimate, as NCCL's tuner picks), ll (NCCL's low-latency protocol) or simple (its bandwidth protocol), as NCCL_PROTO forces one")
      ("rings", po::value<std::string>()->value_name("HOW")->default_value("steps"),
       "how the flow model replays rings and chunked trees: steps (a transfer per step and chunk) or streamed (one per rank and phase, one per tree edge and direction)")
      ("root", po::value<long long>()->value_name("R")->default_value(0), "root of broadcast/reduce, sender of send-recv (a position in --ranks)")
      ("peer", po::value<long long>()->value_name("R")->default_value(1), "receiver of send-recv (a position in --ranks)")
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
    std::string network = vm["network"].as<std::string>();
    if (network != "flow" && network != "analytical") {
      throw InputError("--network: expected flow or analytical, got '" + network + "'");
    }
    const std::string rings = vm["rings"].as<std::string>();
    if (rings != "steps" && rings != "streamed") {
      throw InputError("--rings: expected steps or streamed, got '" + rings + "'");
    }
    const std::string protocol = vm["protocol"].as<std::string>();
    if (protocol != "auto" && protocol != "ll" && protocol != "simple") {
      throw InputError("--protocol: expected auto, ll or simple, got '" + protocol + "'");
    }
    const double lo = parse_size("--minbytes", vm["minbytes"].as<std::string>());
    const double hi = parse_size("--maxbytes", vm["maxbytes"].as<std::string>());
    const double factor = vm["stepfactor"].as<double>();
    if (hi < lo) throw InputError("--maxbytes: smaller than --minbytes");
    if (!(factor > 1.0 && factor <= 1024.0)) throw InputError("--stepfactor: expected a number above 1 and at most 1024");
    const int chunks = vm["chunks"].as<int>(), channels = vm["channels"].as<int>();
    if (chunks < 0 || chunks > 4096) throw InputError("--chunks: expected 0 (automatic) to 4096");
    if (channels < 0 || channels > kMaxChannels) {
      throw InputError("--channels: expected 0 (automatic) to " + std::to_string(kMaxChannels) + " (NCCL's most)");
    }

    LoadedCluster loaded = load_cluster(vm);
    // A scenario's own network model, unless --network says otherwise.
    if (vm["network"].defaulted() && loaded.scenario_network) network = *loaded.scenario_network;
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
    base.streamed = rings == "streamed";
    if (protocol != "auto") base.low_latency = protocol == "ll";
    const long long root = vm["root"].as<long long>(), peer = vm["peer"].as<long long>();
    const auto positions = static_cast<long long>(members.size());
    if (root < 0 || root >= positions) throw InputError("--root: " + std::to_string(root) + " is not a position in --ranks (0 to " + std::to_string(positions - 1) + ")");
    base.root = static_cast<std::size_t>(root);
    // Options that the operation or algorithm has no use for are refused, not ignored.
    const bool rooted = *op == CollectiveOp::kBroadcast || *op == CollectiveOp::kReduce || *op == CollectiveOp::kSendRecv;
    if (!vm["root"].defaulted() && !rooted) {
      throw InputError("--root: applies to broadcast, reduce and send-recv; " + op_text + " has no root");
    }
    if (!vm["peer"].defaulted() && *op != CollectiveOp::kSendRecv) {
      throw InputError("--peer: applies to send-recv only");
    }
    if (channels > 0 && forced.size() == 1 && forced[0] != CollectiveAlgorithm::kRing && forced[0] != CollectiveAlgorithm::kTree) {
      throw InputError("--channels: " + std::string(algorithm_name(forced[0])) + " has no channels (ring and tree have)");
    }
    if (!vm["rings"].defaulted()) {
      // How the flow model replays rings and chunked trees: nothing to say elsewhere.
      if (network == "analytical") throw InputError("--rings: applies to the flow network; the analytical one prices each transfer whole");
      if (*op == CollectiveOp::kAllToAll || *op == CollectiveOp::kSendRecv) {
        throw InputError("--rings: " + op_text + " runs direct transfers, no rings or chunked trees");
      }
      if (forced.size() == 1 && (forced[0] == CollectiveAlgorithm::kDirect || forced[0] == CollectiveAlgorithm::kHalvingDoubling)) {
        throw InputError("--rings: " + std::string(algorithm_name(forced[0])) + " has no rings or chunked trees");
      }
    }
    if (*op == CollectiveOp::kSendRecv) {
      if (peer < 0 || peer >= positions || peer == root) {
        throw InputError("--peer: " + std::to_string(peer) + " is not a position in --ranks (0 to " + std::to_string(positions - 1) +
                         ") other than --root (" + std::to_string(root) + ")");
      }
      base.peer = static_cast<std::size_t>(peer);  // (only send-recv has a receiver)
    }

    // Which algorithms run; a forced one that cannot is an error, 'all' skips (and says so).
    // A direct algorithm past the pairs the model can hold is refused (or skipped) before
    // the selector's estimate, which routes every pair too.
    const NetworkModelKind kind = network == "analytical" ? NetworkModelKind::kAnalytical : NetworkModelKind::kFlow;
    const auto too_large = [&](CollectiveAlgorithm a) {
      CollectiveSpec spec = base;
      spec.algorithm = a;
      return direct_size_problem(group, spec, kind, op_text);
    };
    if (automatic && *op == CollectiveOp::kAllToAll) {
      if (std::string why = too_large(CollectiveAlgorithm::kDirect); !why.empty()) throw TooLargeError(why);
    }
    std::vector<std::string> skipped;
    std::vector<CollectiveAlgorithm> algorithms;
    for (CollectiveAlgorithm a : forced) {
      std::string why = unsupported_reason(group, *op, a);
      if (why.empty()) why = too_large(a);
      if (why.empty()) algorithms.push_back(a);
      else if (forced.size() == 1) throw InputError("--algorithm: " + why);
      else skipped.push_back(std::string(algorithm_name(a)) + ": " + why);
    }

    std::vector<double> sizes;
    constexpr std::size_t kMaxSizes = 10'000;
    for (double s = lo; s <= hi * (1 + 1e-12); s = std::max(s * factor, s + 1)) {
      if (sizes.size() == kMaxSizes) {
        throw InputError("--stepfactor: from --minbytes to --maxbytes in steps of that factor makes more than " +
                         std::to_string(kMaxSizes) + " sizes; take a larger factor or a narrower range");
      }
      sizes.push_back(std::round(s));
    }
    ReplayEngine engine;
    std::vector<Row> rows;
    // On a terminal, which size is being replayed (thousands of ranks take seconds each).
    const bool tty = &err == &std::cerr && ::isatty(2);
    std::size_t done = 0;
    for (double bytes : sizes) {
      if (tty) err << "\rddlsim collective: size " << ++done << "/" << sizes.size() << " (" << printf_string("%.0f", bytes) << " B)" << std::string(8, ' ') << std::flush;
      struct Run {
        CollectiveAlgorithm algorithm;
        int channels;
        std::optional<double> estimate;  // the selector's, when it priced these channels
        std::optional<bool> low_latency;  // the selector's protocol, or --protocol's
      };
      std::vector<Run> runs;
      if (automatic) {
        // With --channels, rings and trees compete with that many channels.
        const CollectiveChoice pick = choose_algorithm(fabric, group, *op, bytes, base.channels, base.low_latency);
        // (The selector prices a rooted operation from rank 0; the row's estimate is the
        // one from --root, to --peer, its protocol chosen from there.)
        if (rooted) runs.push_back({pick.algorithm, pick.channels, std::nullopt, base.low_latency});
        else runs.push_back({pick.algorithm, pick.channels, pick.estimate, pick.low_latency});
      } else {
        for (CollectiveAlgorithm a : algorithms) runs.push_back({a, base.channels, std::nullopt, base.low_latency});
      }
      for (const auto& [a, ch, estimate, ll] : runs) {
        CollectiveSpec spec = base;
        spec.algorithm = a;
        spec.bytes = bytes;
        spec.channels = ch;
        spec.low_latency = ll ? *ll : choose_protocol(fabric, group, spec);
        const double seconds = collective_seconds(fabric, group, spec, kind, op_text, engine);
        const double algbw = bytes / seconds;
        const int used = effective_channels(group, spec);
        rows.push_back(Row{bytes, std::string(algorithm_name(a)), *spec.low_latency, used, effective_chunks(spec), seconds,
                           algbw, algbw * busbw_factor(*op, members.size()),
                           estimate && base.chunks == 0 ? *estimate
                                                        : collective_estimate(fabric, group, *op, a, bytes, used, base.root,
                                                                              base.peer, base.chunks, spec.low_latency)});
      }
    }

    if (tty) err << "\r" << std::string(60, ' ') << "\r" << std::flush;
    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["cluster"] = loaded.title();
      j["op"] = op_text;
      j["ranks"] = members.size();
      j["network"] = network;
      j["algorithm"] = algo_text;
      j["rings"] = rings;
      j["protocol"] = protocol;
      j["skipped"] = skipped;
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const Row& r : rows) {
        list.push_back({{"bytes", r.bytes}, {"algorithm", r.algorithm}, {"protocol", r.low_latency ? "LL" : "Simple"},
                        {"channels", r.channels}, {"chunks", r.chunks},
                        {"time_us", r.seconds * 1e6}, {"algbw_gbytes_per_s", r.algbw / 1e9},
                        {"busbw_gbytes_per_s", r.busbw / 1e9}, {"estimate_us", r.estimate * 1e6}});
      }
      j["results"] = list;
      out << j.dump(2) << "\n";
      return kExitOk;
    }
    // A rooted operation names its root (and send-recv its receiver: only the two take part).
    const auto name_of = [&](std::size_t position) {
      return loaded.cluster.node(members[position]).name + " (position " + std::to_string(position) + ")";
    };
    std::string who = " over " + std::to_string(members.size()) + " ranks";
    if (*op == CollectiveOp::kSendRecv) {
      who = " from " + name_of(base.root) + " to " + name_of(base.peer) + ", 2 of " + std::to_string(members.size()) + " ranks";
    } else if (rooted) {
      who += " from " + name_of(base.root);
    }
    out << "# ddlsim collective: " << op_text << who << " of " << loaded.title()
        << ", network " << network << ", algorithm " << algo_text
        << (rings == "streamed" ? ", rings streamed" : "") << (protocol != "auto" ? ", protocol " + protocol : "") << "\n";
    for (const std::string& s : skipped) out << "# skipped " << s << "\n";
    out << "#        size (B)  algorithm         protocol  channels  chunks      time (us)  algbw (GB/s)  busbw (GB/s)  estimate (us)\n";
    for (const Row& r : rows) {
      char line[240];
      std::snprintf(line, sizeof line, "%17.0f  %-16s  %-8s  %8d  %6d  %13.2f  %12.2f  %12.2f  %13.2f\n", r.bytes,
                    r.algorithm.c_str(), r.low_latency ? "LL" : "Simple", r.channels, r.chunks, r.seconds * 1e6,
                    r.algbw / 1e9, r.busbw / 1e9, r.estimate * 1e6);
      out << line;
    }
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("collective", err);
  }
}

}  // namespace ddlsim
