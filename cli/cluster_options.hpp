// The command-line options that name a cluster (a preset with its options, or an
// explicit topology file, plus catalog patches), shared by the commands that need one.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "topology/catalog.hpp"
#include "topology/cluster.hpp"

namespace boost::program_options {
class options_description;
class variables_map;
}  // namespace boost::program_options

namespace ddlsim {

/// Adds --preset, --nodes, --dims, --pods, --accelerator, --nic, --nics-per-node, --catalog and --file.
void add_cluster_options(boost::program_options::options_description& d);

struct LoadedCluster {
  Catalog catalog = Catalog::builtin();
  Cluster cluster;
  std::string source;     // the preset name or the file
  bool from_file = false;
  std::optional<int> nodes;
  /// A scenario file's simulation.network ("flow" or "analytical"), when it gives one.
  std::optional<std::string> scenario_network;
  /// "dgx-h100, 4 nodes" or the file name.
  [[nodiscard]] std::string title() const;
};

/// Parses a command line with options `d`, a first positional argument going to --file.
/// Returns the exit status when the command should stop here (--help printed to `out`:
/// 0; a malformed command line, one line on `err`: 2), nullopt when it should go on.
std::optional<int> parse_cluster_command(const std::vector<std::string>& args,
                                         const boost::program_options::options_description& d, const char* command,
                                         boost::program_options::variables_map& vm, std::ostream& out, std::ostream& err);

/// Builds the cluster the options name and validates it. Throws InputError.
LoadedCluster load_cluster(const boost::program_options::variables_map& vm);

}  // namespace ddlsim
