// Header-field text helpers shared by the stdio framing and the HTTP layers: optional whitespace
// trimming and ASCII case-insensitive comparison, which HTTP and LSP-style headers both need.
#pragma once

#include <algorithm>
#include <string_view>

namespace kiln {

// Strips spaces and tabs at both ends, and a trailing CR (a header line split on LF alone).
inline std::string_view trim_header_space(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Case-insensitive for ASCII letters only, whatever the locale.
inline bool ascii_iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

}  // namespace kiln
