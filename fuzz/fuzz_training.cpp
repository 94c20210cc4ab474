// libFuzzer harness: arbitrary bytes as a training scenario (a preset cluster, a
// transformer or a CNN, Megatron-style or SBP plans). Validation may reject them (InputError); a scenario that
// passes is lowered and replayed when it is small enough to replay quickly (at most 64
// accelerators and 32 micro-batches per step), and both report formats are printed.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/training.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json doc = ddlsim::parse_json(text, "fuzz.json");
    if (!ddlsim::is_training_scenario(doc)) return 0;
    const ddlsim::TrainingScenario s = ddlsim::read_training_scenario(doc, "");
    if (s.cluster.accelerators().size() > 64 || s.model.layers > 64) return 0;
    std::vector<ddlsim::TrainingReport> reports;
    for (const auto& t : s.strategies) {
      if ((t.sbp ? t.sbp->micro_batches : t.plan.micro_batches()) > 32) continue;
      reports.push_back(ddlsim::run_training_strategy(s, t));
    }
    std::ostringstream out;
    ddlsim::print_training_table(out, s, reports);
    ddlsim::print_training_json(out, s, reports);
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
