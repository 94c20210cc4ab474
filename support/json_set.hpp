// `--set PATH=VALUE`: override one field of a JSON document from the command line.
//
// PATH is dot-separated; a number selects an array element (`strategies.1.bucket_layers`).
// VALUE is read as JSON when it parses (4, 2.5, true, {"a":1}) and as a string otherwise,
// so `--set name=my-run` needs no quotes; a whole number written as a float (1e2, 4.0)
// is that integer (100, 4), as a file's would be read. Missing objects on the way are created; the
// result is then validated like any scenario, so a wrong key or type is still caught.
// VALUE null removes the field or array element instead (as a JSON merge patch removes a
// member), so that the reader's default applies; it must exist. Below workload.hf_config
// (a HuggingFace config, where null is a value with meanings of its own) null is set as
// a value.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace ddlsim {

/// Applies one PATH=VALUE override; throws InputError naming the expression. The
/// ordered form keeps the document's key order (a value object's own keys come sorted).
void apply_set(nlohmann::json& doc, const std::string& expression);
void apply_set(nlohmann::ordered_json& doc, const std::string& expression);

/// Replaces every whole-valued float in `value` (below 2^53 in magnitude) by that
/// integer, so that 1e2 and 100 are the same value in a report.
void whole_numbers_as_integers(nlohmann::json& value);
void whole_numbers_as_integers(nlohmann::ordered_json& value);

}  // namespace ddlsim
