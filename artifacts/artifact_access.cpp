// Who may see an artifact: share changes (password as an Argon2id hash, invites as hashes of
// unguessable tokens), signed expiring cookies, the per-client limit on failed logins, and the
// one access decision `kiln serve` asks for on every request. Nothing secret is stored in clear.
#include <sodium.h>

#include <algorithm>
#include <charconv>
#include <semaphore>
#include <set>

#include <fmt/format.h>

#include "artifacts/artifact_internal.h"
#include "workspace/state_store.h"

namespace kiln::artifacts {

namespace {

constexpr int kMaxFailures = 5;
constexpr std::int64_t kFailureWindowS = 300;
constexpr std::int64_t kInviteCookieS = 30 * 24 * 3600;
constexpr std::size_t kMaxPasswordBytes = 1024;

// Argon2id takes 64 MiB per check: a burst of logins must queue, not exhaust memory.
std::counting_semaphore<8> g_pwhash_slots(2);

struct PwhashSlot {
  PwhashSlot() { g_pwhash_slots.acquire(); }
  ~PwhashSlot() { g_pwhash_slots.release(); }
};

std::string failure_key(const std::string& name, const std::string& client) { return name + '\n' + client; }

}  // namespace

Result<std::string> ArtifactStore::hash_password(const std::string& password) {
  if (password.size() > kMaxPasswordBytes)
    return fail(Errc::invalid_argument, fmt::format("the password is longer than {} bytes", kMaxPasswordBytes));
  char out[crypto_pwhash_STRBYTES];
  PwhashSlot slot;
  if (crypto_pwhash_str(out, password.data(), password.size(), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                        crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
    return fail(Errc::io, "hashing the password ran out of memory (Argon2id needs 64 MiB); try again");
  }
  return std::string(out);
}

struct ArtifactStore::CookieMac {
  crypto_auth_hmacsha256_state keyed;
  ~CookieMac() { sodium_memzero(&keyed, sizeof keyed); }
};

void ArtifactStore::key_cookie_mac() {
  auto mac = std::make_shared<CookieMac>();
  crypto_auth_hmacsha256_init(&mac->keyed, reinterpret_cast<const unsigned char*>(cookie_key_.data()), cookie_key_.size());
  cookie_mac_ = std::move(mac);
}

// HMAC-SHA256(cookie_key_, payload), from a copy of the keyed state: the same MAC as
// crypto_auth_hmacsha256 with the key, without hashing the key's pads again.
void ArtifactStore::cookie_mac(std::string_view payload, unsigned char* out) const {
  crypto_auth_hmacsha256_state st = cookie_mac_->keyed;
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(payload.data()), payload.size());
  crypto_auth_hmacsha256_final(&st, out);
  sodium_memzero(&st, sizeof st);
}

std::string ArtifactStore::make_cookie(const std::string& name, const std::string& kind, std::int64_t expires,
                                       std::int64_t gen) const {
  std::string payload = fmt::format("k1\n{}\n{}\n{}\n{}", name, kind, expires, gen);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  cookie_mac(payload, mac);
  return detail::base64url(payload) + "." + detail::base64url(std::string_view(reinterpret_cast<char*>(mac), sizeof mac));
}

struct ArtifactStore::CookieFields {
  std::string name;
  std::string kind;  // "password" or "invite:ID"
  std::int64_t expires = 0;
  std::int64_t gen = 0;
};

namespace {

// Base64url (no padding) into `out`; the decoded length, or nullopt when the text is not
// base64url entirely or does not fit.
std::optional<std::size_t> decode_into(std::string_view text, unsigned char* out, std::size_t cap) {
  std::size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(out, cap, text.data(), text.size(), nullptr, &len, &end,
                        sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  return len;
}

std::optional<std::int64_t> whole_int64(std::string_view s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ArtifactStore::CookieFields> ArtifactStore::verify_cookie(const std::string& cookie) const {
  // Every protected page comes here, so the cookie is decoded into the stack, not the heap.
  constexpr std::size_t kMaxCookie = 1024;
  auto dot = cookie.find('.');
  if (dot == std::string::npos || cookie.size() > kMaxCookie) return std::nullopt;
  unsigned char payload_bytes[kMaxCookie];
  unsigned char mac[crypto_auth_hmacsha256_BYTES + 3];
  auto payload_len = decode_into(std::string_view(cookie).substr(0, dot), payload_bytes, sizeof payload_bytes);
  auto mac_len = decode_into(std::string_view(cookie).substr(dot + 1), mac, sizeof mac);
  if (!payload_len || !mac_len || *mac_len != crypto_auth_hmacsha256_BYTES) return std::nullopt;
  const std::string_view payload(reinterpret_cast<const char*>(payload_bytes), *payload_len);
  unsigned char expected[crypto_auth_hmacsha256_BYTES];
  cookie_mac(payload, expected);
  // Constant time, as crypto_auth_hmacsha256_verify compares.
  const bool good = crypto_verify_32(expected, mac) == 0;
  sodium_memzero(expected, sizeof expected);
  if (!good) return std::nullopt;
  // Signed by us, so the fields are ours; the callers check them against the artifact as it is now.
  std::string_view f[5];
  std::size_t count = 0;
  for (std::size_t start = 0;;) {
    auto nl = payload.find('\n', start);
    if (count == 5) return std::nullopt;
    f[count++] = payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  if (count != 5 || f[0] != "k1") return std::nullopt;
  auto expires = whole_int64(f[3]);
  auto gen = whole_int64(f[4]);
  if (!expires || !gen) return std::nullopt;
  CookieFields out;
  out.expires = *expires;
  out.gen = *gen;
  out.name = std::string(f[1]);
  out.kind = std::string(f[2]);
  return out;
}

namespace {

// The invite id of an "invite:ID" cookie kind.
std::optional<std::int64_t> invite_id(const std::string& kind) {
  if (kind.rfind("invite:", 0) != 0) return std::nullopt;
  return whole_int64(std::string_view(kind).substr(7));
}

}  // namespace

bool ArtifactStore::cookie_valid_locked(const Row& row, const std::string& cookie, std::string& invite_name) {
  auto c = verify_cookie(cookie);
  if (!c || c->name != row.name) return false;
  // The generation moves on every password or mode change, so older cookies stop working.
  if (c->expires <= now() || c->gen != row.share_gen) return false;
  if (row.share == Share::password) return c->kind == "password";
  auto id = invite_id(c->kind);
  if (row.share != Share::invite || !id) return false;
  // Revoking or expiring an invite ends its cookies too: the invite is looked up every time.
  db::Statement s(db_, "SELECT name, expires_at, revoked FROM invites WHERE id = ?1 AND artifact = ?2");
  s.bind(1, *id);
  s.bind(2, row.name);
  if (!s.next("select invite").value_or(false) || s.int64(2) != 0) return false;
  if (auto e = s.opt_int(1); e && *e <= now()) return false;
  invite_name = s.text(0);
  return true;
}

Result<std::optional<AccessRules>> ArtifactStore::access_rules(const std::string& name) {
  std::lock_guard lock(mu_);
  // One read transaction: the rules are one state of the database, never half of a change.
  if (auto r = db_.exec("BEGIN"); !r) return std::unexpected(r.error());
  struct EndRead {
    db::Database& db;
    ~EndRead() { (void)db.exec("COMMIT"); }
  } end_read{db_};
  auto row = row_locked(name);
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<AccessRules>();
  AccessRules rules;
  rules.name = (*row)->name;
  rules.share = (*row)->share;
  rules.share_gen = (*row)->share_gen;
  rules.expires_at = (*row)->expires_at;
  db::Statement v(db_, "SELECT number FROM versions WHERE artifact = ?1 ORDER BY number");
  v.bind(1, name);
  for (;;) {
    auto more = v.next("select versions");
    if (!more) return std::unexpected(more.error());
    if (!*more) break;
    rules.versions.push_back(int(v.int64(0)));
  }
  if (rules.share == Share::invite) {
    db::Statement i(db_, "SELECT id, name, expires_at, revoked FROM invites WHERE artifact = ?1");
    i.bind(1, name);
    for (;;) {
      auto more = i.next("select invites");
      if (!more) return std::unexpected(more.error());
      if (!*more) break;
      rules.invites[i.int64(0)] = AccessRules::Invite{i.text(1), i.opt_int(2), i.int64(3) != 0};
    }
  }
  return std::optional<AccessRules>(std::move(rules));
}

std::optional<AccessDecision> ArtifactStore::admit_cookie(const AccessRules& rules, std::optional<int> version,
                                                          const std::string& cookie) const {
  if (rules.share == Share::public_) return std::nullopt;  // nothing to admit: check_access answers
  // Every check of cookie_valid_locked, in the same order, against the rules instead of the rows.
  auto c = verify_cookie(cookie);
  if (!c || c->name != rules.name) return std::nullopt;
  const std::int64_t t = now();
  if (rules.expires_at && *rules.expires_at <= t) return std::nullopt;
  if (c->expires <= t || c->gen != rules.share_gen) return std::nullopt;
  AccessDecision d;
  d.share = rules.share;
  if (rules.share == Share::password) {
    if (c->kind != "password") return std::nullopt;
  } else {
    auto id = invite_id(c->kind);
    if (rules.share != Share::invite || !id) return std::nullopt;
    auto it = rules.invites.find(*id);
    if (it == rules.invites.end() || it->second.revoked) return std::nullopt;
    if (it->second.expires_at && *it->second.expires_at <= t) return std::nullopt;
    d.invite_name = it->second.name;
  }
  if (rules.versions.empty()) return std::nullopt;
  if (version) {
    if (!std::binary_search(rules.versions.begin(), rules.versions.end(), *version)) return std::nullopt;
    d.version = *version;
  } else {
    d.version = rules.versions.back();
  }
  d.outcome = AccessOutcome::allowed;
  return d;
}

Result<void> ArtifactStore::apply_share_locked(Row& row, const ShareChange& change, std::vector<InviteInfo>& new_invites) {
  std::vector<std::string> invites;
  for (const auto& n : change.invite_names) {
    if (!valid_invite_name(n)) {
      return fail(Errc::invalid_argument, fmt::format("invite name '{}' is not usable: use 1-64 of letters, digits, "
                                                      "space and ._@+-",
                                                      n));
    }
    if (std::find(invites.begin(), invites.end(), n) == invites.end()) invites.push_back(n);
  }
  if (change.expires_in_s && *change.expires_in_s < 0) return fail(Errc::invalid_argument, "expires_in_s must be >= 0");
  if (change.invite_expires_in_s && *change.invite_expires_in_s < 0)
    return fail(Errc::invalid_argument, "invite_expires_in_s must be >= 0");

  Share mode = row.share;
  if (change.share) mode = *change.share;
  else if (change.password_hash && !invites.empty())
    return fail(Errc::invalid_argument, "a password and invites were both given: pass share to say which mode you mean");
  else if (change.password_hash) mode = Share::password;
  else if (!invites.empty()) mode = Share::invite;
  if (mode != Share::password && change.password_hash)
    return fail(Errc::invalid_argument, "a password only applies with share \"password\"");
  if (mode != Share::invite && !invites.empty())
    return fail(Errc::invalid_argument, "invites only apply with share \"invite\"");
  if (mode == Share::password && !change.password_hash && !(row.share == Share::password && row.password_hash))
    return fail(Errc::invalid_argument, "share \"password\" needs a password: pass password");

  const std::int64_t t = now();
  const std::string now_iso = workspace::now_iso8601();
  for (const auto& n : change.revoke) {
    db::Statement u(db_, "UPDATE invites SET revoked = 1 WHERE artifact = ?1 AND name = ?2 AND revoked = 0");
    u.bind(1, row.name);
    u.bind(2, n);
    auto revoked = u.run("revoke invite");
    if (!revoked) return std::unexpected(revoked.error());
    if (*revoked > 0) continue;
    db::Statement any(db_, "SELECT 1 FROM invites WHERE artifact = ?1 AND name = ?2");
    any.bind(1, row.name);
    any.bind(2, n);
    if (!any.next("select invite").value_or(false))
      return fail(Errc::not_found, fmt::format("artifact {} has no invite named '{}'", row.name, n));
  }
  // Leaving invite mode ends every invite: switching back later must not bring old links to life.
  if (row.share == Share::invite && mode != Share::invite) {
    db::Statement u(db_, "UPDATE invites SET revoked = 1 WHERE artifact = ?1 AND revoked = 0");
    u.bind(1, row.name);
    if (auto r = u.run("revoke invites"); !r) return std::unexpected(r.error());
  }
  std::optional<std::int64_t> invite_expiry;
  if (auto s = change.invite_expires_in_s ? change.invite_expires_in_s : change.expires_in_s; s && *s > 0)
    invite_expiry = detail::expiry_after(t, *s);
  for (const auto& n : invites) {
    db::Statement live(db_, "SELECT id, expires_at FROM invites WHERE artifact = ?1 AND name = ?2 AND revoked = 0");
    live.bind(1, row.name);
    live.bind(2, n);
    if (live.next("select invite").value_or(false)) {
      auto e = live.opt_int(1);
      if (!e || *e > t) {
        return fail(Errc::conflict, fmt::format("'{}' is already invited to {} and that link still works; to send a "
                                                "new link, revoke and invite in one call (revoke: [\"{}\"], invite: [\"{}\"])",
                                                n, row.name, n, n));
      }
      db::Statement old(db_, "UPDATE invites SET revoked = 1 WHERE id = ?1");  // expired: make room for the new one
      old.bind(1, live.int64(0));
      if (auto r = old.run("update invite"); !r) return std::unexpected(r.error());
    }
    unsigned char raw[32];
    randombytes_buf(raw, sizeof raw);
    std::string token = detail::base64url(std::string_view(reinterpret_cast<char*>(raw), sizeof raw));
    sodium_memzero(raw, sizeof raw);
    db::Statement ins(db_, "INSERT INTO invites(artifact, name, token_hash, created_at, expires_at)"
                           " VALUES (?1, ?2, ?3, ?4, ?5)");
    ins.bind(1, row.name);
    ins.bind(2, n);
    ins.bind(3, detail::sha256_hex(token));
    ins.bind(4, now_iso);
    ins.bind(5, invite_expiry);
    if (auto r = ins.run("insert invite"); !r) return std::unexpected(r.error());
    InviteInfo info;
    info.name = n;
    info.created_at = now_iso;
    if (invite_expiry) info.expires_at = detail::iso_utc(*invite_expiry);
    info.token = std::move(token);
    new_invites.push_back(std::move(info));
  }

  Row next = row;
  next.share = mode;
  if (change.password_hash) next.password_hash = change.password_hash;
  if (mode != Share::password) next.password_hash.reset();  // leaving password mode forgets it
  if (mode != row.share || change.password_hash) ++next.share_gen;
  if (change.expires_in_s) {
    if (*change.expires_in_s == 0) next.expires_at.reset();
    else next.expires_at = detail::expiry_after(t, *change.expires_in_s);
  }
  db::Statement u(db_, "UPDATE artifacts SET share = ?2, password_hash = ?3, expires_at = ?4, share_gen = ?5"
                       " WHERE name = ?1");
  u.bind(1, row.name);
  u.bind(2, to_string(next.share));
  u.bind(3, next.password_hash);
  u.bind(4, next.expires_at);
  u.bind(5, next.share_gen);
  if (auto r = u.run("update artifact"); !r) return std::unexpected(r.error());
  row = std::move(next);
  return {};
}

Result<ShareResult> ArtifactStore::share(const ShareRequest& req) {
  ShareChange change;
  change.share = req.share;
  change.invite_names = req.invite_names;
  change.revoke = req.revoke;
  change.expires_in_s = req.expires_in_s;
  change.invite_expires_in_s = req.invite_expires_in_s;
  {
    std::lock_guard lock(mu_);
    auto row = row_locked(req.name);
    if (!row) return std::unexpected(row.error());
    if (!*row) return fail(Errc::not_found, fmt::format("no artifact {} (publish_list or `kiln artifacts list` shows them)", req.name));
  }
  if (!req.password.empty()) {
    auto hash = hash_password(req.password);  // slow: outside the lock
    if (!hash) return std::unexpected(hash.error());
    change.password_hash = std::move(*hash);
  }
  std::lock_guard lock(mu_);
  db::Transaction tx(db_);
  if (auto r = tx.begin(); !r) return std::unexpected(r.error());
  auto row = row_locked(req.name);
  if (!row) return std::unexpected(row.error());
  if (!*row) return fail(Errc::not_found, fmt::format("no artifact {}", req.name));
  ShareResult out;
  if (auto a = apply_share_locked(**row, change, out.new_invites); !a) return std::unexpected(a.error());
  if (auto c = tx.commit(); !c) return std::unexpected(c.error());
  auto info = info_locked(**row);
  if (!info) return std::unexpected(info.error());
  out.artifact = std::move(*info);
  return out;
}

AccessDecision ArtifactStore::check_access(const std::string& name, std::optional<int> version, const Credentials& creds) {
  AccessDecision d;
  std::unique_lock lock(mu_);
  auto row = row_locked(name);
  if (!row) {
    d.outcome = AccessOutcome::denied;  // the database failed: fail closed
    return d;
  }
  if (!*row) return d;  // not_found
  const Row& r = **row;
  d.share = r.share;
  const std::int64_t t = now();
  bool version_exists = false;
  {
    db::Statement v(db_, version ? "SELECT number FROM versions WHERE artifact = ?1 AND number = ?2"
                                 : "SELECT number FROM versions WHERE artifact = ?1 ORDER BY number DESC LIMIT 1");
    v.bind(1, name);
    if (version) v.bind(2, *version);
    if (v.next("select version").value_or(false)) {
      version_exists = true;
      d.version = int(v.int64(0));
    } else if (version) {
      d.version = *version;
    }
  }
  if (r.expires_at && *r.expires_at <= t) {
    d.outcome = AccessOutcome::expired;
    return d;
  }
  // Whether a version exists is only told to those who may see the artifact.
  auto allow = [&] {
    d.outcome = version_exists ? AccessOutcome::allowed : AccessOutcome::not_found;
    if (!version_exists) d.set_cookie.reset();
    return d;
  };
  if (r.share == Share::public_) return allow();
  std::string invite_name;
  if (creds.cookie && cookie_valid_locked(r, *creds.cookie, invite_name)) {
    d.invite_name = invite_name;
    return allow();
  }
  if (r.share == Share::invite) {
    d.outcome = AccessOutcome::denied;
    if (!creds.invite_token || creds.invite_token->empty() || creds.invite_token->size() > 256) return d;
    db::Statement s(db_, "SELECT id, name, expires_at, revoked FROM invites WHERE token_hash = ?1 AND artifact = ?2");
    s.bind(1, detail::sha256_hex(*creds.invite_token));
    s.bind(2, name);
    if (!s.next("select invite").value_or(false)) return d;
    d.invite_name = s.text(1);
    auto exp = s.opt_int(2);
    if (s.int64(3) != 0 || (exp && *exp <= t)) return d;
    std::int64_t until = std::min(detail::add_seconds(t, kInviteCookieS), exp.value_or(INT64_MAX));
    d.set_cookie = make_cookie(name, fmt::format("invite:{}", s.int64(0)), until, r.share_gen);
    d.cookie_max_age_s = std::max<std::int64_t>(0, until - t);
    return allow();
  }
  // Password mode.
  d.outcome = AccessOutcome::need_login;
  if (!creds.password || creds.password->empty() || !r.password_hash) return d;
  const std::string key = failure_key(name, creds.client);
  auto it = failures_.find(key);
  if (it != failures_.end() && it->second.second + kFailureWindowS <= t) {
    failures_.erase(it);
    it = failures_.end();
  }
  if (it != failures_.end() && it->second.first >= kMaxFailures) {
    d.outcome = AccessOutcome::rate_limited;
    d.retry_after_s = int(std::max<std::int64_t>(1, it->second.second + kFailureWindowS - t));
    return d;
  }
  // Counted before the check, so parallel guesses cannot slip past the limit while Argon2 runs.
  if (it == failures_.end()) {
    if (failures_.size() >= 10000) {
      std::erase_if(failures_, [&](const auto& e) { return e.second.second + kFailureWindowS <= t; });
    }
    it = failures_.emplace(key, std::pair<int, std::int64_t>{0, t}).first;
  }
  ++it->second.first;
  const std::string hash = *r.password_hash;
  const std::int64_t gen = r.share_gen;
  lock.unlock();
  bool ok;
  {
    PwhashSlot slot;
    ok = crypto_pwhash_str_verify(hash.c_str(), creds.password->data(), creds.password->size()) == 0;
  }
  lock.lock();
  if (!ok) return d;
  failures_.erase(key);
  d.set_cookie = make_cookie(name, "password", detail::add_seconds(t, kPasswordCookieS), gen);
  d.cookie_max_age_s = kPasswordCookieS;  // the browser forgets it when the server stops accepting it
  return allow();
}

}  // namespace kiln::artifacts
