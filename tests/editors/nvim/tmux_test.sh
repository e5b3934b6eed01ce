#!/usr/bin/env bash
# kiln.nvim as a user sees it: Neovim's TUI in a private tmux server, keys typed with send-keys,
# the screen read back with capture-pane. Run by run.sh with KILN_BIN and KILN_HOME set and
# DIR/ws a fresh copy of examples/sample-project.
# Usage: tmux_test.sh NVIM DIR LABEL     Prints one line per check and "N passed, M failed".
set -uo pipefail

nvim=$1
dir=$2
label=$3
here=$(cd "$(dirname "$0")" && pwd)
sock=$dir/tmux.sock
pass=0
fail=0

t() { tmux -S "$sock" "$@"; }
screen() { t capture-pane -p -t kiln 2>/dev/null; }
keys() { t send-keys -t kiln -l -- "$1"; }
key() { t send-keys -t kiln "$@"; }

# Waits up to $2 seconds for the screen to match the extended regex $1.
wait_for() {
  local pat=$1 secs=${2:-20} i
  for ((i = 0; i < secs * 10; i++)); do
    screen | grep -qE -- "$pat" && return 0
    sleep 0.1
  done
  return 1
}

check() {
  local name=$1
  shift
  if "$@"; then
    pass=$((pass + 1))
    echo "✔ tmux $label: $name"
  else
    fail=$((fail + 1))
    echo "✖ tmux $label: $name"
    echo "    screen:"
    screen | sed 's/^/    | /'
  fi
}

# A command line typed as a user would: ':' ..., Enter.
ex() {
  keys ":$1"
  key Enter
}

finish() {
  t kill-server 2>/dev/null
  echo "$pass passed, $fail failed"
  exit $((fail > 0))
}

t -f /dev/null new-session -d -s kiln -x 110 -y 32 -c "$dir/ws" \
  "exec '$nvim' -i NONE -u '$here/minimal_init.lua'"
t set-option -g default-terminal tmux-256color >/dev/null 2>&1

starts() {
  wait_for '^~ ' 15 && ex 'Kiln status' && wait_for 'Kiln: not started' 5
}
check 'Neovim starts with kiln.nvim loaded (:Kiln status)' starts
if ((fail)); then finish; fi

completes() {
  keys ':Kiln ver'
  key Tab
  wait_for '^:Kiln verify *$' 5
  local rc=$?
  key Escape
  return $rc
}
check '<Tab> completes :Kiln subcommands' completes

verify_fails() {
  ex 'Kiln verify'
  wait_for 'test/case\.test\.js\|10[^|]*\| test: kebabCase' 90 && wait_for 'verify fail' 5 &&
    wait_for '\[Quickfix List\]' 5
}
check ':Kiln verify shows the failing test in the quickfix window' verify_fails

jumps() {
  ex 'cc'
  wait_for "test\('kebabCase'" 10 && wait_for 'case\.test\.js' 5 && wait_for '10,[0-9]+ ' 5
}
check ':cc jumps to the failing test' jumps

runs() {
  ex 'Kiln run echo hi-from-tmux; echo to-stderr >&2'
  wait_for '^hi-from-tmux' 30 && wait_for '^to-stderr' 5 && wait_for '\[exit 0 · .* · trace tr_[0-9a-f]+\]' 10
}
check ':Kiln run shows the output and exit status in a scratch buffer' runs

cancels() {
  ex 'Kiln run echo long-run; sleep 60'
  wait_for '^long-run' 30 || return 1
  key C-c
  wait_for '^\[cancelled\]' 10
}
check '<C-c> in the run buffer cancels the run' cancels

traces() {
  ex 'only'
  ex 'Kiln traces'
  wait_for 'STATUS +KIND' 15 && wait_for '^fail +verify' 5 || return 1
  keys '/^fail\s\+verify'
  key Enter
  key Enter
  wait_for '^Trace tr_[0-9a-f]+ · verify · fail' 10 && wait_for '^steps' 5
}
check ':Kiln traces lists traces and <CR> opens a verify with its steps' traces

logs() {
  ex 'Kiln log'
  wait_for 'stderr +info +.*session initialized by kiln\.nvim' 10
}
check ':Kiln log shows the server log' logs

quits() {
  ex "lua vim.fn.writefile({ tostring(require('kiln')._state.session.pid) }, '$dir/kiln.pid')"
  sleep 0.3
  local pid
  pid=$(cat "$dir/kiln.pid" 2>/dev/null) || return 1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
  ex 'qa!'
  local i
  for ((i = 0; i < 50; i++)); do
    if ! kill -0 "$pid" 2>/dev/null && ! t has-session -t kiln 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "    kiln (pid $pid) still running after :qa!"
  return 1
}
check ':qa! exits Neovim and stops the kiln server' quits

finish
