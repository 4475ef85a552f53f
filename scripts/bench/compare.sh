#!/usr/bin/env bash
# kolo against Open MPI and Gloo on this machine, in one run: kolo-perf (under kolorun),
# kolo-perf-mpi (under mpirun) and kolo-perf-gloo (under kolorun) measure the same sizes with the
# same table, INTERLEAVED (kolo, peer, peer, ..., kolo, peer, ... for every repetition), so a
# change in the machine's load hits every implementation alike. The median over the repetitions
# of each (collective, ranks, size, implementation) goes to a CSV and a JSON, and compare_report.py
# prints kolo/peer ratios (> 1: kolo is faster). The same run measures the machine's physical
# limits first (memcpy and float32 reduction bandwidth on 1 and all cores with kolo-bench-limits,
# loopback TCP throughput with iperf3), reports kolo's busbw as a percentage of the bound its
# transport implies, and draws PNG charts with gnuplot (when installed) next to the CSV.
#
# It builds nothing: run scripts/build/build.sh (or meson setup build && ninja -C build) first.
#
#   scripts/bench/compare.sh                 # 2 and 4 ranks, allreduce 8 B..256 MiB, 3 repetitions
#   scripts/bench/compare.sh --quick         # CI: up to 1 MiB, 1 repetition, under 2 minutes
#   scripts/bench/compare.sh --ranks 2 --collectives allreduce,broadcast --max 64M --transport tcp
set -euo pipefail
cd "$(dirname "$0")/../.."
ORIGINAL_ARGS="$*"  # for the record in meta.txt, before the options are consumed

usage() {
  cat <<'EOF'
usage: scripts/bench/compare.sh [options]
  --build DIR         build directory with the binaries (default: build, or $BUILD_DIR)
  --ranks "2 4"       rank counts to measure (default "2 4")
  --reps R            repetitions, interleaved (default 3; --quick: 1)
  --min SIZE          smallest size (default 8)
  --max SIZE          largest size, K/M/G suffixes (default 256M; --quick: 1M)
  --collectives LIST  comma-separated, any of kolo-perf's (default allreduce); Open MPI runs them
                      all, Gloo only allreduce
  --peers LIST        comma-separated: mpi (shared memory), mpi-tcp, gloo-ring, gloo-ring_chunked,
                      gloo-halving_doubling (default mpi,mpi-tcp,gloo-ring)
  --transport T       KOLO_TRANSPORT for kolo (default: unset, kolo picks automatically)
  --placement in|out  which column to compare (default in: in place, Gloo's native mode)
  --check 0|1         verify every element in the first repetition, sizes up to 16 MiB
                      (default 1; the check runs after the timing, never inside it)
  --out DIR           results directory (default BUILD/compare)
  --no-limits         skip measuring the physical limits (no % of bound)
  --no-plots          skip the PNG charts
  --quick             sizes up to 1 MiB, 1 repetition, short limit measurements
  -h, --help          this text
Environment: RUN_TIMEOUT (seconds per benchmark run, default 600), MPIRUN_EXTRA (more mpirun args),
  KOLO_BLOCKING (kolo-perf's -z for kolo, default 2: wait for each operation, as the peers' blocking calls do).
EOF
}

BUILD=${BUILD_DIR:-build}
RANKS="2 4"
REPS=""
MIN=8
MAX=""
COLLECTIVES=allreduce
PEERS=mpi,mpi-tcp,gloo-ring
TRANSPORT=""
PLACEMENT=in
CHECK=1
OUT=""
QUICK=0
LIMITS=1
PLOTS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    --collectives) COLLECTIVES=$2; shift 2 ;;
    --peers) PEERS=$2; shift 2 ;;
    --transport) TRANSPORT=$2; shift 2 ;;
    --placement) PLACEMENT=$2; shift 2 ;;
    --check) CHECK=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-limits) LIMITS=0; shift ;;
    --no-plots) PLOTS=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  REPS=${REPS:-1}
  MAX=${MAX:-1M}
fi
REPS=${REPS:-3}
MAX=${MAX:-256M}
OUT=${OUT:-$BUILD/compare}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
case "$PLACEMENT" in in|out) ;; *) echo "compare.sh: --placement is in or out" >&2; exit 2 ;; esac
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --reps must be a positive integer" >&2; exit 2; }

# Bytes of a K/M/G size, as kolo-perf reads it.
to_bytes() {
  local s=$1 mult=1
  case "$s" in
    *[kK]) mult=1024; s=${s%?} ;;
    *[mM]) mult=$((1024 * 1024)); s=${s%?} ;;
    *[gG]) mult=$((1024 * 1024 * 1024)); s=${s%?} ;;
  esac
  [[ "$s" =~ ^[0-9]+$ ]] || { echo "compare.sh: '$1' is not a size" >&2; exit 2; }
  echo $((s * mult))
}
MIN_BYTES=$(to_bytes "$MIN")
MAX_BYTES=$(to_bytes "$MAX")
[ "$MIN_BYTES" -le "$MAX_BYTES" ] || { echo "compare.sh: --min is above --max" >&2; exit 2; }

KOLORUN=$BUILD/tools/kolorun/kolorun
KOLO_PERF=$BUILD/bench/perf/kolo-perf
KOLO_BLOCKING=${KOLO_BLOCKING:-2}  # kolo-perf's -z for kolo's runs (see band_iters below)
PERF_MPI=$BUILD/bench/peers/kolo-perf-mpi
PERF_GLOO=$BUILD/bench/peers/kolo-perf-gloo
PERF_LIMITS=$BUILD/bench/micro/kolo-bench-limits
for bin in "$KOLORUN" "$KOLO_PERF"; do
  if [ ! -x "$bin" ]; then
    echo "compare.sh: $bin is missing; build first: scripts/build/build.sh (or: meson setup $BUILD && ninja -C $BUILD)" >&2
    exit 2
  fi
done

# The peers that can run here; a missing one is skipped with the reason and the fix.
impls=(kolo)
IFS=',' read -r -a requested <<< "$PEERS"
for peer in "${requested[@]}"; do
  case "$peer" in
    mpi|mpi-tcp)
      if [ ! -x "$PERF_MPI" ] || ! command -v mpirun >/dev/null; then
        echo "compare.sh: skipping $peer: no $PERF_MPI or mpirun (apt-get install libopenmpi-dev openmpi-bin, then meson setup --reconfigure $BUILD && ninja -C $BUILD)" >&2
        continue
      fi ;;
    gloo-ring|gloo-ring_chunked|gloo-halving_doubling)
      if [ ! -x "$PERF_GLOO" ]; then
        echo "compare.sh: skipping $peer: no $PERF_GLOO (apt-get install libgloo-dev, then meson setup --reconfigure $BUILD && ninja -C $BUILD)" >&2
        continue
      fi ;;
    *) echo "compare.sh: unknown peer '$peer'" >&2; exit 2 ;;
  esac
  impls+=("$peer")
done

# Open MPI as root in a container: --allow-run-as-root, --oversubscribe for more ranks than
# cores (Open MPI then yields the core while it waits; forcing mpi_yield_when_idle 0 makes 4
# ranks on 2 cores a thousand times slower), --bind-to none so MPI ranks are scheduled like
# kolo's and Gloo's (kolorun does not pin). "mpi" is Open MPI's default shared-memory path made
# explicit (ob1 + vader, single-copy through CMA), "mpi-tcp" the TCP BTL only, like kolo's TCP.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1)
# shellcheck disable=SC2206  # MPIRUN_EXTRA is a list of words on purpose
[ -n "${MPIRUN_EXTRA:-}" ] && MPIRUN+=(${MPIRUN_EXTRA})

# Size bands with their own iteration counts: many iterations where a run is cheap, few where a
# 256 MiB all-reduce takes a quarter to several seconds here. The check (first repetition only,
# after the timing) covers every element up to 16 MiB; above, it would cost ~20 s per run on
# this 2-core machine (hashing 64 M elements per rank), so the "huge" band is timed only.
bands=(small medium large huge)
band_lo=(0 $((128 * 1024)) $((8 * 1024 * 1024)) $((32 * 1024 * 1024)))
band_hi=($((64 * 1024)) $((4 * 1024 * 1024)) $((16 * 1024 * 1024)) $((1 << 62)))
# The small and medium bands warm up 20 times, not 5: 5 did not get past a run's first calls
# (page faults, cold caches, the engine thread learning that callers wait): the first size of
# a band read 3-7x slower than the next at 8 B, and 1.5x at 128 KiB.
# It keeps nccl-tests' 20 timed iterations. kolo-perf waits for each operation before it issues
# the next (-z 2, KOLO_BLOCKING): Open MPI's and Gloo's peers call blocking collectives, and this
# is kolo's synchronous caller doing the same. nccl-tests' default -z 0 (issue all 20, then wait)
# keeps every Work alive to the end, which no synchronous caller does; it measured the same from
# 1 MiB and 0-15% faster at 64 KiB-16 MiB on 2 ranks here (docs/PERFORMANCE.md). More than 20
# back-to-back operations are an overlapping caller to kolo (the engine thread takes them over
# after KOLO_INLINE_WINDOW_US), a pattern Open MPI's blocking calls do not have.
band_iters=("-n 20 -w 20" "-n 20 -w 20" "-n 5 -w 1" "-n 2 -w 1")
band_checked=(1 1 1 0)

mkdir -p "$OUT/raw"
rm -f "$OUT"/raw/*.txt
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname), nproc $(nproc), $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "load before: $(uptime)"
  echo "command: scripts/bench/compare.sh $ORIGINAL_ARGS"
  echo "options: ranks '$RANKS' reps $REPS sizes $MIN_BYTES..$MAX_BYTES collectives $COLLECTIVES placement $PLACEMENT transport '${TRANSPORT:-auto}'"
  echo "implementations: ${impls[*]}"
} > "$OUT/meta.txt"
cat "$OUT/meta.txt"

# The physical limits, measured before the runs (on an otherwise idle machine they are what no
# implementation can beat): kolo-bench-limits and a loopback iperf3 stream.
measure_limits() {
  local secs=3 lim_secs=0.5
  [ "$QUICK" = 1 ] && { secs=1; lim_secs=0.2; }
  local lim_json="{}" tcp_gbs=""
  if [ -x "$PERF_LIMITS" ]; then
    lim_json=$(timeout 120 "$PERF_LIMITS" --seconds "$lim_secs") || { echo "compare.sh: kolo-bench-limits failed" >&2; lim_json="{}"; }
  else
    echo "compare.sh: no $PERF_LIMITS (needs libbenchmark-dev at configure time): no memcpy bound" >&2
  fi
  if command -v iperf3 >/dev/null; then
    local port=$((20000 + RANDOM % 20000))
    timeout $((secs + 20)) iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    if timeout $((secs + 15)) iperf3 -c 127.0.0.1 -p "$port" -t "$secs" -J > "$OUT/iperf3.json" 2>/dev/null; then
      tcp_gbs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9)' "$OUT/iperf3.json" 2>/dev/null || true)
    fi
    wait "$server" 2>/dev/null || true
    [ -n "$tcp_gbs" ] || echo "compare.sh: iperf3 on loopback failed: no TCP bound" >&2
  else
    echo "compare.sh: no iperf3 (apt-get install iperf3): no TCP bound" >&2
  fi
  python3 - "$lim_json" "${tcp_gbs:-}" "$(nproc)" > "$OUT/limits.json" <<'PY'
import json, sys
limits = json.loads(sys.argv[1])
limits["cores"] = int(sys.argv[3])
if sys.argv[2]:
    limits["tcp_loopback_gbs"] = round(float(sys.argv[2]), 3)
print(json.dumps(limits))
PY
  echo "compare.sh: limits: $(cat "$OUT/limits.json")"
}
rm -f "$OUT/limits.json"
[ "$LIMITS" = 1 ] && measure_limits

failures=0
run_one() {  # impl ranks collective band-index rep
  local impl=$1 n=$2 coll=$3 b=$4 rep=$5
  local lo=${band_lo[$b]} hi=${band_hi[$b]}
  [ "$lo" -lt "$MIN_BYTES" ] && lo=$MIN_BYTES
  [ "$hi" -gt "$MAX_BYTES" ] && hi=$MAX_BYTES
  [ "$lo" -le "$hi" ] || return 0
  local check=0
  [ "$rep" = 1 ] && [ "${band_checked[$b]}" = 1 ] && check=$CHECK
  # shellcheck disable=SC2206
  local args=("$coll" -b "$lo" -e "$hi" -f 2 -c "$check" ${band_iters[$b]})
  local cmd
  case "$impl" in
    kolo)
      cmd=("$KOLORUN" -n "$n" --timeout "$RUN_TIMEOUT")
      [ -n "$TRANSPORT" ] && cmd+=(-x "KOLO_TRANSPORT=$TRANSPORT")
      cmd+=("$KOLO_PERF" "${args[@]}" -z "$KOLO_BLOCKING") ;;
    mpi) cmd=("${MPIRUN[@]}" --mca btl "self,vader" -np "$n" "$PERF_MPI" "${args[@]}") ;;
    mpi-tcp) cmd=("${MPIRUN[@]}" --mca btl "self,tcp" -np "$n" "$PERF_MPI" "${args[@]}") ;;
    gloo-*)
      [ "$coll" = allreduce ] || return 0  # Gloo's classic algorithms are all-reduces
      cmd=("$KOLORUN" -n "$n" --timeout "$RUN_TIMEOUT" "$PERF_GLOO" "${args[@]}" --algo "${impl#gloo-}") ;;
  esac
  local log="$OUT/raw/r${rep}_${coll}_n${n}_${impl}_${bands[$b]}.txt"
  { echo "# ${cmd[*]}"; echo "# loadavg before: $(cat /proc/loadavg)"; } > "$log"
  if ! timeout -k 10 "$((RUN_TIMEOUT + 30))" "${cmd[@]}" >> "$log" 2>&1; then
    # A peer's failed run is tried once more (added for Gloo's "Connection closed by peer", which
    # was kolo-perf-gloo's own exit, fixed by its final barrier); the first log is kept beside it.
    # kolo is never retried.
    if [ "$impl" != kolo ]; then
      mv "$log" "$log.first-try"
      echo "compare.sh: WARNING: retrying a failed peer run once: ${cmd[*]} (first log: $log.first-try)" >&2
      { echo "# ${cmd[*]}"; echo "# loadavg before: $(cat /proc/loadavg)"; } > "$log"
      timeout -k 10 "$((RUN_TIMEOUT + 30))" "${cmd[@]}" >> "$log" 2>&1 && return 0
    fi
    echo "compare.sh: FAILED: ${cmd[*]} (see $log)" >&2
    failures=$((failures + 1))
  fi
}

IFS=',' read -r -a colls <<< "$COLLECTIVES"
start=$SECONDS
for rep in $(seq 1 "$REPS"); do
  for n in $RANKS; do
    for coll in "${colls[@]}"; do
      for b in "${!bands[@]}"; do
        for impl in "${impls[@]}"; do
          run_one "$impl" "$n" "$coll" "$b" "$rep"
        done
      done
    done
  done
  echo "compare.sh: repetition $rep of $REPS done after $((SECONDS - start)) s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "load after: $(uptime)" >> "$OUT/meta.txt"
echo "elapsed: $((SECONDS - start)) s" >> "$OUT/meta.txt"

report_args=(--raw "$OUT/raw" --placement "$PLACEMENT" --csv "$OUT/compare.csv" --json "$OUT/compare.json"
             --meta "$OUT/meta.txt" --transport "$TRANSPORT")
[ -f "$OUT/limits.json" ] && report_args+=(--limits "$OUT/limits.json")
rm -rf "$OUT/plots"
[ "$PLOTS" = 1 ] && report_args+=(--plots "$OUT/plots")
python3 scripts/bench/compare_report.py "${report_args[@]}" | tee "$OUT/report.md"
echo "compare.sh: CSV in $OUT/compare.csv, JSON in $OUT/compare.json, table in $OUT/report.md, charts in $OUT/plots, logs in $OUT/raw"
if [ "$failures" -ne 0 ]; then
  echo "compare.sh: $failures run(s) failed (wrong results or errors); their sizes are missing above" >&2
  exit 1
fi
