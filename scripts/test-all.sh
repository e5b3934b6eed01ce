#!/usr/bin/env bash
# make test on two cores: a cold build and every suite in about 20 minutes. The clang fuzz build
# starts first, in the background at the lowest priority (it is the longest, and needed last); then
# kiln and kiln-sandbox are built while the downloads run (npm packages, code-server, Neovim 0.10);
# then scripts/run-tests.sh --overlap-builds builds the unit tests in the background too and runs
# the suites, unit and fuzz last. Usage: test-all.sh BUILD
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
mkdir -p "$build/test-logs"
build_abs=$(cd "$build" && pwd)
logs=$build_abs/test-logs

fuzz_pid=
if [[ ${KILN_SKIP_FUZZ_PREBUILD:-} != 1 ]]; then
  # Its own process group, in this session (a new session would escape nice under autogroup).
  set -m
  "$root/scripts/bg-build.sh" fuzz "$logs" "$root/scripts/fuzz.sh" --build-only "$build_abs" &
  fuzz_pid=$!
  set +m
fi
if ! make -C "$root" --no-print-directory -j2 BUILD="$build" bins prefetch; then
  [[ -n $fuzz_pid ]] && kill -TERM -- "-$fuzz_pid" 2>/dev/null
  echo "make test: the build failed"
  exit 2
fi
KILN_FUZZ_BUILD_PID=$fuzz_pid exec "$root/scripts/run-tests.sh" --overlap-builds "$build"
