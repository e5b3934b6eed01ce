#!/usr/bin/env bash
# One background build step of make test: runs the command at the lowest CPU priority, its output in
# LOGS/build-STEP.log, and leaves its exit status in LOGS/bg-STEP.rc for the suite that waits on it
# (scripts/run-tests.sh --overlap-builds). Usage: bg-build.sh STEP LOGS COMMAND...
set -u
step=$1 logs=$2
shift 2
rm -f "$logs/bg-$step.rc"
nice -n 19 "$@" >"$logs/build-$step.log" 2>&1
echo $? >"$logs/bg-$step.rc"
