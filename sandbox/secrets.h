// Secrets by name: values come from the server's environment or from `kiln secret set NAME`
// (a 0600 file under <state>/secrets/). Only names travel in policies, traces and results.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace kiln::sandbox {

// A secret name is an environment variable name: [A-Za-z_][A-Za-z0-9_]{0,127}.
bool valid_secret_name(const std::string& name);

class SecretStore {
 public:
  explicit SecretStore(std::string state_dir) : dir_(std::move(state_dir) + "/secrets") {}

  // Stores `value` for `name` (0600, folder 0700, written atomically).
  Result<void> set(const std::string& name, const std::string& value) const;
  Result<bool> remove(const std::string& name) const;
  std::vector<std::string> names() const;

  // name -> value for each requested name: the server's environment wins, then the store.
  // A name found in neither is an error naming it and saying how to provide it.
  Result<std::map<std::string, std::string>> resolve(const std::vector<std::string>& names) const;

 private:
  std::string dir_;
};

}  // namespace kiln::sandbox
