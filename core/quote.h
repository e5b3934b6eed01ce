// Bounded echoes of client text in messages: an argument quoted in an error (a path, a cwd, a tool
// name) shows its start only, so a 10 MiB argument cannot become a 10 MiB error (the contract keeps
// every message far below 1 MiB).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr std::size_t kQuoteBytes = 200;      // of one argument quoted in a message
inline constexpr std::size_t kMessageBytes = 16384;  // of a whole error message

// `s` itself when it has at most `max` bytes, else its first bytes (cut at a UTF-8 character
// boundary) followed by "… (N bytes)".
inline std::string bounded(std::string_view s, std::size_t max = kQuoteBytes) {
  if (s.size() <= max) return std::string(s);
  std::size_t cut = max;
  // Back up over continuation bytes so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  std::string out(s.substr(0, cut));
  out += "\xE2\x80\xA6 (";  // U+2026 HORIZONTAL ELLIPSIS
  out += std::to_string(s.size());
  out += " bytes)";
  return out;
}

}  // namespace kiln
