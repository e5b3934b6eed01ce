// The ustar block layout and pax records (POSIX.1-2001 pax format); the reader also takes GNU
// long names and base-256 numbers, which GNU tar writes by default, so any common tarball opens.
#include "workspace/tar_format.h"

#include "workspace/search_text.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

constexpr std::size_t kBlock = 512;
constexpr std::size_t kRecord = 10240;  // tar(1)'s default blocking factor, 20
constexpr std::uint64_t kMaxOctal11 = 077777777777ULL;  // the largest size a 12-byte field holds in octal
constexpr std::uint64_t kMaxPaxHeader = 1 << 20;       // one entry's extended header, at most
constexpr std::uint64_t kMaxLongName = 64 * 1024;      // a GNU long name or link target, at most

bool ascii_plain(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

void put_string(char* field, std::size_t width, std::string_view s) {
  std::memcpy(field, s.data(), std::min(width, s.size()));
}

// Octal, zero-padded to width-1 digits and a NUL (the value must fit).
void put_octal(char* field, std::size_t width, std::uint64_t v) {
  std::string digits = fmt::format("{:0{}o}", v, width - 1);
  std::memcpy(field, digits.data(), width - 1);
  field[width - 1] = '\0';
}

void put_checksum(char* block) {
  std::memset(block + 148, ' ', 8);
  unsigned sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(block[i]);
  std::string digits = fmt::format("{:06o}", sum);
  std::memcpy(block + 148, digits.data(), 6);
  block[154] = '\0';
  block[155] = ' ';
}

std::array<char, kBlock> header_block(std::string_view name, std::string_view prefix, std::uint32_t mode,
                                      std::uint64_t size, std::int64_t mtime, char typeflag,
                                      std::string_view linkname) {
  std::array<char, kBlock> b{};
  put_string(b.data(), 100, name);
  put_octal(b.data() + 100, 8, mode & 07777);
  put_octal(b.data() + 108, 8, 0);  // uid, gid: 0, like `tar --owner=0 --group=0`
  put_octal(b.data() + 116, 8, 0);
  put_octal(b.data() + 124, 12, size);
  put_octal(b.data() + 136, 12, std::uint64_t(std::clamp<std::int64_t>(mtime, 0, std::int64_t(kMaxOctal11))));
  b[156] = typeflag;
  put_string(b.data() + 157, 100, linkname);
  std::memcpy(b.data() + 257, "ustar\0" "00", 8);
  put_octal(b.data() + 329, 8, 0);
  put_octal(b.data() + 337, 8, 0);
  put_string(b.data() + 345, 155, prefix);
  put_checksum(b.data());
  return b;
}

// Splits a path into ustar's prefix (155) and name (100) at a '/', when it can be.
bool ustar_split(std::string_view path, std::string_view& prefix, std::string_view& name) {
  if (path.size() <= 100) {
    prefix = {};
    name = path;
    return true;
  }
  for (std::size_t slash = path.rfind('/'); slash != std::string_view::npos && slash > 0;
       slash = path.rfind('/', slash - 1)) {
    if (slash <= 155 && path.size() - slash - 1 <= 100 && path.size() - slash - 1 > 0) {
      prefix = path.substr(0, slash);
      name = path.substr(slash + 1);
      return true;
    }
    if (slash == 0) break;
  }
  return false;
}

std::string field_string(const char* field, std::size_t width) {
  return std::string(field, strnlen(field, width));
}

Result<std::uint64_t> field_number(const char* field, std::size_t width, std::string_view what) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {  // GNU base-256: big-endian, the top bit of the first byte as the marker
    if (u[0] & 0x40) return fail(Errc::invalid_argument, fmt::format("the archive has a negative {}", what));
    std::uint64_t v = u[0] & 0x3f;
    for (std::size_t i = 1; i < width; ++i) {
      if (v >> 56) return fail(Errc::invalid_argument, fmt::format("the archive has a {} too large to use", what));
      v = (v << 8) | u[i];
    }
    return v;
  }
  std::size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  std::uint64_t v = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 60) return fail(Errc::invalid_argument, fmt::format("the archive has a {} too large to use", what));
    v = v * 8 + std::uint64_t(field[i] - '0');
  }
  for (; i < width; ++i)
    if (field[i] != ' ' && field[i] != '\0')
      return fail(Errc::invalid_argument, fmt::format("not a tar archive (a {} field holds '{}')", what, field[i]));
  return v;
}

bool checksum_ok(const char* block) {
  auto stored = field_number(block + 148, 8, "checksum");
  if (!stored) return false;
  unsigned usum = 0;
  int ssum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    char c = (i >= 148 && i < 156) ? ' ' : block[i];
    usum += static_cast<unsigned char>(c);
    ssum += static_cast<signed char>(c);
  }
  return *stored == usum || std::int64_t(*stored) == ssum;
}

// pax records "LEN key=value\n" into key -> value.
Result<std::map<std::string, std::string>> parse_pax(std::string_view body) {
  std::map<std::string, std::string> out;
  while (!body.empty()) {
    std::size_t sp = body.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp > 20)
      return fail(Errc::invalid_argument, "the archive has a damaged pax extended header");
    std::uint64_t len = 0;
    for (std::size_t i = 0; i < sp; ++i) {
      if (body[i] < '0' || body[i] > '9') return fail(Errc::invalid_argument, "the archive has a damaged pax extended header");
      len = len * 10 + std::uint64_t(body[i] - '0');
    }
    if (len <= sp + 1 || len > body.size() || body[len - 1] != '\n')
      return fail(Errc::invalid_argument, "the archive has a damaged pax extended header");
    std::string_view rec = body.substr(sp + 1, len - sp - 2);
    std::size_t eq = rec.find('=');
    if (eq == std::string_view::npos) return fail(Errc::invalid_argument, "the archive has a damaged pax extended header");
    out[std::string(rec.substr(0, eq))] = std::string(rec.substr(eq + 1));
    body.remove_prefix(len);
  }
  return out;
}

Result<std::uint64_t> pax_number(const std::string& v, std::string_view key) {
  // mtime may carry a fraction ("1700000000.123"); the whole seconds are what is kept.
  std::uint64_t n = 0;
  std::size_t i = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) {
    if (n > (UINT64_MAX - 9) / 10) return fail(Errc::invalid_argument, fmt::format("pax {} is too large", key));
    n = n * 10 + std::uint64_t(v[i] - '0');
  }
  if (i == 0 || (i < v.size() && v[i] != '.')) return fail(Errc::invalid_argument, fmt::format("pax {} is not a number: {}", key, v));
  return n;
}

}  // namespace

std::string_view to_string(TarType t) {
  switch (t) {
    case TarType::file: return "file";
    case TarType::dir: return "folder";
    case TarType::symlink: return "symbolic link";
    case TarType::hardlink: return "hard link";
    case TarType::char_device: return "character device";
    case TarType::block_device: return "block device";
    case TarType::fifo: return "FIFO";
    case TarType::other: return "special entry";
  }
  return "special entry";
}

std::string pax_record(std::string_view key, std::string_view value) {
  // The length counts its own digits: grow it until it is stable.
  std::size_t rest = key.size() + value.size() + 3;  // ' ', '=', '\n'
  std::size_t len = rest + 1;
  while (std::to_string(len).size() + rest != len) len = std::to_string(len).size() + rest;
  return fmt::format("{} {}={}\n", len, key, value);
}

Result<void> TarWriter::emit(std::string_view data) {
  if (auto r = sink_(data); !r) return r;
  written_ += data.size();
  return {};
}

Result<void> TarWriter::end_entry() {
  if (remaining_ != 0)
    return fail(Errc::internal, fmt::format("tar entry ended {} bytes short of its size", remaining_));
  static const char zeros[kBlock] = {};
  if (std::size_t pad = (kBlock - entry_size_ % kBlock) % kBlock; pad) {
    if (auto r = emit(std::string_view(zeros, pad)); !r) return r;
  }
  entry_size_ = 0;
  return {};
}

Result<void> TarWriter::add(const TarHeader& h) {
  if (auto r = end_entry(); !r) return r;
  std::string path = h.path;
  if (h.type == TarType::dir && (path.empty() || path.back() != '/')) path += '/';
  char flag = h.type == TarType::dir ? '5' : h.type == TarType::symlink ? '2' : h.type == TarType::file ? '0' : 0;
  if (!flag) return fail(Errc::internal, "the tar writer writes files, folders and symbolic links only");
  const std::uint64_t size = h.type == TarType::file ? h.size : 0;

  std::string pax;
  std::string_view prefix, name;
  const bool path_fits = ascii_plain(path) && ustar_split(path, prefix, name);
  const bool link_fits = h.link_target.size() <= 100 && ascii_plain(h.link_target);
  if ((!path_fits && !valid_utf8(path)) || (!link_fits && !valid_utf8(h.link_target)))
    pax += pax_record("hdrcharset", "BINARY");  // bytes, not UTF-8: names are taken as they are
  if (!path_fits) {
    pax += pax_record("path", path);
    prefix = {};
    name = std::string_view(path).substr(0, 100);
  }
  if (!link_fits) pax += pax_record("linkpath", h.link_target);
  if (size > kMaxOctal11) pax += pax_record("size", std::to_string(size));
  if (h.mtime < 0 || std::uint64_t(h.mtime) > kMaxOctal11) pax += pax_record("mtime", std::to_string(h.mtime));
  if (!pax.empty()) {
    auto x = header_block("PaxHeaders/entry", {}, 0644, pax.size(), h.mtime, 'x', {});
    if (auto r = emit(std::string_view(x.data(), x.size())); !r) return r;
    entry_size_ = pax.size();
    if (auto r = emit(pax); !r) return r;
    if (auto r = end_entry(); !r) return r;
  }
  auto b = header_block(name, prefix, h.mode, size > kMaxOctal11 ? 0 : size, h.mtime, flag,
                        std::string_view(h.link_target).substr(0, 100));
  if (auto r = emit(std::string_view(b.data(), b.size())); !r) return r;
  remaining_ = size;
  entry_size_ = size;
  return {};
}

Result<void> TarWriter::write_data(std::string_view data) {
  if (data.size() > remaining_) return fail(Errc::internal, "more data than the tar entry's size");
  remaining_ -= data.size();
  return emit(data);
}

Result<void> TarWriter::finish() {
  if (auto r = end_entry(); !r) return r;
  static const char zeros[kRecord] = {};
  if (auto r = emit(std::string_view(zeros, 2 * kBlock)); !r) return r;
  if (std::size_t pad = (kRecord - written_ % kRecord) % kRecord; pad) return emit(std::string_view(zeros, pad));
  return {};
}

Result<void> TarReader::read_exact(char* buf, std::size_t n) {
  while (n > 0) {
    auto got = source_(buf, n);
    if (!got) return std::unexpected(got.error());
    if (*got == 0) return fail(Errc::invalid_argument, "the archive ends in the middle of an entry (is it truncated?)");
    buf += *got;
    n -= *got;
  }
  return {};
}

Result<bool> TarReader::read_block(char* block) {
  std::size_t have = 0;
  while (have < kBlock) {
    auto got = source_(block + have, kBlock - have);
    if (!got) return std::unexpected(got.error());
    if (*got == 0) {
      if (have == 0) return false;
      return fail(Errc::invalid_argument, "the archive ends in the middle of a header (it is truncated, or not a tar archive)");
    }
    have += *got;
  }
  return true;
}

Result<void> TarReader::skip_rest() {
  char buf[16384];
  std::uint64_t left = remaining_ + padding_;
  while (left > 0) {
    std::size_t n = std::size_t(std::min<std::uint64_t>(left, sizeof buf));
    if (auto r = read_exact(buf, n); !r) return r;
    left -= n;
  }
  remaining_ = padding_ = 0;
  return {};
}

Result<std::string> TarReader::read_body(std::uint64_t size, std::uint64_t cap, std::string_view what) {
  if (size > cap) return fail(Errc::too_large, fmt::format("the archive has a {} of {} bytes (at most {})", what, size, cap));
  std::string body(size, '\0');
  if (auto r = read_exact(body.data(), body.size()); !r) return std::unexpected(r.error());
  remaining_ = 0;
  padding_ = (kBlock - size % kBlock) % kBlock;
  if (auto r = skip_rest(); !r) return std::unexpected(r.error());
  return body;
}

Result<std::optional<TarHeader>> TarReader::next() {
  if (done_) return std::optional<TarHeader>();
  if (auto r = skip_rest(); !r) return std::unexpected(r.error());
  std::map<std::string, std::string> pax;
  std::optional<std::string> long_name, long_link;
  char block[kBlock];
  for (;;) {
    auto got = read_block(block);
    if (!got) return std::unexpected(got.error());
    if (!*got) {  // the stream ended without the two zero blocks: take it as the end
      done_ = true;
      return std::optional<TarHeader>();
    }
    if (std::all_of(block, block + kBlock, [](char c) { return c == 0; })) {
      done_ = true;  // the end-of-archive marker; what follows is padding
      return std::optional<TarHeader>();
    }
    if (!checksum_ok(block)) return fail(Errc::invalid_argument, "not a tar archive (a header's checksum is wrong)");
    const char flag = block[156];
    auto size = field_number(block + 124, 12, "size");
    if (!size) return std::unexpected(size.error());
    if (flag == 'x' || flag == 'g') {
      auto body = read_body(*size, kMaxPaxHeader, "pax extended header");
      if (!body) return std::unexpected(body.error());
      auto recs = parse_pax(*body);
      if (!recs) return std::unexpected(recs.error());
      if (flag == 'x')  // global headers ('g') are defaults this reader has no use for
        for (auto& [k, v] : *recs) pax[k] = std::move(v);
      continue;
    }
    if (flag == 'L' || flag == 'K') {
      auto body = read_body(*size, kMaxLongName, "GNU long name");
      if (!body) return std::unexpected(body.error());
      body->resize(strnlen(body->data(), body->size()));
      (flag == 'L' ? long_name : long_link) = std::move(*body);
      continue;
    }
    TarHeader h;
    h.typeflag = flag;
    const bool ustar = std::memcmp(block + 257, "ustar\0", 6) == 0;
    std::string prefix = ustar ? field_string(block + 345, 155) : std::string();
    h.path = field_string(block, 100);
    if (!prefix.empty()) h.path = prefix + "/" + h.path;
    if (long_name) h.path = *long_name;
    if (auto it = pax.find("path"); it != pax.end()) h.path = it->second;
    h.link_target = field_string(block + 157, 100);
    if (long_link) h.link_target = *long_link;
    if (auto it = pax.find("linkpath"); it != pax.end()) h.link_target = it->second;
    auto mode = field_number(block + 100, 8, "mode");
    if (!mode) return std::unexpected(mode.error());
    h.mode = std::uint32_t(*mode & 07777);
    auto mtime = field_number(block + 136, 12, "mtime");
    h.mtime = mtime ? std::int64_t(*mtime) : 0;
    if (auto it = pax.find("mtime"); it != pax.end())
      if (auto m = pax_number(it->second, "mtime")) h.mtime = std::int64_t(*m);
    h.size = *size;
    if (auto it = pax.find("size"); it != pax.end()) {
      auto s = pax_number(it->second, "size");
      if (!s) return std::unexpected(s.error());
      h.size = *s;
    }
    switch (flag) {
      case '0': case '\0': case '7':
        h.type = !h.path.empty() && h.path.back() == '/' ? TarType::dir : TarType::file;
        break;
      case '1': h.type = TarType::hardlink; break;
      case '2': h.type = TarType::symlink; break;
      case '3': h.type = TarType::char_device; break;
      case '4': h.type = TarType::block_device; break;
      case '5': h.type = TarType::dir; break;
      case '6': h.type = TarType::fifo; break;
      default: h.type = TarType::other; break;
    }
    // Only files and unknown kinds carry data; a folder's or a link's size field says nothing.
    std::uint64_t data = (h.type == TarType::file || h.type == TarType::other) ? h.size : 0;
    if (h.type != TarType::file) h.size = h.type == TarType::other ? h.size : 0;
    remaining_ = data;
    padding_ = (kBlock - data % kBlock) % kBlock;
    return std::optional<TarHeader>(std::move(h));
  }
}

Result<std::size_t> TarReader::read_data(char* buf, std::size_t n) {
  std::size_t want = std::size_t(std::min<std::uint64_t>(n, remaining_));
  if (want == 0) return std::size_t(0);
  if (auto r = read_exact(buf, want); !r) return std::unexpected(r.error());
  remaining_ -= want;
  return want;
}

}  // namespace kiln::workspace
