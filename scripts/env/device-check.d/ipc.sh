# Sourced by scripts/env/device-check.sh (bash): the CUDA IPC step (issue 44). Defines
#   IPC_CARRY    the built files this step needs beyond prepare's list, relative to the build
#                folder (prepare copies them to .devcarry/build/, or call prepare_ipc BUILD after it)
#   prepare_ipc  here: copies IPC_CARRY from BUILD (default build) into $D/build
#   run_ipc      there: the transport conformance suite on the cuda_ipc pair device with cudaMalloc
#                buffers (tests/transports, ranks as threads: `*/cuda_ipc`, 60 s at most), then
#                kolo-ipc-test (tests/cuda_ipc) through kolorun at 2 ranks (with --bench:
#                the 256 MiB copy, the kernel alone, every all-reduce algorithm (one-shot,
#                two-shot, two-shot-push, leader-push, ring) at 8 B, 64 KiB, 16 MiB, 256 MiB),
#                then 3 and 4 ranks (every check: all-reduce, ring included, reduce-scatter,
#                all-gather, broadcast, reduce, all-to-all), all on GPU 0; after a failure, 2 ranks again ordered on the host alone
#                (KOLO_IPC_HOST_ORDERED=1).
#                One log, $OUT/ipc.log; one summary line.
# It relies on device-check.sh's $B, $D, $OUT, step and summary, and on setup_env's
# LD_LIBRARY_PATH (libkolo.so.0 from $B); kolorun is in prepare's list already.
IPC_CARRY=(tests/cuda_ipc/kolo-ipc-test tests/transports/kolo-test-transports)
CARRY_ipc=("${IPC_CARRY[@]}")  # what device-check.sh's prepare reads

prepare_ipc() {
  local build=${1:-build} f
  for f in "${IPC_CARRY[@]}"; do
    [ -e "$build/$f" ] || { echo "device-check: $build/$f missing (build with -Dcuda=enabled)" >&2; return 1; }
    mkdir -p "$D/build/$(dirname "$f")" && cp "$build/$f" "$D/build/$f" && strip "$D/build/$f"
  done
}

run_ipc() {
  step "cuda_ipc: kolo-ipc-test, 2 ranks (+ bench), 3 and 4 ranks on one GPU"
  local exe=$B/tests/cuda_ipc/kolo-ipc-test log=$OUT/ipc.log line="ipc:"
  if [ ! -x "$exe" ] || [ ! -x "$B/tools/kolorun/kolorun" ]; then
    summary+=("ipc: $exe or kolorun missing (prepare_ipc, carry .devcarry)"); return
  fi
  : > "$log"
  # Bounds: 60 + 35 + 35 + 2 x 30 s (+ 20 s for the diagnostic rerun), plus 2 s each to kill:
  # (plus 62 s for the conformance suite) under 290 s even if every run hangs (about 15 s when all goes well) (a rank's own waits give up after 30 s, and kolorun then
  # stops the others, so a hang usually ends in a message before the bound). The ring's cases
  # (29 checks a run, 4 bench sizes at 2 ranks, each call 3 to 7 phases of ~143 us) should add
  # about 1-2 s a run, estimated, not measured: far inside the limits, which stay.
  ipc_run() {  # ipc_run LABEL LIMIT N [ENV=VALUE] -- ARGS...
    local label=$1 limit=$2 n=$3 t0 rc; shift 3
    local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    echo "== $label: kolorun -n $n kolo-ipc-test $* ${envs[*]} (timeout $limit s)" >> "$log"
    t0=$(date +%s)
    env "${envs[@]}" timeout -k 2 "$limit" "$B/tools/kolorun/kolorun" -n "$n" "$exe" "$@" >> "$log" 2>&1
    rc=$?
    echo "== $label: rc=$rc in $(( $(date +%s) - t0 )) s" >> "$log"
    line+=" $label rc=$rc"
    return $rc
  }
  local bad=0
  # Issue 44 item 1: the pair contract on device memory (the stand-in runs the same cases in CI).
  local conf=$B/tests/transports/kolo-test-transports
  if [ -x "$conf" ]; then
    echo "== conformance: kolo-test-transports --gtest_filter='*/cuda_ipc' (timeout 60 s)" >> "$log"
    timeout -k 2 60 "$conf" --gtest_filter='*/cuda_ipc' >> "$log" 2>&1
    local crc=$?
    echo "== conformance: rc=$crc" >> "$log"
    line+=" conformance rc=$crc"
    [ $crc = 0 ] || bad=1
  else
    line+=" conformance: $conf missing"
  fi
  ipc_run 2r 60 2 -- --bench || bad=1
  ipc_run 3r 35 3 -- || bad=1
  ipc_run 4r 35 4 -- || bad=1
  # Something failed: once more at 2 ranks ordered on the host alone (no IPC event waits), which
  # tells a fault of the event ordering apart from one of the mapped memory or the kernels.
  if [ $bad = 1 ] || grep -qE '^\[  FAILED  \]' "$log"; then
    ipc_run 2r-host-ordered 20 2 KOLO_IPC_ORDERING=host --
  fi
  # The other orderings, checks and bench at 2 ranks: which costs least where ranks share a GPU
  # (events cost ~280 us per call in runs 6-7). IPC_ORDERINGS= skips them.
  local o
  for o in ${IPC_ORDERINGS-flags host}; do
    ipc_run "2r-$o" 30 2 KOLO_IPC_ORDERING="$o" -- --bench || bad=1
  done
  local passed failed skipped
  passed=$(grep -cE '^\[       OK \]' "$log")
  failed=$(grep -cE '^\[  FAILED  \]' "$log")
  skipped=$(grep -cE '^\[  SKIPPED \]' "$log")
  line+=" (OK lines $passed, FAILED lines $failed, SKIPPED lines $skipped)"
  # The measured targets: the copy's rate, and per algorithm the 8 B time and the 256 MiB ratio.
  line+=" $(grep -hoE '^BENCH copy .*' "$log" | head -1)"
  line+=" $(grep -hE '^BENCH parts ' "$log" | sed 's/^BENCH parts //' | tr '\n' ';')"
  # (one group per run with --bench, in the order run: events, then IPC_ORDERINGS)
  line+=" $(grep -hE '^SUMMARY ipc' "$log" | sed -E 's/^SUMMARY ipc allreduce //; s/ \(target.*//' | tr '\n' ';')"
  summary+=("$line")
  grep -E '^(BENCH|SUMMARY|\[  FAILED|\[  PASSED|\[  SKIPPED|== )' "$log"
}
