#!/usr/bin/env bash
# Tests the VS Code extension (editor-plugins/vscode) against the kiln of a build folder:
#   1. unit tests (node --test, stub `vscode`, the real BUILD/kiln for the command tests)
#   2. type check (tsc --noEmit)
#   3. bundle (esbuild, with the repo's kiln.json schema copied in)
#   4. package (.vsix with @vscode/vsce, into BUILD/vscode/, by scripts/vsix.sh as make package)
#   5. end to end in a real VS Code (code-server, installed by install.sh; screenshots in
#      BUILD/test-artifacts/vscode/)
# and closes with node-test style totals ("ℹ pass N", "ℹ fail M") for scripts/run-tests.sh.
# Usage: run.sh [BUILD] [--no-e2e]     BUILD defaults to the repo's build/.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
ext=$root/editor-plugins/vscode
build=$root/build
e2e=1
for a in "$@"; do
  case $a in
    --no-e2e) e2e=0 ;;
    *) build=$a ;;
  esac
done
mkdir -p "$build"
build=$(cd "$build" && pwd)
logs=$build/test-logs
artifacts=$build/test-artifacts/vscode
mkdir -p "$logs" "$build/vscode"

# Nothing is cached outside the repo and the build folder.
export npm_config_cache=$build/.npm-cache
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
export KILN_BUILD=$build

passed=0
failed=0
failures=()

step() { # name, then the command; counts one pass or one fail (a setup step only counts failing)
  local name=$1
  shift
  echo "== vscode: $name =="
  if "$@" >"$logs/vscode-$name.log" 2>&1; then
    cat "$logs/vscode-$name.log"
    echo "✔ $name"
    [[ $name == deps || $name == e2e-install ]] || passed=$((passed + 1))
  else
    cat "$logs/vscode-$name.log"
    echo "✖ $name (log: $logs/vscode-$name.log)"
    failed=$((failed + 1))
    failures+=("$name")
    return 1
  fi
}

node_suite() { # name, dir, then the node --test arguments; counts its tests
  local name=$1 dir=$2
  shift 2
  local log=$logs/vscode-$name.log
  echo "== vscode: $name (node --test) =="
  (cd "$dir" && node --test --test-reporter=spec "$@") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} p f c
  p=$(grep -E '^ℹ pass [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  f=$(grep -E '^ℹ fail [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  c=$(grep -E '^ℹ cancelled [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  if [[ -z $p || -z $f ]]; then
    failed=$((failed + 1))
    failures+=("$name (no summary, exit $rc)")
    return
  fi
  passed=$((passed + p))
  failed=$((failed + f + ${c:-0}))
  if ((f + ${c:-0} > 0)); then
    failures+=("$name")
  elif ((rc != 0)); then
    failed=$((failed + 1))
    failures+=("$name (exit $rc)")
  fi
}

# The .vsix is built by scripts/vsix.sh, the same steps make package runs, one step at a time here.
vsix_sh=$root/scripts/vsix.sh
vsix=$("$vsix_sh" "$build" path)

if step deps "$vsix_sh" "$build" deps; then
  node_suite unit "$ext" "$ext"/test/*.test.mjs
  step typecheck bash -c "cd '$ext' && npx --no-install tsc --noEmit -p ."
  if step bundle "$vsix_sh" "$build" bundle; then
    step package "$vsix_sh" "$build" package && step vsix-contents "$vsix_sh" "$build" check
  fi
fi

if ((e2e)); then
  if [[ -f $vsix ]] && step e2e-install "$here/install.sh" "$build"; then
    rm -rf "$artifacts"
    mkdir -p "$artifacts"
    KILN_VSIX=$vsix node_suite e2e "$here" --test-timeout=600000 e2e.test.mjs
    # The test stops code-server by its process group; if the test itself died, do it here.
    if [[ -f $artifacts/code-server.pgid ]]; then
      pgid=$(cat "$artifacts/code-server.pgid")
      kill -0 -- "-$pgid" 2>/dev/null && { kill -TERM -- "-$pgid"; sleep 2; kill -KILL -- "-$pgid" 2>/dev/null; }
      rm -f "$artifacts/code-server.pgid"
    fi
  elif [[ ! -f $vsix ]]; then
    echo "✖ e2e not run: no $vsix"
    failed=$((failed + 1))
    failures+=("e2e (no .vsix)")
  fi
fi

echo
echo "== vscode extension: $passed passed, $failed failed${failures:+ (${failures[*]})} =="
echo "ℹ pass $passed"
echo "ℹ fail $failed"
((failed == 0 && passed > 0))
