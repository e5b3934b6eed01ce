#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln builds and tests with, and only when one is missing, so
# `make` on a machine that has everything touches neither apt nor the network.
# `install-deps.sh --bench` (used by `make bench`) also installs the optional peers the benchmark
# compares against; if those cannot be installed it warns and succeeds (the bench reports them missing).
set -euo pipefail

bench=0
[[ ${1:-} == --bench ]] && bench=1

# chromium: the browser tests (the artifact server's login page, the VS Code extension in
# code-server), driven by playwright-core.
# neovim tmux patchelf: kiln.nvim's tests (Debian's 0.7.2 headless and in tmux; patchelf for the
# 0.10.4 that scripts/install-nvim010.sh unpacks from Debian's archive into the build folder).
# build-essential libx11-dev libxkbfile-dev libsecret-1-dev libkrb5-dev: code-server's native
# modules, built at install for the VS Code end-to-end test.
# wrk: the load test's HTTP clients on published artifacts (tests/robustness/load.test.mjs).
# clang-19 libclang-rt-19-dev: the libFuzzer targets in fuzz/ (scripts/fuzz.sh; clang 14 is too old
# for libstdc++ 12's std::expected).
# sqlite3: the fault tests' integrity_check of the state databases (tests/robustness/faults.test.mjs).
# libzstd-dev: zstd for checkpoint export and import (.tar.zst), linked statically (libzstd.a).
# postgresql redis-server: the servers Kiln runs inside sandboxes as services (tests/e2e/services.test.mjs,
# the second demo sample, the services benchmark).
packages=(cmake ninja-build g++ pkg-config ccache nlohmann-json3-dev libboost1.81-dev libspdlog-dev
          doctest-dev libsqlite3-dev libcli11-dev libpcre2-dev libseccomp-dev libsodium-dev libpugixml-dev libzstd-dev ripgrep python3
          chromium neovim tmux patchelf build-essential libx11-dev libxkbfile-dev libsecret-1-dev libkrb5-dev wrk
          clang-19 libclang-rt-19-dev sqlite3 postgresql redis-server)

# Benchmark peers only: bubblewrap (bwrap), and socat, which the srt CLI needs next to bwrap on Linux;
# nginx and wrk for the static-serving comparison with `kiln serve`; gnuplot-nox draws bench/scaling.png.
bench_packages=(bubblewrap socat nginx wrk gnuplot-nox)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done

# Node.js and npm: any install that provides the commands counts (the image may carry a newer
# Node than Debian's 18); otherwise Debian's packages.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

sudo=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1; then sudo=(sudo); fi
can_install() { [[ $(id -u) -eq 0 ]] || ((${#sudo[@]})); }
export DEBIAN_FRONTEND=noninteractive

if ((${#missing[@]})); then
  if ! can_install; then
    echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if ((bench)); then
  bench_missing=()
  for p in "${bench_packages[@]}"; do installed "$p" || bench_missing+=("$p"); done
  if ((${#bench_missing[@]})); then
    if ! can_install; then
      echo "install-deps: warning: bench peers ${bench_missing[*]} missing and cannot install (not root, no sudo); the bench reports them missing" >&2
    else
      echo "install-deps: installing bench peers ${bench_missing[*]}"
      { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y --no-install-recommends "${bench_missing[@]}"; } ||
        echo "install-deps: warning: could not install ${bench_missing[*]}; the bench reports them missing" >&2
    fi
  fi
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < 20)); then
  echo "install-deps: warning: node $(node --version) is older than the Node 20 Kiln's tests are written for" >&2
fi
