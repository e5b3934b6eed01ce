#!/bin/sh
# Remakes vendor/pg.js, the sample's vendored PostgreSQL client: `pg` (pure JavaScript; pg-native
# is left out) and its dependencies bundled by esbuild into one CommonJS file, so that the sample
# runs in a sandbox with no network and nothing downloaded. Run by hand when upgrading; needs npm.
set -eu
PG_VERSION=${PG_VERSION:-8.23.1}
ESBUILD_VERSION=${ESBUILD_VERSION:-0.28.2}   # the version editor-plugins/vscode pins
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm init -y >/dev/null
npm install --no-audit --no-fund "pg@$PG_VERSION" "esbuild@$ESBUILD_VERSION" >/dev/null
{
  printf '// pg %s (https://github.com/brianc/node-postgres, MIT licence; every bundled package and its licence: vendor/LICENSES.txt),\n' "$PG_VERSION"
  printf '// bundled with its dependencies by vendor/bundle-pg.sh (esbuild %s). Generated: do not edit.\n' "$ESBUILD_VERSION"
} >"$tmp/banner.js"
./node_modules/.bin/esbuild node_modules/pg/lib/index.js --bundle --platform=node --format=cjs \
  --target=node18 --external:pg-native --external:pg-cloudflare --legal-comments=none \
  --banner:js="$(cat "$tmp/banner.js")" --metafile="$tmp/meta.json" --outfile="$here/pg.js" --log-level=warning
# Every package the bundle holds, with its version and licence text (all MIT or ISC).
node -e '
  const fs = require("fs");
  const meta = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const pkgs = [...new Set(Object.keys(meta.inputs).map((f) => f.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//)?.[1]).filter(Boolean))].sort();
  let out = "Licences of the packages bundled in pg.js (from vendor/bundle-pg.sh).\n";
  for (const p of pkgs) {
    const dir = "node_modules/" + p;
    const j = JSON.parse(fs.readFileSync(dir + "/package.json", "utf8"));
    const lic = fs.readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
    out += "\n==== " + p + " " + j.version + " (" + j.license + ")\n\n" + (lic ? fs.readFileSync(dir + "/" + lic, "utf8").trim() : "(no licence file in the package; package.json says " + j.license + ")") + "\n";
  }
  fs.writeFileSync(process.argv[2], out);
' "$tmp/meta.json" "$here/LICENSES.txt"
echo "wrote $here/pg.js ($(wc -c <"$here/pg.js") bytes) from pg $(node -p "require('./node_modules/pg/package.json').version")"
