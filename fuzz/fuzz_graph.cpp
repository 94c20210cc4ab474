// libFuzzer harness: arbitrary bytes as a custom task graph (`ddlsim run` on a file with
// "tasks"). Validation may reject them (InputError); a graph that passes is replayed and
// reported, when its cluster is small enough to build and replay quickly (a GPU preset
// of at most 4 servers, at most 256 tasks).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/task_graph_scenario.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json doc = ddlsim::parse_json(text, "fuzz.json");
    if (!ddlsim::is_task_graph_scenario(doc)) return 0;
    if (doc.contains("cluster") && doc["cluster"].is_object()) {
      const auto& c = doc["cluster"];
      if (c.contains("dims") || c.contains("pods")) return 0;
      if (c.contains("nodes") && !(c["nodes"].is_number_integer() && c["nodes"].get<std::int64_t>() <= 4)) return 0;
      if (c.contains("preset") && c["preset"].is_string() && c["preset"].get<std::string>().rfind("tpu", 0) == 0) return 0;
      if (c.contains("preset") && c["preset"] == "gb200-nvl72") return 0;
    }
    if (doc["tasks"].is_array() && doc["tasks"].size() > 256) return 0;
    std::ostringstream out;
    ddlsim::TaskGraphRunOptions o;
    ddlsim::run_task_graph_scenario(doc, o, out);
    o.json = true;
    ddlsim::run_task_graph_scenario(doc, o, out);
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
