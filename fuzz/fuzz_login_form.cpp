// Fuzzes what `kiln serve` reads from a visitor before any password is checked: the login form
// body, the Cookie header, HTTP Basic credentials and the `next` redirect target (http/parse.cpp, serve/pages.cpp),
// and the login page built from them. No open redirect, no unescaped markup, no crash.
#include <algorithm>

#include "fuzz/fuzz_support.h"
#include "http/parse.h"
#include "serve/pages.h"

using kiln::fuzz::violated;
using namespace kiln::server::http;

namespace {

void check_escaped(const std::string& html, std::string_view what) {
  if (html.find_first_of("<>\"'") != std::string::npos) violated("html_escape left markup", what);
}

}  // namespace

// Fields ('\n'-separated): form body, Cookie header, Authorization header, artifact name, rest.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto f = kiln::fuzz::fields(std::string_view(reinterpret_cast<const char*>(data), size), 5);
  const std::string& body = f[0];
  const std::string name = f[3].empty() ? "site" : f[3];

  auto form = parse_form(body);
  for (const auto& [k, v] : form) (void)percent_decode(k + v, true);
  const std::string next = safe_next(form.count("next") ? form["next"] : f[4], name);
  const std::string base = "/a/" + name + "/";
  if (!next.starts_with(base)) violated("safe_next left /a/NAME/", next);
  if (next != base) {
    if (next.find("//") != std::string::npos || next.find('\\') != std::string::npos ||
        next.find("/../") != std::string::npos || next.find("/_kiln/") != std::string::npos)
      violated("safe_next kept a dangerous target", next);
    for (unsigned char c : next)
      if (c <= 0x20 || c >= 0x7f) violated("safe_next kept a control or non-ASCII byte", next);
  }

  if (auto c = cookie_value(f[1], "kiln_session")) {
    if (c->find(';') != std::string::npos) violated("cookie value spans a ';'", *c);
  }
  (void)basic_password(f[2]);
  (void)cookie_safe(f[1]);

  check_escaped(html_escape(body), body);
  const std::string error = form.count("error") ? form["error"] : f[4];
  // Everything the visitor controls is escaped: the page has exactly as much markup as the same
  // page built from harmless values.
  auto markup = [](const std::string& html) {
    return std::count_if(html.begin(), html.end(), [](char c) { return c == '<' || c == '>' || c == '"' || c == '\''; });
  };
  const std::string page = login_page(name, next, error);
  const std::string plain = login_page("x", "/a/x/", error.empty() ? "" : "e");
  if (markup(page) != markup(plain)) violated("unescaped markup from the input in the login page", page);
  const std::string msg = message_page(400, f[4], body);
  if (markup(msg) != markup(message_page(400, "t", "b"))) violated("unescaped markup in a message page", msg);
  return 0;
}
