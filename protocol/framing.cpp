// Stream splitting for stdio: both framings are byte-driven state machines so that chunk boundaries
// never matter and an oversize message streams past without ever being held in memory.
#include "protocol/framing.h"
#include "core/ascii_text.h"

#include <algorithm>
#include <utility>

namespace kiln::protocol {

namespace {

constexpr std::string_view kMarker = "content-length:";  // compared case-insensitively
// Real header blocks are a few dozen bytes; anything this long is garbage, not a header.
constexpr std::size_t kMaxHeaderBlockBytes = 8192;

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

using kiln::ascii_lower;
constexpr auto trim = kiln::trim_header_space;
constexpr auto iequals = kiln::ascii_iequals;

// Quotes a header line for a diagnostic without letting control bytes or megabytes into it.
std::string quote_for_detail(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 60)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (s.size() > 60) out += "...";
  out += "'";
  return out;
}

}  // namespace

FrameReader::FrameReader(std::size_t max_message_bytes) : max_bytes_(max_message_bytes) {}

std::optional<Frame> FrameReader::next() {
  if (ready_.empty()) return std::nullopt;
  Frame f = std::move(ready_.front());
  ready_.pop_front();
  return f;
}

std::size_t FrameReader::buffered_bytes() const { return detect_.size() + line_.size() + body_.size(); }

void FrameReader::emit(Frame::Kind kind, std::string payload, std::string detail) {
  ready_.push_back(Frame{kind, std::move(payload), std::move(detail)});
}

void FrameReader::feed(std::string_view bytes) {
  if (mode_ == Framing::undecided) {
    feed_undecided(bytes);
    return;
  }
  if (mode_ == Framing::ndjson) {
    feed_ndjson(bytes);
  } else {
    feed_lsp(bytes);
  }
}

void FrameReader::feed_undecided(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size() && mode_ == Framing::undecided) {
    const char c = bytes[i++];
    if (detect_.empty() && is_json_space(c)) continue;
    detect_.push_back(c);
    const std::size_t n = detect_.size();
    if (ascii_lower(c) != kMarker[n - 1]) {
      mode_ = Framing::ndjson;
    } else if (n == kMarker.size()) {
      mode_ = Framing::content_length;
    }
  }
  if (mode_ == Framing::undecided) return;
  // Replay what was held back through the chosen framing, then continue with the rest.
  std::string held = std::move(detect_);
  detect_.clear();
  feed(held);
  feed(bytes.substr(i));
}

void FrameReader::feed_ndjson(std::string_view bytes) {
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view segment = bytes.substr(0, nl);
    if (!discarding_) {
      // One extra byte of room for a trailing '\r' that end_ndjson_line strips.
      if (line_.size() + segment.size() > max_bytes_ + 1) {
        emit(Frame::oversize, {},
             "a message line exceeds the " + std::to_string(max_bytes_) +
                 "-byte limit; it was dropped");
        line_.clear();
        line_.shrink_to_fit();
        discarding_ = true;
      } else {
        line_.append(segment);
      }
    }
    if (nl == std::string_view::npos) return;
    end_ndjson_line();
    bytes.remove_prefix(nl + 1);
  }
}

void FrameReader::end_ndjson_line() {
  if (discarding_) {
    discarding_ = false;  // already reported when it crossed the limit
    return;
  }
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (std::ranges::all_of(line_, is_json_space)) {
    line_.clear();
    return;
  }
  if (line_.size() > max_bytes_) {
    emit(Frame::oversize, {},
         "a message line of " + std::to_string(line_.size()) + " bytes exceeds the " +
             std::to_string(max_bytes_) + "-byte limit; it was dropped");
    line_.clear();
    return;
  }
  emit(Frame::message, std::move(line_), {});
  line_.clear();
}

void FrameReader::feed_lsp(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    switch (lsp_) {
      case LspState::headers: {
        const char c = bytes[i++];
        if (++header_bytes_ > kMaxHeaderBlockBytes) {
          lsp_fail("header block exceeds " + std::to_string(kMaxHeaderBlockBytes) + " bytes");
          break;
        }
        if (c == '\n') {
          lsp_header_line();
        } else {
          line_.push_back(c);
        }
        break;
      }
      case LspState::body:
      case LspState::skip_body: {
        const std::size_t take = std::min(remaining_, bytes.size() - i);
        if (lsp_ == LspState::body) body_.append(bytes.substr(i, take));
        i += take;
        remaining_ -= take;
        if (remaining_ == 0) {
          if (lsp_ == LspState::body) {
            emit(Frame::message, std::move(body_), {});
            body_.clear();
          }
          lsp_ = LspState::headers;
        }
        break;
      }
      case LspState::resync: {
        const char c = bytes[i++];
        // Anywhere, not only at a line start: LSP bodies end without a newline, so the next header
        // usually follows the skipped bytes directly. 'c' occurs once in the marker, so a plain
        // counter is a correct matcher.
        if (ascii_lower(c) == kMarker[resync_match_]) {
          if (++resync_match_ == kMarker.size()) {
            lsp_ = LspState::headers;
            line_ = "Content-Length:";
            header_bytes_ = line_.size();
            resync_match_ = 0;
          }
        } else {
          resync_match_ = (ascii_lower(c) == kMarker[0]) ? 1 : 0;
        }
        break;
      }
    }
  }
}

void FrameReader::lsp_header_line() {
  const std::string_view line = trim(line_);
  if (line.empty()) {
    if (!seen_header_) {  // stray blank lines between messages are harmless
      line_.clear();
      header_bytes_ = 0;
      return;
    }
    if (!content_length_) {
      lsp_fail("header block has no Content-Length");
      return;
    }
    const std::size_t n = *content_length_;
    line_.clear();
    header_bytes_ = 0;
    seen_header_ = false;
    content_length_.reset();
    if (n > max_bytes_) {
      emit(Frame::oversize, {},
           "a message of " + std::to_string(n) + " bytes exceeds the " + std::to_string(max_bytes_) +
               "-byte limit; it was skipped");
      lsp_ = LspState::skip_body;
    } else {
      lsp_ = LspState::body;
    }
    remaining_ = n;
    if (n == 0) {
      if (lsp_ == LspState::body) emit(Frame::message, {}, {});
      lsp_ = LspState::headers;
    }
    return;
  }

  const std::size_t colon = line.find(':');
  const std::string_view name = colon == std::string_view::npos ? "" : trim(line.substr(0, colon));
  if (name.empty()) {
    lsp_fail("malformed header line " + quote_for_detail(line) + " (expected 'Name: value')");
    return;
  }
  seen_header_ = true;
  if (iequals(name, "content-length")) {
    const std::string_view value = trim(line.substr(colon + 1));
    const bool digits = !value.empty() && value.size() <= 18 &&
                        std::ranges::all_of(value, [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      lsp_fail("Content-Length value " + quote_for_detail(value) +
               " is not a non-negative decimal integer");
      return;
    }
    std::size_t n = 0;
    for (char c : value) n = n * 10 + static_cast<std::size_t>(c - '0');
    if (content_length_ && *content_length_ != n) {
      lsp_fail("conflicting Content-Length headers");
      return;
    }
    content_length_ = n;
  }
  // Content-Type and unknown headers carry nothing we act on.
  line_.clear();
}

void FrameReader::lsp_fail(std::string detail) {
  emit(Frame::framing_error, {}, std::move(detail));
  lsp_ = LspState::resync;
  resync_match_ = 0;
  line_.clear();
  line_.shrink_to_fit();
  header_bytes_ = 0;
  seen_header_ = false;
  content_length_.reset();
}

std::string encode_frame(std::string_view json_text, Framing mode) {
  std::string out;
  if (mode == Framing::content_length) {
    out = "Content-Length: " + std::to_string(json_text.size()) + "\r\n\r\n";
    out += json_text;
  } else {
    out.reserve(json_text.size() + 1);
    out += json_text;
    out += '\n';
  }
  return out;
}

}  // namespace kiln::protocol
