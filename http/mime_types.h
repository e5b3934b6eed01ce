// Content types by file extension, for resources and (later) published artifacts.
#pragma once

#include <string_view>

namespace kiln::server {

// "text/plain" for unknown text-like names is the caller's choice; this returns "" when unknown.
std::string_view mime_type_for(std::string_view path);

}  // namespace kiln::server
