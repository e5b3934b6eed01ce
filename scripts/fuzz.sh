#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ (built in build-fuzz/ with clang 19, ASan+UBSan) for a bounded
# time, after replaying its seeds and the regression inputs of crashes found before.
#   scripts/fuzz.sh [--short | --build-only] BUILD_ABS
# --short (make test): ~FUZZ_SECONDS=10 per target; default (make fuzz): FUZZ_SECONDS=120 per target.
# --build-only: only configure and build the targets (make test starts this early, in the
# background, and runs --short when the build is done).
# BUILD_ABS only says where logs go (BUILD_ABS/test-logs/fuzz-*); the fuzzers always build in
# build-fuzz/. The repo's corpus is never written to: each run fuzzes a copy. Ends like node's spec
# reporter ("ℹ pass N", "ℹ fail M", "ℹ skipped K"), one test per target.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
short=0
build_only=0
if [[ ${1:-} == --short ]]; then short=1; shift; fi
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
build_abs=${1:-$root/build}
mkdir -p "$build_abs/test-logs"
build_abs=$(cd "$build_abs" && pwd)
logs="$build_abs/test-logs"
fuzz_build="$root/build-fuzz"
if ((short)); then seconds=${FUZZ_SECONDS:-10}; else seconds=${FUZZ_SECONDS:-120}; fi

mapfile -t targets < <(cd "$root/fuzz" && ls fuzz_*.cpp 2>/dev/null | sed 's/\.cpp$//')
summary() {
  echo "ℹ tests $(($1 + $2 + $3))"
  echo "ℹ pass $1"
  echo "ℹ fail $2"
  echo "ℹ skipped $3"
}

# No clang 19 with its libFuzzer runtime: nothing can run here, which is not a pass.
rt=/usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a
if ! command -v clang++-19 >/dev/null 2>&1 || [[ ! -f $rt ]]; then
  echo "fuzz: not run: clang++-19 or $rt is missing (Debian packages clang-19 libclang-rt-19-dev; scripts/install-deps.sh installs them)"
  summary 0 0 "${#targets[@]}"
  exit 0
fi

export CCACHE_DIR=${CCACHE_DIR_FUZZ:-$fuzz_build/.ccache}
echo "fuzz: building ${#targets[@]} targets in $fuzz_build"
if ! { { [[ -f $fuzz_build/build.ninja ]] || (cd "$root" && cmake --preset fuzz >"$logs/fuzz-build.log" 2>&1); } &&
       cmake --build "$fuzz_build" -j "${FUZZ_JOBS:-2}" --target kiln_fuzzers >>"$logs/fuzz-build.log" 2>&1; }; then
  tail -40 "$logs/fuzz-build.log"
  echo "✖ build of the fuzz targets failed (log: $logs/fuzz-build.log)"
  summary 0 1 0
  exit 1
fi
if ((build_only)); then
  echo "fuzz: built ${#targets[@]} targets"
  exit 0
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
sym=$(command -v llvm-symbolizer-19 || command -v llvm-symbolizer || true)
[[ -n $sym ]] && export ASAN_SYMBOLIZER_PATH=$sym

# Each run fuzzes a copy: --short a throw-away one, the long run a corpus kept in build-fuzz that
# grows from run to run.
work_base="$fuzz_build/work"
mkdir -p "$work_base"
crashes="$logs/fuzz-crashes"
mkdir -p "$crashes"

pass=0
fail=0
for t in "${targets[@]}"; do
  bin="$fuzz_build/fuzz/$t"
  log="$logs/fuzz-$t.log"
  if ((short)); then
    work=$(mktemp -d "$work_base/$t.XXXXXX")
  else
    work="$fuzz_build/corpus/$t"
    mkdir -p "$work"
  fi
  seeds=("$root/fuzz/corpus/$t" "$root/fuzz/regressions/$t")
  for d in "${seeds[@]}"; do [[ -d $d ]] && cp -n "$d"/* "$work"/ 2>/dev/null; done
  dict=()
  [[ -f $root/fuzz/dict/$t.dict ]] && dict=(-dict="$root/fuzz/dict/$t.dict")
  common=(-timeout=30 -rss_limit_mb=3072 -artifact_prefix="$crashes/$t-" -print_final_stats=1)

  scratch_base=/dev/shm
  [[ -w $scratch_base ]] || scratch_base=$work_base
  export KILN_FUZZ_SCRATCH
  KILN_FUZZ_SCRATCH=$(mktemp -d "$scratch_base/kiln-fuzz-$t.XXXXXX")

  # 1. Every seed and regression input once, as individual files (no fuzzing, nothing written).
  mapfile -t inputs < <(find "${seeds[@]}" -type f 2>/dev/null | sort)
  : >"$log"
  rc=0
  if ((${#inputs[@]})); then
    "$bin" "${common[@]}" "${inputs[@]}" >>"$log" 2>&1 || rc=$?
  fi
  # 2. Fuzz the copy for a bounded time.
  if ((rc == 0)); then
    "$bin" "${common[@]}" "${dict[@]}" -max_total_time="$seconds" "$work" >>"$log" 2>&1 || rc=$?
  fi
  ((short)) && rm -rf "$work"
  rm -rf "$KILN_FUZZ_SCRATCH"

  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  if ((rc == 0)); then
    pass=$((pass + 1))
    echo "✔ $t (${#inputs[@]} seeds replayed, ${runs:-?} runs in ${seconds}s, cov ${cov:-?})"
  else
    fail=$((fail + 1))
    crash=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
    echo "✖ $t failed (exit $rc); input: ${crash:-see log}; log: $log"
    # The sanitizer's (or the harness's) report, from its first line on, shortened.
    start=$(grep -nE '^==[0-9]+==ERROR|runtime error:|kiln fuzz: invariant|^==[0-9]+== ERROR: libFuzzer|deadly signal' "$log" | head -1 | cut -d: -f1)
    sed -n "${start:-1},\$p" "$log" | head -60 | sed 's/^/    /'
  fi
done
summary "$pass" "$fail" 0
((fail == 0))
