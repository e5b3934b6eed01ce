// A small extension table; enough for source trees and static sites.
#include "http/mime_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

namespace kiln::server {

std::string_view mime_type_for(std::string_view path) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 38> kTable{{
      {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},   {"js", "text/javascript; charset=utf-8"},
      {"mjs", "text/javascript; charset=utf-8"}, {"json", "application/json"},
      {"map", "application/json"},          {"txt", "text/plain; charset=utf-8"},
      {"md", "text/markdown; charset=utf-8"}, {"csv", "text/csv; charset=utf-8"},
      {"xml", "application/xml"},           {"svg", "image/svg+xml"},
      {"png", "image/png"},                 {"jpg", "image/jpeg"},
      {"jpeg", "image/jpeg"},               {"gif", "image/gif"},
      {"webp", "image/webp"},               {"ico", "image/x-icon"},
      {"pdf", "application/pdf"},           {"wasm", "application/wasm"},
      {"woff", "font/woff"},                {"woff2", "font/woff2"},
      {"ttf", "font/ttf"},                  {"zip", "application/zip"},
      {"gz", "application/gzip"},           {"tar", "application/x-tar"},
      {"c", "text/x-c; charset=utf-8"},     {"h", "text/x-c; charset=utf-8"},
      {"cpp", "text/x-c++; charset=utf-8"}, {"hpp", "text/x-c++; charset=utf-8"},
      {"py", "text/x-python; charset=utf-8"}, {"rs", "text/x-rust; charset=utf-8"},
      {"go", "text/x-go; charset=utf-8"},   {"ts", "text/x-typescript; charset=utf-8"},
      {"sh", "text/x-shellscript; charset=utf-8"}, {"yaml", "application/yaml"},
      {"yml", "application/yaml"},          {"toml", "application/toml"},
  }};
  auto slash = path.rfind('/');
  auto base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  auto dot = base.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  std::string ext(base.substr(dot + 1));
  std::ranges::transform(ext, ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const auto& [e, type] : kTable) {
    if (e == ext) return type;
  }
  return {};
}

}  // namespace kiln::server
