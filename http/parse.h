// The small parsers of HTTP request pieces (request-target, query, form, cookie, Basic credentials,
// ETag lists, byte ranges), kept apart from any router so each can be tested and fuzzed on its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::server::http {

// Percent-decodes once; nullopt for a malformed escape. `plus_as_space` for form bodies.
std::optional<std::string> percent_decode(std::string_view s, bool plus_as_space = false);

struct Target {
  std::string raw_path;               // as sent, before decoding (for redirects)
  std::string query;                  // raw, without the '?'
  std::vector<std::string> segments;  // decoded; no empty, ".", ".." or slash-carrying segment
  bool trailing_slash = false;
};

// Splits and decodes a request-target. On refusal returns the reason (the caller answers 400):
// NUL or control bytes, backslashes, an encoded slash inside a segment, "." / ".." or empty
// segments, a malformed escape. Nothing is normalised.
std::optional<Target> parse_target(std::string_view target, std::string* why);

// The decoded value of the first `name` parameter in a raw query string (empty if absent).
std::optional<std::string> query_param(std::string_view query, std::string_view name);
// The raw query without any `name` parameter.
std::string query_without(std::string_view query, std::string_view name);

// application/x-www-form-urlencoded; later duplicates are ignored.
std::map<std::string, std::string> parse_form(std::string_view body);

std::optional<std::string> cookie_value(std::string_view cookie_header, std::string_view name);
// The password of an `Authorization: Basic` header (the user name is ignored).
std::optional<std::string> basic_password(std::string_view authorization);

// If-None-Match semantics: weak comparison, "*" matches anything.
bool etag_matches(std::string_view if_none_match, std::string_view etag);

struct ByteRange {
  enum Kind { whole, partial, unsatisfiable } kind = whole;
  std::uint64_t first = 0;
  std::uint64_t length = 0;
};
// A single `bytes=a-b`, `a-` or `-n` range; anything else (several ranges, another unit, bad
// syntax) is ignored, which RFC 9110 allows, and the whole file is sent.
ByteRange parse_range(std::string_view header, std::uint64_t size);

// Characters a cookie value may carry unquoted (RFC 6265 cookie-octet).
bool cookie_safe(std::string_view v);

}  // namespace kiln::server::http
