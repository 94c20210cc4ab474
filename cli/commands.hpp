// The subcommands of `ddlsim`, each taking its arguments after the command word.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ddlsim {

/// Inside a catch (...) block: writes the exception in flight as one line
/// "ddlsim COMMAND: ..." and returns its exit status (2 for input errors, 1 otherwise).
int exit_for_current_exception(const char* command, std::ostream& err);

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int collective_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int workload_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int search_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int merge_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int topology_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ddlsim
