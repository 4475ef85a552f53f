#!/usr/bin/env bash
# kolo across hosts made of network namespaces (netns-hosts.sh): launched the ways users launch
# jobs (kolorun --hosts, mpirun, torchrun multi-node, Slurm's variables), with clear errors when
# the store cannot be reached, exact results through a lossy, slow, reordering, duplicating
# switch, and every rank failing within the timeout when a host's link is cut or the host vanishes.
#
#   multihost_test.sh --build-dir DIR [--long] [--filter SUBSTRING]
#
# Short mode (meson test --suite multihost): one pass of each, about 2-3 minutes on 2 cores.
# --long: the impaired sweep on 4 hosts over 8 B..1 MiB and 5 trials each of cut and crash,
# with timings (docs/RELIABILITY.md, "Faults between hosts"). Prints GoogleTest-style lines
# because scripts/test.sh counts them. Needs root and network namespaces, else it says it
# skipped and passes 0 tests.
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD=""
LONG=0
FILTER=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --long) LONG=1; shift ;;
    --filter) FILTER=$2; shift 2 ;;
    *) echo "usage: $0 --build-dir DIR [--long] [--filter SUBSTRING]" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD" ] || BUILD="$ROOT/build"
NET="$HERE/netns-hosts.sh"
KOLORUN="$BUILD/tools/kolorun/kolorun"
PERF="$BUILD/bench/perf/kolo-perf"
WORKER="$BUILD/tests/collectives/kolo-test-worker"
TORCH_PY=/usr/bin/python3
export KOLO_SECRET=multihost-test-secret  # one job secret for ranks started by hand
export KOLO_DEBUG=WARN

skip_all() {
  echo "[==========] Multihost: 0 tests ran."
  echo "[  SKIPPED ] Multihost: $1"
  echo "[  PASSED  ] 0 tests."
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip_all "needs root (network namespaces)"
ip netns add kolo-probe-$$ 2>/dev/null && ip netns delete kolo-probe-$$ || skip_all "network namespaces are unavailable here"
for prog in "$KOLORUN" "$PERF"; do [ -x "$prog" ] || { echo "missing $prog (build first)"; echo "[  FAILED  ] 1 test, listed below:"; exit 1; }; done

# One run at a time: the namespaces and addresses are fixed.
exec 9> /run/kolo-multihost.lock
flock -w 600 9 || skip_all "another multihost run holds /run/kolo-multihost.lock"

WORK=$(mktemp -d /tmp/kolo-multihost.XXXXXX)
cleanup() { "$NET" down; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=0
FAILED=()
SKIPPED=0
CURRENT=""
CURRENT_OK=1

fail() {  # fail MESSAGE: the current test fails, and says why
  echo "    FAILURE: $*"
  CURRENT_OK=0
}
note() { echo "    $*"; }

run_test() {  # run_test NAME: runs test_NAME
  local name=$1
  [ -z "$FILTER" ] || [[ "$name" == *"$FILTER"* ]] || return 0
  CURRENT=$name
  CURRENT_OK=1
  echo "[ RUN      ] Multihost.$name"
  local t0=$(date +%s%N)
  "test_$name"
  local rc=$?
  [ $rc -eq 77 ] && { SKIPPED=$((SKIPPED + 1)); echo "[  SKIPPED ] Multihost.$name"; "$NET" down; return 0; }
  [ $rc -ne 0 ] && fail "the test body exited with $rc"
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $CURRENT_OK -eq 1 ]; then
    PASSED=$((PASSED + 1))
    echo "[       OK ] Multihost.$name ($ms ms)"
  else
    FAILED+=("$name")
    echo "[  FAILED  ] Multihost.$name ($ms ms)"
  fi
  "$NET" down
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
in_host() { local h=$1; shift; ip netns exec "kolo-h$h" "$@"; }

# --- launching --------------------------------------------------------------------------------

# kolorun -H, two hosts of two ranks: shm inside a host, tcp across, exact results.
test_KolorunHostsShmInsideTcpAcross() {
  "$NET" up --hosts 2 || return 1
  timeout 120 "$KOLORUN" --hosts kolo-h0:2,kolo-h1:2 --launch-agent 'ip netns exec {host}' -t \
    -x KOLO_DEBUG=DEBUG -x KOLO_DEBUG_SUBSYS=INIT -x KOLO_SOCKET_IFNAME=eth \
    "$PERF" allreduce -b 8 -e 256K -f 8 -c 1 -w 1 -n 2 > "$WORK/out" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { tail -20 "$WORK/out"; fail "kolorun exited with $rc"; return 0; }
  local shm tcp
  shm=$(grep -c "shm carries 1 peer" "$WORK/out")
  tcp=$(grep -c "tcp carries 2 peer" "$WORK/out")
  [ "$shm" -eq 4 ] || fail "expected every rank to reach its one host-mate by shm, saw $shm ranks do so"
  [ "$tcp" -eq 4 ] || fail "expected every rank to reach the 2 ranks of the other host by tcp, saw $tcp ranks do so"
  note "shm inside a host: $shm ranks, tcp across hosts: $tcp ranks"
}

# kolorun --elastic -H with --store-addr: kolorun serves the store from h0's address (it runs on
# h0, beside rank 0), so when rank 0 kills itself mid-run the three others, on both hosts, still
# agree through it, shrink (shm inside h1, tcp across) and check every element. Without
# --store-addr rank 0 would serve the store and take it down with it.
test_ElasticShrinkAcrossHostsThroughKolorunsStore() {
  [ -x "$WORKER" ] || { fail "missing $WORKER (build first)"; return 0; }
  "$NET" up --hosts 2 || return 1
  local addr
  addr=$("$NET" addr h0)
  in_host 0 timeout 90 "$KOLORUN" --elastic --hosts kolo-h0:2,kolo-h1:2 --store-addr "$addr" \
    --launch-agent 'ip netns exec {host}' -t -x KOLO_SOCKET_IFNAME=eth -x KOLO_TIMEOUT=10 -x KOLO_SPIN_US=0 \
    "$WORKER" shrink kill 0 7 5 > "$WORK/out" 2>&1
  local rc=$? r
  [ $rc -eq 0 ] || { tail -20 "$WORK/out"; fail "kolorun exited with $rc"; return 0; }
  for r in 1 2 3; do
    grep -q "rank $((r - 1)) of 3 (was $r)" "$WORK/out" || fail "rank $r did not report its place in the shrunk group"
  done
  grep -q "rank 0 serves the store" "$WORK/out" && fail "kolorun left the store to rank 0"
  note "$(grep -m1 -o 'shrunk: generation 1 rank 0 of 3.*' "$WORK/out")"
}

# kolorun -H over four hosts, allreduce and allgather checked element by element.
test_KolorunFourHosts() {
  "$NET" up --hosts 4 || return 1
  for coll in allreduce allgather; do
    timeout 120 "$KOLORUN" --hosts kolo-h0,kolo-h1,kolo-h2,kolo-h3 --launch-agent 'ip netns exec {host}' \
      "$PERF" "$coll" -b 8 -e 1M -f 32 -c 1 -w 1 -n 2 > "$WORK/out" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { tail -20 "$WORK/out"; fail "$coll: kolorun exited with $rc"; }
  done
}

# Four hosts of two ranks: large all-reduce, all-gather, reduce-scatter and broadcast take the
# hierarchical algorithms (shm inside a host, tcp between leaders), every element checked.
test_HierarchicalFourHostsOfTwo() {
  "$NET" up --hosts 4 || return 1
  for coll in allreduce allgather reducescatter broadcast; do
    timeout 180 "$KOLORUN" --hosts kolo-h0:2,kolo-h1:2,kolo-h2:2,kolo-h3:2 --launch-agent 'ip netns exec {host}' -t \
      -x KOLO_DEBUG=INFO -x KOLO_DEBUG_SUBSYS=COLL -x KOLO_SOCKET_IFNAME=eth \
      "$PERF" "$coll" -b 8 -e 4M -f 8 -c 1 -w 1 -n 2 > "$WORK/out" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { tail -20 "$WORK/out"; fail "$coll: kolorun exited with $rc (1: wrong elements)"; continue; }
    grep -q "Out of bounds values : 0 OK" "$WORK/out" || fail "$coll: kolo-perf did not report 0 wrong values"
    local ranks
    ranks=$(grep ": algorithm hier," "$WORK/out" | grep -o "rank [0-7]" | sort -u | wc -l)
    [ "$ranks" -eq 8 ] || fail "$coll: expected all 8 ranks to run the hierarchical algorithm, saw $ranks"
    note "$coll: 8 ranks ran hier, results exact"
  done
}

# Open MPI's mpirun with `ip netns exec` in place of ssh (netns-ssh.sh: Open MPI's rsh launcher
# wants a remote shell): mpirun runs on kolo-h0 (its daemons must reach it on the hosts'
# network) and starts an orted in each other host through the agent.
# Open MPI's own daemon (orted) once crashed in orte_init before any rank started (CI,
# 2026-11-26, not reproduced in 6 runs): such a launcher failure, and only that, is retried
# once, and the retry is reported.
test_Mpirun() {
  command -v mpirun > /dev/null || return 77
  "$NET" up --hosts 3 || return 1
  local attempt rc
  for attempt in 1 2; do
    in_host 0 timeout 120 mpirun --allow-run-as-root --mca plm_rsh_agent "$HERE/netns-ssh.sh" \
      --mca oob_tcp_if_include eth0 --mca btl self,tcp --mca btl_tcp_if_include eth0 \
      -H kolo-h0:1,kolo-h1:1,kolo-h2:2 -np 4 \
      -x MASTER_ADDR=kolo-h0 -x MASTER_PORT=29610 -x KOLO_SECRET -x PATH \
      "$PERF" allreduce -b 8 -e 1M -f 32 -c 1 -w 1 -n 2 > "$WORK/out" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $attempt -eq 1 ] && grep -q "ORTE was unable to reliably start one or more daemons" "$WORK/out" || break
    note "retrying once: Open MPI's daemons did not start (exit $rc), before any rank ran: $(grep -m1 -o 'Segmentation fault\|Signal: [A-Za-z ]*' "$WORK/out")"
  done
  [ $rc -eq 0 ] || { tail -30 "$WORK/out"; fail "mpirun exited with $rc"; }
}

# torchrun multi-node (kolo_torch.run: Debian's torchrun needs its fix), one agent per host; the
# agent on node 0 serves the store at MASTER_ADDR, as with torchrun's static rendezvous.
test_TorchrunMultiNode() {
  [ -d "$BUILD/python/kolo_torch" ] && "$TORCH_PY" -c 'import torch' 2>/dev/null || return 77
  "$NET" up --hosts 4 || return 1
  local pids=() k rc=0
  for k in 0 1 2 3; do
    in_host $k env PYTHONPATH="$BUILD/python" timeout 120 "$TORCH_PY" -m kolo_torch.run --nnodes 4 --node_rank $k \
      --nproc_per_node 1 --master_addr kolo-h0 --master_port 29620 --no_python \
      "$PERF" allreduce -b 8 -e 1M -f 32 -c 1 -w 1 -n 2 > "$WORK/node$k" 2>&1 &
    pids+=($!)
  done
  for k in 0 1 2 3; do
    wait "${pids[$k]}" || { rc=$?; tail -15 "$WORK/node$k"; fail "node $k exited with $rc"; }
  done
}

# srun's variables set by hand: SLURM_PROCID and friends, MASTER_ADDR from the step's node list.
test_SlurmVariables() {
  "$NET" up --hosts 2 || return 1
  local pids=() r rc
  for r in 0 1 2 3; do
    in_host $((r / 2)) env SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_LOCALID=$((r % 2)) SLURM_NODEID=$((r / 2)) \
      SLURM_NTASKS_PER_NODE=2 SLURM_STEP_NODELIST='kolo-h[0-1]' SLURM_JOB_ID=4242 \
      KOLO_DEBUG=DEBUG KOLO_DEBUG_SUBSYS=INIT \
      timeout 120 "$PERF" allreduce -b 8 -e 256K -f 8 -c 1 -w 1 -n 2 > "$WORK/rank$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1 2 3; do
    wait "${pids[$r]}" || { rc=$?; tail -15 "$WORK/rank$r"; fail "rank $r exited with $rc"; }
    grep -q "shm carries 1 peer" "$WORK/rank$r" || fail "rank $r did not use shm for its host-mate"
  done
}

# The store's host is down, its address is wrong, or its name does not resolve: a clear error,
# within the timeout.
test_UnreachableStoreIsAClearBoundedError() {
  "$NET" up --hosts 2 || return 1
  local case addr expect t0 t1 rc
  for case in "kolo-h0|Connection refused" "10.77.0.99|10.77.0.99" "no-such-host.invalid|no-such-host.invalid"; do
    addr=${case%%|*}
    expect=${case#*|}
    t0=$(now_ms)
    in_host 1 env RANK=1 WORLD_SIZE=2 MASTER_ADDR="$addr" MASTER_PORT=29630 KOLO_TIMEOUT=3 \
      timeout 30 "$PERF" allreduce -b 8 -e 8 -c 1 > "$WORK/out" 2>&1
    rc=$?
    t1=$(now_ms)
    note "MASTER_ADDR=$addr: exit $rc after $((t1 - t0)) ms: $(grep -m1 -i "error\|TCPStore" "$WORK/out" | cut -c1-200)"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "MASTER_ADDR=$addr: expected a kolo error, got exit $rc"
    [ $((t1 - t0)) -lt 8000 ] || fail "MASTER_ADDR=$addr: took $((t1 - t0)) ms with KOLO_TIMEOUT=3"
    grep -q "rank 1 cannot reach the rendezvous store at MASTER_ADDR:MASTER_PORT = $addr:29630" "$WORK/out" ||
      fail "MASTER_ADDR=$addr: the error does not say which store it could not reach"
    grep -q "$expect" "$WORK/out" || fail "MASTER_ADDR=$addr: the error does not mention '$expect'"
  done
}

# KOLO_SOCKET_IFNAME naming no interface fails at once with the list of interfaces; naming
# loopback on a multi-host job warns, and the peers' connection errors end within the timeout.
test_WrongInterfaceIsAClearBoundedError() {
  "$NET" up --hosts 2 || return 1
  local t0 rc took
  t0=$(now_ms)
  timeout 60 "$KOLORUN" --hosts kolo-h0,kolo-h1 --launch-agent 'ip netns exec {host}' -x KOLO_SOCKET_IFNAME=wlan \
    -x KOLO_TIMEOUT=3 "$PERF" allreduce -b 8 -e 8 -c 1 > "$WORK/out" 2>&1
  rc=$?
  took=$(( $(now_ms) - t0 ))
  note "KOLO_SOCKET_IFNAME=wlan: exit $rc after $took ms: $(grep -m1 IFNAME "$WORK/out")"
  [ $rc -eq 3 ] || fail "KOLO_SOCKET_IFNAME=wlan: expected kolo-perf's error status 3, got $rc"
  grep -q "KOLO_SOCKET_IFNAME='wlan' allows no up interface.*eth0 10.77.0.1" "$WORK/out" ||
    fail "the error does not name the setting and the interfaces there are"
  t0=$(now_ms)
  timeout 60 "$KOLORUN" --hosts kolo-h0,kolo-h1 --launch-agent 'ip netns exec {host}' -x KOLO_SOCKET_IFNAME==lo \
    -x KOLO_TIMEOUT=3 "$PERF" allreduce -b 8 -e 8 -c 1 > "$WORK/out" 2>&1
  rc=$?
  took=$(( $(now_ms) - t0 ))
  note "KOLO_SOCKET_IFNAME==lo: exit $rc after $took ms: $(grep -m1 "could not connect" "$WORK/out" | cut -c1-200)"
  [ $rc -eq 3 ] || fail "KOLO_SOCKET_IFNAME==lo: expected kolo-perf's error status 3, got $rc"
  [ $took -lt 12000 ] || fail "KOLO_SOCKET_IFNAME==lo: took $took ms with KOLO_TIMEOUT=3"
  grep -q "listens on 127.0.0.1 .*ranks on other hosts cannot reach it" "$WORK/out" || fail "no warning about listening on loopback"
}

# --- faults between hosts ---------------------------------------------------------------------

# Through the impairing switch (loss, delay, reordering, duplication both ways), a validated sweep.
impaired_sweep() {  # impaired_sweep HOSTS MAX_BYTES FACTOR
  local n=$1 max=$2 factor=$3 hosts="" i
  "$NET" up --hosts "$n" --delay 100 --loss 5 --reorder 25 --duplicate 5 --seed 7 || return 1
  for ((i = 0; i < n; i++)); do hosts+="${hosts:+,}kolo-h$i"; done
  for coll in allreduce allgather; do
    local t0=$(now_ms)
    timeout 500 "$KOLORUN" --hosts "$hosts" --launch-agent 'ip netns exec {host}' -x KOLO_TIMEOUT=120 \
      "$PERF" "$coll" -b 8 -e "$max" -f "$factor" -c 1 -w 1 -n 2 > "$WORK/out" 2>&1
    local rc=$?
    note "$coll on $n hosts, 8 B..$max: exit $rc in $(( $(now_ms) - t0 )) ms"
    [ $rc -eq 0 ] || { tail -20 "$WORK/out"; fail "$coll: kolorun exited with $rc (1: wrong elements)"; }
  done
  local stats
  stats=$("$NET" stats)
  note "switch: $stats" | cut -c1-220
  for counter in dropped duplicated reordered; do
    python3 -c "import json,sys; sys.exit(0 if json.loads(sys.argv[1])['$counter'] > 0 else 1)" "$stats" ||
      fail "the switch reports no $counter frames: the impairment did not happen"
  done
}
test_ImpairedLinksGiveExactResults() {
  if [ $LONG -eq 1 ]; then impaired_sweep 4 1M 4; else impaired_sweep 2 64K 8; fi
}

# A host lost mid-run (`cut`: its cable pulled; `crash`: it vanishes): every rank, on the lost
# host too, raises within KOLO_TIMEOUT + slack; the survivors' errors name a rank and at least one
# names a rank of the lost host. Ranks are started by hand, one per host, to time each.
# kill|stop: only the rank on kolo-h3 gets SIGKILL|SIGSTOP; its host stays up (a kill's sockets
# close, so every survivor must name rank 3 at once; a stop is silence, as a cut).
# stop|cut|crash: silence, so the timed-out survivors settle whom to blame through the store on kolo-h0
# (the blame chain, src/engine/blame.hpp): every survivor must say rank 3 did not report, also
# those that waited for a live rank stuck behind it (the double binary tree's rank 1).
lose_host() {  # lose_host cut|crash|kill|stop TRIAL -> appends "trial worst_ms named_lost" to $WORK/$1.results
  local how=$1 trial=$2 timeout_s=5 n=4 lost=3 r
  "$NET" up --hosts $n || return 1
  local pids=()
  for ((r = 0; r < n; r++)); do
    in_host $r env RANK=$r WORLD_SIZE=$n MASTER_ADDR=kolo-h0 MASTER_PORT=29640 KOLO_TIMEOUT=$timeout_s \
      timeout 120 "$PERF" allreduce -b 64K -e 64K -c 0 -z 1 -w 1 -n 100000000 > "$WORK/rank$r" 2>&1 &
    pids+=($!)
  done
  sleep 3
  for ((r = 0; r < n; r++)); do
    kill -0 "${pids[$r]}" 2>/dev/null || { tail -5 "$WORK/rank$r"; fail "rank $r ended before the fault"; }
  done
  local t0=$(now_ms) lost_pids=""
  case "$how" in
    kill|stop)
      lost_pids=$(ip netns pids kolo-h$lost)
      for pid in $lost_pids; do kill -"${how^^}" "$pid" 2>/dev/null; done ;;
    *) "$NET" "$how" kolo-h$lost ;;
  esac
  local worst=0 named=0 rc
  for ((r = 0; r < n; r++)); do
    [ $r -eq $lost ] && [ "$how" != cut ] && continue  # killed, stopped or gone with its host
    wait "${pids[$r]}"
    rc=$?
    local took=$(( $(now_ms) - t0 ))
    local err
    err=$(grep -m1 "rank [0-9]" "$WORK/rank$r" | cut -c1-300)
    note "rank $r: exit $rc after $took ms: $err"
    [ $rc -eq 3 ] || fail "rank $r: expected kolo-perf's kolo-error status 3, got $rc"
    # The exits are collected in rank order, so a rank's time is an upper bound.
    [ $took -le $(( (timeout_s + 6) * 1000 )) ] || fail "rank $r took $took ms (KOLO_TIMEOUT=$timeout_s)"
    [ -n "$err" ] || fail "rank $r's error names no rank"
    local names="rank $lost"
    case "$how" in stop|cut|crash) names="rank $lost did not report" ;; esac
    [ $r -ne $lost ] && grep -q "$names" "$WORK/rank$r" && named=$((named + 1))
    [ $took -gt $worst ] && worst=$took
  done
  [ $named -ge 1 ] || fail "no survivor's error names rank $lost, the rank of the lost host"
  [ "$how" = kill ] && [ $named -ne $((n - 1)) ] && fail "a killed rank's sockets close: all $((n - 1)) survivors must name rank $lost, $named did"
  case "$how" in
    stop|cut|crash) [ $named -eq $((n - 1)) ] || fail "the blame chain: all $((n - 1)) survivors must say rank $lost did not report, $named did" ;;
  esac
  if [ -n "$lost_pids" ]; then  # a stopped rank would outlive its namespace
    for pid in $lost_pids; do kill -KILL "$pid" 2>/dev/null; done
    wait "${pids[$lost]}" 2>/dev/null
  fi
  echo "$trial $worst $named" >> "$WORK/$how.results"
}
lose_host_trials() {
  local how=$1 trials=1 t
  [ $LONG -eq 1 ] && trials=5
  for ((t = 1; t <= trials; t++)); do lose_host "$how" $t; done
  note "$how: trial worst_ms survivors_naming_rank_3: $(tr '\n' ';' < "$WORK/$how.results")"
}
test_LinkCutFailsEveryRankInTime() { lose_host_trials cut; }
test_HostCrashFailsEveryRankInTime() { lose_host_trials crash; }
test_RankKilledOnAnotherHostIsNamedByEverySurvivor() { lose_host_trials kill; }
test_RankStoppedOnAnotherHostFailsEveryRankInTime() { lose_host_trials stop; }

echo "[==========] Multihost ($([ $LONG -eq 1 ] && echo long || echo short) mode, build $BUILD)"
"$NET" down
run_test KolorunHostsShmInsideTcpAcross
run_test KolorunFourHosts
run_test ElasticShrinkAcrossHostsThroughKolorunsStore
run_test HierarchicalFourHostsOfTwo
run_test Mpirun
run_test TorchrunMultiNode
run_test SlurmVariables
run_test UnreachableStoreIsAClearBoundedError
run_test WrongInterfaceIsAClearBoundedError
run_test ImpairedLinksGiveExactResults
run_test LinkCutFailsEveryRankInTime
run_test HostCrashFailsEveryRankInTime
run_test RankKilledOnAnotherHostIsNamedByEverySurvivor
run_test RankStoppedOnAnotherHostFailsEveryRankInTime
echo "[==========] $((PASSED + ${#FAILED[@]})) tests ran ($SKIPPED skipped)."
echo "[  PASSED  ] $PASSED tests."
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "[  FAILED  ] ${#FAILED[@]} tests, listed below:"
  for f in "${FAILED[@]}"; do echo "[  FAILED  ] Multihost.$f"; done
  exit 1
fi
exit 0
