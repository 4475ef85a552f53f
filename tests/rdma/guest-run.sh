#!/bin/sh
# Runs inside the RDMA test VM (see scripts/env/rdma-vm.sh): brings up Soft-RoCE on a dummy network
# device, checks it with rdma-core's own tools, then runs kolo over it. Lines starting with
# "CHECK FAIL" count as failures on the host; GoogleTest output goes to /results/gtest.log.
B=/kolo/${kolo_build:-build}
# Non-Debian libraries of the build (the CUDA runtime), copied in by scripts/env/rdma-vm.sh.
export LD_LIBRARY_PATH=/results/hostlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
FILTER=${kolo_filter:-default}
# Default: every collective at 2 ranks, two at 4 ranks, and the fault tests (kill, stop,
# mismatches, secrets; the kill test runs 4 ranks). Under TCG emulation one round trip costs
# milliseconds and the 4-rank all-reduce matrix alone takes minutes: widen with
# scripts/env/rdma-vm.sh --filter '*_world2:*_world4:Faults.*' when time allows.
# The stopped-rank test is left out: its 3 s timeout also bounds connection setup, which TCG
# emulation on a loaded host can take longer than (it failed so once); the killed-rank test stays.
[ "$FILTER" = default ] && FILTER='*_world2:*broadcast_world4:*alltoall_world4:Faults.*-Faults.StoppedRank*'
ok() { echo "CHECK OK: $*"; }
bad() { echo "CHECK FAIL: $*"; }
now() { date +%s; }
t0=$(now)

echo "== kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print $2/1024 " MiB"}' /proc/meminfo)"
ip link set lo up
modprobe rdma_rxe || bad "modprobe rdma_rxe"
# The dummy module makes dummy0 itself when it loads; make it only if it is not there.
ip link show dummy0 > /dev/null 2>&1 || modprobe dummy
ip link show dummy0 > /dev/null 2>&1 || ip link add dummy0 type dummy
ip addr add 10.77.0.1/24 dev dummy0
ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || bad "rdma link add rxe0"
state=""
for i in $(seq 100); do
  state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
  case "$state" in *ACTIVE*) break ;; esac
  sleep 0.3
done
case "$state" in *ACTIVE*) ok "rxe0 port 1 $state" ;; *) bad "rxe0 port state '$state'" ;; esac
ibv_devinfo -d rxe0 | sed -n '1,40p'

# The RoCE v2 GID holding dummy0's IPv4 address (kolo finds it the same way by itself).
gid=""
for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
  i=${f##*/}
  g=$(cat "$f")
  t=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)
  case "$g" in 0000:0000:0000:0000:0000:ffff:*) [ "$t" = "RoCE v2" ] && { gid=$i; break; } ;; esac
done
echo "== RoCE v2 IPv4-mapped GID index: ${gid:-none}"
[ -n "$gid" ] || bad "no RoCE v2 IPv4 GID"

echo "== ibv_rc_pingpong"
ibv_rc_pingpong -d rxe0 -g "$gid" -n 200 > /tmp/pp-server.log 2>&1 &
sleep 1
if timeout 60 ibv_rc_pingpong -d rxe0 -g "$gid" -n 200 127.0.0.1 > /tmp/pp-client.log 2>&1; then
  ok "ibv_rc_pingpong"; tail -2 /tmp/pp-client.log
else
  bad "ibv_rc_pingpong"; cat /tmp/pp-client.log /tmp/pp-server.log
fi
wait

echo "== ib_write_bw (1 MiB messages)"
ib_write_bw -d rxe0 -x "$gid" -s 1048576 -n 100 > /tmp/bw-server.log 2>&1 &
sleep 1
if timeout 120 ib_write_bw -d rxe0 -x "$gid" -s 1048576 -n 100 127.0.0.1 > /tmp/bw-client.log 2>&1; then
  ok "ib_write_bw"; grep -A1 "BW average" /tmp/bw-client.log
else
  bad "ib_write_bw"; tail -5 /tmp/bw-client.log
fi
wait

export KOLO_TRANSPORT=ibverbs
export KOLO_TEST_WORKER=$B/tests/collectives/kolo-test-worker
export KOLO_PERF_BINARY=$B/bench/perf/kolo-perf
export TMPDIR=/tmp

echo "== kolo-perf allreduce over ibverbs, 2 ranks, every element checked"
t=$(now)
if KOLO_DEBUG=INFO timeout 240 "$B/tools/kolorun/kolorun" -n 2 "$B/bench/perf/kolo-perf" allreduce -b 8 -e 8M -f 4 -c 1 -n 5 -w 1 \
    > /tmp/perf.log 2> /tmp/perf.err && grep -q "Out of bounds values : 0 OK" /tmp/perf.log; then
  ok "kolo-perf allreduce -c 1 ($(( $(now) - t )) s)"
else
  bad "kolo-perf allreduce -c 1"; tail -20 /tmp/perf.err
fi
cat /tmp/perf.log
grep -m2 "transport" /tmp/perf.err
cp /tmp/perf.log /results/perf.log

echo "== kolo-test-ibverbs (the transport alone, threads as ranks)"
t=$(now)
"$B/tests/ibverbs/kolo-test-ibverbs" > /results/gtest-ibverbs.log 2>&1
echo "kolo-test-ibverbs exit $? after $(( $(now) - t )) s"
grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) +\]' /results/gtest-ibverbs.log

echo "== kolo-test-transports: the transport conformance suite, for ibverbs"
t=$(now)
"$B/tests/transports/kolo-test-transports" --gtest_filter='*/ibverbs' > /results/gtest-transports.log 2>&1
echo "kolo-test-transports exit $? after $(( $(now) - t )) s"
grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) +\]' /results/gtest-transports.log

echo "== collectives-test --gtest_filter=$FILTER (KOLO_TRANSPORT=ibverbs)"
t=$(now)
"$B/tests/collectives/collectives-test" --gtest_filter="$FILTER" > /results/gtest.log 2>&1
echo "collectives-test exit $? after $(( $(now) - t )) s"
grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) +\]|^\[==========\]' /results/gtest.log
echo "== guest done in $(( $(now) - t0 )) s"
