#!/usr/bin/env bash
# Makes editor-plugins/nvim/screenshot.png: kiln.nvim in a real Neovim TUI (0.10 when
# scripts/install-nvim010.sh can provide it, else the system's) inside tmux, after :Kiln verify
# and :Kiln traces on a copy of examples/sample-project; the tmux screen (capture-pane -e) is
# rendered to PNG by render-screen.mjs. Not a test. Usage: screenshot.sh [BUILD] [OUT.png]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$root/editor-plugins/nvim/screenshot.png}
nvim=$("$root/scripts/install-nvim010.sh" "$build" | tail -1) || nvim=$(command -v nvim)

dir=$(mktemp -d /tmp/kiln-nvim-shot.XXXXXX)
sock=$dir/tmux.sock
t() { tmux -S "$sock" "$@"; }
cleanup() {
  t kill-server 2>/dev/null || true
  if [[ -f $dir/home/serve.json ]]; then kill "$(sed -nE 's/.*"pid": *([0-9]+).*/\1/p' "$dir/home/serve.json")" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/home" "$dir/xdg"
cp -r "$root/examples/sample-project" "$dir/textkit"
rm -rf "$dir/textkit/reports"

wait_for() {
  local i
  for ((i = 0; i < ${2:-30} * 10; i++)); do
    t capture-pane -p -t shot | grep -qE -- "$1" && return 0
    sleep 0.1
  done
  echo "screenshot: timed out waiting for /$1/" >&2
  t capture-pane -p -t shot >&2
  return 1
}
ex() {
  t send-keys -t shot -l ":$1"
  t send-keys -t shot Enter
}

export KILN_BIN=$build/kiln KILN_HOME=$dir/home XDG_STATE_HOME=$dir/xdg XDG_DATA_HOME=$dir/xdg XDG_CONFIG_HOME=$dir/xdg
t -f /dev/null new-session -d -s shot -x 118 -y 38 -c "$dir/textkit" \
  "TERM=tmux-256color COLORTERM=truecolor exec '$nvim' -i NONE -u '$here/minimal_init.lua' -c 'set termguicolors laststatus=2 noshowmode' src/case.js"
wait_for 'kebabCase' 15
ex 'Kiln verify'
wait_for 'verify fail' 90
ex 'Kiln traces'
wait_for '^fail +verify' 15
t send-keys -t shot -l '/^fail\s\+verify'
t send-keys -t shot Enter Enter
wait_for '^steps' 15
# Source on top, the verify's trace in the middle, the quickfix list at the bottom.
ex 'cclose | botright copen 3'
ex '2resize 17'
ex 'wincmd t'
ex 'call search("words(text).join")'
ex 'normal! zz'
ex 'echo ""'
sleep 0.5
t capture-pane -e -p -t shot >"$dir/screen.ansi"
node "$here/render-screen.mjs" "$dir/screen.ansi" "$out" "nvim $("$nvim" --version | head -1 | sed 's/^NVIM //') · kiln.nvim · :Kiln verify, then :Kiln traces"
