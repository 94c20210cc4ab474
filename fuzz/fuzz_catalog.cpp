// libFuzzer harness: arbitrary bytes as a catalog patch merged into the built-in catalog.
// Only InputError may come out, and a failed merge must leave the catalog as it was.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "topology/catalog.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string builtin = ddlsim::Catalog::builtin().to_json();
  const std::string text(reinterpret_cast<const char*>(data), size);
  ddlsim::Catalog c = ddlsim::Catalog::builtin();
  try {
    c.merge(ddlsim::parse_json(text, "fuzz.json"), "fuzz.json");
    for (const auto& id : c.accelerator_ids()) (void)c.link(c.accelerator(id).scale_up);
  } catch (const ddlsim::InputError&) {
    if (c.to_json() != builtin) __builtin_trap();  // a failed merge changed the catalog
  }
  return 0;
}
