#!/usr/bin/env bash
# Puts Neovim 0.10.4 (Debian 13's package) under BUILD/nvim-0.10 so kiln.nvim's tests can run on
# a current Neovim as well as on Debian 12's 0.7.2. Debian 12 cannot install trixie's package (it
# needs libc6 >= 2.38), so this downloads the package and its library closure with a private apt
# configuration (the system's sources, lists and dpkg state are never touched), unpacks them, and
# patchelf's nvim to trixie's loader and libraries (a plain `ld.so --library-path` wrapper breaks
# the TUI, which re-execs v:progpath). Nothing is kept outside BUILD/nvim-0.10.
#
# Usage: scripts/install-nvim010.sh [BUILD]   (default build/)
# Prints the path of the nvim binary as its last line. Idempotent: a working install is reused.
# Exits non-zero, saying why, when it cannot (no network, archive unreachable, no patchelf), so
# callers count the 0.10 tests as not run rather than passed.
set -euo pipefail

want=0.10.4
suite=trixie
mirror=${KILN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
dest=$build/nvim-0.10
nvim=$dest/root/usr/bin/nvim

say() { echo "install-nvim010: $*" >&2; }

works() {
  local v
  [[ -x $nvim ]] && v=$("$nvim" --version 2>/dev/null) && [[ ${v%%$'\n'*} == "NVIM v$want" ]]
}

if works; then
  echo "$nvim"
  exit 0
fi

for tool in apt-get dpkg-deb patchelf; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    say "needs $tool (apt-get install patchelf); Neovim $want not installed"
    exit 3
  fi
done
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -r $keyring ]]; then
  say "needs $keyring (apt-get install debian-archive-keyring); Neovim $want not installed"
  exit 3
fi

work=$dest.partial
rm -rf "$work"
mkdir -p "$work"/apt/{lists/partial,archives/partial,cache,parts,prefs} "$work/root"
: >"$work/apt/status" # an empty dpkg state: apt resolves the whole closure from trixie
echo "deb [signed-by=$keyring] $mirror $suite main" >"$work/apt/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$work/apt/sources.list"
  -o "Dir::Etc::SourceParts=$work/apt/parts"
  -o "Dir::Etc::Preferences=$work/apt/prefs/none"
  -o "Dir::Etc::PreferencesParts=$work/apt/prefs"
  -o "Dir::State::Lists=$work/apt/lists"
  -o "Dir::State::status=$work/apt/status"
  -o "Dir::Cache=$work/apt/cache"
  -o "Dir::Cache::archives=$work/apt/archives"
  -o "Debug::NoLocking=1"
  -o "APT::Sandbox::User=$(id -un)"
  -o "Acquire::Languages=none"
  -o "Acquire::Retries=2"
  -o "Acquire::http::Timeout=20"
  -o "APT::Install-Recommends=false"
)

if ! apt-get "${apt_opts[@]}" -qq update >"$work/update.log" 2>&1 ||
  grep -qE '^(E|W): (Failed|Some index)' "$work/update.log" ||
  ! compgen -G "$work/apt/lists/*_Packages*" >/dev/null; then
  say "cannot reach Debian's $suite archive at $mirror; Neovim $want not installed:"
  sed 's/^/  /' "$work/update.log" | tail -5 >&2
  rm -rf "$work"
  exit 2
fi

if ! apt-get "${apt_opts[@]}" -qq -y --download-only install "neovim=$want*" >"$work/download.log" 2>&1; then
  say "could not download neovim $want and its libraries from $suite:"
  sed 's/^/  /' "$work/download.log" | tail -8 >&2
  rm -rf "$work"
  exit 2
fi

for deb in "$work"/apt/archives/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done
lib=$dest/root/usr/lib/x86_64-linux-gnu # final location: patch for it, then move the tree there
if [[ ! -x $work/root/usr/bin/nvim || ! -e $work/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 ]]; then
  say "the downloaded packages lack usr/bin/nvim or trixie's loader; Neovim $want not installed"
  rm -rf "$work"
  exit 2
fi
# DT_RPATH (not RUNPATH) so the libraries' own dependencies (libc for libluajit, ...) resolve there too.
patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$lib" "$work/root/usr/bin/nvim"

rm -rf "$dest"
mkdir -p "$dest"
mv "$work/root" "$dest/root"
ls "$work"/apt/archives/*.deb | xargs -n1 basename >"$dest/packages.txt"
rm -rf "$work"

if ! works; then
  say "the unpacked nvim does not run:"
  "$nvim" --version 2>&1 | head -3 | sed 's/^/  /' >&2 || true
  exit 4
fi
say "Neovim $want from Debian $suite in $dest ($(wc -l <"$dest/packages.txt") packages)"
echo "$nvim"
