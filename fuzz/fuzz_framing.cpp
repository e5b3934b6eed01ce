// Fuzzes the stdio framing (protocol/framing.*), both NDJSON and Content-Length: the frames must not
// depend on how the bytes were chunked, no frame is larger than the limit, and the reader's memory
// stays bounded by the limit however the stream is shaped.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/framing.h"

using namespace kiln::protocol;

namespace {

struct Seen {
  std::vector<Frame> frames;
  Framing mode;
};

Seen run(std::string_view bytes, std::size_t limit, const std::vector<std::size_t>& cuts) {
  FrameReader r(limit);
  Seen s;
  std::size_t pos = 0;
  auto drain = [&] {
    while (auto f = r.next()) s.frames.push_back(std::move(*f));
  };
  for (std::size_t cut : cuts) {
    std::size_t n = std::min(cut, bytes.size() - pos);
    r.feed(bytes.substr(pos, n));
    pos += n;
    // 8 KiB is the LSP header block bound; a line or body never exceeds the limit (+1 for '\r').
    if (r.buffered_bytes() > limit + 8192 + 16) std::abort();
    drain();
  }
  r.feed(bytes.substr(pos));
  drain();
  s.mode = r.mode();
  return s;
}

}  // namespace

// Input: byte 0 picks the message limit, byte 1 seeds the chunk sizes, byte 2 forces a framing by
// prefixing the stream (0: as is, 1: an NDJSON '{', 2: an LSP header); the rest is the stream.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::size_t limit = 1 + (std::size_t{data[0]} * 7);
  std::uint32_t seed = data[1] | 1u;
  std::string stream;
  if (data[2] % 3 == 2) stream = "Content-Length: " + std::to_string(size > 3 ? (data[3] % 64) : 0) + "\r\n\r\n";
  if (data[2] % 3 == 1) stream = "{";
  stream.append(reinterpret_cast<const char*>(data + 3), size - 3);

  std::vector<std::size_t> cuts;
  for (std::size_t total = 0; total < stream.size();) {
    seed = seed * 1103515245u + 12345u;
    std::size_t c = 1 + (seed >> 16) % 17;
    cuts.push_back(c);
    total += c;
  }
  Seen whole = run(stream, limit, {});
  Seen chunked = run(stream, limit, cuts);
  if (whole.mode != chunked.mode || whole.frames.size() != chunked.frames.size()) std::abort();
  for (std::size_t i = 0; i < whole.frames.size(); ++i) {
    const Frame& a = whole.frames[i];
    const Frame& b = chunked.frames[i];
    if (a.kind != b.kind || a.payload != b.payload || a.detail != b.detail) std::abort();
    if (a.payload.size() > limit) std::abort();
    if (a.kind != Frame::message && !a.payload.empty()) std::abort();
    if (a.kind == Frame::message && whole.mode == Framing::ndjson && a.payload.find('\n') != std::string::npos)
      std::abort();
  }
  // A message re-framed in the mode the stream used reads back as itself.
  if (whole.mode == Framing::content_length) {
    for (const Frame& f : whole.frames) {
      if (f.kind != Frame::message) continue;
      FrameReader again(limit);
      again.feed(encode_frame(f.payload, Framing::content_length));
      auto back = again.next();
      if (!back || back->kind != Frame::message || back->payload != f.payload) std::abort();
    }
  }
  return 0;
}
