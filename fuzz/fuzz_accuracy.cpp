// libFuzzer harness: arbitrary bytes as a recorded accuracy file (`ddlsim validate
// --check FILE`), checked against a fixed table. Only InputError may come out; an
// accepted file gives one line per regression, each naming the file.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/validation.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<ddlsim::Accuracy> table = {
      {"vtrain-multi", "3.6B (h 3072, 30 layers)", 26, 0, 0, 20, 0.17, 0.52, 0.87, true, 60},
      {"vtrain-multi", "all", 109, 1, 1, 90, 0.10, 0.52, 0.62, true, 300},
  };
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const std::string& line : ddlsim::accuracy_regressions(table, ddlsim::parse_json(text, "acc.json"), "acc.json")) {
      if (line.find("vtrain-multi / ") != 0) __builtin_trap();
    }
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
