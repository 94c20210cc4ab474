// `ddlsim sweep` and `ddlsim merge` (cli/sweep_command.cpp): what their inputs are read
// with, exposed for the fuzz harness.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim {

/// One --vary PATH=V1,V2,...: the values as given.
struct Vary {
  std::string path;
  std::vector<std::string> values;
};

/// Splits the values at the commas outside brackets, braces and quotes, so that a JSON
/// array or object stays one value. Throws InputError naming --vary.
Vary parse_vary(const std::string& expression);

/// --shard K/N: part k of n, 1-based.
struct Shard {
  std::size_t k = 1, n = 1;
};

/// "K/N" with 1 <= K <= N <= 100000. Throws InputError naming --shard.
Shard parse_shard(const std::string& text);

/// The sweep that the parts (file name, its text as `ddlsim sweep --shard K/N --json`
/// wrote it) make up together: rows in point order, no "shard". Throws InputError naming
/// the part for anything else: not such a file, parts of different sweeps, a part
/// missing or given twice, a row of the wrong part or without what the table shows.
nlohmann::ordered_json merge_sweep_parts(const std::vector<std::pair<std::string, std::string>>& parts);

/// The sweep's rows as CSV (its columns, in order), and as the table on stdout.
void write_sweep_csv(std::ostream& out, const nlohmann::ordered_json& sweep);
void print_sweep_table(std::ostream& out, const nlohmann::ordered_json& sweep);

}  // namespace ddlsim
