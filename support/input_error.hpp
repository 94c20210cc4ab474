// InputError: the user's input is wrong. Its message is one line that names where
// (a JSON path such as `workload.layers`, an option such as `--set`) and what is wrong.
// The command line turns it into that line on stderr and exit status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace ddlsim {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

// TooLargeError: the input is well formed but its replay would outgrow memory (a task or
// transfer limit). The command line treats it as any InputError; a search skips the plan.
class TooLargeError : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace ddlsim
