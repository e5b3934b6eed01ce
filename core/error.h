// The one error type that crosses module boundaries: what went wrong, in words that tell the
// caller what to do next. Layers return std::expected<T, Error>; nothing throws across them.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace kiln {

enum class Errc {
  invalid_argument,  // the caller passed something unusable; the message says what to pass instead
  not_found,         // a file, workspace, trace or artifact that does not exist
  path_escape,       // a path that resolves outside the workspace root
  conflict,          // a precondition failed (if_sha256 mismatch, target exists, ambiguous edit)
  too_large,         // a size limit was hit
  io,                // the operating system refused (permission, disk full, ...)
  unsupported,       // the host lacks a feature this needs
  cancelled,         // the caller gave up
  internal,          // a bug in Kiln
};

struct Error {
  Errc code = Errc::internal;
  std::string message;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Errc code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace kiln
