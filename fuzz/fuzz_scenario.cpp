// libFuzzer harness: arbitrary bytes as a scenario file. Validation may reject them
// (InputError); anything else that escapes -- another exception, a crash, a sanitizer
// report, a hang -- is a bug.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "exercise.hpp"
#include "support/input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto doc = ddlsim::scenario_document(text, "fuzz.json", {});
    ddlsim::fuzz::exercise(ddlsim::read_scenario(doc));
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
