// The few HTML pages `kiln serve` writes itself (the password form, error pages) and the login's
// redirect rule; the artifact router is their only user besides tests and fuzzers.
#pragma once

#include <string>
#include <string_view>

namespace kiln::server::http {

// Our own pages run no scripts and load nothing, and no other site may frame them.
inline constexpr const char* kOwnPageCsp =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

std::string html_escape(std::string_view s);
// `next` after a login, if it stays inside /a/NAME/ (no open redirects); else "/a/NAME/".
std::string safe_next(std::string_view next, std::string_view name);

// Our own small pages: the password form, the secret form and the error pages.
std::string login_page(std::string_view name, std::string_view next, std::string_view error);
std::string message_page(int status, std::string_view title, std::string_view text);
// The one-time page that asks the person for secret `name` (serve/secret_page.h). It posts to its
// own address and never holds a value: `error` is said above the empty field.
std::string secret_form_page(std::string_view name, std::string_view error, std::string_view asked_by = {});

}  // namespace kiln::server::http
