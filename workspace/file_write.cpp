// file_write: whole-file replacement that is atomic (temp file + rename) and, with if_sha256,
// refuses to clobber changes made since the caller last read the file.
#include <fcntl.h>
#include <fmt/format.h>

#include "workspace/file_ops.h"
#include "workspace/file_ops_internal.h"

namespace kiln::workspace {

Result<WriteResult> write_file(const Root& root, const WriteRequest& req, std::stop_token stop) {
  auto rel = root.relative(req.path);
  if (!rel) return std::unexpected(rel.error());
  std::string decoded;
  std::string_view content = req.content;
  if (req.encoding == Encoding::base64) {
    auto bytes = detail::base64_decode(req.content);
    if (!bytes) return std::unexpected(bytes.error());
    decoded = std::move(*bytes);
    content = decoded;
  }
  auto target = detail::locate_for_write(root, req.path, req.create_dirs);
  if (!target) return std::unexpected(target.error());

  if (req.if_sha256) {
    if (!target->exists) {
      return fail(Errc::conflict, fmt::format("'{}' no longer exists, so it changed since you read it (if_sha256 was "
                                              "given); check where it went, or write without if_sha256 to create it",
                                              req.path));
    }
    auto now_hash = detail::sha256_file(target->parent.dir.get(), target->parent.name, req.path, kWholeFileBytes,
                                        std::move(stop));
    if (!now_hash) return std::unexpected(now_hash.error());
    const std::string& now = *now_hash;
    if (!detail::same_sha256(*req.if_sha256, now)) {
      return fail(Errc::conflict, fmt::format("'{}' changed since you read it (sha256 now {}); read it again and retry",
                                              req.path, now));
    }
  }
  mode_t mode = target->exists ? (target->st.st_mode & 07777) : 0644;
  auto written = detail::atomic_replace(target->parent, content, mode, req.path);
  if (!written) return std::unexpected(written.error());
  WriteResult out;
  out.path = *rel;
  out.size = content.size();
  out.sha256 = sha256_hex(content);
  out.created = !target->exists;
  return out;
}

}  // namespace kiln::workspace
