// The local user's principal name, computed once.
#include "mcp/principal.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace kiln::server {

const std::string& local_principal() {
  static const std::string name = [] {
    uid_t uid = ::geteuid();
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_name &&
        valid_principal_name(found->pw_name)) {
      return std::string(found->pw_name);
    }
    return "uid" + std::to_string(uid);
  }();
  return name;
}

bool valid_principal_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '@' || c == '-';
  });
}

}  // namespace kiln::server
