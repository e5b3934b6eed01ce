#!/usr/bin/env bash
# kiln.nvim's tests against the real BUILD/kiln: headless (headless_test.lua) and as a user sees
# it in tmux (tmux_test.sh), on Debian 12's Neovim 0.7.2 and on Neovim 0.10.4 fetched from
# Debian 13's packages into BUILD/nvim-0.10 (scripts/install-nvim010.sh).
# Usage: tests/editors/nvim/run.sh [BUILD] [headless] [tmux]   (default: build/, both)
# Ends like node's spec reporter: "ℹ tests N", "ℹ pass N", "ℹ fail N", "ℹ skipped N". A Neovim
# that cannot be had (0.10 with the archive unreachable) is skipped, never counted as passed.
# Exit status: non-zero when anything failed or nothing ran.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build}
shift || true
parts=("$@")
((${#parts[@]})) || parts=(headless tmux)

pass=0
fail=0
skipped=0
failures=()

summary() {
  ((${#failures[@]})) && echo "failed: ${failures[*]}"
  echo "ℹ tests $((pass + fail))"
  echo "ℹ pass $pass"
  echo "ℹ fail $fail"
  echo "ℹ skipped $skipped"
}

if ! build=$(cd "$build" 2>/dev/null && pwd) || [[ ! -x $build/kiln ]]; then
  echo "nvim tests: no kiln in '${1:-build}': run make build first"
  fail=1
  failures+=("no kiln binary")
  summary
  exit 1
fi
kiln=$build/kiln

tmp=$(mktemp -d /tmp/kiln-nvim-tests.XXXXXX)

# Each test run gets its own KILN_HOME; publish may have started a `kiln serve` daemon for it.
stop_serve() {
  local f=$1/serve.json pid
  [[ -f $f ]] || return 0
  pid=$(sed -nE 's/.*"pid": *([0-9]+).*/\1/p' "$f" | head -1)
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  return 0
}

cleanup() {
  local s h
  for s in "$tmp"/*/tmux.sock; do
    [[ -S $s ]] && tmux -S "$s" kill-server 2>/dev/null
  done
  for h in "$tmp"/*/home; do
    [[ -d $h ]] && stop_serve "$h"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

# Adds the "N passed, M failed" line of a log to the totals.
count() {
  local name=$1 log=$2 rc=$3 line p f
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  if [[ -z $line ]]; then
    fail=$((fail + 1))
    failures+=("$name (no summary, exit $rc)")
    return
  fi
  p=${line%% passed*}
  f=${line#*, }
  f=${f%% failed}
  pass=$((pass + p))
  fail=$((fail + f))
  if ((f > 0)); then
    failures+=("$name")
  elif ((rc != 0)); then
    fail=$((fail + 1))
    failures+=("$name (exit $rc)")
  fi
}

# A fresh copy of the sample project, a private KILN_HOME and XDG folders for one run.
setup_dir() {
  local dir=$1
  mkdir -p "$dir"/home "$dir"/xdg/{config,data,state,cache}
  cp -r "$root/examples/sample-project" "$dir/ws"
  rm -rf "$dir/ws/reports" "$dir/ws/node_modules"
}

run_env() {
  local dir=$1
  shift
  env KILN_BIN="$kiln" KILN_HOME="$dir/home" KILN_TEST_TMP="$dir" \
    XDG_CONFIG_HOME="$dir/xdg/config" XDG_DATA_HOME="$dir/xdg/data" XDG_STATE_HOME="$dir/xdg/state" \
    XDG_CACHE_HOME="$dir/xdg/cache" "$@"
}

run_headless() {
  local label=$1 nvim=$2 dir="$tmp/headless-$1"
  echo "== kiln.nvim headless on $label =="
  setup_dir "$dir"
  (cd "$dir/ws" && run_env "$dir" timeout 600 "$nvim" --headless --noplugin -i NONE -u "$here/minimal_init.lua" \
    -c "luafile $here/headless_test.lua") 2>&1 | tee "$dir/log"
  local rc=${PIPESTATUS[0]}
  stop_serve "$dir/home"
  count "headless $label" "$dir/log" "$rc"
}

run_tmux() {
  local label=$1 nvim=$2 dir="$tmp/tmux-$1"
  echo "== kiln.nvim in tmux on $label =="
  if ! command -v tmux >/dev/null 2>&1; then
    echo "tmux is not installed (apt-get install tmux): skipped"
    skipped=$((skipped + 1))
    return
  fi
  setup_dir "$dir"
  run_env "$dir" timeout 300 "$here/tmux_test.sh" "$nvim" "$dir" "$label" 2>&1 | tee "$dir/log"
  local rc=${PIPESTATUS[0]}
  stop_serve "$dir/home"
  count "tmux $label" "$dir/log" "$rc"
}

versions=()
nvims=()
if command -v nvim >/dev/null 2>&1; then
  versions+=("$(nvim --version | head -1 | sed 's/^NVIM v//')")
  nvims+=("$(command -v nvim)")
else
  echo "nvim is not installed (apt-get install neovim): Debian's Neovim tests fail"
  fail=$((fail + 1))
  failures+=("no nvim on PATH")
fi
if nvim010=$("$root/scripts/install-nvim010.sh" "$build" | tail -1) && [[ -x $nvim010 ]]; then
  versions+=("0.10.4")
  nvims+=("$nvim010")
else
  echo "Neovim 0.10 could not be installed (see above): its tests are skipped, not passed"
  for p in "${parts[@]}"; do skipped=$((skipped + 1)); done
fi

for i in "${!nvims[@]}"; do
  for p in "${parts[@]}"; do
    case $p in
      headless) run_headless "nvim-${versions[$i]}" "${nvims[$i]}" ;;
      tmux) run_tmux "nvim-${versions[$i]}" "${nvims[$i]}" ;;
      *) echo "run.sh: unknown part '$p'" >&2; exit 2 ;;
    esac
    echo
  done
done

summary
((fail == 0 && pass > 0))
