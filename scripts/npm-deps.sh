#!/usr/bin/env bash
# `npm ci` in one package folder (tests/ or bench/) when its node_modules is missing or was
# installed from a different package-lock.json (the stamp holds the lockfile's hash).
set -euo pipefail
dir=${1:?usage: npm-deps.sh DIR}
cd "$dir"
stamp=node_modules/.kiln-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -d node_modules && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
echo "npm-deps: npm ci in $dir"
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
