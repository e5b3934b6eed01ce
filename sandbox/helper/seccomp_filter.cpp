// The seccomp filter, embedded: compiled from sandbox/seccomp_gen/seccomp_rules.cpp by libseccomp
// at build time (kiln-seccomp-gen), so no sandbox pays for the compile and the helper does not
// link libseccomp.
#include "sandbox/helper/seccomp_filter.h"

#include <sys/prctl.h>

#include <iterator>

#include <linux/seccomp.h>

namespace kiln::helper {

namespace {

const sock_filter kProgram[] = {
#include "seccomp_program.inc"
};

}  // namespace

void load_seccomp_program(SeccompProgram& out) { out.insns.assign(std::begin(kProgram), std::end(kProgram)); }

bool seccomp_enforce(const SeccompProgram& prog) {
  if (prog.insns.empty()) return true;
  sock_fprog fp{};
  fp.len = static_cast<unsigned short>(prog.insns.size());
  fp.filter = const_cast<sock_filter*>(prog.insns.data());
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) == 0;
}

}  // namespace kiln::helper
