// file:// URIs for workspace files (RFC 8089): percent-encoding both ways.
#include <cctype>
#include <fmt/format.h>

#include "mcp/methods.h"

namespace kiln::server {

std::string file_uri(const std::string& absolute_path) {
  std::string out = "file://";
  for (unsigned char c : absolute_path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string path_from_file_uri(const std::string& uri) {
  std::string rest;
  if (uri.starts_with("file:///")) {
    rest = uri.substr(7);
  } else if (uri.starts_with("file://localhost/")) {
    rest = uri.substr(16);
  } else {
    return {};
  }
  std::string out;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    char c = rest[i];
    if (c == '?' || c == '#') break;
    if (c == '%' && i + 2 < rest.size() && std::isxdigit(static_cast<unsigned char>(rest[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(rest[i + 2]))) {
      char decoded = char(std::stoi(rest.substr(i + 1, 2), nullptr, 16));
      if (decoded == '\0') return {};
      out += decoded;
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace kiln::server
