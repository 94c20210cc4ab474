// `--set PATH=VALUE`: override one field of a JSON document from the command line.
//
// PATH is dot-separated; a number selects an array element (`strategies.1.bucket_layers`).
// VALUE is read as JSON when it parses (4, 2.5, true, {"a":1}) and as a string otherwise,
// so `--set name=my-run` needs no quotes. Missing objects on the way are created; the
// result is then validated like any scenario, so a wrong key or type is still caught.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace ddlsim {

/// Applies one PATH=VALUE override; throws InputError naming the expression.
void apply_set(nlohmann::json& doc, const std::string& expression);

}  // namespace ddlsim
