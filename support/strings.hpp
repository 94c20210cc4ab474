// Small string helpers shared by input validation.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim {

/// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF).
bool valid_utf8(std::string_view s);

/// Columns `s` takes on a terminal: one per code point of UTF-8, two for East Asian wide
/// and fullwidth characters and emoji, none for combining marks, zero-width characters
/// and variation selectors (a byte that is not valid UTF-8 counts one).
std::size_t display_width(std::string_view s);

/// `text` followed by spaces up to `width` columns (display_width; printf's %-*s pads
/// by bytes, which misaligns names with accents or CJK); longer text stays whole.
std::string padded(std::string_view text, std::size_t width);

/// Edit distance (insertions, deletions, substitutions, neighbour transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// " (did you mean 'x'?)" for the first candidate that starts with `given` ("h100" ->
/// "h100-sxm"), else that ends in it after a dash ("ndr" -> "ib-ndr"), else that `given`
/// extends after '_' or '-' ("seq_len" -> "seq"), else for the closest one when it is
/// close enough to be a plausible typo, otherwise "".
std::string did_you_mean(std::string_view given, std::span<const std::string> candidates);

/// A CSV cell of text: in double quotes, its own quotes doubled.
std::string csv_quoted(std::string_view text);

/// printf into a string of whatever length the result has (table rows whose names are
/// long: a fixed buffer would cut them).
std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

/// The cells of one CSV line: split at commas outside double quotes, the quotes removed
/// (a doubled quote inside them is one quote, as csv_quoted writes it) and a trailing
/// carriage return dropped. An empty line is one empty cell.
std::vector<std::string> csv_fields(std::string_view line);

/// A data row of a CSV file and its line number (1: the header).
struct CsvRow {
  std::size_t line = 0;
  std::vector<std::string> fields;
};

/// The rows of a CSV text whose first line must be `header` (after a byte-order mark, as
/// spreadsheets write one): blank lines skipped, every other row as many fields as the
/// header. Throws InputError "<source>:<line>: ..." for another header, a quote left
/// open, or a row of another width.
std::vector<CsvRow> csv_rows(std::string_view text, const std::string& source, const std::vector<std::string>& header);

/// The text as a positive finite decimal number ("2.5", "1e-3"), all of it: no sign,
/// space, hexadecimal, unit or trailing text; nullopt otherwise.
std::optional<double> positive_number(const std::string& text);
/// A step time in seconds as a CSV gives it: positive_number from a microsecond to about
/// 116 days (1e-6 to 1e7); outside that, a misplaced unit, not a step.
std::optional<double> step_seconds(const std::string& text);
/// The shortest text that reads back as `v` (12.2, not 12.199999999999999).
std::string shortest_text(double v);

/// `value` rounded to `decimals` places, a result of zero always +0, so that a printed
/// "%+.1f" of -0.04 reads +0.0, not -0.0.
double rounded_for_print(double value, int decimals);

}  // namespace ddlsim
