// libFuzzer harness: arbitrary bytes as a HuggingFace config.json. Reading may reject them
// (InputError); a config that passes is built into an operator graph for one sequence
// (when small enough to build quickly) and every operator is priced on an H100, and
// every cost must be finite and non-negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/compute_model.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/catalog.hpp"
#include "workloads/hf_config.hpp"
#include "workloads/presets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ddlsim::Catalog catalog = ddlsim::Catalog::builtin();
  static const ddlsim::ComputeModel model(catalog.accelerator("h100-sxm"));
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ddlsim::TransformerConfig c = ddlsim::read_hf_config(ddlsim::parse_json(text, "fuzz.json"), "fuzz.json");
    if (c.layers > 256) return 0;  // building is linear in layers; keep one input fast
    const ddlsim::OperatorGraph g = ddlsim::build_transformer_with(c, ddlsim::WorkloadOptions{});
    for (const auto& op : g.ops()) {
      const double f = model.time(op, ddlsim::Pass::kForward).value(), b = model.time(op, ddlsim::Pass::kBackward).value();
      if (!(std::isfinite(f) && std::isfinite(b) && f >= 0 && b >= 0)) __builtin_trap();
    }
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
