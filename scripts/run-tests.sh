#!/usr/bin/env bash
# Runs the test suites against an already built tree and closes with one line for the whole run:
# "N passed, M failed". Usage: run-tests.sh [--overlap-builds] BUILD [unit] [wire] [e2e] [helper]
# [security] [robustness] [fuzz] [conformance] [nvim] [vscode] [install]   (default: all)
# Every suite runs even when an earlier one failed; the exit status is non-zero if anything
# failed or if no test ran at all.
# --overlap-builds (make test, scripts/test-all.sh): only kiln and kiln-sandbox are built yet. The
# unit tests and the clang fuzz targets are built in the background, at the lowest CPU priority,
# while the suites that need only the binaries run (they mostly wait on processes, sockets and
# browsers); unit, install and fuzz run last, once their build is done.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
overlap=0
if [[ ${1:-} == --overlap-builds ]]; then overlap=1; shift; fi
build=${1:-build}
shift || true
suites=("$@")
((${#suites[@]})) || suites=(unit wire e2e helper security robustness fuzz conformance nvim vscode install)

cd "$root"
build_abs=$(cd "$build" 2>/dev/null && pwd) || { echo "run-tests: no build folder '$build': run make build" >&2; exit 2; }
export KILN_BIN="$build_abs/kiln"
logs="$build_abs/test-logs"
mkdir -p "$logs"

passed=0
failed=0
failures=()
timings=()

# The background builds of --overlap-builds, each a process group (scripts/bg-build.sh) that leaves
# its exit status in $logs/bg-<step>.rc for the suite that waits on it. The fuzz build may already
# run, started by scripts/test-all.sh (KILN_FUZZ_BUILD_PID).
declare -A bg_pid=()
start_step() { # step, then the command
  local step=$1
  shift
  # Its own process group (so it can be stopped as a whole), in this session: with the kernel's
  # autogroup scheduling a new session (setsid) would get an equal CPU share whatever its nice.
  set -m
  "$root/scripts/bg-build.sh" "$step" "$logs" "$@" &
  bg_pid[$step]=$!
  set +m
}
start_background_builds() {
  local s
  for s in "${suites[@]}"; do
    case $s in
      unit) start_step unit cmake --build "$build_abs" -j "${JOBS:-2}" ;;
      fuzz)
        if [[ -n ${KILN_FUZZ_BUILD_PID:-} ]]; then
          bg_pid[fuzz]=$KILN_FUZZ_BUILD_PID
        else
          start_step fuzz "$root/scripts/fuzz.sh" --build-only "$build_abs"
        fi ;;
    esac
  done
  echo "run-tests: building ${!bg_pid[*]} in the background (logs: $logs/build-<step>.log)"
}
stop_background_builds() {
  local p
  for p in "${bg_pid[@]}"; do kill -0 "$p" 2>/dev/null && kill -TERM -- "-$p" 2>/dev/null; done
  return 0
}
trap stop_background_builds EXIT

# Waits for a background build step; returns its exit status (0 when there was none).
wait_background() {
  local step=$1
  ((overlap)) || return 0
  [[ -n ${bg_pid[$step]:-} ]] || return 0
  echo "run-tests: waiting for the background $step build"
  while [[ ! -f $logs/bg-$step.rc ]]; do
    kill -0 "${bg_pid[$step]}" 2>/dev/null || { sleep 1; break; }
    sleep 2
  done
  local rc
  rc=$(cat "$logs/bg-$step.rc" 2>/dev/null || echo 1)
  if ((rc != 0)); then
    tail -40 "$logs/build-$step.log"
    echo "run-tests: the background $step build failed (exit $rc; log $logs/build-$step.log)"
  fi
  return "$rc"
}

# ctest prints "NN% tests passed, F tests failed out of T".
run_unit() {
  local log="$logs/unit.log"
  echo "== unit tests (ctest) =="
  if ! wait_background unit; then
    failed=$((failed + 1))
    failures+=("unit (build failed)")
    return
  fi
  ctest --test-dir "$build_abs" --output-on-failure 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line total fail
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [[ -n $line ]]; then
    fail=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
    passed=$((passed + total - fail))
    failed=$((failed + fail))
    ((fail == 0)) || failures+=("unit")
  fi
  if [[ -z $line || ($rc -ne 0 && ${fail:-0} -eq 0) ]]; then
    # ctest found nothing to run or failed before reporting: count the suite as one failure.
    failed=$((failed + 1))
    failures+=("unit (ctest exit $rc)")
  fi
  # ctest counts executables; a doctest case skipped inside a passing one (doctest::skip, reason
  # from tests/unit/skip.h) is named in ctest's full log: say how many and why, never as passed.
  local full="$build_abs/Testing/Temporary/LastTest.log" skipped
  skipped=$(grep -c '^\[doctest\] SKIPPED: ' "$full" 2>/dev/null)
  if ((${skipped:-0} > 0)); then
    echo "unit: $skipped doctest cases skipped, not run (named in $full):"
    grep '^\[kiln\] SKIP ' "$full" | sort -u | sed 's/^\[kiln\] SKIP /  /'
  fi
  # node:test files beside the unit tests that drive the built unit executables (the sandbox gate).
  run_node unit-node unit
}

# node's spec reporter closes with "ℹ pass N", "ℹ fail N", "ℹ cancelled N".
run_node() {
  local name=$1 dir=$2
  local log="$logs/$name.log"
  echo "== $name tests (node --test) =="
  local files=(tests/"$dir"/*.test.mjs)
  files=("${files[@]#tests/}")
  # Two files at a time for e2e: most of its time is waiting (servers starting, apps waking, a
  # schedule's next minute), and each file has its own state directory and ports.
  local concurrency=1
  [[ $name == e2e ]] && concurrency=${KILN_E2E_CONCURRENCY:-2}
  (cd tests && node --test --test-concurrency="$concurrency" --test-reporter=spec --test-timeout=180000 "${files[@]}") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f c
  p=$(grep -E '^(ℹ|#) pass [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  f=$(grep -E '^(ℹ|#) fail [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  c=$(grep -E '^(ℹ|#) cancelled [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  if [[ -z $p || -z $f ]]; then
    failed=$((failed + 1))
    failures+=("$name (no summary from node, exit $rc)")
    return
  fi
  passed=$((passed + p))
  failed=$((failed + f + ${c:-0}))
  if ((f + ${c:-0} > 0)); then
    failures+=("$name")
  elif ((rc != 0)); then
    failed=$((failed + 1))
    failures+=("$name (node exit $rc)")
  fi
}

# The sandbox helper's own checks (tests/sandbox_helper/check_helper.py prints "PASS"/"FAIL" per
# check and "N checks, F failed"), as the current user and, when that is root, also as an
# unprivileged user, because users run Kiln that way. FROM is the folder holding build/kiln-sandbox
# and tests/ (the checkout, or a copy staged for kilntest).
run_helper_as() {
  local who=$1 from=$2
  shift 2
  local log="$logs/helper-$who.log"
  echo "-- kiln-sandbox checks as $who${from:+ (from $from)} --"
  # Sanitizer builds (scripts/test-asan.sh): setpriv --reset-env must not drop the report options.
  local keep=() v
  # Nor KILN_REQUIRE_SANDBOX (set on CI by .ci/run).
  for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS KILN_REQUIRE_SANDBOX; do [[ -n ${!v:-} ]] && keep+=("$v=${!v}"); done
  local bin=$build_abs/kiln-sandbox dir=$root
  [[ -n $from ]] && bin=$from/build/kiln-sandbox dir=$from
  (cd "$dir" && "$@" env "${keep[@]}" KILN_SANDBOX="$bin" python3 tests/sandbox_helper/check_helper.py) 2>&1 | tee "$log"
  local line n f
  line=$(grep -E '^[0-9]+ checks, [0-9]+ failed' "$log" | tail -1)
  if [[ -z $line ]]; then
    failed=$((failed + 1))
    failures+=("helper as $who (no summary)")
    return
  fi
  n=$(awk '{print $1}' <<<"$line")
  f=$(awk '{print $3}' <<<"$line")
  passed=$((passed + n - f))
  failed=$((failed + f))
  ((f == 0)) || failures+=("helper as $who")
}

# What the checks read besides the helper binary, relative to the repo root.
helper_files=(tests/sandbox_helper tests/security/probes/proc_write_walk.py)

# The kilntest pass: from the checkout when kilntest can reach it, else from a copy staged by
# scripts/stage-for-user.sh in /tmp (a CI clone under /root, mode 0700), removed however it ends.
run_helper_as_kilntest() {
  id kilntest >/dev/null 2>&1 || useradd --system --create-home --shell /usr/sbin/nologin kilntest
  local why='' stage='' p
  local as=(setpriv --reuid kilntest --regid kilntest --init-groups --reset-env)
  local reach=(test -x "$build_abs/kiln-sandbox")
  for p in tests/sandbox_helper/check_helper.py tests/sandbox_helper/run_helper.py tests/sandbox_helper/syscall_probe.c "${helper_files[1]}"; do
    reach+=(-a -r "$root/$p")
  done
  if ! command -v setpriv >/dev/null; then
    why="setpriv is not installed"
  elif ! id kilntest >/dev/null 2>&1; then
    why="there is no user kilntest and useradd could not create it"
  elif "${as[@]}" "${reach[@]}"; then
    run_helper_as kilntest '' "${as[@]}"
    return
  else
    echo "kilntest cannot reach $build_abs/kiln-sandbox or $root/tests (directory permissions): staging a copy"
    trap 'rm -rf -- "$stage"' EXIT
    trap 'rm -rf -- "$stage"; exit 130' INT TERM HUP
    # On success the script's only output is the folder; on failure, why.
    if stage=$(scripts/stage-for-user.sh kilntest "$build_abs" "${helper_files[@]}" 2>&1); then
      run_helper_as kilntest "$stage" "${as[@]}"
    else
      why="kilntest cannot read $build_abs or $root (directory permissions), and staging a copy failed: $stage"
      stage=''
    fi
    rm -rf -- "$stage"
    trap - EXIT INT TERM HUP
  fi
  [[ -z $why ]] && return
  if [[ ${KILN_REQUIRE_SANDBOX:-} == 1 ]]; then
    # CI can run the checks as kilntest, so there a pass that did not happen is a failure.
    echo "FAIL: not run as kilntest, and KILN_REQUIRE_SANDBOX=1 makes that a failure: $why"
    failed=$((failed + 1))
    failures+=("helper as kilntest (not run)")
  else
    echo "not run as kilntest: $why; counted as not run"
  fi
}

run_helper() {
  echo "== kiln-sandbox helper checks =="
  if [[ ! -x $build_abs/kiln-sandbox ]]; then
    failed=$((failed + 1))
    failures+=("helper (no $build_abs/kiln-sandbox)")
    return
  fi
  run_helper_as "$(id -un)" ''
  if ((EUID == 0)); then run_helper_as_kilntest; fi
}

# SANDBOX_CASES.md as attacks through MCP (tests/security/run.mjs: as the current user and, when
# root, as kilntest). Each run ends "=> P pass, F fail, S skipped, T open findings (todo)"; skipped
# and todo tests count as not run, never as passed.
run_security() {
  local log="$logs/security.log"
  echo "== security tests (SANDBOX_CASES) =="
  KILN_BIN="$build_abs/kiln" node tests/security/run.mjs 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local lines p f
  lines=$(grep -E '^  => [0-9]+ pass, [0-9]+ fail' "$log")
  if [[ -z $lines ]]; then
    failed=$((failed + 1))
    failures+=("security (no summary, exit $rc)")
    return
  fi
  while read -r _ p _ f _; do
    passed=$((passed + p))
    failed=$((failed + ${f%,}))
    ((${f%,} == 0)) || failures+=("security")
  done < <(sed -E 's/^  => ([0-9]+) pass, ([0-9]+) fail.*/=> \1 pass, \2 fail,/' <<<"$lines")
  if ((rc != 0)) && [[ ! " ${failures[*]} " == *" security "* ]]; then
    failed=$((failed + 1))
    failures+=("security (exit $rc)")
  fi
}

# A suite run by its own script, which ends like node's spec reporter ("ℹ pass N", "ℹ fail M";
# "ℹ skipped N" is what could not run here, and counts as not run, never as passed).
run_script() {
  local name=$1
  shift
  local log="$logs/$name.log"
  echo "== $name tests ($*) =="
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -E '^ℹ pass [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  f=$(grep -E '^ℹ fail [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  if [[ -z $p || -z $f ]]; then
    failed=$((failed + 1))
    failures+=("$name (no summary, exit $rc)")
    return
  fi
  passed=$((passed + p))
  failed=$((failed + f))
  if ((f > 0)); then
    failures+=("$name")
  elif ((rc != 0)); then
    failed=$((failed + 1))
    failures+=("$name (exit $rc)")
  fi
}

if ((overlap)); then
  # The suites that need only kiln and kiln-sandbox first; then unit (its build done), install
  # (which runs ninja in the same build folder, so never beside the background build), fuzz.
  ordered=()
  for s in "${suites[@]}"; do [[ $s == unit || $s == install || $s == fuzz ]] || ordered+=("$s"); done
  for late in unit install fuzz; do
    for s in "${suites[@]}"; do [[ $s == "$late" ]] && ordered+=("$s"); done
  done
  suites=("${ordered[@]}")
  start_background_builds
fi

for s in "${suites[@]}"; do
  suite_start=$SECONDS
  case $s in
    unit) run_unit ;;
    wire) run_node wire wire ;;
    e2e) run_node e2e e2e ;;
    helper) run_helper ;;
    security) run_security ;;
    # Faults (kill -9 at random points, disk full) and load (1000 calls in flight, 50 HTTP
    # sessions, wrk during publishes): tests/robustness/, node:test files.
    robustness) run_node robustness robustness ;;
    # A short libFuzzer run of every target in fuzz/ (clang, ASan+UBSan), corpus replay included.
    fuzz) wait_background fuzz; run_script fuzz scripts/fuzz.sh --short "$build_abs" ;;
    # The official MCP conformance suite and the Inspector CLI (tests/conformance/, their own
    # npm folder with Node 22): node:test files, one test per scenario.
    conformance) run_node conformance conformance ;;
    # kiln.nvim headless and in tmux, on Debian's Neovim 0.7.2 and on 0.10.4 (fetched from
    # Debian's archive into the build folder by scripts/install-nvim010.sh).
    nvim) run_script nvim tests/editors/nvim/run.sh "$build_abs" ;;
    # The VS Code extension: unit tests with a stubbed vscode, type-check, bundle, .vsix, and
    # end to end in code-server driven by Chromium.
    vscode) run_script vscode tests/editors/vscode/run.sh "$build_abs" ;;
    # make install (DESTDIR, PREFIX=/usr) and make package (.deb, .vsix): what they install runs.
    install) wait_background unit; run_script install tests/install/check.sh "$build_abs" ;;
    *) echo "run-tests: unknown suite '$s'" >&2; exit 2 ;;
  esac
  timings+=("$s $((SECONDS - suite_start))s")
  echo "== $s: $((SECONDS - suite_start)) s =="
  echo
done

echo "suite times: ${timings[*]} (total $SECONDS s)"

if ((${#failures[@]})); then
  echo "failed suites: ${failures[*]} (logs in $logs)"
fi
echo "$passed passed, $failed failed"
((failed == 0 && passed > 0))
