// Access to the JSON Schemas of schemas/, embedded at build time (see cmake/embed_schemas.cmake).
#pragma once

#include <span>
#include <string_view>

namespace kiln::schemas {

struct EmbeddedFile {
  std::string_view path;  // relative to schemas/, e.g. "tools/file_read.json"
  std::string_view text;
};

std::span<const EmbeddedFile> all();

}  // namespace kiln::schemas
