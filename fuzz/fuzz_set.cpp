// libFuzzer harness: arbitrary bytes as `--set` expressions (one per line, at most 8)
// applied to the embedded default scenario, then validated and replayed. As for
// scenario files, only InputError may come out.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exercise.hpp"
#include "scenarios/default_scenario.hpp"
#include "support/input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> sets;
  for (std::size_t start = 0; start <= text.size() && sets.size() < 8;) {
    const auto end = text.find('\n', start);
    sets.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  try {
    const auto doc = ddlsim::scenario_document(std::string(ddlsim::kDefaultScenario), "default.json", sets);
    ddlsim::fuzz::exercise(ddlsim::read_scenario(doc));
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
