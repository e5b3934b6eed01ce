#!/usr/bin/env bash
# Runs the test suites against an already built tree and closes with one line for the whole run:
# "N passed, M failed". Usage: run-tests.sh BUILD [unit] [wire] [e2e]   (default: all three)
# Every suite runs even when an earlier one failed; the exit status is non-zero if anything
# failed or if no test ran at all.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
suites=("$@")
((${#suites[@]})) || suites=(unit wire e2e)

cd "$root"
build_abs=$(cd "$build" 2>/dev/null && pwd) || { echo "run-tests: no build folder '$build': run make build" >&2; exit 2; }
export KILN_BIN="$build_abs/kiln"
logs="$build_abs/test-logs"
mkdir -p "$logs"

passed=0
failed=0
failures=()

# ctest prints "NN% tests passed, F tests failed out of T".
run_unit() {
  local log="$logs/unit.log"
  echo "== unit tests (ctest) =="
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
}

# node's spec reporter closes with "ℹ pass N", "ℹ fail N", "ℹ cancelled N".
run_node() {
  local name=$1 dir=$2
  local log="$logs/$name.log"
  echo "== $name tests (node --test) =="
  local files=(tests/"$dir"/*.test.mjs)
  files=("${files[@]#tests/}")
  (cd tests && node --test --test-reporter=spec --test-timeout=180000 "${files[@]}") 2>&1 | tee "$log"
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

for s in "${suites[@]}"; do
  case $s in
    unit) run_unit ;;
    wire) run_node wire wire ;;
    e2e) run_node e2e e2e ;;
    *) echo "run-tests: unknown suite '$s'" >&2; exit 2 ;;
  esac
  echo
done

if ((${#failures[@]})); then
  echo "failed suites: ${failures[*]} (logs in $logs)"
fi
echo "$passed passed, $failed failed"
((failed == 0 && passed > 0))
