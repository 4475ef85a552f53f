#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what kolo needs, build it, and run a
# validated 4-rank all-reduce sweep (every element checked) with kolo-perf, over shared memory
# (the transport kolo picks for ranks on one host; KOLO_TRANSPORT=tcp for TCP loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build/install-deps.sh
scripts/build/build.sh
BUILD_DIR=${BUILD_DIR:-build}
exec "$BUILD_DIR/tools/kolorun/kolorun" -n 4 "$BUILD_DIR/bench/perf/kolo-perf" allreduce -b 8 -e 16M -f 4 -c 1
