#include "support/json_reader.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "support/input_error.hpp"
#include "support/strings.hpp"

namespace ddlsim {

std::string shown(const nlohmann::json& value) {
  // Containers are summarised rather than dumped: dumping recurses, and a value nested
  // a million levels deep would overflow the stack while reporting the error.
  if (value.is_array()) return value.empty() ? "[]" : "[...]";
  if (value.is_object()) return value.empty() ? "{}" : "{...}";
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

std::string read_input_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError("cannot read " + what + " " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + what + " " + path + ": no such file or not readable");
  // At most kMaxInputBytes, read in blocks, so that a device or pipe that never ends
  // (/dev/zero) is refused rather than read until memory runs out.
  constexpr std::size_t kMaxInputBytes = std::size_t{512} << 20;
  std::string text;
  std::vector<char> block(std::size_t{1} << 20);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    text.append(block.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) {
      throw InputError("cannot read " + what + " " + path + ": larger than 512 MiB, the most ddlsim reads");
    }
  }
  if (in.bad()) throw InputError("cannot read " + what + " " + path + ": read error");
  return text;
}

namespace {

// A pass over the text that builds nothing and checks what the JSON library lets
// through: a key given twice in one object (the library would silently keep the last)
// and nesting deeper than kMaxDepth (the library's serializer, used in reports,
// recurses). A SAX pass, linear in the text: the library's callback parser rescans a
// parent array after every object it closes, quadratic in an array of objects.
class JsonChecker : public nlohmann::json_sax<nlohmann::json> {
 public:
  static constexpr std::size_t kMaxDepth = 64;
  std::string problem;
  bool syntax_error = false;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return open();
  }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) problem = "key '" + k + "' appears twice in one object";
    return problem.empty();
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    keys_.emplace_back();  // unused: keeps keys_ in step with the nesting
    return open();
  }
  bool end_array() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    syntax_error = true;
    return false;
  }

 private:
  bool open() {
    if (++depth_ > kMaxDepth) problem = "nested more than " + std::to_string(kMaxDepth) + " levels deep";
    return problem.empty();
  }
  std::size_t depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

}  // namespace

bool check_json(const std::string& text, const std::string& source) {
  JsonChecker check;
  nlohmann::json::sax_parse(text, &check);
  if (!check.problem.empty()) throw InputError(source + ": " + check.problem);
  return !check.syntax_error;
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  check_json(text, source);  // a syntax error: the parse below says where
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);  // the checks passed, or it throws the syntax error
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors, and numbers beyond the range of a double (out_of_range.406).
    std::string what = e.what();
    const auto at = what.find("] ");
    if (at != std::string::npos) what = what.substr(at + 2);
    throw InputError(source + ": invalid JSON: " + what);
  }
  return doc;
}

JsonArray::JsonArray(const nlohmann::json& value, std::string path) : value_(&value), path_(std::move(path)) {
  if (!value.is_array()) throw InputError(path_ + ": expected an array, got " + shown(value));
}

std::size_t JsonArray::size() const { return value_->size(); }

const nlohmann::json& JsonArray::at(std::size_t i) const { return (*value_)[i]; }

namespace {
// `v` (at `path`) as one of `choices`; otherwise InputError "<path>: expected one of ...".
std::string one_of(const nlohmann::json& v, const std::string& path, const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + ("\"" + c + "\"");
  const std::string s = v.is_string() ? v.get<std::string>() : std::string();
  if (v.is_string()) {
    for (const auto& c : choices) {
      if (c == s) return s;
    }
  }
  throw InputError(path + ": expected one of " + list + ", got " + shown(v) + (v.is_string() ? did_you_mean(s, choices) : ""));
}
}  // namespace

std::string JsonArray::choice(std::size_t i, const std::vector<std::string>& choices) const {
  return one_of(at(i), path_ + "." + std::to_string(i), choices);
}

namespace {
std::optional<std::int64_t> as_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) return {};
    return v.get<std::int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
  }
  return {};
}
}  // namespace

std::vector<int> JsonArray::ints(int lo, int hi, const std::string& what) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < size(); ++i) {
    const nlohmann::json& v = at(i);
    const auto n = as_integer(v);  // whole-valued numbers such as 12.0 too, as elsewhere
    if (!n || *n < lo || *n > hi) throw InputError(path_ + "." + std::to_string(i) + ": expected " + what + ", got " + shown(v));
    out.push_back(static_cast<int>(*n));
  }
  return out;
}

JsonObject JsonArray::object(std::size_t i) const {
  return JsonObject((*value_)[i], path_ + "." + std::to_string(i));
}

JsonObject::JsonObject(const nlohmann::json& value, std::string path) : value_(&value), path_(std::move(path)) {
  if (!value.is_object()) {
    throw InputError((path_.empty() ? std::string("the document") : path_) + ": expected an object, got " + shown(value));
  }
}

bool JsonObject::has(const std::string& key) const { return value_->contains(key); }

std::string JsonObject::field_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void JsonObject::fail(const std::string& key, const std::string& expected) const {
  throw InputError(field_path(key) + ": expected " + expected + ", got " + shown((*value_)[key]));
}

const nlohmann::json& JsonObject::at(const std::string& key) {
  read_.insert(key);
  auto it = value_->find(key);
  if (it == value_->end()) {
    // A near miss among the keys present is most likely the user's spelling of this one.
    std::string hint;
    for (const auto& item : value_->items()) {
      const std::vector<std::string> one{key};
      if (item.key() != key && !did_you_mean(item.key(), one).empty()) {
        hint = " (found '" + item.key() + "': a misspelling?)";
        break;
      }
    }
    throw InputError(field_path(key) + ": missing (a required field)" + hint);
  }
  return *it;
}


std::string JsonObject::string(const std::string& key) {
  const auto& v = at(key);
  if (!v.is_string()) fail(key, "a string");
  return v.get<std::string>();
}

std::string JsonObject::name(const std::string& key) {
  std::string text = string(key);
  if (text.empty()) throw InputError(field_path(key) + ": expected a non-empty string, got \"\"");
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "%04X", static_cast<unsigned>(c));
      throw InputError(field_path(key) + ": a control character (U+" + code + ") in the name; use printable characters");
    }
  }
  return text;
}

std::int64_t JsonObject::positive_int(const std::string& key) {
  const auto i = as_integer(at(key));
  if (!i || *i <= 0) fail(key, "a positive integer");
  return *i;
}

double JsonObject::number(const std::string& key, double lo, double hi) {
  const auto& v = at(key);
  const double d = v.is_number() ? v.get<double>() : 0.0;
  if (!v.is_number() || !(d >= lo && d <= hi)) {
    char range[96];
    if (std::isinf(hi)) std::snprintf(range, sizeof range, "a number of at least %g", lo);
    else std::snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
    fail(key, range);
  }
  return d;
}

bool JsonObject::boolean(const std::string& key) {
  const auto& v = at(key);
  if (!v.is_boolean()) fail(key, "true or false");
  return v.get<bool>();
}

std::string JsonObject::choice(const std::string& key, const std::vector<std::string>& choices) {
  return one_of(at(key), field_path(key), choices);
}

JsonObject JsonObject::object(const std::string& key) { return JsonObject(at(key), field_path(key)); }

JsonArray JsonObject::array(const std::string& key) { return JsonArray(at(key), field_path(key)); }

std::string JsonObject::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : (read_.insert(key), fallback);
}
std::int64_t JsonObject::positive_int_or(const std::string& key, std::int64_t fallback) {
  return has(key) ? positive_int(key) : (read_.insert(key), fallback);
}
std::string JsonObject::choice_or(const std::string& key, const std::vector<std::string>& choices,
                                  const std::string& fallback) {
  return has(key) ? choice(key, choices) : (read_.insert(key), fallback);
}
double JsonObject::number_or(const std::string& key, double lo, double hi, double fallback) {
  return has(key) ? number(key, lo, hi) : (read_.insert(key), fallback);
}
bool JsonObject::boolean_or(const std::string& key, bool fallback) {
  return has(key) ? boolean(key) : (read_.insert(key), fallback);
}

void JsonObject::finish() const {
  const std::vector<std::string> known(read_.begin(), read_.end());
  for (const auto& item : value_->items()) {
    if (read_.count(item.key()) == 0) {
      throw InputError(field_path(item.key()) + ": unknown key" + did_you_mean(item.key(), known));
    }
  }
}

}  // namespace ddlsim
