#include "support/strings.hpp"

#include "support/input_error.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ddlsim {

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and transpositions of
  // two neighbours ("bf61" for "bf16") each cost one.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), row(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(row);
  }
  return prev[m];
}

std::string did_you_mean(std::string_view given_text, std::span<const std::string> candidates) {
  // Every comparison ignores letter case ("NCCL" for "nccl", "H100" for "h100-sxm").
  const auto lower = [](std::string_view t) {
    std::string l(t);
    for (char& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return l;
  };
  const std::string given = lower(given_text);
  std::vector<std::string> lowered;
  lowered.reserve(candidates.size());
  for (const auto& c : candidates) lowered.push_back(lower(c));
  const auto suggest = [&](std::size_t i) { return " (did you mean '" + candidates[i] + "'?)"; };
  // The same name in other letter case.
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (lowered[i] == given && candidates[i] != given_text) return suggest(i);
  }
  // A candidate that starts with what was typed ("h100" for "h100-sxm") is the likeliest.
  if (given.size() >= 2) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const std::string& c = lowered[i];
      if (c.size() > given.size() && c.compare(0, given.size(), given) == 0) return suggest(i);
    }
    // One that ends in what was typed after a dash ("ib-ndr" for "ndr"): the short name.
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const std::string& c = lowered[i];
      if (c.size() > given.size() + 1 && c.compare(c.size() - given.size(), given.size(), given) == 0 &&
          c[c.size() - given.size() - 1] == '-') {
        return suggest(i);
      }
    }
    // One that what was typed extends with a suffix ("seq" for "seq_len", "vocab" for
    // "vocab_size"): another tool's spelling of the same field.
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const std::string& c = lowered[i];
      if (c.size() >= 2 && given.size() > c.size() + 1 && given.compare(0, c.size(), c) == 0 &&
          (given[c.size()] == '_' || given[c.size()] == '-')) {
        return suggest(i);
      }
    }
  }
  std::size_t best = candidates.size();
  std::size_t best_d = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::size_t d = edit_distance(given, lowered[i]);
    if (best == candidates.size() || d < best_d) {
      best = i;
      best_d = d;
    }
  }
  // A typo: at most a third of the longer word changed (and at least one edit allowed).
  if (best == candidates.size()) return {};
  const std::size_t limit = std::max<std::size_t>(1, std::max(given.size(), lowered[best].size()) / 3);
  if (best_d > limit) return {};
  return suggest(best);
}

std::string csv_quoted(std::string_view text) {
  std::string q = "\"";
  for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::optional<double> positive_number(const std::string& text) {
  // Decimal digits, a point and an exponent only: no sign, space, hexadecimal or words.
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return std::nullopt;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') {
      return std::nullopt;
    }
  }
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v;
}

std::optional<double> step_seconds(const std::string& text) {
  const std::optional<double> v = positive_number(text);
  if (!v || *v < 1e-6 || *v > 1e7) return std::nullopt;
  return v;
}

std::string shortest_text(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

std::vector<CsvRow> csv_rows(std::string_view text, const std::string& source, const std::vector<std::string>& header) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<CsvRow> rows;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    const std::string where = source + ":" + std::to_string(number);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (std::count(line.begin(), line.end(), '"') % 2 != 0) throw InputError(where + ": a quote is not closed");
    std::vector<std::string> fields = csv_fields(line);
    if (number == 1) {
      if (fields != header) {
        std::string names;
        for (const std::string& h : header) names += (names.empty() ? "" : ",") + h;
        throw InputError(where + ": expected the header " + names);
      }
      continue;
    }
    if (line.empty()) continue;
    if (fields.size() != header.size()) {
      throw InputError(where + ": expected " + std::to_string(header.size()) + " fields, got " + std::to_string(fields.size()));
    }
    rows.push_back({number, std::move(fields)});
  }
  if (number == 0) throw InputError(source + ": empty (expected the header first)");
  return rows;
}

std::vector<std::string> csv_fields(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> out{""};
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

namespace {

// The code point at s[i] and its length in bytes; a malformed byte is itself, one byte.
std::pair<char32_t, std::size_t> decode(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n <= 1 || i + n > s.size()) return {c, 1};
  char32_t cp = c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {c, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, n};
}

std::size_t columns(char32_t c) {
  if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x200B && c <= 0x200F) || (c >= 0xFE00 && c <= 0xFE0F) ||
      (c >= 0x1AB0 && c <= 0x1AFF) || (c >= 0x20D0 && c <= 0x20FF)) {
    return 0;
  }
  if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) || (c >= 0xAC00 && c <= 0xD7A3) ||
      (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
      (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) || (c >= 0x1F900 && c <= 0x1F9FF) ||
      (c >= 0x20000 && c <= 0x3FFFD)) {
    return 2;
  }
  return 1;
}

}  // namespace

std::size_t display_width(std::string_view s) {
  std::size_t w = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto [cp, n] = decode(s, i);
    w += columns(cp);
    i += n;
  }
  return w;
}

std::string padded(std::string_view text, std::size_t width) {
  std::string out(text);
  const std::size_t w = display_width(text);
  if (w < width) out.append(width - w, ' ');
  return out;
}

std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

double rounded_for_print(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  const double r = std::round(value * scale) / scale;
  return r == 0 ? 0.0 : r;
}

}  // namespace ddlsim
