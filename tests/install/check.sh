#!/usr/bin/env bash
# `make install` and `make package` as a user runs them: the staged install (DESTDIR, PREFIX=/usr)
# runs, sandboxes with the kiln-sandbox it installed, and kiln.nvim finds the installed kiln on
# PATH; the .deb has the files, the fields and the dependencies the binaries need, and its
# unpacked programs work; the .vsix is built.
# Usage: tests/install/check.sh [BUILD]   Ends like node's spec reporter ("ℹ pass N", "ℹ fail M").
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 2
tmp=$(mktemp -d /tmp/kiln-install-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
version=$(sed -nE 's/^project\(kiln VERSION ([0-9.]+).*/\1/p' "$root/CMakeLists.txt")
# The installed kiln must find its helper by itself, not through the test environment.
unset KILN_SANDBOX_HELPER

pass=0
fail=0
check() { # description, then the command
  local what=$1
  shift
  if out=$("$@" 2>&1); then
    echo "✔ $what"
    pass=$((pass + 1))
  else
    echo "✖ $what"
    sed 's/^/    /' <<<"$out" | tail -40
    fail=$((fail + 1))
  fi
}

finish() {
  echo "ℹ tests $((pass + fail))"
  echo "ℹ pass $pass"
  echo "ℹ fail $fail"
  ((fail == 0 && pass > 0))
  exit
}

# A sandboxed command in a scratch workspace with its own state directory: prints its output.
sandboxed() { # kiln binary, then the command
  local kiln=$1
  shift
  mkdir -p "$tmp/ws" "$tmp/home"
  (cd "$tmp/ws" && KILN_HOME=$tmp/home "$kiln" run -- "$@")
}

# ---- make install ------------------------------------------------------------------------------
stage=$tmp/stage
check 'make install DESTDIR=... PREFIX=/usr' make -C "$root" --no-print-directory install BUILD="$build" DESTDIR="$stage" PREFIX=/usr
[[ -x $stage/usr/bin/kiln ]] || finish

installed_files() {
  local f
  for f in usr/bin/kiln usr/libexec/kiln/kiln-sandbox \
    usr/share/nvim/site/pack/kiln/start/kiln.nvim/plugin/kiln.lua \
    usr/share/nvim/site/pack/kiln/start/kiln.nvim/lua/kiln/init.lua \
    usr/share/nvim/site/pack/kiln/start/kiln.nvim/doc/kiln.txt \
    usr/share/nvim/site/pack/kiln/start/kiln.nvim/doc/tags usr/share/doc/kiln/install.md; do
    [[ -f $stage/$f ]] || { echo "not installed: $f"; return 1; }
  done
  [[ ! -e $stage/usr/bin/kiln-sandbox ]] || { echo "kiln-sandbox is on PATH"; return 1; }
}
check 'installs kiln in bin, kiln-sandbox in libexec/kiln, kiln.nvim as a Neovim package' installed_files

check "the installed kiln --version says $version" bash -c "'$stage/usr/bin/kiln' --version | grep -qx 'kiln $version'"

runs_sandboxed() {
  local out
  out=$(sandboxed "$stage/usr/bin/kiln" sh -c 'echo sandboxed-ok') || { echo "$out"; return 1; }
  grep -qx sandboxed-ok <<<"$out" || { echo "unexpected output: $out"; return 1; }
  sandboxed "$stage/usr/bin/kiln" true
}
check 'the installed kiln runs a sandboxed command (kiln run -- true)' runs_sandboxed

# Without libexec/kiln the same command must fail: the run above used the installed helper.
needs_its_helper() {
  mv "$stage/usr/libexec/kiln" "$stage/usr/libexec/kiln.away"
  local out rc
  out=$(sandboxed "$stage/usr/bin/kiln" true 2>&1)
  rc=$?
  mv "$stage/usr/libexec/kiln.away" "$stage/usr/libexec/kiln"
  ((rc != 0)) || { echo "kiln run succeeded without the installed helper"; return 1; }
  grep -q 'sandbox helper' <<<"$out" || { echo "unexpected error: $out"; return 1; }
}
check 'with libexec/kiln moved away it refuses to run (it used the installed helper)' needs_its_helper

# The generated help tags are what Neovim's :helptags writes.
help_tags() {
  mkdir -p "$tmp/doc"
  cp "$stage/usr/share/nvim/site/pack/kiln/start/kiln.nvim/doc/kiln.txt" "$tmp/doc/"
  nvim --headless -u NONE -i NONE -c "helptags $tmp/doc" -c 'qa!' || return 1
  diff "$tmp/doc/tags" "$stage/usr/share/nvim/site/pack/kiln/start/kiln.nvim/doc/tags"
}
check 'doc/tags of the installed kiln.nvim equals what :helptags makes' help_tags

# A user's Neovim with nothing configured: the package's start/ folder loads kiln.nvim, whose default
# cmd finds the installed kiln on PATH; :checkhealth completes an MCP handshake with it.
nvim_finds_kiln() {
  local report=$tmp/health.txt
  mkdir -p "$tmp/ws" "$tmp/home"
  (cd "$tmp/ws" && env PATH="$stage/usr/bin:$PATH" KILN_HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/xdg" XDG_DATA_HOME="$tmp/xdg" \
    XDG_STATE_HOME="$tmp/xdg" timeout 120 nvim --headless -i NONE -u NORC \
    --cmd "set packpath^=$stage/usr/share/nvim/site" \
    -c 'help kiln-setup' -c "call writefile([expand('%:t')], '$tmp/help.txt')" \
    -c 'silent checkhealth kiln' -c "call writefile(getline(1, '\$'), '$report')" -c 'qa!') || return 1
  grep -qx kiln.txt "$tmp/help.txt" || { echo ":help kiln-setup did not open kiln.txt"; return 1; }
  grep -q "$stage/usr/bin/kiln: kiln $version" "$report" && grep -q 'MCP handshake: kiln' "$report" &&
    ! grep -q ERROR "$report" || { cat "$report"; return 1; }
}
check 'kiln.nvim, installed and unconfigured, finds the installed kiln on PATH (:checkhealth, :help)' nvim_finds_kiln

# ---- make package ------------------------------------------------------------------------------
deb=$build/package/kiln_${version}_$(dpkg --print-architecture).deb
vsix=$("$root/scripts/vsix.sh" "$build" path)
rm -f "$deb" "$vsix"
check 'make package' make -C "$root" --no-print-directory package BUILD="$build"
check "it leaves ${deb#"$build"/}" test -f "$deb"
check "and ${vsix#"$build"/}" test -f "$vsix"
[[ -f $deb ]] || finish

fields() {
  dpkg-deb -I "$deb" || return 1
  [[ $(dpkg-deb -f "$deb" Package) == kiln && $(dpkg-deb -f "$deb" Version) == "$version" ]] &&
    [[ -n $(dpkg-deb -f "$deb" Maintainer) && -n $(dpkg-deb -f "$deb" Description) ]]
}
check 'the .deb is kiln, the project version, with a maintainer and a description' fields

# Every shared library kiln and kiln-sandbox load belongs to a package the .deb depends on.
depends() {
  local deps lib pkg ok=0
  deps=$(dpkg-deb -f "$deb" Depends)
  echo "Depends: $deps"
  for lib in $(ldd "$build/kiln" "$build/kiln-sandbox" | awk '$2 == "=>" {print $3}' | sort -u); do
    pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1)
    [[ -n $pkg ]] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1)
    if [[ -z $pkg ]] || ! grep -qE "(^|, )$pkg( |,|$)" <<<"$deps"; then
      echo "$lib (package ${pkg:-unknown}) is not in Depends"
      ok=1
    fi
  done
  return $ok
}
check 'Depends names the Debian package of every library the binaries link' depends

contents() {
  local listing f
  listing=$(dpkg-deb -c "$deb") || return 1
  for f in ./usr/bin/kiln ./usr/libexec/kiln/kiln-sandbox ./usr/share/nvim/site/pack/kiln/start/kiln.nvim/plugin/kiln.lua \
    ./usr/share/nvim/site/pack/kiln/start/kiln.nvim/doc/tags ./usr/share/doc/kiln/install.md; do
    grep -q " $f\$" <<<"$listing" || { echo "missing $f"; echo "$listing"; return 1; }
  done
  ! grep -qE '\.png$|/build/' <<<"$listing" || { echo "screenshots or build files packaged"; return 1; }
}
check 'dpkg-deb -c: kiln, kiln-sandbox, kiln.nvim and the docs under /usr' contents

unpacked() {
  dpkg -x "$deb" "$tmp/root" || return 1
  "$tmp/root/usr/bin/kiln" --version | grep -qx "kiln $version" || return 1
  ! readelf -S "$tmp/root/usr/bin/kiln" | grep -q '\.debug_info' || { echo "kiln is not stripped"; return 1; }
  sandboxed "$tmp/root/usr/bin/kiln" true
}
check 'dpkg -x into a scratch root: the stripped kiln runs and sandboxes' unpacked

finish
