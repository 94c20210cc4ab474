// Reading user JSON with checks that name the path of every problem.
//
// A JsonObject is a view of one JSON object at a path such as `strategies.1`. Each getter
// checks the type and range of one field and throws InputError with a message such as
//   workload.layers: expected a positive integer, got "x"
// and finish() rejects any key that no getter asked for, so a misspelt optional field is
// an error instead of a silently ignored line.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ddlsim {

class JsonObject;

class JsonArray {
 public:
  JsonArray(const nlohmann::json& value, std::string path);
  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] JsonObject object(std::size_t i) const;
  [[nodiscard]] const nlohmann::json& at(std::size_t i) const;
  /// Every element as an integer from lo to hi; otherwise InputError
  /// "<path>.<i>: expected <what>, got <value>".
  [[nodiscard]] std::vector<int> ints(int lo, int hi, const std::string& what) const;
  /// Element i as one of `choices`; otherwise InputError naming "<path>.<i>".
  [[nodiscard]] std::string choice(std::size_t i, const std::vector<std::string>& choices) const;

 private:
  const nlohmann::json* value_;
  std::string path_;
};

class JsonObject {
 public:
  /// Throws InputError unless `value` is an object. An empty path names the document root.
  JsonObject(const nlohmann::json& value, std::string path);

  [[nodiscard]] bool has(const std::string& key) const;
  [[nodiscard]] std::string field_path(const std::string& key) const;
  [[nodiscard]] const std::string& path() const { return path_; }

  // Required fields: a missing key is an error.
  std::string string(const std::string& key);
  /// A name that reports print: a non-empty string without control characters (a
  /// newline or an escape would break a table, a CSV or the terminal).
  std::string name(const std::string& key);
  std::int64_t positive_int(const std::string& key);
  /// A finite number from lo to hi inclusive. Every physical quantity has such a range,
  /// so that no input can overflow a simulated time to infinity. (hi = infinity: any
  /// finite number from lo, for figures that are no physical quantity.)
  double number(const std::string& key, double lo, double hi);
  bool boolean(const std::string& key);
  /// A string that must be one of `choices`.
  std::string choice(const std::string& key, const std::vector<std::string>& choices);
  JsonObject object(const std::string& key);
  JsonArray array(const std::string& key);
  /// The value as it is, of any type, for a field whose reader takes JSON of its own.
  const nlohmann::json& value(const std::string& key) { return at(key); }
  /// The whole object, as it is (its keys, for a reader that refuses some by name).
  [[nodiscard]] const nlohmann::json& raw() const { return *value_; }

  // Optional fields with a documented default.
  std::string string_or(const std::string& key, const std::string& fallback);
  std::int64_t positive_int_or(const std::string& key, std::int64_t fallback);
  double number_or(const std::string& key, double lo, double hi, double fallback);
  std::string choice_or(const std::string& key, const std::vector<std::string>& choices, const std::string& fallback);
  bool boolean_or(const std::string& key, bool fallback);

  /// Declares an optional key as known without reading it, so that finish() accepts it
  /// and suggests it for near misses.
  void known(const std::string& key) { read_.insert(key); }

  /// Rejects every key no getter has read (with a "did you mean" for near misses).
  void finish() const;

 private:
  const nlohmann::json& at(const std::string& key);
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

  const nlohmann::json* value_;
  std::string path_;
  std::set<std::string> read_;
};

/// The whole content of a file the user named; InputError "cannot read <what> <path>:
/// ..." when it cannot be read (missing, a directory, unreadable).
std::string read_input_file(const std::string& path, const std::string& what);

/// Parses JSON text, turning syntax errors into InputError naming `source` and the
/// line and column; a key given twice in one object or nesting deeper than 64 levels is
/// an InputError too (check_json).
nlohmann::json parse_json(const std::string& text, const std::string& source);

/// The checks parse_json makes beyond the syntax, in one pass that builds nothing (for
/// text parsed into another JSON type): InputError naming `source` for a repeated key
/// or too deep a nesting; false if the text is not JSON at all.
bool check_json(const std::string& text, const std::string& source);

/// A JSON value shown in an error message, shortened to about 40 characters.
std::string shown(const nlohmann::json& value);

}  // namespace ddlsim
