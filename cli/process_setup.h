// What a kiln command needs from its surroundings before it starts work: termination signals
// taken by a thread of their own, and where the kiln-sandbox helper is.
#pragma once

#include <stop_token>
#include <string>

namespace kiln::cli {

// For one-shot commands (`kiln run`, `kiln verify`): SIGINT, SIGTERM and SIGHUP are taken by a
// thread that requests the returned stop, so Ctrl-C kills the sandboxed tree and kiln still
// reports and exits with the right code. Call before any other thread starts.
std::stop_source stop_on_termination_signals();

// KILN_SANDBOX_HELPER, else kiln-sandbox next to the kiln binary (or in ../libexec/kiln/).
std::string default_helper_path();

}  // namespace kiln::cli
