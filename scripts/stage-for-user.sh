#!/usr/bin/env bash
# Copies what a test run as another user needs into a fresh folder that user can read, for when the
# checkout is out of its reach (a CI clone under /root, mode 0700). Used by tests/security/run.mjs
# and scripts/run-tests.sh (helper checks) for their `kilntest` pass.
#
#   stage-for-user.sh USER BIN_DIR PATH...
#
# BIN_DIR's kiln and kiln-sandbox (whichever exist) land side by side in STAGE/build/; each PATH
# (relative to the repo root, file or folder) lands at STAGE/PATH, symlinks resolved, so a staged
# tests/node_modules holds no symlink back into the checkout (files are hard links or copies). STAGE is a new mode-0755 folder under
# $TMPDIR, /tmp or /var/tmp (the first where the copy succeeds and USER can read all of it).
# Prints STAGE on stdout; the caller removes it (rm -rf). On failure prints why on stderr, exits 1
# and leaves nothing behind.
set -uo pipefail

user=${1:?usage: stage-for-user.sh USER BIN_DIR PATH...}
bin_dir=${2:?usage: stage-for-user.sh USER BIN_DIR PATH...}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)

as_user() {
  if command -v runuser >/dev/null; then runuser -u "$user" -- "$@"
  else setpriv --reuid "$user" --regid "$user" --init-groups -- "$@"; fi
}

[[ -x $bin_dir/kiln || -x $bin_dir/kiln-sandbox ]] || { echo "stage-for-user: no kiln or kiln-sandbox in $bin_dir" >&2; exit 1; }
id -u "$user" >/dev/null 2>&1 || { echo "stage-for-user: no user $user" >&2; exit 1; }
command -v runuser >/dev/null || command -v setpriv >/dev/null || { echo "stage-for-user: neither runuser nor setpriv is installed" >&2; exit 1; }

stage=
# An interrupted copy must not leave a half-filled folder in /tmp.
trap '[[ -n $stage ]] && rm -rf "$stage"' EXIT
trap 'exit 130' INT TERM HUP

# Hard links where the source and /tmp share a file system (thousands of npm files copy slowly),
# else copies. The stage's own folders are new, so making them enterable changes nothing outside.
put() {
  local src=$1 dst=$2 out
  cp -RL --link "$src" "$dst" 2>/dev/null && return 0
  rm -rf "$dst"
  out=$(cp -RL "$src" "$dst" 2>&1) || { echo "copying $src: $out"; return 1; }
}

# Fills $stage; prints the first problem and returns 1.
fill() {
  local p f
  mkdir "$stage/build" || return 1
  for b in kiln kiln-sandbox; do
    [[ -e $bin_dir/$b ]] || continue
    put "$bin_dir/$b" "$stage/build/$b" || return 1
  done
  for p in "$@"; do
    [[ -e $root/$p ]] || { echo "$root/$p does not exist"; return 1; }
    mkdir -p "$stage/$(dirname "$p")" || return 1
    put "$root/$p" "$stage/$p" || return 1
  done
  chmod 0755 "$stage" && find "$stage" -type d -exec chmod a+rx {} + || return 1
  # A linked file the user could not read (or run) becomes a copy of its own, so the checkout's
  # modes stay as they are.
  while IFS= read -r -d '' f; do
    cp -p "$f" "$f.copy" && mv -f "$f.copy" "$f" && chmod a+rX "$f" || { echo "cannot make $f readable"; return 1; }
  done < <(find "$stage" -type f \( ! -perm -o=r -o -path "$stage/build/*" ! -perm -o=x \) -print0)
  # access(2) as the user: every entry readable, every folder enterable, the binaries runnable.
  f=$(as_user find "$stage" \( ! -readable -o -type d ! -executable \) -print -quit 2>&1)
  [[ -z $f ]] || { echo "$user cannot read $f"; return 1; }
  for f in "$stage"/build/*; do
    as_user test -x "$f" || { echo "$user cannot execute $f"; return 1; }
  done
}

why=()
tried=" "
for base in ${TMPDIR:+"$TMPDIR"} /tmp /var/tmp; do
  [[ -d $base && $tried != *" $base "* ]] || continue
  tried+="$base "
  stage=$(mktemp -d "$base/kiln-stage-$user-XXXXXX" 2>/dev/null) || { why+=("$base: cannot create a folder"); stage=; continue; }
  if problem=$(fill "$@"); then
    trap - EXIT
    echo "$stage"
    exit 0
  fi
  why+=("$base: $problem")
  rm -rf "$stage"
  stage=
done
((${#why[@]})) || why=("no temporary folder")
echo "stage-for-user: cannot stage a copy for $user: $(printf '%s; ' "${why[@]}" | sed 's/; $//')" >&2
exit 1
