// The few HTML pages `kiln serve` writes itself (password and secret forms, errors): self-contained, no
// scripts, no external assets, so the strict CSP on them costs nothing.
#include "serve/pages.h"

#include <algorithm>

#include <fmt/format.h>

#include "http/message.h"

namespace kiln::server::http {
namespace {

constexpr std::string_view kStyle =
    "body{font:16px/1.5 system-ui,-apple-system,Segoe UI,sans-serif;background:#f6f6f4;color:#222;"
    "display:flex;min-height:100vh;margin:0;align-items:center;justify-content:center}"
    "main{background:#fff;padding:2rem 2.5rem;border-radius:10px;box-shadow:0 1px 4px #0002;max-width:26rem;width:100%}"
    "h1{font-size:1.25rem;margin:0 0 1rem}p{margin:.5rem 0}.err{color:#b00020}"
    "input[type=password]{width:100%;box-sizing:border-box;padding:.6rem;font-size:1rem;margin:.5rem 0 1rem;"
    "border:1px solid #bbb;border-radius:6px}"
    "button{padding:.6rem 1.2rem;font-size:1rem;border:0;border-radius:6px;background:#222;color:#fff;cursor:pointer}"
    "small{color:#666}code{font-size:.85em}";

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string login_page(std::string_view name, std::string_view next, std::string_view error) {
  std::string n = html_escape(name);
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<title>{0}: password required</title><style>{1}</style></head>\n<body><main>"
      "<h1>{0} is password-protected</h1>{2}"
      "<form method=\"post\" action=\"/a/{0}/_kiln/login\">"
      "<input type=\"hidden\" name=\"next\" value=\"{3}\">"
      "<label for=\"password\">Password</label>"
      "<input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" autofocus required>"
      "<button type=\"submit\">Continue</button></form>"
      "<p><small>Scripts can use HTTP Basic instead: <code>curl -u :PASSWORD URL</code></small></p>"
      "</main></body></html>\n",
      n, kStyle, error.empty() ? std::string() : fmt::format("<p class=\"err\" role=\"alert\">{}</p>", html_escape(error)),
      html_escape(next));
}

std::string secret_form_page(std::string_view name, std::string_view error, std::string_view asked_by) {
  std::string n = html_escape(name);
  std::string who = asked_by.empty() ? std::string()
                                     : fmt::format("<p>Asked for by <strong>{}</strong>. Type it only if you trust "
                                                   "that project with it.</p>", html_escape(asked_by));
  // No action: the form posts back to this page's own one-time address.
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<title>Kiln asks for {0}</title><style>{1}</style></head>\n<body><main>"
      "<h1>Kiln asks for the secret <code>{0}</code></h1>{2}{3}"
      "<p>What you type here goes into Kiln's secret store on this machine. It is never shown to the "
      "assistant or written to a log; runs that name <code>{0}</code> get it as an environment variable.</p>"
      "<form method=\"post\">"
      "<label for=\"value\">Value of {0}</label>"
      "<input type=\"password\" id=\"value\" name=\"value\" autocomplete=\"off\" autofocus required>"
      "<button type=\"submit\">Store</button></form>"
      "<p><small>This page works once and expires 15 minutes after it was asked for. From a terminal instead: "
      "<code>kiln secret set {0}</code></small></p>"
      "</main></body></html>\n",
      n, kStyle, error.empty() ? std::string() : fmt::format("<p class=\"err\" role=\"alert\">{}</p>", html_escape(error)),
      who);
}

std::string message_page(int status, std::string_view title, std::string_view text) {
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<title>{0} {1}</title><style>{2}</style></head>\n<body><main><h1>{1}</h1><p>{3}</p>"
      "<p><small>{0} {4} &middot; kiln serve</small></p></main></body></html>\n",
      status, html_escape(title), kStyle, html_escape(text), html_escape(reason_phrase(status)));
}

std::string safe_next(std::string_view next, std::string_view name) {
  std::string base = "/a/" + std::string(name) + "/";
  bool ok = next.starts_with(base) && next.size() < 2048 &&
            next.find("//") == std::string_view::npos && next.find("/./") == std::string_view::npos &&
            next.find("/../") == std::string_view::npos && next.find("/_kiln/") == std::string_view::npos &&
            std::all_of(next.begin(), next.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f && c != '\\'; });
  return ok ? std::string(next) : base;
}

}  // namespace kiln::server::http
