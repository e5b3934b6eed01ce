#!/usr/bin/env bash
# make test-asan: the test suites against the AddressSanitizer + UndefinedBehaviorSanitizer build
# (CMake preset "asan", folder build-asan/), with every sanitizer report collected in one folder;
# fails when a suite fails or when any report was written, even by a process whose test passed.
# Usage: test-asan.sh [BUILD] [suite...]   (default: build-asan and every suite but fuzz, which
# builds and runs its own clang ASan+UBSan tree in make test already)
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-asan}
shift || true
suites=("$@")
((${#suites[@]})) || suites=(unit wire e2e helper security robustness conformance nvim vscode)

cd "$root"
build_abs=$(cd "$build" 2>/dev/null && pwd) || { echo "test-asan: no build folder '$build'" >&2; exit 2; }
if ! grep -q -- '-fsanitize=address' "$build_abs/CMakeCache.txt" 2>/dev/null; then
  echo "test-asan: $build_abs is not a sanitizer build (configure it with: cmake --preset asan)" >&2
  exit 2
fi

reports="$build_abs/test-logs/asan"
rm -rf "$reports"
mkdir -p "$reports"
# The helper checks and the security suite also run as the unprivileged kilntest user, whose
# sanitized processes write their reports here too.
chmod 1777 "$reports"

# Reports go to files (one per process: PREFIX.PID), never to the stderr a test may swallow.
# abort_on_error: a report ends the process with SIGABRT, which no test mistakes for success.
# detect_stack_use_after_return: GCC 12 instruments for it; the runtime option turns it on.
# check_initialization_order/strict_init_order: static-init order bugs between files.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:log_path=$reports/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
# The leak tests (tests/robustness/leaks.test.mjs) assert LeakSanitizer's verdict only when set.
export KILN_SANITIZED=1
supp="$root/tests/sanitizers/lsan.supp"
[[ -f $supp ]] && export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"

scripts/run-tests.sh "$build_abs" "${suites[@]}"
rc=$?

# A report written to stderr instead of a file (a process whose environment was scrubbed, or one
# inside a sandbox's own root where the report folder does not exist) still ends in a SUMMARY line.
stray=$(grep -lE 'SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer)|ERROR: Can.t open file: .*/test-logs/asan/' \
  "$build_abs"/test-logs/*.log 2>/dev/null)

shopt -s nullglob
files=("$reports"/*)
if ((${#files[@]})); then
  echo
  echo "== sanitizer reports (${#files[@]} files in $reports) =="
  for f in "${files[@]}"; do
    echo "---- $f"
    cat "$f"
  done
  echo "test-asan: FAILED: ${#files[@]} sanitizer report(s) above"
  exit 1
fi
if [[ -n $stray ]]; then
  echo "test-asan: FAILED: sanitizer output in test logs: $stray"
  grep -hE -B2 -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|ERROR: Can.t open file' $stray | head -200
  exit 1
fi
if ((rc != 0)); then
  echo "test-asan: FAILED: test failures (no sanitizer report was written)"
  exit "$rc"
fi
echo "test-asan: no sanitizer report"
