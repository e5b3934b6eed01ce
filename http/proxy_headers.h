// The header rules of the reverse proxy (http/proxy.h): which fields are hop-by-hop, and the heads
// sent upstream and back to the client. Plain strings in and out, so they are tested without sockets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/proxy.h"

namespace kiln::server::http {

using HeaderFields = std::vector<std::pair<std::string, std::string>>;  // as received, in order

// How a body is delimited on the wire the head is for.
enum class BodyFraming { none, length, chunked, until_close };

// RFC 9110 7.6.1: Connection, the names it lists, Keep-Alive, Proxy-*, TE, Trailer,
// Transfer-Encoding, Upgrade; and the framing the proxy writes itself (Content-Length) or
// answers itself (Expect). `listed` holds the lower-case names the Connection fields list.
bool proxy_hop_by_hop(std::string_view name, const std::vector<std::string>& listed);
std::vector<std::string> connection_listed(const HeaderFields& fields);

// "METHOD target HTTP/1.1" and the client's fields minus the hop-by-hop ones and the upstream's
// drops, then its set_headers; Upgrade and `Connection: Upgrade` only for an upgrade request.
std::string proxy_request_head(std::string_view method, const ProxyUpstream& up, const HeaderFields& fields,
                               bool upgrade, BodyFraming framing, std::uint64_t length);

// The status line and the upstream's fields minus the hop-by-hop ones and the Set-Cookie fields
// set_cookie_dropped() refuses, framed for the client. A 101 keeps the upstream's Upgrade and
// says `Connection: Upgrade`. For BodyFraming::none the upstream's Content-Length stays (a HEAD
// answer's length is the GET's).
std::string proxy_response_head(int status, std::string_view reason, const HeaderFields& fields, BodyFraming framing,
                                std::uint64_t length, bool close, const std::vector<std::string>& drop_set_cookies = {});

// Whether a Set-Cookie value sets (or clears) one of `names` (ignoring case and the spaces a
// browser trims), or a cookie with an empty name (RFC 6265bis 5.6: no '=' before the first ';'
// or nothing before it), which a browser sends as its bare value.
bool set_cookie_dropped(std::string_view value, const std::vector<std::string>& names);

// The framing around one piece of a re-chunked body: its size line and CRLF (none for an empty
// piece), and the last chunk after it when `last`.
void chunk_framing(std::size_t size, bool last, std::string& before, std::string& after);

// A short plain-text answer of the proxy's own (502, 504), head and body.
std::string proxy_error_message(int status, std::string_view text, bool close);

}  // namespace kiln::server::http
