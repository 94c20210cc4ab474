// `ddlsim topology`: build a cluster from a preset and describe it.
#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "cli/cli.hpp"
#include "cli/cluster_options.hpp"
#include "cli/options.hpp"
#include "cli/commands.hpp"
#include "sim/core/errors.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/explicit.hpp"
#include "topology/presets.hpp"
#include "topology/stats.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

constexpr const char* kTopologyHelp = R"(Usage: ddlsim topology --preset NAME [OPTIONS]
       ddlsim topology FILE.json [OPTIONS]      (an explicit topology: nodes and links,
                                                or a scenario whose cluster names a preset
                                                or such a file)
       ddlsim topology --list

Builds a cluster from a preset and describes it: nodes by kind, cables by link kind,
injection bandwidth per accelerator (the sum of its links, one direction), diameter (the
longest shortest path between two accelerators, in hops) and bisection bandwidth (the
smallest maximum flow between two halves of the accelerators: rank order, and for a
torus each even dimension cut in half).

Examples:
  ddlsim topology --list                          # presets, accelerators and links
  ddlsim topology --preset dgx-h100 --nodes 32    # one DGX H100 SuperPOD scalable unit
  ddlsim topology --preset tpu-v4-pod --dims 4x4x8 --json
  ddlsim topology --preset dgx-a100 --nodes 4 --nic ib-ndr --dot a100.dot
  ddlsim topology --preset dgx-h100 --catalog mine.json --accelerator my-chip
  ddlsim topology --preset dgx-h100 --nodes 2 --export two.json   # start an explicit file
  ddlsim topology two.json                        # describe an explicit topology

Options)";

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void print_text(std::ostream& out, const std::string& title, const TopologyStats& s) {
  out << "topology:   " << title << "\n";
  out << "nodes:      ";
  const char* sep = "";
  for (const auto& [kind, n] : s.nodes_by_kind) {
    out << sep << n << " " << kind << (n == 1 ? "" : kind == "switch" ? "es" : "s");
    sep = ", ";
  }
  out << "\naccelerators: ";
  sep = "";
  for (const auto& [model, n] : s.accelerators_by_model) {
    out << sep << n << " x " << model;
    sep = ", ";
  }
  out << "\nlinks:" << (s.links_by_kind.empty() ? "      none\n" : "\n");
  for (const auto& [kind, g] : s.links_by_kind) {
    char line[160];
    if (g.min_gbytes_per_s == g.max_gbytes_per_s) {
      std::snprintf(line, sizeof line, "  %-14s %8zu %s x %g GB/s per direction\n", kind.c_str(), g.cables,
                    g.cables == 1 ? "cable " : "cables", g.gbytes_per_s);
    } else {  // asymmetric cables, or cables of one kind at different rates
      std::snprintf(line, sizeof line, "  %-14s %8zu %s x %g to %g GB/s per direction\n", kind.c_str(), g.cables,
                    g.cables == 1 ? "cable " : "cables", g.min_gbytes_per_s, g.max_gbytes_per_s);
    }
    out << line;
  }
  out << "injection:  " << fmt(s.injection_min_gbytes_per_s);
  if (s.injection_max_gbytes_per_s != s.injection_min_gbytes_per_s) out << " to " << fmt(s.injection_max_gbytes_per_s);
  out << " GB/s per accelerator (sum of its links, one direction)\n";
  if (!s.oversubscription.empty()) {
    out << "oversubscription: ";
    sep = "";
    for (const auto& [role, ratio] : s.oversubscription) {
      out << sep << role << " " << fmt(ratio) << ":1";
      sep = ", ";
    }
    out << " (bandwidth toward the endpoints over bandwidth toward the next tier)\n";
  }
  out << "diameter:   " << (s.diameter_exact ? "" : "at least ") << s.diameter_hops
      << (s.diameter_hops == 1 ? " hop" : " hops") << " between accelerators"
      << (s.diameter_exact ? "" : " (searched from 64 sources)") << "\n";
  const auto accelerators = s.nodes_by_kind.find("accelerator");
  if (accelerators == s.nodes_by_kind.end() || accelerators->second < 2) {
    out << "bisection:  - (one accelerator: no halves to cut)\n";
  } else {
    out << "bisection:  " << fmt(s.bisection_gbytes_per_s) << " GB/s (max flow between halves of the accelerators; cut: "
        << s.bisection_cut << ")\n";
  }
}

void print_json(std::ostream& out, const std::string& source, bool is_file, const TopologyStats& s) {
  nlohmann::ordered_json j;
  j[is_file ? "file" : "preset"] = source;
  j["nodes_by_kind"] = s.nodes_by_kind;
  j["accelerators_by_model"] = s.accelerators_by_model;
  nlohmann::ordered_json links = nlohmann::ordered_json::object();
  for (const auto& [kind, g] : s.links_by_kind) links[kind] = {{"cables", g.cables}, {"gbytes_per_s", g.gbytes_per_s}, {"min_gbytes_per_s", g.min_gbytes_per_s}, {"max_gbytes_per_s", g.max_gbytes_per_s}};
  j["links_by_kind"] = links;
  j["injection_min_gbytes_per_s"] = s.injection_min_gbytes_per_s;
  j["injection_max_gbytes_per_s"] = s.injection_max_gbytes_per_s;
  j["oversubscription"] = s.oversubscription;
  j["diameter_hops"] = s.diameter_hops;
  j["diameter_exact"] = s.diameter_exact;
  j["bisection_gbytes_per_s"] = s.bisection_gbytes_per_s;
  j["bisection_cut"] = s.bisection_cut;
  out << j.dump(2) << "\n";
}

std::string dot_escaped(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

void write_dot(std::ostream& out, const Cluster& c) {
  out << "graph cluster {\n  node [fontname=\"Helvetica\"];\n";
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    const Node& n = c.node(NodeId(static_cast<std::uint32_t>(i)));
    out << "  n" << i << " [label=\"" << dot_escaped(n.name) << "\", shape="
        << (n.kind == NodeKind::kAccelerator ? "box" : n.kind == NodeKind::kSwitch ? "ellipse" : "diamond") << "];\n";
  }
  for (std::size_t l = 0; l < c.link_count(); l += 2) {
    const Link& link = c.link(LinkId(static_cast<std::uint32_t>(l)));
    out << "  n" << link.from.value << " -- n" << link.to.value << " [label=\"" << dot_escaped(link.kind) << "\"];\n";
  }
  out << "}\n";
}

}  // namespace

int topology_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description d(kTopologyHelp);
  d.add_options()("help,h", "show this help")
      ("list", "list the presets, and the catalog's accelerators and links");
  add_cluster_options(d);
  d.add_options()("json", "print the description as JSON")
      ("dot", po::value<std::string>()->value_name("FILE"), "write the cluster in GraphViz dot syntax")
      ("export", po::value<std::string>()->value_name("FILE"), "write the cluster as an explicit topology (JSON)");
  po::variables_map vm;
  if (const auto stop = parse_cluster_command(args, d, "topology", vm, out, err)) return *stop;
  try {
    if (vm.count("list")) {
      // It lists every preset and the catalog; anything else given with it would be ignored.
      for (const auto& [name, value] : vm) {
        if (name == "list" || name == "catalog" || value.defaulted()) continue;
        throw InputError("--list: lists the presets and the catalog as text; not with " +
                         (name == "file" ? std::string("a topology file") : "--" + name));
      }
      Catalog catalog = Catalog::builtin();
      if (vm.count("catalog")) {
        const std::string path = vm["catalog"].as<std::string>();
        catalog.merge(parse_json(read_input_file(path, "catalog"), path), path);
      }
      out << "presets:\n";
      for (const auto& p : preset_list()) out << "  " << p.name << "  " << p.summary << "\n";
      out << "accelerators:";
      for (const auto& a : catalog.accelerator_ids()) out << " " << a;
      out << "\nlinks:";
      for (const auto& l : catalog.link_ids()) out << " " << l;
      out << "\n";
      return kExitOk;
    }
    std::vector<std::string> inputs;
    for (const char* in : {"file", "catalog"}) {
      if (vm.count(in)) inputs.push_back(vm[in].as<std::string>());
    }
    check_outputs(vm, {"dot", "export"}, inputs);
    const LoadedCluster loaded = load_cluster(vm);
    const Cluster& c = loaded.cluster;
    const TopologyStats s = topology_stats(c);
    // Both output files are written before either is committed: all or nothing.
    std::optional<AtomicFile> dot, exported;
    if (vm.count("dot")) {
      dot.emplace(vm["dot"].as<std::string>());
      write_dot(dot->stream(), c);
    }
    if (vm.count("export")) {
      exported.emplace(vm["export"].as<std::string>());
      exported->stream() << write_explicit_topology(c);
    }
    if (dot) dot->commit();
    if (exported) exported->commit();
    if (vm.count("json")) {
      print_json(out, loaded.source, loaded.from_file, s);
    } else {
      print_text(out, loaded.title(), s);
    }
    return kExitOk;
  } catch (...) {
    return exit_for_current_exception("topology", err);
  }
}

}  // namespace ddlsim
