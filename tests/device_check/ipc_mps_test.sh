#!/usr/bin/env bash
# scripts/env/device-check.d/ipc_mps.sh without a GPU: the step sourced as device-check.sh sources
# it, with stand-ins for nvidia-cuda-mps-control, kolorun and kolo-ipc-test in a scratch folder.
# Checks what a GPU session cannot afford to find out there:
#   - a control daemon that does not start: the summary gives its exit status (3 here), and
#     no client runs;
#   - a daemon that starts: both orderings run as clients of the step's own pipe folder
#     (CUDA_MPS_PIPE_DIRECTORY reaches them), the summary counts their OK lines and names the
#     server list, and afterwards the daemon is gone and the MPS variables are unset.
# About 2 s (the step's stop waits 1 s).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/kolo-ipc-mps-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The carried build's layout: $B/tools/kolorun/kolorun and $B/tests/cuda_ipc/kolo-ipc-test.
B=$T/build OUT=$T/out
mkdir -p "$B/tools/kolorun" "$B/tests/cuda_ipc" "$OUT" "$T/bin-refuses" "$T/bin-starts"
cat > "$B/tools/kolorun/kolorun" <<'EOF'
#!/usr/bin/env bash
# kolorun -n N EXE ARGS...: runs EXE once per rank, in turn.
n=$2; shift 2
for r in $(seq 0 $((n - 1))); do RANK=$r "$@" || exit $?; done
EOF
cat > "$B/tests/cuda_ipc/kolo-ipc-test" <<EOF
#!/usr/bin/env bash
# Reports the MPS pipe folder it was given, and one passing check and one bench summary per rank.
echo "rank \$RANK ordering \$KOLO_IPC_ORDERING pipe \${CUDA_MPS_PIPE_DIRECTORY:-none}" >> "$T/clients"
[ "\$RANK" = 0 ] && echo "[       OK ] IpcAllReduce.stand-in/\$KOLO_IPC_ORDERING"
[ "\$RANK" = 0 ] && echo "SUMMARY ipc allreduce one-shot ranks=2 bytes=8 time_us=1.0 ratio_to_copy=0.1 (target: none)"
exit 0
EOF
# A control that refuses to start its daemon.
printf '#!/usr/bin/env bash\n[ "${1-}" = -d ] && { echo "stand-in: refused" >&2; exit 3; }\nexit 0\n' \
  > "$T/bin-refuses/nvidia-cuda-mps-control"
# A control whose daemon (a sleep, its pid in a file) starts with -d and ends on `quit`.
cat > "$T/bin-starts/nvidia-cuda-mps-control" <<EOF
#!/usr/bin/env bash
if [ "\${1-}" = -d ]; then
  sleep 60 > /dev/null 2>&1 < /dev/null &
  echo \$! > "$T/daemon.pid"
  echo "stand-in control started" > "\$CUDA_MPS_LOG_DIRECTORY/control.log"
  exit 0
fi
read -r cmd
case "\$cmd" in
  get_server_list) echo 4242 ;;
  quit) kill "\$(cat "$T/daemon.pid")" ;;
esac
exit 0
EOF
chmod +x "$B/tools/kolorun/kolorun" "$B/tests/cuda_ipc/kolo-ipc-test" "$T"/bin-*/nvidia-cuda-mps-control

# What device-check.sh provides to a sourced step.
step() { echo "== $*"; }
summary=()
# shellcheck source=/dev/null
. "$ROOT/scripts/env/device-check.d/ipc_mps.sh"

# The step sets and clears an EXIT trap of its own: this test's cleanup is set again after each run.
cleanup() { rm -rf "$T"; }
PATH=$T/bin-refuses:$PATH run_ipc_mps > "$T/refuses.log" 2>&1
trap cleanup EXIT
# The step's own folders (mktemp under /tmp), named in its log: removed here, not left in /tmp.
step_dir() {
  local pipe
  pipe=$(sed -n 's/^== mps: .* -d (pipe \(.*\))$/\1/p' "$OUT/ipc_mps.log")
  case "$pipe" in /tmp/kolo-mps.*/pipe) rm -rf "${pipe%/pipe}"; echo "$pipe" ;; esac
}
[ -n "$(step_dir)" ] || fail "the step's log names no pipe folder of its own"
case "${summary[-1]-}" in
  *"daemon did not start (rc=3)"*) ;;
  *) fail "a daemon that does not start: summary '${summary[-1]-}', want its exit status 3" ;;
esac
[ ! -e "$T/clients" ] || fail "clients ran although the daemon did not start"

summary=()
PATH=$T/bin-starts:$PATH run_ipc_mps > "$T/starts.log" 2>&1
line=${summary[-1]-}
for want in "events rc=0" "servers=[4242 ]" "host rc=0" "(OK lines 2, FAILED lines 0)" "one-shot ranks=2 bytes=8"; do
  case "$line" in *"$want"*) ;; *) fail "a daemon that starts: summary '$line' lacks '$want'" ;; esac
done
pipe=$(step_dir)
[ -n "$pipe" ] || fail "the step's log names no pipe folder of its own"
[ "$(grep -cx "rank [01] ordering \(events\|host\) pipe $pipe" "$T/clients" 2>/dev/null)" = 4 ] ||
  fail "the clients were not all given the step's pipe folder $pipe: $(cat "$T/clients" 2>/dev/null)"
pid=$(cat "$T/daemon.pid" 2>/dev/null)
# Gone, or a zombie that nobody has reaped yet (its parent exited: PID 1 reaps it when it will).
state=$(ps -o stat= -p "${pid:-0}" 2>/dev/null)
case "$state" in "" | Z*) ;; *) fail "the daemon (pid $pid, state $state) still runs after the step"; kill "$pid" ;; esac
[ -z "${CUDA_MPS_PIPE_DIRECTORY+set}" ] || fail "CUDA_MPS_PIPE_DIRECTORY still set after the step"
[ -z "$(trap -p EXIT)" ] || fail "the step left its EXIT trap: $(trap -p EXIT)"
trap cleanup EXIT

if [ $fails -gt 0 ]; then
  echo "--- step output (refuses):"; cat "$T/refuses.log"; echo "--- step output (starts):"; cat "$T/starts.log"
  echo "--- the step's log:"; cat "$OUT/ipc_mps.log"
  exit 1
fi
echo "ipc_mps step: both paths as expected"
