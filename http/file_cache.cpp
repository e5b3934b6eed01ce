// The small-blob cache of `kiln serve` (declared in server_impl.h): published files up to
// 64 KiB are read once and answered from memory, since a blob never changes under its sha256.
#include <fstream>

#include "http/server_impl.h"

namespace kiln::server::http {

std::shared_ptr<const std::string> FileCache::get(const std::string& sha256, const std::string& path,
                                                  std::uint64_t size) {
  {
    std::shared_lock lock(mu_);
    if (auto it = files_.find(sha256); it != files_.end()) return it->second;
  }
  auto data = std::make_shared<std::string>(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(data->data(), static_cast<std::streamsize>(size)) || in.peek() != std::ifstream::traits_type::eof()) {
    return nullptr;
  }
  std::unique_lock lock(mu_);
  if (bytes_ + size > kMaxTotal) {  // rare enough that dropping everything beats bookkeeping
    files_.clear();
    bytes_ = 0;
  }
  auto [it, inserted] = files_.emplace(sha256, std::move(data));
  if (inserted) bytes_ += size;
  return it->second;
}

}  // namespace kiln::server::http
