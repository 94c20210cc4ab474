// libFuzzer harness: arbitrary bytes as `--set` expressions (one per line, at most 8)
// applied to the embedded default scenario (a training scenario), then validated and,
// for strategies small enough to replay quickly (at most 16 accelerators, 16
// micro-batches, no ZeRO-3 over more than 8 replicas), replayed. As for scenario files,
// only InputError may come out.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/training.hpp"
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
    if (!ddlsim::is_training_scenario(doc)) {
      ddlsim::fuzz::exercise(ddlsim::read_scenario(doc));
      return 0;
    }
    const ddlsim::TrainingScenario s = ddlsim::read_training_scenario(doc, "");
    if (s.cluster.accelerators().size() > 16) return 0;
    for (const auto& t : s.strategies) {
      const bool big_zero3 = t.plan.dp_mode == ddlsim::DataParallelMode::kZero3 && t.plan.dp > 8;
      if (t.plan.micro_batches() <= 16 && !big_zero3) ddlsim::run_training_strategy(s, t);
    }
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
