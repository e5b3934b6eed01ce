// Frame splitting under the conditions stdio really produces: odd chunking, CRLF, blank lines,
// LSP headers, oversize messages that must not be buffered, and garbage the reader must survive.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/framing.h"

using kiln::protocol::encode_frame;
using kiln::protocol::Frame;
using kiln::protocol::FrameReader;
using kiln::protocol::Framing;

namespace {

std::vector<Frame> drain(FrameReader& r) {
  std::vector<Frame> out;
  while (auto f = r.next()) out.push_back(std::move(*f));
  return out;
}

std::vector<Frame> feed_bytewise(FrameReader& r, std::string_view s) {
  for (char c : s) r.feed(std::string_view(&c, 1));
  return drain(r);
}

std::vector<std::string> payloads(const std::vector<Frame>& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames) {
    out.push_back(f.kind == Frame::message ? f.payload
                  : f.kind == Frame::oversize ? "<oversize>"
                                              : "<framing_error>");
  }
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("ndjson: whole chunk with several messages") {
  FrameReader r;
  CHECK(r.mode() == Framing::undecided);
  r.feed("{\"a\":1}\n{\"b\":2}\n");
  CHECK(r.mode() == Framing::ndjson);
  CHECK(payloads(drain(r)) == Strings{"{\"a\":1}", "{\"b\":2}"});
  CHECK_FALSE(r.next().has_value());
}

TEST_CASE("ndjson: byte-at-a-time feeding gives the same messages") {
  FrameReader r;
  CHECK(payloads(feed_bytewise(r, "{\"a\":1}\n{\"b\":\"x y\"}\n")) ==
        Strings{"{\"a\":1}", "{\"b\":\"x y\"}"});
}

TEST_CASE("ndjson: a line is only complete at its newline") {
  FrameReader r;
  r.feed("{\"a\":");
  CHECK_FALSE(r.next().has_value());
  CHECK(r.buffered_bytes() == 5);
  r.feed("1}");
  CHECK_FALSE(r.next().has_value());
  r.feed("\n");
  CHECK(payloads(drain(r)) == Strings{"{\"a\":1}"});
  CHECK(r.buffered_bytes() == 0);
}

TEST_CASE("ndjson: exactly one trailing CR is stripped") {
  FrameReader r;
  r.feed("{}\r\n[1]\r\r\n");
  CHECK(payloads(drain(r)) == Strings{"{}", "[1]\r"});
}

TEST_CASE("ndjson: blank and whitespace-only lines are skipped") {
  FrameReader r;
  r.feed("{}\n\n   \n\t\r\n\r\n{\"x\":1}\n");
  CHECK(payloads(drain(r)) == Strings{"{}", "{\"x\":1}"});
}

TEST_CASE("mode detection skips leading whitespace") {
  SUBCASE("ndjson") {
    FrameReader r;
    r.feed("\r\n\n  \t");
    CHECK(r.mode() == Framing::undecided);
    r.feed("{\"a\":1}\n");
    CHECK(r.mode() == Framing::ndjson);
    CHECK(payloads(drain(r)) == Strings{"{\"a\":1}"});
  }
  SUBCASE("content-length") {
    FrameReader r;
    r.feed("\r\n  Content-Length: 2\r\n\r\n{}");
    CHECK(r.mode() == Framing::content_length);
    CHECK(payloads(drain(r)) == Strings{"{}"});
  }
}

TEST_CASE("mode detection: header name is case-insensitive and needs the colon") {
  SUBCASE("lower case") {
    FrameReader r;
    CHECK(payloads(feed_bytewise(r, "content-length: 2\r\n\r\n{}")) == Strings{"{}"});
    CHECK(r.mode() == Framing::content_length);
  }
  SUBCASE("upper case") {
    FrameReader r;
    r.feed("CONTENT-LENGTH: 2\r\n\r\n{}");
    CHECK(r.mode() == Framing::content_length);
  }
  SUBCASE("a near miss is ndjson and the held bytes are not lost") {
    FrameReader r;
    r.feed("Content-Lengt");
    CHECK(r.mode() == Framing::undecided);
    r.feed("h 2\n{}\n");
    CHECK(r.mode() == Framing::ndjson);
    CHECK(payloads(drain(r)) == Strings{"Content-Length 2", "{}"});
  }
  SUBCASE("decided once: a later Content-Length line in ndjson is just a line") {
    FrameReader r;
    r.feed("{}\nContent-Length: 2\n");
    CHECK(r.mode() == Framing::ndjson);
    CHECK(payloads(drain(r)) == Strings{"{}", "Content-Length: 2"});
  }
}

TEST_CASE("lsp: several messages in one chunk, with Content-Type and unknown headers") {
  FrameReader r;
  std::string in = "Content-Length: 7\r\n\r\n{\"a\":1}";
  in += "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: 2\r\n\r\n{}";
  in += "X-Whatever: yes\r\ncontent-length:3\r\n\r\n[1]";
  r.feed(in);
  CHECK(r.mode() == Framing::content_length);
  CHECK(payloads(drain(r)) == Strings{"{\"a\":1}", "{}", "[1]"});
}

TEST_CASE("lsp: headers and body split byte-at-a-time; body may contain newlines") {
  FrameReader r;
  const std::string body = "{\n\"a\": \"line\\nx\"\r\n}";
  const std::string in = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                         "Content-Length: 2\r\n\r\n{}";
  CHECK(payloads(feed_bytewise(r, in)) == Strings{body, "{}"});
}

TEST_CASE("lsp: bare LF header endings and stray blank lines between messages are tolerated") {
  FrameReader r;
  r.feed("Content-Length: 2\n\n{}\r\n\r\nContent-Length: 4\n\n[23]");
  CHECK(payloads(drain(r)) == Strings{"{}", "[23]"});
}

TEST_CASE("lsp: a body is complete only after Content-Length bytes") {
  FrameReader r;
  r.feed("Content-Length: 9\r\n\r\n{\"a\":");
  CHECK_FALSE(r.next().has_value());
  r.feed("12");
  CHECK_FALSE(r.next().has_value());
  r.feed("3}Content-Length: 2\r\n\r\n{}");
  CHECK(payloads(drain(r)) == Strings{"{\"a\":123}", "{}"});
}

TEST_CASE("lsp: Content-Length 0 is an empty message, not a hang") {
  FrameReader r;
  r.feed("Content-Length: 0\r\n\r\nContent-Length: 2\r\n\r\n{}");
  CHECK(payloads(drain(r)) == Strings{"", "{}"});
}

TEST_CASE("ndjson: oversize line is reported once, never buffered, and the stream recovers") {
  FrameReader r(16);
  r.feed("{\"ok\":1}\n");
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) {
    r.feed(chunk);
    CHECK(r.buffered_bytes() <= 17);
  }
  r.feed("tail\n{\"after\":2}\n");
  const auto frames = drain(r);
  CHECK(payloads(frames) == Strings{"{\"ok\":1}", "<oversize>", "{\"after\":2}"});
  CHECK(frames[1].detail.find("16-byte limit") != std::string::npos);
  CHECK(r.buffered_bytes() == 0);
}

TEST_CASE("ndjson: the limit is inclusive and a CR does not count against it") {
  FrameReader r(4);
  r.feed("[12]\n[12]\r\n[123]\n[1]\n");
  CHECK(payloads(drain(r)) == Strings{"[12]", "[12]", "<oversize>", "[1]"});
}

TEST_CASE("ndjson: oversize byte-at-a-time and with the newline in the same chunk") {
  SUBCASE("bytewise") {
    FrameReader r(8);
    CHECK(payloads(feed_bytewise(r, "[1,2,3,4,5,6]\n{}\n")) == Strings{"<oversize>", "{}"});
  }
  SUBCASE("one chunk") {
    FrameReader r(8);
    r.feed("[1,2,3,4,5,6]\n{}\n");
    CHECK(payloads(drain(r)) == Strings{"<oversize>", "{}"});
  }
}

TEST_CASE("ndjson: a 40 MiB line under the default 16 MiB limit stays bounded") {
  FrameReader r;
  const std::string chunk(1 << 20, 'x');
  r.feed("{\"a\":\"");
  std::size_t peak = 0;
  for (int i = 0; i < 40; ++i) {
    r.feed(chunk);
    peak = std::max(peak, r.buffered_bytes());
  }
  r.feed("\"}\n{}\n");
  CHECK(peak <= kiln::protocol::kDefaultMaxMessageBytes + 1);
  CHECK(r.buffered_bytes() == 0);
  CHECK(payloads(drain(r)) == Strings{"<oversize>", "{}"});
}

TEST_CASE("lsp: oversize body is skipped by count without buffering") {
  FrameReader r(16);
  r.feed("Content-Length: 100000\r\n\r\n");
  const std::string chunk(999, '[');
  for (int i = 0; i < 100; ++i) {
    r.feed(chunk);
    CHECK(r.buffered_bytes() == 0);
  }
  r.feed(std::string(100, ']'));  // 99900 + 100 = exactly the declared length
  r.feed("Content-Length: 2\r\n\r\n{}");
  const auto frames = drain(r);
  CHECK(payloads(frames) == Strings{"<oversize>", "{}"});
  CHECK(frames[0].detail.find("100000 bytes") != std::string::npos);
}

TEST_CASE("lsp: malformed header blocks yield framing_error and the reader resyncs") {
  SUBCASE("non-numeric length") {
    FrameReader r;
    r.feed("Content-Length: abc\r\n\r\n{}Content-Length: 2\r\n\r\n{}");
    const auto frames = drain(r);
    CHECK(payloads(frames) == Strings{"<framing_error>", "{}"});
    CHECK(frames[0].detail.find("'abc'") != std::string::npos);
  }
  SUBCASE("header line without a colon") {
    FrameReader r;
    r.feed("Content-Length: 2\r\n\r\n{}garbage here\r\n\r\nmore\nContent-Length: 3\r\n\r\n[1]");
    CHECK(payloads(drain(r)) == Strings{"{}", "<framing_error>", "[1]"});
  }
  SUBCASE("header block without Content-Length") {
    FrameReader r;
    r.feed("Content-Length: 2\r\n\r\n{}Content-Type: x\r\n\r\n{}\r\nContent-Length: 2\r\n\r\n{}");
    CHECK(payloads(drain(r)) == Strings{"{}", "<framing_error>", "{}"});
  }
  SUBCASE("conflicting lengths") {
    FrameReader r;
    r.feed("Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}\nContent-Length: 2\r\n\r\n{}");
    CHECK(payloads(drain(r)) == Strings{"<framing_error>", "{}"});
  }
  SUBCASE("endless header line") {
    FrameReader r;
    r.feed("Content-Length: 2\r\n\r\n{}X-Long: ");
    for (int i = 0; i < 100; ++i) r.feed(std::string(1000, 'z'));
    CHECK(r.buffered_bytes() <= 8192);
    r.feed("\r\nContent-Length: 2\r\n\r\n{}");
    CHECK(payloads(drain(r)) == Strings{"{}", "<framing_error>", "{}"});
  }
  SUBCASE("resync finds a header that directly follows an unterminated body") {
    FrameReader r;
    r.feed("Content-Length: x\r\n\r\n{\"a\":\"ccontent\"}CContent-Length: 3\r\n\r\n[7]");
    CHECK(payloads(drain(r)) == Strings{"<framing_error>", "[7]"});
  }
  SUBCASE("resync byte-at-a-time, marker split across feeds") {
    FrameReader r;
    CHECK(payloads(feed_bytewise(r, "Content-Length: -1\r\n\r\nxxCONTENT-LENGTH: zz\nCONTENT-LENGTH: 2\n\n{}")) ==
          Strings{"<framing_error>", "<framing_error>", "{}"});
  }
}

TEST_CASE("encode_frame") {
  CHECK(encode_frame("{}", Framing::ndjson) == "{}\n");
  CHECK(encode_frame("{}", Framing::undecided) == "{}\n");
  CHECK(encode_frame("{\"a\":\"\xc3\xa9\"}", Framing::content_length) ==
        "Content-Length: 10\r\n\r\n{\"a\":\"\xc3\xa9\"}");
}

TEST_CASE("encode_frame round-trips through FrameReader in both framings") {
  for (Framing mode : {Framing::ndjson, Framing::content_length}) {
    FrameReader r;
    std::string stream;
    const Strings msgs = {"{\"jsonrpc\":\"2.0\",\"id\":1}", "{\"x\":\"\xe2\x82\xac\"}", "[]"};
    for (const auto& m : msgs) stream += encode_frame(m, mode);
    CHECK(payloads(feed_bytewise(r, stream)) == msgs);
    CHECK(r.mode() == mode);
  }
}
