// libFuzzer harness: arbitrary bytes as an explicit topology file, read against the
// built-in catalog, described, and written back. Only InputError may come out.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/explicit.hpp"
#include "topology/stats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ddlsim::Catalog catalog = ddlsim::Catalog::builtin();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto doc = ddlsim::parse_json(text, "fuzz.json");
    const ddlsim::Cluster c = ddlsim::read_explicit_topology(doc, catalog, "fuzz.json");
    (void)ddlsim::topology_stats(c);
    const std::string again = ddlsim::write_explicit_topology(c);
    const ddlsim::Cluster d = ddlsim::read_explicit_topology(nlohmann::json::parse(again), catalog, "again.json");
    if (ddlsim::write_explicit_topology(d) != again) __builtin_trap();  // the round trip must be exact
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
