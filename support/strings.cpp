#include "support/strings.hpp"

#include <algorithm>
#include <vector>

namespace ddlsim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view given, std::span<const std::string> candidates) {
  const std::string* best = nullptr;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(given, c);
    if (best == nullptr || d < best_d) {
      best = &c;
      best_d = d;
    }
  }
  // A typo: at most a third of the longer word changed (and at least one edit allowed).
  if (best == nullptr) return {};
  const std::size_t limit = std::max<std::size_t>(1, std::max(given.size(), best->size()) / 3);
  if (best_d > limit) return {};
  return " (did you mean '" + *best + "'?)";
}

}  // namespace ddlsim
