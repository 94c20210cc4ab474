#include "support/json_set.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <vector>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"

namespace ddlsim {

namespace {
template <class Json>
void integers_of_whole_numbers(Json& value) {
  if (value.is_number_float()) {
    const double d = value.template get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9007199254740992.0) value = static_cast<std::int64_t>(d);
  } else if (value.is_structured()) {
    for (auto& element : value) integers_of_whole_numbers(element);
  }
}
}  // namespace

void whole_numbers_as_integers(nlohmann::json& value) { integers_of_whole_numbers(value); }
void whole_numbers_as_integers(nlohmann::ordered_json& value) { integers_of_whole_numbers(value); }

namespace {
template <class Json>
void apply_set_to(Json& doc, const std::string& expression) {
  const auto eq = expression.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--set '" + expression + "': expected PATH=VALUE, e.g. strategies.0.bucket_layers=4");
  }
  const std::string path = expression.substr(0, eq);
  const std::string text = expression.substr(eq + 1);

  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // PATH=null removes the field (or array element), as a JSON merge patch (RFC 7386)
  // removes a member: the path must exist up to it, and creates nothing. Inside a
  // HuggingFace config, whose format gives null meanings of its own (q_lora_rank null:
  // no query latent), null is written as a value.
  const bool remove = text == "null" && path.rfind("workload.hf_config.", 0) != 0;
  Json* node = &doc;
  std::string walked;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (part.empty()) throw InputError("--set " + path + ": empty path element");
    const std::string here = walked.empty() ? part : walked + "." + part;
    if (node->is_array()) {
      std::size_t index = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (ec != std::errc() || end != part.data() + part.size()) {
        throw InputError("--set " + path + ": " + (walked.empty() ? "the scenario" : walked) +
                         " is an array; expected an index, got '" + part + "'");
      }
      if (index >= node->size()) {
        throw InputError("--set " + path + ": " + walked + " has " + std::to_string(node->size()) +
                         " elements, so index " + part + " does not exist");
      }
      if (remove && last) {
        node->erase(index);
        return;
      }
      node = &(*node)[index];
    } else if (node->is_object() || node->is_null()) {
      if (remove && !node->contains(part)) {
        throw InputError("--set " + path + "=null: " + (walked.empty() ? "the scenario" : walked) + " has no '" + part +
                         "' to remove");
      }
      if (remove && last) {
        node->erase(part);
        return;
      }
      node = &(*node)[part];
    } else {
      throw InputError("--set " + path + ": " + walked + " is a " + node->type_name() +
                       ", not an object or array");
    }
    walked = here;
  }
  if (nlohmann::json::accept(text)) {
    const nlohmann::json value = parse_json(text, "--set " + path);  // same checks as a file: depth, duplicates, range
    if constexpr (std::is_same_v<Json, nlohmann::json>) {
      *node = value;
    } else {
      *node = Json::parse(value.dump());
    }
    whole_numbers_as_integers(*node);
  } else {
    if (!valid_utf8(text)) throw InputError("--set " + path + ": the value is not valid UTF-8 text");
    *node = text;
  }
}
}  // namespace

void apply_set(nlohmann::json& doc, const std::string& expression) { apply_set_to(doc, expression); }
void apply_set(nlohmann::ordered_json& doc, const std::string& expression) { apply_set_to(doc, expression); }

}  // namespace ddlsim
