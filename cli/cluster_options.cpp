#include "cli/cluster_options.hpp"

#include "cli/options.hpp"

#include <algorithm>
#include <filesystem>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/scenario.hpp"

#include "sim/core/errors.hpp"
#include "sim/network.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/explicit.hpp"
#include "topology/presets.hpp"

namespace po = boost::program_options;

namespace ddlsim {
namespace {

std::vector<int> parse_dims(const std::string& text) {
  std::vector<int> dims;
  std::size_t start = 0;
  for (;;) {
    const auto x = text.find('x', start);
    const std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    int v = 0;
    const bool digits = !part.empty() && part.size() <= 4 &&
                        part.find_first_not_of("0123456789") == std::string::npos;
    if (digits) v = std::stoi(part);
    if (v <= 0 || v > 4096) throw InputError("--dims: expected sizes from 1 to 4096 joined by 'x', like 4x4x8, got '" + text + "'");
    dims.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (dims.size() > 4) throw InputError("--dims: at most 4 dimensions, got '" + text + "'");
  return dims;
}

}  // namespace

void add_cluster_options(po::options_description& d) {
  d.add_options()
      ("preset", po::value<std::string>()->value_name("NAME"), "the machine to build (see 'ddlsim topology --list')")
      ("nodes", po::value<int>()->value_name("N"), "servers (GPU presets; default 1)")
      ("dims", po::value<std::string>()->value_name("AxBxC"), "TPU slice shape: v4 and v5p AxBxC (4x4x8, flat 4x4x1), v3 AxB")
      ("pods", po::value<int>()->value_name("N"), "TPU slices joined over the data-centre network (default 1)")
      ("accelerator", po::value<std::string>()->value_name("ID"), "replace the preset's accelerator (catalog id)")
      ("nic", po::value<std::string>()->value_name("ID"), "replace the preset's scale-out link (catalog id)")
      ("nics-per-node", po::value<int>()->value_name("N"),
       "dgx-* and mi300x-platform presets: scale-out NICs per server, 1, 2, 4 or 8 (default 8, one per GPU); fewer are each "
       "shared by 8/N GPUs behind a PCIe switch")
      ("catalog", po::value<std::string>()->value_name("FILE"), "JSON that adds or patches catalog entries")
      ("file", po::value<std::string>()->value_name("FILE"),
       "an explicit topology JSON file, or a scenario whose cluster names a preset or such a file (or give it first)");
}

std::optional<int> parse_cluster_command(const std::vector<std::string>& args, const po::options_description& d,
                                         const char* command, po::variables_map& vm, std::ostream& out,
                                         std::ostream& err) {
  return parse_command_options(args, d, "file", command, vm, out, err);
}

std::string LoadedCluster::title() const {
  if (from_file || !nodes) return source;
  return source + ", " + std::to_string(*nodes) + (*nodes == 1 ? " node" : " nodes");
}

LoadedCluster load_cluster(const po::variables_map& vm) {
  LoadedCluster out;
  if (vm.count("preset") == vm.count("file")) {
    throw InputError(vm.count("file") ? "give either --preset or a topology file, not both"
                                      : "--preset: required, or a topology file (see 'ddlsim topology --list' for the presets)");
  }
  nlohmann::json doc;
  if (vm.count("file")) {
    const std::string path = vm["file"].as<std::string>();
    for (const char* opt : {"nodes", "dims", "pods", "accelerator", "nic", "nics-per-node"}) {
      if (vm.count(opt)) throw InputError(std::string("--") + opt + ": applies to presets, not to a topology file");
    }
    doc = parse_json(read_input_file(path, "topology"), path);
  }
  const bool scenario = doc.is_object() && doc.contains("cluster");
  // A scenario's catalog patch first, then --catalog's over it.
  Catalog& catalog = out.catalog;
  if (scenario) {
    const std::string path = vm["file"].as<std::string>();
    try {
      merge_scenario_catalog(doc, std::filesystem::path(path).parent_path().string(), catalog);
    } catch (const InputError& e) {
      throw InputError(path + ": " + e.what());
    }
  }
  if (vm.count("catalog")) {
    const std::string path = vm["catalog"].as<std::string>();
    catalog.merge(parse_json(read_input_file(path, "catalog"), path), path);
  }
  Cluster& c = out.cluster;
  if (vm.count("file")) {
    const std::string path = vm["file"].as<std::string>();
    out.source = path;
    out.from_file = true;
    if (scenario) {
      // A scenario: its cluster, which must name a preset.
      const nlohmann::json& section = doc.at("cluster");
      if (section.is_object() && !section.contains("preset") && !section.contains("file")) {
        throw InputError(path + ": cluster: a uniform cluster (devices, device_tflops, ...) is not a graph; "
                                "give the cluster a \"preset\" (or a topology \"file\") to describe it");
      }
      try {
        JsonObject cluster(section, "cluster");
        std::string title;
        c = read_scenario_cluster(cluster, catalog, std::filesystem::path(path).parent_path().string(), title);
      } catch (const InputError& e) {
        throw InputError(path + ": " + e.what());
      }
      if (doc.contains("simulation") && doc["simulation"].is_object() && doc["simulation"].contains("network")) {
        const nlohmann::json& n = doc["simulation"]["network"];
        if (!n.is_string() || !parse_network_model(n.get<std::string>())) {
          throw InputError(path + ": simulation.network: expected one of \"flow\", \"analytical\", got " + n.dump());
        }
        out.scenario_network = n.get<std::string>();
      }
    } else {
      c = read_explicit_topology(doc, catalog, path);
    }
  } else {
    out.source = vm["preset"].as<std::string>();
    PresetOptions o;
    if (vm.count("nodes")) o.nodes = vm["nodes"].as<int>();
    if (vm.count("dims")) o.dims = parse_dims(vm["dims"].as<std::string>());
    if (vm.count("pods")) o.pods = vm["pods"].as<int>();
    if (vm.count("accelerator")) o.accelerator = vm["accelerator"].as<std::string>();
    if (vm.count("nic")) o.nic = vm["nic"].as<std::string>();
    if (vm.count("nics-per-node")) o.nics_per_node = vm["nics-per-node"].as<int>();
    out.nodes = o.nodes;
    try {
      c = build_preset(catalog, out.source, o);
      c.validate();
    } catch (const InputError& e) {
      // The preset's option keys as this command's flags: nics_per_node -> --nics-per-node.
      const auto flag = [](std::string_view key) {
        std::string f = "--" + std::string(key);
        std::replace(f.begin(), f.end(), '_', '-');
        return f;
      };
      throw InputError(spelled_preset_error(e.what(), flag, ""));
    } catch (const GraphError& e) {
      throw InputError(out.source + ": " + e.what());
    }
  }
  return out;
}

}  // namespace ddlsim
