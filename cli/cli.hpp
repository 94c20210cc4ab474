// The `ddlsim` command line, as a function so that tests can run it in-process.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ddlsim {

/// Exit statuses of the ddlsim command.
enum ExitStatus : int {
  kExitOk = 0,
  kExitFailure = 1,  // an output file could not be written, or an internal error
  kExitBadInput = 2, // invalid command line, scenario or other input
};

/// Runs `ddlsim args...` (args excludes the program name), writing to out and err.
int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ddlsim
