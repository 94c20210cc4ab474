#include "cli/options.hpp"

#include <ostream>

#include "cli/cli.hpp"

namespace po = boost::program_options;

namespace ddlsim {

std::optional<int> parse_command_options(const std::vector<std::string>& args, const po::options_description& d,
                                         const char* positional, const char* command, po::variables_map& vm,
                                         std::ostream& out, std::ostream& err, int positional_count) {
  po::positional_options_description pos;
  if (positional != nullptr) pos.add(positional, positional_count);
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "ddlsim " << command << ": " << e.what() << " (see 'ddlsim " << command << " --help')\n";
    return kExitBadInput;
  }
  if (vm.count("help")) {
    out << d << "\n";
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace ddlsim
