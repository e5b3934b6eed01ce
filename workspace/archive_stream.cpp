// zstd's streaming API over a file descriptor (libzstd, linked statically like the rest).
#include "workspace/archive_stream.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>

namespace kiln::workspace {

namespace {

Result<void> write_fd(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return fail(Errc::io, fmt::format("cannot write the archive: {}", std::strerror(errno)));
    }
    p += w;
    n -= std::size_t(w);
  }
  return {};
}

Result<std::size_t> read_fd(int fd, char* p, std::size_t n, const std::string& shown) {
  for (;;) {
    ssize_t r = ::read(fd, p, n);
    if (r >= 0) return std::size_t(r);
    if (errno != EINTR) return fail(Errc::io, fmt::format("cannot read {}: {}", shown, std::strerror(errno)));
  }
}

class PlainOutput final : public ArchiveOutput {
 public:
  explicit PlainOutput(int fd) : fd_(fd) {}
  Result<void> write(std::string_view d) override {
    // Gathered into 1 MiB writes: tar hands over 512-byte headers one at a time.
    buf_.append(d);
    if (buf_.size() >= (1 << 20)) return flush();
    return {};
  }
  Result<void> finish() override { return flush(); }

 private:
  Result<void> flush() {
    auto r = write_fd(fd_, buf_.data(), buf_.size());
    buf_.clear();
    return r;
  }
  int fd_;
  std::string buf_;
};

class ZstdOutput final : public ArchiveOutput {
 public:
  ZstdOutput(int fd, ZSTD_CCtx* c) : fd_(fd), cctx_(c), out_(ZSTD_CStreamOutSize()) {}
  ~ZstdOutput() override { ZSTD_freeCCtx(cctx_); }
  Result<void> write(std::string_view d) override {
    ZSTD_inBuffer in{d.data(), d.size(), 0};
    while (in.pos < in.size) {
      if (auto r = step(in, ZSTD_e_continue); !r) return std::unexpected(r.error());
    }
    return {};
  }
  Result<void> finish() override {
    ZSTD_inBuffer in{nullptr, 0, 0};
    for (;;) {
      auto left = step(in, ZSTD_e_end);
      if (!left) return std::unexpected(left.error());
      if (*left == 0) return {};
    }
  }

 private:
  Result<std::size_t> step(ZSTD_inBuffer& in, ZSTD_EndDirective how) {
    ZSTD_outBuffer o{out_.data(), out_.size(), 0};
    std::size_t left = ZSTD_compressStream2(cctx_, &o, &in, how);
    if (ZSTD_isError(left)) return fail(Errc::internal, fmt::format("zstd: {}", ZSTD_getErrorName(left)));
    if (auto r = write_fd(fd_, out_.data(), o.pos); !r) return std::unexpected(r.error());
    return left;
  }
  int fd_;
  ZSTD_CCtx* cctx_;
  std::vector<char> out_;
};

class PlainInput final : public ArchiveInput {
 public:
  PlainInput(UniqueFd fd, std::string shown, std::string head)
      : fd_(std::move(fd)), shown_(std::move(shown)), head_(std::move(head)) {}
  Result<std::size_t> read(char* buf, std::size_t n) override {
    if (pos_ < head_.size()) {
      std::size_t k = std::min(n, head_.size() - pos_);
      std::memcpy(buf, head_.data() + pos_, k);
      pos_ += k;
      return k;
    }
    return read_fd(fd_.get(), buf, n, shown_);
  }
  bool compressed() const override { return false; }

 private:
  UniqueFd fd_;
  std::string shown_;
  std::string head_;  // the bytes read to tell the format
  std::size_t pos_ = 0;
};

class ZstdInput final : public ArchiveInput {
 public:
  ZstdInput(UniqueFd fd, std::string shown, std::string head, ZSTD_DCtx* d)
      : fd_(std::move(fd)), shown_(std::move(shown)), dctx_(d), in_buf_(ZSTD_DStreamInSize()) {
    std::memcpy(in_buf_.data(), head.data(), head.size());
    in_ = {in_buf_.data(), head.size(), 0};
  }
  ~ZstdInput() override { ZSTD_freeDCtx(dctx_); }
  Result<std::size_t> read(char* buf, std::size_t n) override {
    for (;;) {
      if (in_.pos == in_.size && !eof_) {
        auto got = read_fd(fd_.get(), in_buf_.data(), in_buf_.size(), shown_);
        if (!got) return std::unexpected(got.error());
        if (*got == 0) eof_ = true;
        in_ = {in_buf_.data(), *got, 0};
      }
      ZSTD_outBuffer o{buf, n, 0};
      const std::size_t consumed_before = in_.pos;
      std::size_t hint = ZSTD_decompressStream(dctx_, &o, &in_);
      if (ZSTD_isError(hint))
        return fail(Errc::invalid_argument, fmt::format("{} is damaged (zstd: {})", shown_, ZSTD_getErrorName(hint)));
      // A call with no input left says nothing about the frame (it would ask for the next one).
      if (in_.pos != consumed_before || o.pos > 0) frame_done_ = hint == 0;
      if (o.pos > 0) return o.pos;
      if (eof_ && in_.pos == in_.size) {
        if (!frame_done_) return fail(Errc::invalid_argument, fmt::format("{} ends in the middle of a zstd frame (is it truncated?)", shown_));
        return std::size_t(0);
      }
    }
  }
  bool compressed() const override { return true; }

 private:
  UniqueFd fd_;
  std::string shown_;
  ZSTD_DCtx* dctx_;
  std::vector<char> in_buf_;
  ZSTD_inBuffer in_{};
  bool eof_ = false;
  bool frame_done_ = true;
};

}  // namespace

Result<std::unique_ptr<ArchiveOutput>> ArchiveOutput::open(int fd, bool zstd, int level) {
  if (!zstd) return std::unique_ptr<ArchiveOutput>(new PlainOutput(fd));
  ZSTD_CCtx* c = ZSTD_createCCtx();
  if (!c) return fail(Errc::internal, "zstd: cannot allocate a compression context");
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  return std::unique_ptr<ArchiveOutput>(new ZstdOutput(fd, c));
}

Result<std::unique_ptr<ArchiveInput>> ArchiveInput::open(UniqueFd fd, const std::string& shown) {
  std::string head(4, '\0');
  std::size_t have = 0;
  while (have < head.size()) {
    auto got = read_fd(fd.get(), head.data() + have, head.size() - have, shown);
    if (!got) return std::unexpected(got.error());
    if (*got == 0) break;
    have += *got;
  }
  head.resize(have);
  static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};  // ZSTD_MAGICNUMBER, little-endian
  if (have == 4 && std::memcmp(head.data(), magic, 4) == 0) {
    ZSTD_DCtx* d = ZSTD_createDCtx();
    if (!d) return fail(Errc::internal, "zstd: cannot allocate a decompression context");
    return std::unique_ptr<ArchiveInput>(new ZstdInput(std::move(fd), shown, std::move(head), d));
  }
  return std::unique_ptr<ArchiveInput>(new PlainInput(std::move(fd), shown, std::move(head)));
}

}  // namespace kiln::workspace
