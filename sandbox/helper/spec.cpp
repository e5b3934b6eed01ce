// Spec parsing: nlohmann exceptions stop here; the result is plain data every later step trusts.
#include "sandbox/helper/spec.h"

#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

namespace kiln::helper {

namespace {

const char* kStep = "spec";

bool get_string_array(const nlohmann::json& v, const char* name, std::vector<std::string>& out, StepError& e) {
  if (!v.is_array()) return fail_plain(e, kStep, std::string("spec field '") + name + "' must be an array of strings");
  for (const auto& item : v) {
    if (!item.is_string())
      return fail_plain(e, kStep, std::string("spec field '") + name + "' must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return true;
}

}  // namespace

bool is_clean_abs_path(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.find('\0') != std::string::npos) return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  std::size_t pos = 1;
  while (pos <= p.size()) {
    std::size_t next = p.find('/', pos);
    if (next == std::string::npos) next = p.size();
    std::string part = p.substr(pos, next - pos);
    if (part.empty() || part == "." || part == "..") return false;
    pos = next + 1;
  }
  return true;
}

const char* network_name(Network n) {
  switch (n) {
    case Network::none: return "none";
    case Network::loopback: return "loopback";
    case Network::host: return "host";
  }
  return "none";
}

bool parse_spec(const std::string& text, Spec& spec, StepError& e) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& ex) {
    return fail_plain(e, kStep, std::string("spec is not valid JSON: ") + ex.what());
  }
  if (!j.is_object()) return fail_plain(e, kStep, "spec must be a JSON object");
  try {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const auto& v = it.value();
      auto want = [&](bool ok, const char* type) {
        if (!ok) fail_plain(e, kStep, "spec field '" + k + "' must be " + type);
        return ok;
      };
      if (k == "id") {
        if (!want(v.is_string(), "a string")) return false;
        spec.id = v.get<std::string>();
      } else if (k == "workspace") {
        if (!want(v.is_string(), "a string")) return false;
        spec.workspace = v.get<std::string>();
      } else if (k == "workspace_dev" || k == "workspace_ino") {
        if (!want(v.is_number_unsigned(), "an unsigned number")) return false;
        (k == "workspace_dev" ? spec.workspace_dev : spec.workspace_ino) = v.get<std::uint64_t>();
        spec.workspace_identity = true;
      } else if (k == "workspace_writable") {
        if (!want(v.is_boolean(), "a boolean")) return false;
        spec.workspace_writable = v.get<bool>();
      } else if (k == "ro_binds") {
        if (!get_string_array(v, "ro_binds", spec.ro_binds, e)) return false;
      } else if (k == "data_binds") {
        if (!want(v.is_array() && v.size() <= 16, "an array of at most 16 {source, target, dev, ino}")) return false;
        for (const auto& b : v) {
          if (!b.is_object() || b.size() != 4 || !b.contains("source") || !b["source"].is_string() ||
              !b.contains("target") || !b["target"].is_string() || !b.contains("dev") ||
              !b["dev"].is_number_unsigned() || !b.contains("ino") || !b["ino"].is_number_unsigned())
            return fail_plain(e, kStep, "each data_binds entry must be exactly {source, target, dev, ino}");
          spec.data_binds.push_back({b["source"].get<std::string>(), b["target"].get<std::string>(),
                                     b["dev"].get<std::uint64_t>(), b["ino"].get<std::uint64_t>()});
        }
      } else if (k == "network") {
        if (!want(v.is_string(), "\"none\", \"loopback\" or \"host\"")) return false;
        auto s = v.get<std::string>();
        if (s == "none") spec.network = Network::none;
        else if (s == "loopback") spec.network = Network::loopback;
        else if (s == "host") spec.network = Network::host;
        else return fail_plain(e, kStep, "spec field 'network' must be \"none\", \"loopback\" or \"host\"");
      } else if (k == "hostname") {
        if (!want(v.is_string(), "a string")) return false;
        spec.hostname = v.get<std::string>();
        if (spec.hostname.empty() || spec.hostname.size() > 64)
          return fail_plain(e, kStep, "spec field 'hostname' must be 1 to 64 characters");
      } else if (k == "tmp_size_mb") {
        if (!want(v.is_number_unsigned() && v.get<unsigned long>() >= 1 && v.get<unsigned long>() <= 1048576,
                  "an integer from 1 to 1048576"))
          return false;
        spec.tmp_size_mb = v.get<unsigned>();
      } else if (k == "uid" || k == "gid") {
        if (!want(v.is_number_unsigned() && v.get<unsigned long>() < 4294967295UL, "a non-negative integer"))
          return false;
        (k == "uid" ? spec.uid : spec.gid) = static_cast<long>(v.get<unsigned long>());
      } else if (k == "cgroups") {
        if (!get_string_array(v, "cgroups", spec.cgroups, e)) return false;
      } else if (k == "seccomp") {
        if (!want(v.is_boolean(), "a boolean")) return false;
        spec.seccomp = v.get<bool>();
      } else if (k == "landlock") {
        if (!want(v.is_boolean(), "a boolean")) return false;
        spec.landlock = v.get<bool>();
      } else if (k == "single_exec") {
        if (!want(v.is_boolean(), "a boolean")) return false;
        spec.single_exec = v.get<bool>();
      } else {
        return fail_plain(e, kStep, "unknown spec field '" + k + "'",
                          "kiln and kiln-sandbox are from different builds; reinstall them together");
      }
    }
  } catch (const std::exception& ex) {
    return fail_plain(e, kStep, std::string("spec: ") + ex.what());
  }

  if (spec.workspace.empty()) return fail_plain(e, kStep, "spec field 'workspace' is required");
  if (!is_clean_abs_path(spec.workspace))
    return fail_plain(e, kStep, "workspace '" + spec.workspace + "' is not a clean absolute path");
  // No realpath here: resolving again would follow a symlink swapped in since kiln checked the
  // path. The mount step opens it without following any and compares it with workspace_dev/ino.
  if (spec.workspace == "/") return fail_plain(e, kStep, "the workspace cannot be /");
  for (const auto& p : spec.ro_binds)
    if (!is_clean_abs_path(p) || p == "/")
      return fail_plain(e, kStep, "ro_binds entry '" + p + "' is not a clean absolute path (and not /)");
  for (const auto& p : spec.cgroups)
    if (!is_clean_abs_path(p)) return fail_plain(e, kStep, "cgroups entry '" + p + "' is not a clean absolute path");
  // Only below /var/lib/kiln inside: nowhere a system folder, the workspace or /tmp could be covered.
  for (const auto& b : spec.data_binds) {
    if (!is_clean_abs_path(b.source) || b.source == "/")
      return fail_plain(e, kStep, "data_binds source '" + b.source + "' is not a clean absolute path (and not /)");
    if (!is_clean_abs_path(b.target) || b.target.rfind("/var/lib/kiln/", 0) != 0)
      return fail_plain(e, kStep, "data_binds target '" + b.target + "' must be a clean path below /var/lib/kiln/");
  }
  return true;
}

}  // namespace kiln::helper
