#!/usr/bin/env bash
# What TLS (KOLO_TLS=1) costs the TCP transport, measured in one run: kolo-perf all-reduce over
# TCP in clear and with TLS (interleaved, per rank count), against what AES-256-GCM alone allows
# on this machine (`openssl speed -evp aes-256-gcm`, 16 KiB blocks = one TLS record, encrypt and
# decrypt, timed in the same run), and plain Gloo's ring all-reduce over TCP (Debian's Gloo has
# no TCP_TLS transport to compare with; kolo-perf-gloo, when built).
#
# The bound. A ring all-reduce of S bytes on n ranks is a reduce-scatter then an all-gather,
# each n-1 steps of S/n bytes: every rank sends 2(n-1)/n S bytes and receives as many, so it
# encrypts 2(n-1)/n S and decrypts 2(n-1)/n S; the n ranks together encrypt 2(n-1)S and
# decrypt 2(n-1)S, 4(n-1)S of cipher work in all. For 2 ranks: each rank sends S/2 and receives
# S/2 in each phase, so it encrypts S and decrypts S (2x the buffer per rank, 1x each way), and
# the two ranks 4S together: the issue's "4x the buffer" counts both ranks, which share the 2
# cores. With c cores (at most n busy) the cipher alone takes at least
# 2(n-1)S (1/E + 1/D) / c seconds (E, D: encrypt and decrypt rates of one core), and busbw
# (S/t * 2(n-1)/n) is then at most c / (n * (1/E + 1/D)): 1/(1/E + 1/D), about E/2, for 2 ranks
# on 2 cores; half that for 4 ranks on 2 cores.
# What the bound leaves out: TCP's own work on the same cores (copies into and out of the
# kernel, loopback's protocol processing on both ends), and that openssl speed seals one
# 16 KiB block over and over, hot in cache. The "clear busbw / bound" column shows the first:
# if the cipher's time simply added to clear TCP's, TLS would reach clear/(clear + bound) of it
# (0.46 at a ratio of 0.85).
#
# Usage: scripts/bench/tls_cost.sh [ranks...]   (default: 2 4; BUILD=build, MAX=256M, STEP=2, ITERS, REPS=3,
#   GLOO= to leave Gloo out). On a shared machine run it as `chrt -f 10 scripts/bench/tls_cost.sh`
#   (SCHED_FIFO: builds cannot preempt the ranks) with GLOO= : Gloo's ring under SCHED_FIFO on 2
#   cores stalls for minutes (a spinning thread starves its peer); its column then comes from a
#   run without chrt. Every launch is bounded (kolorun --timeout 300).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MAX=${MAX:-256M}
ITERS=${ITERS:-}  # default: 50 iterations up to 1 MiB, 10 up to 16 MiB, 3 above
REPS=${REPS:-3}
STEP=${STEP:-2}  # sizes 8 B, 16 B, ... MAX (STEP=4: 8 B, 32 B, ... 128 MiB)
[ $# -eq 0 ] && set -- 2 4
RANKS=("$@")
CORES=$(nproc)
MAX_BYTES=$(numfmt --from=iec "$MAX")
export KOLO_TRANSPORT=tcp KOLO_SECRET=${KOLO_SECRET:-tls-cost-bench}

speed() {  # bytes/s of one core at 16 KiB blocks, $1: "" or -decrypt
  openssl speed -seconds 3 -bytes 16384 -evp aes-256-gcm $1 2>/dev/null |
    awk '/^aes-256-gcm|^AES-256-GCM/ {v=$NF; sub(/k$/, "", v); print v * 1000}'
}

perf() {  # $1 ranks, $2 size, $3 KOLO_TLS, $4 program (default kolo-perf), more flags: "size µs busbw #wrong"
  # (out of place), the fastest of REPS launches: on a shared machine the others' load only adds.
  local n=$1 size=$2 tls=$3 prog=${4:-$BUILD/bench/perf/kolo-perf}
  shift 4
  local iters=${ITERS:-$(( size <= 1048576 ? 50 : size <= 16777216 ? 10 : 3 ))}
  for ((rep = 0; rep < REPS; ++rep)); do
    KOLO_TLS=$tls "$BUILD/tools/kolorun/kolorun" --timeout 300 -n "$n" "$prog" allreduce -b "$size" -e "$size" \
      -n "$iters" -w 1 -c 1 "$@" 2>&1 | awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $1, $6, $8, $9}'
  done | sort -k2,2g | head -1
}
GLOO=${GLOO-$BUILD/bench/peers/kolo-perf-gloo}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $CORES cores, $(uname -r), $(openssl version)"
E=$(speed "")
D=$(speed -decrypt)
echo "# openssl speed -evp aes-256-gcm, 16 KiB blocks, one core: encrypt $(awk -v v="$E" 'BEGIN{printf "%.2f", v/1e9}') GB/s, decrypt $(awk -v v="$D" 'BEGIN{printf "%.2f", v/1e9}') GB/s"
for n in "${RANKS[@]}"; do
  c=$(( n < CORES ? n : CORES ))
  bound=$(awk -v e="$E" -v d="$D" -v c="$c" -v n="$n" 'BEGIN{printf "%.4f", c / (n * (1/e + 1/d)) / 1e9}')
  plain="" tls="" gloo=""
  # Size by size, the three back to back: load that comes and goes on a shared machine then
  # hits all three alike.
  for ((size = 8; size <= MAX_BYTES; size *= STEP)); do
    plain+="$(perf "$n" "$size" 0 "")"$'\n'
    tls+="$(perf "$n" "$size" 1 "")"$'\n'
    if [ -n "$GLOO" ] && [ -x "$GLOO" ]; then gloo+="$(perf "$n" "$size" 0 "$GLOO" --algo ring)"$'\n'; else gloo+="$size 0 0 -"$'\n'; fi
  done
  plain=${plain%$'\n'} tls=${tls%$'\n'} gloo=${gloo%$'\n'}
  echo
  echo "## $n ranks: AES-GCM bound on busbw $bound GB/s ($c cores)"
  echo "| size (B) | clear µs | TLS µs | Gloo ring (clear) µs | TLS time / clear | TLS busbw GB/s | TLS busbw / AES-GCM bound | clear busbw / bound | #wrong (clear, TLS, Gloo) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  paste <(echo "$plain") <(echo "$tls") <(echo "$gloo") | awk -v b="$bound" '{
    printf "| %s | %.1f | %.1f | %s | %.2f | %.3f | %.2f | %.2f | %s, %s, %s |\n", $1, $2, $6, ($10 > 0 ? sprintf("%.1f", $10) : "-"), ($2 > 0 ? $6 / $2 : 0), $7, $7 / b, $3 / b, $4, $8, $12 }'
done
