// Unguessable identifiers (session ids, task ids, elicitation ids): `bytes` random bytes from
// libsodium, as lowercase hex. Header-only like the rest of core: the layer that includes it links
// libsodium and has called sodium_init().
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <sodium.h>

namespace kiln {

inline std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  randombytes_buf(raw.data(), raw.size());
  std::string hex(bytes * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), raw.data(), raw.size());
  sodium_memzero(raw.data(), raw.size());
  hex.pop_back();
  return hex;
}

}  // namespace kiln
