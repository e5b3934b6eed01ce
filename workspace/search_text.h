// Turning bytes found by file_search into text an agent can read: results travel as JSON
// strings, which must be valid UTF-8, and one minified line must not flood a reply.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::workspace {

bool valid_utf8(std::string_view s);

// Copies `s`, replacing each invalid UTF-8 sequence with U+FFFD.
std::string sanitize_utf8(std::string_view s);

// A line shortened to at most `max_bytes` (plus ellipsis marks "…" where it was cut), keeping
// the window around byte `focus` so a match deep inside a long line stays visible. Never splits
// a UTF-8 sequence; the result is sanitised.
std::string clip_line(std::string_view line, size_t focus, size_t max_bytes);

}  // namespace kiln::workspace
