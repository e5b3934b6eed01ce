// The few HTML pages `kiln serve` writes itself (the password form, error pages) and the login's
// redirect rule; the artifact router is their only user besides tests and fuzzers.
#pragma once

#include <string>
#include <string_view>

namespace kiln::server::http {

std::string html_escape(std::string_view s);
// `next` after a login, if it stays inside /a/NAME/ (no open redirects); else "/a/NAME/".
std::string safe_next(std::string_view next, std::string_view name);

// Our own small pages: the password form and the error pages.
std::string login_page(std::string_view name, std::string_view next, std::string_view error);
std::string message_page(int status, std::string_view title, std::string_view text);

}  // namespace kiln::server::http
