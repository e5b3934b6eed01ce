// Access decisions: public, password (Argon2id, cookies, rate limit), invite (tokens, revoke,
// expiry), artifact expiry, and that no password or token is ever stored in clear.
#include <sodium.h>

#include <cstring>

#include "artifact_test_support.h"

using namespace kiln;
using namespace kiln::artifacts;
using namespace kiln::artifacts::testing;

namespace {

Credentials with_password(std::string pw, std::string client = "10.0.0.1") {
  Credentials c;
  c.password = std::move(pw);
  c.client = std::move(client);
  return c;
}

Credentials with_cookie(std::string cookie) {
  Credentials c;
  c.cookie = std::move(cookie);
  c.client = "10.0.0.1";
  return c;
}

Credentials with_invite(std::string token) {
  Credentials c;
  c.invite_token = std::move(token);
  c.client = "10.0.0.1";
  return c;
}

PublishRequest protected_site(const Fixture& f, const std::string& password) {
  auto req = f.request("site");
  req.share = Share::password;
  req.password = password;
  return req;
}

}  // namespace

TEST_CASE("public artifacts are open; unknown names and versions are not found") {
  Fixture f;
  f.publish("site");
  f.publish("site");
  auto d = f.store->check_access("site", std::nullopt, {});
  CHECK(d.outcome == AccessOutcome::allowed);
  CHECK(d.share == Share::public_);
  CHECK(d.version == 2);
  CHECK_FALSE(d.set_cookie);
  CHECK(f.store->check_access("site", 1, {}).version == 1);
  CHECK(f.store->check_access("site", 7, {}).outcome == AccessOutcome::not_found);
  CHECK(f.store->check_access("nope", std::nullopt, {}).outcome == AccessOutcome::not_found);
}

TEST_CASE("password: login, cookie, tampering, password change") {
  Fixture f;
  auto r = f.publish(protected_site(f, "correct horse"));
  CHECK(r.artifact.share == Share::password);
  CHECK(r.artifact.has_password);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::need_login);
  CHECK(f.store->check_access("site", std::nullopt, with_password("wrong")).outcome == AccessOutcome::need_login);
  CHECK(f.store->check_access("site", std::nullopt, with_password("")).outcome == AccessOutcome::need_login);
  auto ok = f.store->check_access("site", std::nullopt, with_password("correct horse"));
  REQUIRE(ok.outcome == AccessOutcome::allowed);
  CHECK(ok.version == 1);
  REQUIRE(ok.set_cookie);
  const std::string cookie = *ok.set_cookie;
  CHECK(cookie.find("correct") == std::string::npos);

  auto again = f.store->check_access("site", 1, with_cookie(cookie));
  CHECK(again.outcome == AccessOutcome::allowed);
  CHECK_FALSE(again.set_cookie);  // a valid cookie needs no new one
  CHECK(f.store->check_access("site", 2, with_cookie(cookie)).outcome == AccessOutcome::not_found);

  std::string tampered = cookie;
  tampered[tampered.size() / 3] = tampered[tampered.size() / 3] == 'A' ? 'B' : 'A';
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(tampered)).outcome == AccessOutcome::need_login);
  CHECK(f.store->check_access("site", std::nullopt, with_cookie("garbage")).outcome == AccessOutcome::need_login);
  CHECK(f.store->check_access("site", std::nullopt, with_cookie("")).outcome == AccessOutcome::need_login);
  // A cookie for one artifact opens no other.
  auto other = f.request("report.html", "other");
  other.share = Share::password;
  other.password = "correct horse";
  f.publish(other);
  CHECK(f.store->check_access("other", std::nullopt, with_cookie(cookie)).outcome == AccessOutcome::need_login);
  // Still valid after a restart (the key is kept), until it expires.
  f.reopen();
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(cookie)).outcome == AccessOutcome::allowed);
  f.advance(12 * 3600 + 1);
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(cookie)).outcome == AccessOutcome::need_login);

  auto fresh = f.store->check_access("site", std::nullopt, with_password("correct horse"));
  REQUIRE(fresh.set_cookie);
  ShareRequest change;
  change.name = "site";
  change.password = "battery staple";
  auto s = f.store->share(change);
  REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(*fresh.set_cookie)).outcome == AccessOutcome::need_login);
  CHECK(f.store->check_access("site", std::nullopt, with_password("correct horse")).outcome == AccessOutcome::need_login);
  CHECK(f.store->check_access("site", std::nullopt, with_password("battery staple")).outcome == AccessOutcome::allowed);
}

TEST_CASE("password: five failures within five minutes lock out that client") {
  Fixture f;
  f.publish(protected_site(f, "pw"));
  for (int i = 0; i < 5; ++i)
    CHECK(f.store->check_access("site", std::nullopt, with_password("guess")).outcome == AccessOutcome::need_login);
  auto limited = f.store->check_access("site", std::nullopt, with_password("pw"));
  CHECK(limited.outcome == AccessOutcome::rate_limited);
  CHECK(limited.retry_after_s > 0);
  CHECK(limited.retry_after_s <= 300);
  CHECK_FALSE(limited.set_cookie);
  // Another client is not affected.
  CHECK(f.store->check_access("site", std::nullopt, with_password("pw", "10.0.0.2")).outcome == AccessOutcome::allowed);
  f.advance(120);
  auto later = f.store->check_access("site", std::nullopt, with_password("pw"));
  CHECK(later.outcome == AccessOutcome::rate_limited);
  CHECK(later.retry_after_s <= 180);
  f.advance(181);
  CHECK(f.store->check_access("site", std::nullopt, with_password("pw")).outcome == AccessOutcome::allowed);
  // A success starts the count again.
  for (int i = 0; i < 4; ++i) f.store->check_access("site", std::nullopt, with_password("guess"));
  CHECK(f.store->check_access("site", std::nullopt, with_password("pw")).outcome == AccessOutcome::allowed);
  for (int i = 0; i < 4; ++i) f.store->check_access("site", std::nullopt, with_password("guess"));
  CHECK(f.store->check_access("site", std::nullopt, with_password("pw")).outcome == AccessOutcome::allowed);
}

TEST_CASE("invite: one link per name, revocable, expiring") {
  Fixture f;
  auto req = f.request("site");
  req.share = Share::invite;
  req.invite_names = {"alice", "bob@example.com"};
  auto r = f.publish(req);
  REQUIRE(r.new_invites.size() == 2);
  CHECK(r.artifact.invites.size() == 2);
  CHECK(r.artifact.invites[0].token.empty());  // never readable again
  const std::string alice = r.new_invites[0].token, bob = r.new_invites[1].token;
  CHECK(alice.size() >= 43);
  CHECK(alice != bob);

  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::denied);
  CHECK(f.store->check_access("site", std::nullopt, with_invite("not-a-token")).outcome == AccessOutcome::denied);
  auto a = f.store->check_access("site", std::nullopt, with_invite(alice));
  REQUIRE(a.outcome == AccessOutcome::allowed);
  CHECK(a.invite_name == "alice");
  REQUIRE(a.set_cookie);
  const std::string alice_cookie = *a.set_cookie;
  auto by_cookie = f.store->check_access("site", 1, with_cookie(alice_cookie));
  CHECK(by_cookie.outcome == AccessOutcome::allowed);
  CHECK(by_cookie.invite_name == "alice");
  CHECK(f.store->check_access("site", std::nullopt, with_invite(bob)).invite_name == "bob@example.com");

  // A live invite is not silently replaced.
  ShareRequest dup;
  dup.name = "site";
  dup.invite_names = {"alice"};
  CHECK(f.store->share(dup).error().code == Errc::conflict);

  ShareRequest revoke;
  revoke.name = "site";
  revoke.revoke = {"alice"};
  auto rv = f.store->share(revoke);
  REQUIRE(rv);
  CHECK(rv->artifact.invites[0].revoked);
  auto denied = f.store->check_access("site", std::nullopt, with_invite(alice));
  CHECK(denied.outcome == AccessOutcome::denied);
  CHECK(denied.invite_name == "alice");
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(alice_cookie)).outcome == AccessOutcome::denied);
  CHECK(f.store->check_access("site", std::nullopt, with_invite(bob)).outcome == AccessOutcome::allowed);
  revoke.revoke = {"carol"};
  CHECK(f.store->share(revoke).error().code == Errc::not_found);

  // Revoke and invite in one call: a new link for alice; the old one stays dead.
  ShareRequest renew;
  renew.name = "site";
  renew.revoke = {"alice"};
  renew.invite_names = {"alice"};
  renew.invite_expires_in_s = 60;
  auto rn = f.store->share(renew);
  REQUIRE_MESSAGE(rn, (rn ? "" : rn.error().message));
  REQUIRE(rn->new_invites.size() == 1);
  CHECK(rn->new_invites[0].expires_at.has_value());
  const std::string alice2 = rn->new_invites[0].token;
  auto a2 = f.store->check_access("site", std::nullopt, with_invite(alice2));
  REQUIRE(a2.outcome == AccessOutcome::allowed);
  REQUIRE(a2.set_cookie);
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(alice_cookie)).outcome == AccessOutcome::denied);
  CHECK(f.store->check_access("site", std::nullopt, with_invite(alice)).outcome == AccessOutcome::denied);

  f.advance(61);
  CHECK(f.store->check_access("site", std::nullopt, with_invite(alice2)).outcome == AccessOutcome::denied);
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(*a2.set_cookie)).outcome == AccessOutcome::denied);
  CHECK(f.store->check_access("site", std::nullopt, with_invite(bob)).outcome == AccessOutcome::allowed);
  auto info = f.store->get("site");
  REQUIRE(info);
  REQUIRE(info->has_value());
  CHECK((*info)->invites.back().expired);
  // An expired invite's name can be invited again.
  dup.invite_names = {"alice"};
  CHECK(f.store->share(dup).has_value());
}

TEST_CASE("the whole artifact's share expires") {
  Fixture f;
  auto req = f.request("site");
  req.expires_in_s = 10;
  auto r = f.publish(req);
  REQUIRE(r.artifact.expires_at);
  CHECK_FALSE(r.artifact.expired);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::allowed);
  // The clock counts whole seconds: the share lasts at least the 10 asked for.
  f.advance(10);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::allowed);
  f.advance(1);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::expired);
  auto info = f.store->get("site");
  REQUIRE(info);
  CHECK((*info)->expired);
  ShareRequest clear;
  clear.name = "site";
  clear.expires_in_s = 0;
  auto c = f.store->share(clear);
  REQUIRE(c);
  CHECK_FALSE(c->artifact.expires_at);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::allowed);

  // Publishing again after the expiry passed makes it visible again; an expiry still ahead stays.
  f.publish(req);
  f.advance(30);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::expired);
  auto back = f.publish("site");
  CHECK_FALSE(back.artifact.expires_at);
  CHECK(f.store->check_access("site", std::nullopt, {}).outcome == AccessOutcome::allowed);
  f.publish(req);
  auto kept = f.publish("site");
  CHECK(kept.artifact.expires_at);
}

TEST_CASE("leaving invite mode revokes every invite: switching back brings no old link back") {
  Fixture f;
  auto req = f.request("site");
  req.share = Share::invite;
  req.invite_names = {"alice"};
  auto r = f.publish(req);
  REQUIRE(r.new_invites.size() == 1);
  const std::string alice = r.new_invites[0].token;
  ShareRequest to_public;
  to_public.name = "site";
  to_public.share = Share::public_;
  REQUIRE(f.store->share(to_public));
  ShareRequest back;
  back.name = "site";
  back.share = Share::invite;
  back.invite_names = {"bob"};
  auto b = f.store->share(back);
  REQUIRE_MESSAGE(b, (b ? "" : b.error().message));
  CHECK(f.store->check_access("site", std::nullopt, with_invite(alice)).outcome == AccessOutcome::denied);
  CHECK(f.store->check_access("site", std::nullopt, with_invite(b->new_invites.at(0).token)).outcome ==
        AccessOutcome::allowed);
  // alice can be invited again, with a new link.
  ShareRequest again;
  again.name = "site";
  again.invite_names = {"alice"};
  CHECK(f.store->share(again).has_value());
}

TEST_CASE("share changes: mode switches, what each needs, and old cookies") {
  Fixture f;
  f.publish("site");
  ShareRequest s;
  s.name = "site";
  s.share = Share::password;
  CHECK(f.store->share(s).error().code == Errc::invalid_argument);  // no password
  s.password = "pw";
  auto on = f.store->share(s);
  REQUIRE(on);
  CHECK(on->artifact.share == Share::password);
  auto login = f.store->check_access("site", std::nullopt, with_password("pw"));
  REQUIRE(login.set_cookie);
  ShareRequest pub;
  pub.name = "site";
  pub.share = Share::public_;
  auto off = f.store->share(pub);
  REQUIRE(off);
  CHECK_FALSE(off->artifact.has_password);  // leaving password mode forgets it
  ShareRequest back;
  back.name = "site";
  back.share = Share::password;
  CHECK(f.store->share(back).error().code == Errc::invalid_argument);
  back.password = "pw";
  REQUIRE(f.store->share(back));
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(*login.set_cookie)).outcome == AccessOutcome::need_login);
  ShareRequest bad;
  bad.name = "site";
  bad.share = Share::public_;
  bad.password = "x";
  CHECK(f.store->share(bad).error().code == Errc::invalid_argument);
  bad.password.clear();
  bad.invite_names = {"x"};
  CHECK(f.store->share(bad).error().code == Errc::invalid_argument);
  bad.share.reset();
  bad.invite_names = {"bad\nname"};
  CHECK(f.store->share(bad).error().code == Errc::invalid_argument);
  ShareRequest unknown;
  unknown.name = "nope";
  CHECK(f.store->share(unknown).error().code == Errc::not_found);
  // Invites alone imply invite mode.
  ShareRequest inv;
  inv.name = "site";
  inv.invite_names = {"dana"};
  auto i = f.store->share(inv);
  REQUIRE(i);
  CHECK(i->artifact.share == Share::invite);
}

TEST_CASE("no password or invite token is stored in clear") {
  Fixture f;
  const std::string password = "hunter2-very-distinctive";
  auto req = protected_site(f, password);
  f.publish(req);
  auto state_bytes = [&] {
    std::string bytes;
    for (const char* file : {"/artifacts.db", "/artifacts.db-wal"})
      if (std::filesystem::exists(f.state.path + file)) bytes += read_file(f.state.path + file);
    return bytes;
  };
  std::string before = state_bytes();
  CHECK(before.find(password) == std::string::npos);
  CHECK(before.find("$argon2id$") != std::string::npos);
  ShareRequest s;
  s.name = "site";
  s.share = Share::invite;
  s.invite_names = {"eve"};
  auto r = f.store->share(s);
  REQUIRE(r);
  const std::string token = r->new_invites.at(0).token;
  std::string after = state_bytes();
  REQUIRE(after.size() > 0);
  CHECK(after.find(password) == std::string::npos);
  CHECK(after.find(token) == std::string::npos);
}

// kiln serve's in-memory check (admit_cookie against AccessRules) must admit exactly the cookies
// check_access admits, and never one it refuses: every way a cookie ends, checked both ways.
TEST_CASE("admit_cookie agrees with check_access on every cookie, against rules read after each change") {
  Fixture f;
  auto invite_req = f.request("site", "guests");
  invite_req.share = Share::invite;
  invite_req.invite_names = {"alice", "bob"};
  invite_req.invite_expires_in_s = 3600;
  auto inv = f.publish(invite_req);
  f.publish(protected_site(f, "correct horse"));  // "site", password mode
  f.publish(f.request("site", "open"));            // public

  auto token = [&](const std::string& name) {
    for (const auto& i : inv.new_invites)
      if (i.name == name) return i.token;
    FAIL("no invite " << name);
    return std::string();
  };
  auto pw_cookie = *f.store->check_access("site", std::nullopt, with_password("correct horse")).set_cookie;
  auto alice = *f.store->check_access("guests", std::nullopt, with_invite(token("alice"))).set_cookie;
  auto bob = *f.store->check_access("guests", std::nullopt, with_invite(token("bob"))).set_cookie;

  // Both answers for (artifact, version, cookie): admit_cookie's from freshly read rules.
  auto agree = [&](const std::string& name, std::optional<int> version, const std::string& cookie) {
    CAPTURE(name);
    CAPTURE(cookie);
    auto full = f.store->check_access(name, version, with_cookie(cookie));
    auto rules = f.store->access_rules(name);
    REQUIRE(rules.has_value());
    if (!*rules) {
      CHECK(full.outcome == AccessOutcome::not_found);
      return false;
    }
    auto fast = f.store->admit_cookie(**rules, version, cookie);
    if (fast) {
      CHECK(full.outcome == AccessOutcome::allowed);
      CHECK(fast->share == full.share);
      CHECK(fast->version == full.version);
      CHECK(fast->invite_name == full.invite_name);
      CHECK_FALSE(fast->set_cookie);
    } else {
      // The fast path may leave an admission to check_access only where there is none to give.
      CHECK(full.outcome != AccessOutcome::allowed);
    }
    return fast.has_value();
  };

  CHECK(agree("site", std::nullopt, pw_cookie));
  CHECK(agree("site", 1, pw_cookie));
  CHECK_FALSE(agree("site", 9, pw_cookie));                 // no such version
  CHECK(agree("guests", std::nullopt, alice));
  CHECK(agree("guests", std::nullopt, bob));
  CHECK_FALSE(agree("guests", std::nullopt, pw_cookie));    // another artifact's cookie
  CHECK_FALSE(agree("site", std::nullopt, alice));
  // Public: nothing to admit by cookie (check_access lets everyone in without one).
  CHECK_FALSE(f.store->admit_cookie(**f.store->access_rules("open"), std::nullopt, pw_cookie));
  CHECK_FALSE(agree("site", std::nullopt, "forged"));
  std::string tampered = pw_cookie;
  tampered[tampered.size() / 3] = tampered[tampered.size() / 3] == 'A' ? 'B' : 'A';
  CHECK_FALSE(agree("site", std::nullopt, tampered));
  CHECK_FALSE(agree("site", std::nullopt, pw_cookie.substr(0, pw_cookie.find('.'))));

  // Revoking one invite ends its cookie, not the other's.
  ShareRequest revoke;
  revoke.name = "guests";
  revoke.revoke = {"alice"};
  REQUIRE(f.store->share(revoke).has_value());
  CHECK_FALSE(agree("guests", std::nullopt, alice));
  CHECK(agree("guests", std::nullopt, bob));

  // A new password ends the old cookie.
  ShareRequest repass;
  repass.name = "site";
  repass.password = "battery staple";
  REQUIRE(f.store->share(repass).has_value());
  CHECK_FALSE(agree("site", std::nullopt, pw_cookie));
  auto new_cookie = *f.store->check_access("site", std::nullopt, with_password("battery staple")).set_cookie;
  CHECK(agree("site", std::nullopt, new_cookie));

  // Time alone: the invite's expiry (bob's cookie lasts as long as the invite), then the
  // artifact's own expiry, then the login's lifetime; rules read before the time passed too.
  auto guests_before = **f.store->access_rules("guests");
  f.advance(3601);
  CHECK_FALSE(agree("guests", std::nullopt, bob));
  CHECK_FALSE(f.store->admit_cookie(guests_before, std::nullopt, bob));
  ShareRequest expire;
  expire.name = "site";
  expire.expires_in_s = 60;
  REQUIRE(f.store->share(expire).has_value());
  auto site_before = **f.store->access_rules("site");
  CHECK(f.store->admit_cookie(site_before, std::nullopt, new_cookie));
  f.advance(61);
  CHECK_FALSE(agree("site", std::nullopt, new_cookie));
  CHECK_FALSE(f.store->admit_cookie(site_before, std::nullopt, new_cookie));
  expire.expires_in_s = 0;
  REQUIRE(f.store->share(expire).has_value());
  CHECK(agree("site", std::nullopt, new_cookie));
  f.advance(kPasswordCookieS);
  CHECK_FALSE(agree("site", std::nullopt, new_cookie));

  // Leaving password mode for invite mode ends password cookies.
  auto last = *f.store->check_access("site", std::nullopt, with_password("battery staple")).set_cookie;
  CHECK(agree("site", std::nullopt, last));
  ShareRequest to_invite;
  to_invite.name = "site";
  to_invite.share = Share::invite;
  to_invite.invite_names = {"carol"};
  REQUIRE(f.store->share(to_invite).has_value());
  CHECK_FALSE(agree("site", std::nullopt, last));

  // Unpublishing ends it all.
  REQUIRE(f.store->unpublish("guests", std::nullopt).has_value());
  CHECK_FALSE(agree("guests", std::nullopt, bob));
}

namespace {

std::string b64url(std::string_view bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(std::strlen(out.c_str()));
  return out;
}

// A cookie signed the way the store signed them before it kept its keyed HMAC state: the one-shot
// crypto_auth_hmacsha256 with the 32 bytes of serve.key.
std::string sign_by_hand(const std::string& key, const std::string& payload) {
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256(mac, reinterpret_cast<const unsigned char*>(payload.data()), payload.size(),
                         reinterpret_cast<const unsigned char*>(key.data()));
  return b64url(payload) + "." + b64url(std::string_view(reinterpret_cast<char*>(mac), sizeof mac));
}

std::string payload_of(const std::string& cookie) {
  std::string enc = cookie.substr(0, cookie.find('.'));
  std::string out(enc.size(), '\0');
  std::size_t len = 0;
  REQUIRE(sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), enc.data(), enc.size(), nullptr,
                            &len, nullptr, sodium_base64_VARIANT_URLSAFE_NO_PADDING) == 0);
  out.resize(len);
  return out;
}

}  // namespace

TEST_CASE("cookie MACs are HMAC-SHA256 with serve.key: cookies signed before stay valid, any other field layout is refused") {
  Fixture f;
  f.publish(protected_site(f, "correct horse"));
  auto ok = f.store->check_access("site", std::nullopt, with_password("correct horse"));
  REQUIRE(ok.set_cookie);
  const std::string cookie = *ok.set_cookie;
  const std::string key = read_file(f.state.path + "/serve.key");
  REQUIRE(key.size() == 32);
  const std::string payload = payload_of(cookie);
  // What the store issues is exactly the one-shot HMAC of its payload.
  CHECK(sign_by_hand(key, payload) == cookie);
  auto admitted = [&](const std::string& c) {
    auto rules = f.store->access_rules("site");
    REQUIRE(rules);
    REQUIRE(*rules);
    return f.store->admit_cookie(**rules, std::nullopt, c).has_value();
  };
  CHECK(admitted(cookie));
  CHECK(f.store->check_access("site", std::nullopt, with_cookie(cookie)).outcome == AccessOutcome::allowed);
  // Correctly signed, but not the five fields k1, name, kind, expires, generation as written.
  const auto nl = payload.rfind('\n');
  for (const std::string& odd : {payload + "\n1", payload.substr(0, nl), payload.substr(0, nl) + "\n+" + payload.substr(nl + 1),
                                 payload.substr(0, nl) + "\n" + payload.substr(nl + 1) + "x", "k2" + payload.substr(2),
                                 payload.substr(0, nl) + "\n"}) {
    INFO(odd);
    CHECK_FALSE(admitted(sign_by_hand(key, odd)));
    CHECK(f.store->check_access("site", std::nullopt, with_cookie(sign_by_hand(key, odd))).outcome ==
          AccessOutcome::need_login);
  }
  // The right layout under another key is refused.
  std::string other_key(32, 'k');
  CHECK_FALSE(admitted(sign_by_hand(other_key, payload)));
  // A MAC one byte short, or with a byte more, is refused.
  const std::string mac_part = cookie.substr(cookie.find('.') + 1);
  CHECK_FALSE(admitted(cookie.substr(0, cookie.size() - 2)));
  CHECK_FALSE(admitted(cookie + "AA"));
  CHECK_FALSE(admitted(cookie.substr(0, cookie.find('.') + 1) + mac_part + mac_part));
}
