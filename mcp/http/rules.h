// The header rules of MCP's Streamable HTTP transport as pure functions (Accept, Content-Type,
// Host and Origin against DNS rebinding, protocol versions, bearer tokens), so each strict choice
// is unit-tested on its own and transport.cpp only strings them together.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kiln::server::mcp_http {

// A numeric address (as --listen gives it) on the loopback: 127.0.0.0/8, ::1, ::ffff:127.x.x.x.
bool is_loopback_address(std::string_view numeric);

// Whether an Accept header lists `media_type` explicitly with a non-zero quality. Wildcards
// (*/*, text/*) do not count: the transport requires clients to name both types it may answer.
bool accepts(std::string_view accept, std::string_view media_type);

// Content-Type application/json, with no charset or charset=utf-8.
bool is_json_content_type(std::string_view content_type);

// A Host header naming this loopback listener: localhost, 127.0.0.1 or [::1], with no port or
// `port` (the bound one). Anything else on a loopback bind is what DNS rebinding looks like.
bool is_loopback_host(std::string_view host, unsigned short port);

// An Origin of a page served from this machine's loopback: http(s)://localhost|127.0.0.1|[::1]
// with any port (a local web client, such as the Inspector, has its own port).
bool is_loopback_origin(std::string_view origin);

// An Origin naming the same host (and port) the request was sent to, i.e. not cross-site.
bool origin_matches_host(std::string_view origin, std::string_view host);

// An MCP-Protocol-Version value this server speaks.
bool is_supported_protocol_version(std::string_view version);
// "2025-11-25, 2025-06-18, 2025-03-26", for error messages.
std::string supported_protocol_versions_text();
// Whether a session that negotiated `version` must see the MCP-Protocol-Version header on every
// request (the header exists since 2025-06-18; 2025-03-26 clients never send it).
bool version_requires_header(std::string_view version);

// A 2026-07-28 request header value as the server compares it with the body: plain visible ASCII
// (and inner spaces/tabs) as is, or the `=?base64?...?=` sentinel form decoded. nullopt for a
// value with other characters or a sentinel that is not valid base64.
std::optional<std::string> decode_mcp_header_value(std::string_view raw);

// Which body field a 2026-07-28 request's Mcp-Name header mirrors: params.name (tools/call,
// prompts/get), params.uri (resources/read), params.taskId (tasks/get, tasks/update,
// tasks/cancel); nullptr for other methods (no Mcp-Name expected).
const char* mcp_name_field(std::string_view method);

// The bearer tokens /mcp takes, each with the principal it acts for; kept as hashes and compared
// in constant time.
class TokenSet {
 public:
  // Lines `NAME TOKEN`, or a bare `TOKEN` named by its position ("token-1" for the first token
  // of the file); blank lines and lines starting with '#' are skipped; surrounding spaces are
  // trimmed. Refuses a file others can read or write, one without tokens, names outside
  // [A-Za-z0-9._@-] (1-64 characters), and tokens shorter than 32 characters or with characters
  // outside RFC 6750's token68 set.
  static Result<TokenSet> load(const std::string& path);
  static Result<TokenSet> from_text(std::string_view text);
  // One token acting for `principal` (the default token of the state directory).
  static Result<TokenSet> single(std::string_view principal, std::string_view token);

  // The principal of the token in `authorization` ("Bearer <token>", scheme case-insensitive), or
  // nullopt. Compares against every token without stopping early, so timing says nothing about
  // which one is close.
  std::optional<std::string> principal_for(std::string_view authorization) const;
  bool check(std::string_view authorization) const { return principal_for(authorization).has_value(); }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string principal;
    std::array<unsigned char, 32> hash;
  };
  std::vector<Entry> entries_;
};

}  // namespace kiln::server::mcp_http
