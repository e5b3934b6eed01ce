#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln builds and tests with, and only when one is missing, so
# `make` on a machine that has everything touches neither apt nor the network.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config ccache nlohmann-json3-dev libboost1.81-dev libspdlog-dev
          doctest-dev libsqlite3-dev libcli11-dev libpcre2-dev libseccomp-dev libsodium-dev ripgrep python3)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done

# Node.js and npm: any install that provides the commands counts (the image may carry a newer
# Node than Debian's 18); otherwise Debian's packages.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if ((${#missing[@]})); then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2
      exit 1
    fi
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < 20)); then
  echo "install-deps: warning: node $(node --version) is older than the Node 20 Kiln's tests are written for" >&2
fi
