// The sandbox's seccomp filter, as rules given to libseccomp and exported as a classic BPF program
// for x86_64. Only the build-time generator links libseccomp; kiln-sandbox embeds its output.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

namespace kiln::seccomp_gen {

// The filter's program; false with `error` saying which rule or step failed.
bool build_program(std::vector<sock_filter>& out, std::string& error);

}  // namespace kiln::seccomp_gen
