// Publishing and serving: folders and files become immutable, deduplicated versions; URL paths
// resolve only to what a version holds; symlinks and limits; unpublish collects unused blobs.
#include <sys/stat.h>
#include <unistd.h>

#include "artifact_test_support.h"

using namespace kiln;
using namespace kiln::artifacts;
using namespace kiln::artifacts::testing;

TEST_CASE("names, shares and content types") {
  CHECK(valid_artifact_name("my-site-2"));
  CHECK_FALSE(valid_artifact_name(""));
  CHECK_FALSE(valid_artifact_name("-x"));
  CHECK_FALSE(valid_artifact_name("My"));
  CHECK_FALSE(valid_artifact_name("a/b"));
  CHECK_FALSE(valid_artifact_name(std::string(65, 'a')));
  CHECK(default_artifact_name("dist", "/w/proj") == "dist");
  CHECK(default_artifact_name("docs/Report Final.HTML", "/w/proj") == "report-final");
  CHECK(default_artifact_name("", "/w/My Project") == "my-project");
  CHECK(default_artifact_name("___", "/w") == "site");
  CHECK(valid_invite_name("alice@example.com"));
  CHECK_FALSE(valid_invite_name("a\nb"));
  CHECK(parse_share("invite") == Share::invite);
  CHECK_FALSE(parse_share("private"));
  CHECK(std::string(to_string(Share::public_)) == "public");
  CHECK(content_type_for("a/index.html") == "text/html; charset=utf-8");
  CHECK(content_type_for("x.WASM") == "application/wasm");
  CHECK(content_type_for("x.js.map") == "application/json; charset=utf-8");
  CHECK(content_type_for("Makefile") == "application/octet-stream");
}

TEST_CASE("a published folder serves its files; folders mean their index.html") {
  Fixture f;
  auto r = f.publish("site");
  CHECK(r.artifact.name == "site");
  CHECK(r.version.number == 1);
  CHECK(r.version.files == 4);
  CHECK(r.version.source_path == "site");
  CHECK_FALSE(r.version.single_file);
  CHECK(r.new_blobs == 4);
  CHECK(r.artifact.share == Share::public_);
  CHECK(f.served("site", std::nullopt, "") == "<h1>home</h1>");
  CHECK(f.served("site", 1, "index.html") == "<h1>home</h1>");
  CHECK(f.served("site", 1, "sub/") == "<h1>sub</h1>");
  CHECK(f.served("site", 1, "sub") == "<h1>sub</h1>");
  CHECK(f.served("site", 1, "sub/page.html") == "<p>page</p>");
  auto css = f.store->resolve("site", 1, "css/site.css");
  REQUIRE(css);
  CHECK(css->content_type == "text/css; charset=utf-8");
  CHECK(css->size == 6);
  CHECK(css->logical_path == "css/site.css");
  CHECK(css->sha256.size() == 64);
  auto folder = f.store->resolve("site", 1, "sub");
  REQUIRE(folder);
  CHECK(folder->logical_path == "sub/index.html");
  auto m = f.store->manifest("site", 1);
  REQUIRE(m);
  CHECK(m->size() == 4);
  CHECK((*m)["sub/page.html"]["size"] == 11);
  CHECK(f.store->resolve("site", 2, "").error().code == Errc::not_found);
  CHECK(f.store->resolve("nope", std::nullopt, "").error().code == Errc::not_found);
}

TEST_CASE("paths that leave the version, or are not in it, are not found") {
  Fixture f;
  f.publish("site");
  for (const char* p : {"../etc/passwd", "a/../../b", "sub/../index.html", "./index.html", "/index.html",
                        "sub//page.html", "..", "../", "css", "missing.html", "index.html/"}) {
    CAPTURE(p);
    CHECK(f.served("site", 1, p) == kNotFound);
  }
  CHECK(f.served("site", 1, std::string("index.html\0", 11)) == kNotFound);
}

TEST_CASE("republishing unchanged files stores nothing new; versions stay as published") {
  Fixture f;
  auto v1 = f.publish("site");
  std::size_t blobs = f.blob_count();
  auto v2 = f.publish("site");
  CHECK(v2.version.number == 2);
  CHECK(v2.new_blobs == 0);
  CHECK(f.blob_count() == blobs);

  write_file(f.ws.path + "/site/index.html", "<h1>changed</h1>");
  std::filesystem::remove(f.ws.path + "/site/sub/page.html");
  CHECK(f.served("site", 1, "") == "<h1>home</h1>");  // the workspace changing changes no version
  CHECK(f.served("site", std::nullopt, "sub/page.html") == "<p>page</p>");
  auto v3 = f.publish("site");
  CHECK(v3.version.number == 3);
  CHECK(v3.new_blobs == 1);
  CHECK(v3.version.files == 3);
  CHECK(f.served("site", 3, "") == "<h1>changed</h1>");
  CHECK(f.served("site", std::nullopt, "") == "<h1>changed</h1>");
  CHECK(f.served("site", 3, "sub/page.html") == kNotFound);
  CHECK(f.served("site", 1, "") == "<h1>home</h1>");
  CHECK(f.served("site", 2, "sub/page.html") == "<p>page</p>");
  // Identical bytes under another artifact are still one blob.
  auto other = f.publish("site", "copy");
  CHECK(other.new_blobs == 0);
}

TEST_CASE("a published file is served at the version's root") {
  Fixture f;
  auto r = f.publish("report.html");
  CHECK(r.artifact.name == "report");
  CHECK(r.version.single_file);
  CHECK(r.version.files == 1);
  CHECK(f.served("report", std::nullopt, "") == "<h1>report</h1>");
  CHECK(f.served("report", 1, "report.html") == "<h1>report</h1>");
  auto file = f.store->resolve("report", 1, "");
  REQUIRE(file);
  CHECK(file->content_type == "text/html; charset=utf-8");
  CHECK(file->logical_path == "report.html");
  CHECK(f.served("report", 1, "other") == kNotFound);
}

TEST_CASE("symlinks in the published folder are never followed; .git is left out") {
  Fixture f;
  write_file(f.ws.path + "/secret.txt", "workspace secret");
  REQUIRE(::symlink("/etc/passwd", (f.ws.path + "/site/passwd").c_str()) == 0);
  REQUIRE(::symlink("../secret.txt", (f.ws.path + "/site/secret.txt").c_str()) == 0);
  REQUIRE(::symlink("index.html", (f.ws.path + "/site/alias.html").c_str()) == 0);
  REQUIRE(::symlink("/etc", (f.ws.path + "/site/etc").c_str()) == 0);
  write_file(f.ws.path + "/site/.git/config", "[core]");
  write_file(f.ws.path + "/site/.well-known/security.txt", "contact");
  auto r = f.publish("site");
  CHECK(r.skipped_symlinks == 4);
  CHECK(r.version.files == 5);
  for (const char* p : {"passwd", "secret.txt", "alias.html", "etc/passwd", ".git/config"}) {
    CAPTURE(p);
    CHECK(f.served("site", 1, p) == kNotFound);
  }
  CHECK(f.served("site", 1, ".well-known/security.txt") == "contact");
  // A path that itself leads out of the workspace is refused before anything is copied.
  REQUIRE(::symlink("/etc", (f.ws.path + "/out").c_str()) == 0);
  auto out = f.store->publish(f.request("out"));
  REQUIRE_FALSE(out);
  CHECK(out.error().code == Errc::path_escape);
  CHECK(f.store->publish(f.request("../")).error().code == Errc::path_escape);
}

TEST_CASE("limits on files and bytes per version") {
  Fixture f;
  f.store->set_limits(3, 1 << 20);
  auto many = f.store->publish(f.request("site"));
  REQUIRE_FALSE(many);
  CHECK(many.error().code == Errc::too_large);
  CHECK(many.error().message.find("more than 3 files") != std::string::npos);
  f.store->set_limits(100, 10);
  auto big = f.store->publish(f.request("site"));
  REQUIRE_FALSE(big);
  CHECK(big.error().code == Errc::too_large);
  auto got = f.store->get("site");
  REQUIRE(got);
  CHECK_FALSE(got->has_value());  // nothing half-published
  std::filesystem::create_directories(f.ws.path + "/empty");
  CHECK(f.store->publish(f.request("empty")).error().code == Errc::invalid_argument);
  CHECK(f.store->publish(f.request("missing")).error().code == Errc::not_found);
  CHECK(f.store->publish(f.request("site", "Bad Name")).error().code == Errc::invalid_argument);
}

TEST_CASE("unpublish removes versions and the blobs nobody else holds") {
  Fixture f;
  f.publish("site");
  write_file(f.ws.path + "/site/index.html", "<h1>v2</h1>");
  f.publish("site");
  f.publish("report.html", "keep");
  CHECK(f.blob_count() == 6);
  auto rm = f.store->unpublish("site", 2);
  REQUIRE(rm);
  CHECK(*rm == std::vector<int>{2});
  CHECK(f.blob_count() == 5);  // only v2's index.html was unique to it
  CHECK(f.served("site", std::nullopt, "") == "<h1>home</h1>");
  CHECK(f.store->unpublish("site", 2).error().code == Errc::not_found);
  // Numbers are never reused: /v/2/ must not come back with other content.
  CHECK(f.publish("site").version.number == 3);
  auto all = f.store->unpublish("site", std::nullopt);
  REQUIRE(all);
  CHECK(*all == std::vector<int>{1, 3});
  CHECK(f.blob_count() == 1);
  auto gone = f.store->get("site");
  REQUIRE(gone);
  CHECK_FALSE(gone->has_value());
  CHECK(f.served("keep", std::nullopt, "") == "<h1>report</h1>");
  CHECK(f.store->unpublish("site", std::nullopt).error().code == Errc::not_found);
  // Not even after the whole artifact went: the name numbers on where it stopped, across a reopen.
  f.reopen();
  auto again = f.publish("site");
  CHECK(again.version.number == 4);
  REQUIRE(again.artifact.versions.size() == 1);
  CHECK(f.store->check_access("site", 3, {}).outcome == AccessOutcome::not_found);
  REQUIRE(f.store->unpublish("site", std::nullopt));
  CHECK(f.publish("site").version.number == 5);
}

TEST_CASE("artifacts belong to one workspace; list filters by it") {
  Fixture f;
  f.publish("site");
  auto req = f.request("report.html", "site");
  req.workspace_id = "ws_2";
  CHECK(f.store->publish(req).error().code == Errc::conflict);
  req.name = "other";
  f.publish(req);
  auto mine = f.store->list("ws_1");
  REQUIRE(mine);
  REQUIRE(mine->size() == 1);
  CHECK((*mine)[0].name == "site");
  CHECK((*mine)[0].latest() == 1);
  auto every = f.store->list("");
  REQUIRE(every);
  CHECK(every->size() == 2);
  f.reopen();  // the record is durable
  auto again = f.store->get("other");
  REQUIRE(again);
  REQUIRE(again->has_value());
  CHECK((*again)->workspace_id == "ws_2");
}

TEST_CASE("state files are private") {
  Fixture f;
  struct stat st {};
  REQUIRE(::stat((f.state.path + "/serve.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_size == 32);
  REQUIRE(::stat((f.state.path + "/artifacts.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(f.state.path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  std::string key = read_file(f.state.path + "/serve.key");
  f.reopen();
  CHECK(read_file(f.state.path + "/serve.key") == key);  // created once, kept
}
