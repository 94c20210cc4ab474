// The subcommands of `ddlsim`, each taking its arguments after the command word.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ddlsim {

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int topology_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ddlsim
