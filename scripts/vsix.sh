#!/usr/bin/env bash
# The VS Code extension's .vsix (editor-plugins/vscode, @vscode/vsce) into BUILD/vscode/, built one
# way for `make package` and for the vscode test suite (tests/editors/vscode/run.sh runs the steps
# one at a time and counts each).
# Usage: vsix.sh BUILD [deps] [bundle] [package] [check]   (default: all four, then the .vsix path)
#        vsix.sh BUILD path                                  (only print where the .vsix goes)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ext=$root/editor-plugins/vscode
build=${1:?usage: vsix.sh BUILD [deps] [bundle] [package] [check] | vsix.sh BUILD path}
shift
mkdir -p "$build/vscode"
build=$(cd "$build" && pwd)
version=$(node -p "require('$ext/package.json').version")
vsix=$build/vscode/kiln-$version.vsix

# Nothing is cached outside the repo and the build folder.
export npm_config_cache=${npm_config_cache:-$build/.npm-cache}
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

# The bundle, the schema (identical to the repo's), the manifest; no sources, no node_modules.
check() {
  local listing
  listing=$(python3 -m zipfile -l "$vsix" | awk 'NR > 1 {print $1}') || return 1
  echo "$listing"
  for f in extension/package.json extension/dist/extension.js extension/schemas/kiln.schema.json extension/media/kiln.svg; do
    grep -qx "$f" <<<"$listing" || { echo "missing $f in $vsix"; return 1; }
  done
  ! grep -qE '^extension/(src|test|node_modules|scripts)/' <<<"$listing" || { echo "sources or node_modules packaged"; return 1; }
  python3 - "$vsix" "$root/schemas/kiln.schema.json" <<'PY'
import sys, zipfile
packaged = zipfile.ZipFile(sys.argv[1]).read('extension/schemas/kiln.schema.json')
sys.exit(0 if packaged == open(sys.argv[2], 'rb').read() else 'the packaged kiln.schema.json differs from schemas/')
PY
}

steps=("$@")
((${#steps[@]})) || steps=(deps bundle package check)
for s in "${steps[@]}"; do
  case $s in
    path) echo "$vsix" ;;
    deps) "$root/scripts/npm-deps.sh" "$ext" ;;
    bundle) (cd "$ext" && node scripts/build.mjs --production) ;;
    package)
      rm -f "$vsix"
      (cd "$ext" && npx --no-install vsce package --no-dependencies --skip-license --allow-missing-repository -o "$vsix")
      ;;
    check) check ;;
    *) echo "vsix.sh: unknown step '$s'" >&2; exit 2 ;;
  esac
done
(($#)) || echo "$vsix"
