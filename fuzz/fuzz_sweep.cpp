// libFuzzer harness: the inputs of `ddlsim sweep` and `ddlsim merge`. The bytes up to
// the first newline are a --vary expression, the rest one or two sweep parts (split at
// a line "--") merged as `ddlsim merge` would, then written as CSV and as the table. Only
// InputError may come out; a parsed --vary has a path and no empty value, and a merged
// sweep has its rows in point order.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/sweep.hpp"
#include "support/input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = text.find('\n');
  try {
    const ddlsim::Vary v = ddlsim::parse_vary(text.substr(0, nl));
    if (v.path.empty() || v.values.empty()) __builtin_trap();
    for (const std::string& value : v.values) {
      if (value.empty()) __builtin_trap();
    }
  } catch (const ddlsim::InputError&) {
  }
  if (nl == std::string::npos) return 0;
  const std::string rest = text.substr(nl + 1);
  std::vector<std::pair<std::string, std::string>> parts;
  const std::size_t split = rest.find("\n--\n");
  parts.emplace_back("a.json", rest.substr(0, split));
  if (split != std::string::npos) parts.emplace_back("b.json", rest.substr(split + 4));
  try {
    const nlohmann::ordered_json merged = ddlsim::merge_sweep_parts(parts);
    std::size_t last = 0;
    for (const auto& r : merged["rows"]) {
      if (r["point"].get<std::size_t>() < last) __builtin_trap();
      last = r["point"].get<std::size_t>();
    }
    std::ostringstream out;
    ddlsim::write_sweep_csv(out, merged);
    ddlsim::print_sweep_table(out, merged);
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
