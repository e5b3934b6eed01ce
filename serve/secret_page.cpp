// The secret pages' tokens and their HTTP side. What is typed on a page is written to the secret
// store and nowhere else: no log line, page or error message ever carries it.
#include "serve/secret_page.h"

#include <sodium.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/ascii_text.h"
#include "http/parse.h"
#include "sandbox/secrets.h"
#include "serve/app_control.h"
#include "serve/pages.h"

namespace kiln::server::secrets {
namespace {

constexpr std::size_t kTokenBytes = 32;
constexpr std::size_t kTokenHex = 2 * kTokenBytes;

// Lookups are by this hash, so neither the map nor its comparisons hold or time the token itself.
std::string token_key(std::string_view token) {
  std::array<unsigned char, 32> h{};
  crypto_generichash(h.data(), h.size(), reinterpret_cast<const unsigned char*>(token.data()), token.size(), nullptr, 0);
  return std::string(reinterpret_cast<const char*>(h.data()), h.size());
}

bool well_formed_token(std::string_view t) {
  return t.size() == kTokenHex &&
         std::all_of(t.begin(), t.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with the form's
// own post (Fetch, "serialize a request origin"), which the Origin check must refuse. The page
// loads nothing and links nowhere, so its address still never reaches another site.
http::Response page(const http::Request& req, int status, std::string html) {
  http::Response r;
  r.status = status;
  r.head = req.method == "HEAD";
  r.body = std::move(html);
  r.headers = {{"Content-Type", "text/html; charset=utf-8"},
               {"Cache-Control", "no-store"},
               {"Referrer-Policy", "same-origin"},
               {"X-Frame-Options", "DENY"},
               {"X-Content-Type-Options", "nosniff"},
               {"Content-Security-Policy", http::kOwnPageCsp}};
  return r;
}

http::Response message(const http::Request& req, int status, std::string_view title, std::string_view text) {
  return page(req, status, http::message_page(status, title, text));
}

http::Response gone(const http::Request& req) {
  return message(req, 404, "This page is used up or has expired",
                 "A secret page takes one value and lasts 15 minutes. Ask the assistant again for a new page, "
                 "or store the secret from a terminal with kiln secret set NAME.");
}

// "/_kiln/secret/TOKEN" (a query is ignored) -> TOKEN, or empty for anything else.
std::string_view token_of(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::string_view prefix = kSecretPagePrefix;
  if (!target.starts_with(prefix)) return {};
  std::string_view t = target.substr(prefix.size());
  return well_formed_token(t) ? t : std::string_view{};
}

// A cross-site form post carries its site's Origin; a fetch from a page of this server, ours.
// Sec-Fetch-Site, where sent, says the same and cannot be set by a page.
bool same_origin(const http::Request& r) {
  if (const auto* site = r.header("sec-fetch-site"); site && *site != "same-origin" && *site != "none") return false;
  const auto* origin = r.header("origin");
  return !origin || ascii_iequals(*origin, "http://" + r.host);
}

// A Host that is not this server as a browser here names it (a DNS-rebinding page's own name,
// say) is refused: the Origin check means nothing when Host is the attacker's too.
bool known_host(std::string_view host, std::string_view base_url) {
  std::string_view base = base_url.substr(base_url.find("://") == std::string_view::npos ? 0 : base_url.find("://") + 3);
  if (ascii_iequals(host, base)) return true;
  auto colon = base.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view port = base.substr(colon);
  for (std::string_view local : {"127.0.0.1", "localhost", "[::1]"})
    if (ascii_iequals(host, std::string(local) + std::string(port))) return true;
  return false;
}

}  // namespace

SecretRequests::SecretRequests(std::string state_dir, Clock clock)
    : state_dir_(std::move(state_dir)), clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {
  [[maybe_unused]] int rc = sodium_init();
}

void SecretRequests::set_base_url(std::string url) {
  std::lock_guard lock(mu_);
  base_url_ = std::move(url);
}

std::string SecretRequests::base_url() {
  std::lock_guard lock(mu_);
  return base_url_;
}

void SecretRequests::drop_expired_locked(std::chrono::steady_clock::time_point now) {
  std::erase_if(pages_, [now](const auto& kv) { return now - kv.second.issued >= kSecretPageTtl; });
}

std::map<std::string, SecretRequests::Page>::iterator SecretRequests::find_locked(std::string_view token) {
  drop_expired_locked(clock_());
  return pages_.find(token_key(token));
}

Result<IssuedPage> SecretRequests::issue(const std::string& name, const std::string& asked_by) {
  if (!sandbox::valid_secret_name(name))
    return fail(Errc::invalid_argument,
                fmt::format("\"{}\" is not a secret name: a secret is named like an environment variable, letters, "
                            "digits and '_', not starting with a digit, at most 128 characters",
                            name.size() > 64 ? name.substr(0, 64) + "..." : name));
  std::array<unsigned char, kTokenBytes> raw{};
  randombytes_buf(raw.data(), raw.size());
  std::string token(kTokenHex, '\0');
  sodium_bin2hex(token.data(), token.size() + 1, raw.data(), raw.size());
  sodium_memzero(raw.data(), raw.size());
  std::lock_guard lock(mu_);
  if (base_url_.empty()) return fail(Errc::unsupported, "kiln serve is not listening yet; ask again in a moment");
  const auto now = clock_();
  drop_expired_locked(now);
  while (pages_.size() >= kMaxOutstandingPages) {
    auto oldest = std::min_element(pages_.begin(), pages_.end(),
                                   [](const auto& a, const auto& b) { return a.second.issued < b.second.issued; });
    spdlog::info("serve: secret page {}... for {} dropped: {} pages are outstanding", oldest->second.log_id,
                 oldest->second.name, pages_.size());
    pages_.erase(oldest);
  }
  Page p{name, token.substr(0, 8), asked_by.substr(0, 1000), now};
  spdlog::info("serve: secret page {}... issued for {} (expires in {} s)", p.log_id, name, kSecretPageTtl.count());
  pages_.emplace(token_key(token), std::move(p));
  return IssuedPage{base_url_ + kSecretPagePrefix + token, int(kSecretPageTtl.count()), name};
}

std::string SecretRequests::asked_by_for(std::string_view token) {
  std::lock_guard lock(mu_);
  auto it = find_locked(token);
  return it == pages_.end() ? std::string() : it->second.asked_by;
}

std::optional<std::string> SecretRequests::name_for(std::string_view token) {
  std::lock_guard lock(mu_);
  auto it = find_locked(token);
  if (it == pages_.end()) return std::nullopt;
  return it->second.name;
}

Result<std::string> SecretRequests::fulfil(std::string_view token, const std::string& value) {
  // Held while the file is written: two posts of one page cannot both store.
  std::lock_guard lock(mu_);
  auto it = find_locked(token);
  if (it == pages_.end()) return fail(Errc::not_found, "no such secret page");
  const Page p = it->second;
  if (auto ok = sandbox::SecretStore(state_dir_).set(p.name, value); !ok) {
    spdlog::error("serve: secret page {}... could not store {}: {}", p.log_id, p.name, ok.error().message);
    return std::unexpected(ok.error());
  }
  pages_.erase(it);
  spdlog::info("serve: secret {} stored from its page {}...", p.name, p.log_id);
  return p.name;
}

std::size_t SecretRequests::outstanding() {
  std::lock_guard lock(mu_);
  drop_expired_locked(clock_());
  return pages_.size();
}

namespace {

// Everything decided from the request head: the refusal, or nullopt and the page's secret name.
std::optional<http::Response> screen_request(SecretRequests& requests, const http::Request& r, std::string* name) {
  if (r.method != "GET" && r.method != "HEAD" && r.method != "POST") {
    http::Response out = message(r, 405, "Method not allowed", "A secret page is opened with GET and sent with POST.");
    out.headers.emplace_back("Allow", "GET, HEAD, POST");
    return out;
  }
  // Plain HTTP: a value typed on another machine would cross the network in clear text.
  if (!apps::from_this_machine(r))
    return message(r, 403, "Not from here", "Secret pages open in a browser on the machine kiln serve runs on.");
  if (!known_host(r.host, requests.base_url()))
    return message(r, 403, "Wrong address", "Open the secret page at the address Kiln gave.");
  if (r.method == "POST" && !same_origin(r))
    return message(r, 403, "Refused", "A secret can only be sent from its own page, not from another site.");
  auto found = requests.name_for(token_of(r.target));
  if (!found) return gone(r);
  if (name) *name = std::move(*found);
  return std::nullopt;
}

bool form_content(std::string_view content_type) {
  constexpr std::string_view form = "application/x-www-form-urlencoded";
  return content_type.size() >= form.size() && ascii_iequals(content_type.substr(0, form.size()), form);
}

http::Response handle(SecretRequests& requests, http::Request r) {
  std::string name;
  if (auto refused = screen_request(requests, r, &name)) return std::move(*refused);
  const std::string asked_by = requests.asked_by_for(token_of(r.target));
  if (r.method != "POST") return page(r, 200, http::secret_form_page(name, "", asked_by));
  if (!form_content(r.content_type))
    return message(r, 415, "Unsupported form", "The secret form posts application/x-www-form-urlencoded.");
  auto form = http::parse_form(r.body);
  sodium_memzero(r.body.data(), r.body.size());
  std::string& value = form["value"];
  http::Response out;
  if (value.empty()) {
    out = page(r, 400, http::secret_form_page(name, "Type the value, then press Store.", asked_by));
  } else if (value.find('\0') != std::string::npos) {
    out = page(r, 400, http::secret_form_page(name, "A secret cannot contain a NUL character: type it again.", asked_by));
  } else if (auto stored = requests.fulfil(token_of(r.target), value); stored) {
    out = message(r, 200, fmt::format("Stored {}", *stored), "You can close this page.");
  } else if (stored.error().code == Errc::not_found) {
    out = gone(r);
  } else {
    out = message(r, 500, "Not stored",
                  fmt::format("The secret store refused {}: {}. The page still works once that is fixed.", name,
                              stored.error().message));
  }
  for (auto& [k, v] : form) sodium_memzero(v.data(), v.size());
  return out;
}

}  // namespace

http::Endpoint secret_page_endpoint(SecretRequests& requests) {
  http::Endpoint e;
  e.path = kSecretPagePrefix;
  e.prefix = true;
  e.body_limit = kSecretPageBodyLimit;
  // A refused post is answered before its body is read.
  e.screen = [&requests](const http::Request& r) { return screen_request(requests, r, nullptr); };
  e.handler = [&requests](http::Request r) { return handle(requests, std::move(r)); };
  return e;
}

}  // namespace kiln::server::secrets
