#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "support/atomic_file.hpp"

int main(int argc, char** argv) {
  // Ctrl-C or a scheduler's SIGTERM during a long sweep leaves no *.tmp.* files behind.
  ddlsim::remove_temporaries_on_signals();
  std::vector<std::string> args(argv + 1, argv + argc);
  return ddlsim::cli_main(args, std::cout, std::cerr);
}
