#include "cli/options.hpp"

#include <filesystem>
#include <ostream>
#include <stdexcept>

#include "cli/cli.hpp"
#include "support/atomic_file.hpp"
#include "support/input_error.hpp"
#include "support/strings.hpp"

namespace po = boost::program_options;

namespace ddlsim {

std::string option_error(const po::error& e, const po::options_description& d) {
  std::string message = e.what();
  if (const auto* unknown = dynamic_cast<const po::unknown_option*>(&e)) {
    std::vector<std::string> names;
    for (const auto& o : d.options()) {
      if (!o->long_name().empty()) names.push_back("--" + o->long_name());
    }
    message += did_you_mean(unknown->get_option_name(), names);
  }
  return message;
}

std::string stray_argument_error(const std::vector<std::string>& args, const po::options_description& d,
                                 const char* positional, int positional_count) {
  // Boost names no argument here: parse again with a catch-all for the strays, and name
  // the first (often a file whose option came after it, or was left out).
  po::options_description all;
  all.add(d).add_options()("\x01stray", po::value<std::vector<std::string>>());
  po::positional_options_description every;
  if (positional != nullptr) every.add(positional, positional_count);
  every.add("\x01stray", -1);
  po::variables_map strays;
  std::string first = "?";
  try {
    po::store(po::command_line_parser(args).options(all).positional(every).style(kOptionStyle).run(), strays);
    if (strays.count("\x01stray")) first = strays["\x01stray"].as<std::vector<std::string>>().front();
  } catch (const po::error&) {
  }
  return "unexpected argument '" + first + "': " +
         (positional != nullptr ? std::string("one more than the ") + positional + " it takes"
                                : std::string("it takes none without an option")) +
         "; every other file follows the option it is for";
}

std::optional<int> parse_command_options(const std::vector<std::string>& args, const po::options_description& d,
                                         const char* positional, const char* command, po::variables_map& vm,
                                         std::ostream& out, std::ostream& err, int positional_count) {
  po::positional_options_description pos;
  if (positional != nullptr) pos.add(positional, positional_count);
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).style(kOptionStyle).run(), vm);
    po::notify(vm);
  } catch (const po::too_many_positional_options_error&) {
    err << "ddlsim " << command << ": " << stray_argument_error(args, d, positional, positional_count) << " (see 'ddlsim "
        << command << " --help')\n";
    return kExitBadInput;
  } catch (const po::error& e) {
    err << "ddlsim " << command << ": " << option_error(e, d) << " (see 'ddlsim " << command << " --help')\n";
    return kExitBadInput;
  }
  if (vm.count("help")) {
    out << d << "\n";
    return kExitOk;
  }
  return std::nullopt;
}

namespace {

std::filesystem::path resolved(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? std::filesystem::path(path) : full;
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) { return a == b || resolved(a) == resolved(b); }

void check_outputs(const std::vector<std::pair<std::string, std::optional<std::string>>>& outputs,
                   const std::vector<std::string>& inputs, bool to_stdout) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].second) continue;
    const std::string& a = *outputs[i].second;
    if (a == "-" && !to_stdout) {
      throw InputError("--" + outputs[i].first + ": '-' (standard output) would mix with the report printed there; give a file name");
    }
    try {
      check_writable(a);
    } catch (const std::runtime_error& e) {
      throw InputError("--" + outputs[i].first + ": " + e.what());
    }
    for (const std::string& in : inputs) {
      if (a != "-" && same_file(a, in)) {
        throw InputError("--" + outputs[i].first + ": " + a + " is this command's input too" + (a == in ? "" : " (" + in + ")") +
                         "; writing it would destroy it, so give the output another name");
      }
    }
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      if (!outputs[j].second) continue;
      const std::string& b = *outputs[j].second;
      if (same_file(a, b)) {
        throw InputError("--" + outputs[i].first + " and --" + outputs[j].first + " name the same file, " + a +
                         "; give them different names");
      }
    }
  }
}

void check_outputs(const po::variables_map& vm, const std::vector<std::string>& flags, const std::vector<std::string>& inputs,
                   bool to_stdout) {
  std::vector<std::pair<std::string, std::optional<std::string>>> outputs;
  for (const std::string& f : flags) {
    outputs.emplace_back(f, vm.count(f) ? std::optional<std::string>(vm[f].as<std::string>()) : std::nullopt);
  }
  check_outputs(outputs, inputs, to_stdout);
}

}  // namespace ddlsim
