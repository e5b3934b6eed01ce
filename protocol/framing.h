// Splits a stdio byte stream into JSON-RPC payloads: MCP's newline-delimited JSON, or LSP-style
// Content-Length framing for clients such as Neovim's vim.lsp.rpc, detected once per session.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::protocol {

enum class Framing { undecided, ndjson, content_length };

inline constexpr std::size_t kDefaultMaxMessageBytes = std::size_t{16} * 1024 * 1024;

struct Frame {
  enum Kind {
    message,        // payload holds one complete message body (not yet parsed as JSON)
    oversize,       // a message over the limit was dropped; detail says how big and what the limit is
    framing_error,  // an LSP header block was unusable; detail says why; the reader resyncs
  };
  Kind kind = message;
  std::string payload;
  std::string detail;
};

// Incremental and allocation-bounded: bytes may arrive one at a time or in gigabyte chunks, and the
// reader never holds more than about max_message_bytes of one message (an oversize message is
// skipped while it streams past, never buffered).
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_message_bytes = kDefaultMaxMessageBytes);

  void feed(std::string_view bytes);
  std::optional<Frame> next();
  Framing mode() const { return mode_; }

  // Bytes of a message not yet complete; lets callers (and tests) see that memory stays bounded.
  std::size_t buffered_bytes() const;

 private:
  enum class LspState { headers, body, skip_body, resync };

  void feed_undecided(std::string_view bytes);
  void feed_ndjson(std::string_view bytes);
  void feed_lsp(std::string_view bytes);
  void end_ndjson_line();
  void lsp_header_line();
  void lsp_fail(std::string detail);
  void emit(Frame::Kind kind, std::string payload, std::string detail);

  std::size_t max_bytes_;
  Framing mode_ = Framing::undecided;
  std::deque<Frame> ready_;

  std::string detect_;  // the first non-whitespace bytes, held until the framing is known

  std::string line_;         // NDJSON: the current line; LSP: the current header line
  bool discarding_ = false;  // NDJSON: inside an oversize line, dropping bytes until '\n'

  LspState lsp_ = LspState::headers;
  std::size_t header_bytes_ = 0;            // size of the header block so far (bounded)
  bool seen_header_ = false;                // a non-blank header line arrived in this block
  std::optional<std::size_t> content_length_;
  std::string body_;
  std::size_t remaining_ = 0;  // body bytes still to read (body) or drop (skip_body)
  std::size_t resync_match_ = 0;  // chars of "content-length:" matched while resyncing
};

// NDJSON: text + "\n"; Content-Length: the LSP header then text. undecided behaves like NDJSON,
// MCP's only standard framing. The text must already be compact (no raw newline).
std::string encode_frame(std::string_view json_text, Framing mode);

}  // namespace kiln::protocol
