// Reading a subcommand's options: the one shared shape of every `ddlsim COMMAND`.
#pragma once

#include <boost/program_options.hpp>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim {

/// Long options in full only: Boost's default guessing took "--net" for "--network" (and
/// would silently change meaning when an option is added that shares the prefix).
inline constexpr int kOptionStyle =
    boost::program_options::command_line_style::default_style & ~boost::program_options::command_line_style::allow_guessing;

/// A parse error's message; an unknown option gains "(did you mean '--x'?)" from `d`.
std::string option_error(const boost::program_options::error& e, const boost::program_options::options_description& d);
/// For boost's too_many_positional_options_error, which names no argument: the first
/// argument no option takes, named ("unexpected argument 'x.json': ...").
std::string stray_argument_error(const std::vector<std::string>& args,
                                 const boost::program_options::options_description& d, const char* positional,
                                 int positional_count);

/// Parses `args` against `d` (with `positional`, when given, as the name of the
/// positional arguments: at most `positional_count` of them, -1 for any number). On a parse error writes "ddlsim COMMAND: ... (see 'ddlsim
/// COMMAND --help')" to err and returns the bad-input status; on --help prints `d` to
/// out and returns success; otherwise fills vm and returns nullopt.
std::optional<int> parse_command_options(const std::vector<std::string>& args,
                                         const boost::program_options::options_description& d, const char* positional,
                                         const char* command, boost::program_options::variables_map& vm,
                                         std::ostream& out, std::ostream& err, int positional_count = 1);

/// Whether two paths name one file (the same text, or the same file once resolved).
[[nodiscard]] bool same_file(const std::string& a, const std::string& b);

/// Checks a command's output options before its work: throws InputError ("--a: cannot
/// write PATH: no folder /x") when one cannot be written (check_writable), or ("--a and
/// --b name the same file, PATH; give them different names") when two of those present
/// in vm name one file (as written, or after making them absolute and resolving links:
/// "t.json", "./t.json", a link to it), or one names a file among `inputs` (the command
/// would overwrite what it reads), or one is "-" (standard output) where the command
/// prints its report there too (`to_stdout` false).
void check_outputs(const boost::program_options::variables_map& vm, const std::vector<std::string>& flags,
                   const std::vector<std::string>& inputs = {}, bool to_stdout = false);
/// The same over (flag, path) pairs, a pair without a path skipped.
void check_outputs(const std::vector<std::pair<std::string, std::optional<std::string>>>& outputs,
                   const std::vector<std::string>& inputs = {}, bool to_stdout = false);

}  // namespace ddlsim
