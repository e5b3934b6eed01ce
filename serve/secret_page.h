// One-time pages on which the person types a secret Kiln lacks (issue 20): the value goes from
// their browser straight into the state directory's secret store, never through an MCP client,
// the model, a log or a trace. The control API issues a page (op secret_request); the page takes
// one value and is gone.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "http/server.h"

namespace kiln::server::secrets {

inline constexpr const char* kSecretPagePrefix = "/_kiln/secret/";
inline constexpr std::chrono::seconds kSecretPageTtl{900};
inline constexpr std::size_t kMaxOutstandingPages = 64;  // past this the oldest page is dropped
inline constexpr std::size_t kSecretPageBodyLimit = 64 * 1024;

struct IssuedPage {
  std::string url;  // base URL + kSecretPagePrefix + 64 hex characters
  int expires_in_s = 0;
  std::string name;
};

// The outstanding pages, in this process's memory only: a restart of kiln serve forgets them.
// Tokens are kept as hashes; only their first 8 characters are ever logged. Thread-safe.
class SecretRequests {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  explicit SecretRequests(std::string state_dir, Clock clock = {});

  // The listener's address as a browser on this machine opens it ("http://127.0.0.1:7700"),
  // known once it is bound.
  void set_base_url(std::string url);
  std::string base_url();

  // A new page for secret `name`. invalid_argument for a name that is not a secret name;
  // unsupported before set_base_url.
  // `asked_by` (shown on the page, at most 1000 characters kept) says who asks: the workspace
  // whose run needs it, so the person can tell an untrusted checkout asking for a cloud key.
  Result<IssuedPage> issue(const std::string& name, const std::string& asked_by = {});
  // Who asked for the live page's secret ("" when unknown or not given).
  std::string asked_by_for(std::string_view token);

  // The secret a live page asks for, or nullopt (unknown, used or expired token).
  std::optional<std::string> name_for(std::string_view token);

  // Stores `value` as the page's secret and ends the page. not_found: no live page; io: the
  // store refused (the page stays usable). The caller checked that the value is acceptable.
  Result<std::string> fulfil(std::string_view token, const std::string& value);

  std::size_t outstanding();

 private:
  struct Page {
    std::string name;
    std::string log_id;  // the token's first 8 characters
    std::string asked_by;
    std::chrono::steady_clock::time_point issued;
  };
  void drop_expired_locked(std::chrono::steady_clock::time_point now);
  std::map<std::string, Page>::iterator find_locked(std::string_view token);

  std::string state_dir_;
  Clock clock_;
  std::mutex mu_;
  std::string base_url_;
  std::map<std::string, Page> pages_;  // by the token's BLAKE2b hash
};

// GET/HEAD kSecretPagePrefix + TOKEN: the form; POST (field `value`): stores it. Answered to
// clients on this machine only (the page is plain HTTP), and a POST whose Origin is another
// site's is refused.
http::Endpoint secret_page_endpoint(SecretRequests& requests);

}  // namespace kiln::server::secrets
