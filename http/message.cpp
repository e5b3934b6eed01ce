// The listener's small shared vocabulary: header lookup and the reason phrases.
#include "http/message.h"

#include "core/ascii_text.h"

namespace kiln::server::http {

const std::string* Request::header(std::string_view name) const {
  std::string key(name);
  for (char& c : key) c = ascii_lower(c);
  auto it = headers.find(key);
  return it == headers.end() ? nullptr : &it->second;
}

std::string Request::header_value(std::string_view name) const {
  const std::string* v = header(name);
  return v ? *v : std::string();
}

const std::string* Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (ascii_iequals(k, name)) return &v;
  }
  return nullptr;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace kiln::server::http
