# Sourced by scripts/env/device-check.sh (bash): CUDA IPC with the ranks as clients of one MPS
# server (issue 44 item 3: "order across processes with IPC events, or prove MPS can be started
# there, and measure both"). Without MPS two processes on one GPU take turns in time slices, and
# each cross-process wait costs a switch (~280 us per 8 B all-reduce in runs 6-7); under MPS their
# kernels share one context and run side by side.
#   run_ipc_mps  there: starts an MPS control daemon of this step's own (its pipe and log folders
#                under /tmp, so no other process of the machine becomes its client, and the
#                card's settings, compute mode included, are left as they are: METHOD.md), checks
#                that a client reached it, runs kolo-ipc-test --bench at 2 ranks under the
#                default (events) and host ordering, then stops the daemon whatever happened
#                (a trap: `quit` to the control daemon, then SIGKILL to what is left of it).
#                One log, $OUT/ipc_mps.log; one summary line. Skips, saying why, where the
#                machine has no nvidia-cuda-mps-control or the daemon does not start.
# The binaries are the ipc step's (IPC_CARRY); nothing more to carry.
CARRY_ipc_mps=()

run_ipc_mps() {
  step "cuda_ipc under MPS: kolo-ipc-test --bench, 2 ranks, events and host ordering"
  local exe=$B/tests/cuda_ipc/kolo-ipc-test log=$OUT/ipc_mps.log line="ipc_mps:"
  : > "$log"
  if [ ! -x "$exe" ] || [ ! -x "$B/tools/kolorun/kolorun" ]; then
    summary+=("ipc_mps: $exe or kolorun missing (prepare_ipc, carry .devcarry)"); return
  fi
  local ctl
  ctl=$(command -v nvidia-cuda-mps-control || true)
  if [ -z "$ctl" ]; then
    summary+=("ipc_mps: skipped, no nvidia-cuda-mps-control on PATH"); return
  fi
  local dir before
  before=" $(pgrep -d ' ' -f 'nvidia-cuda-mps-(control|server)') "  # never ours to stop
  dir=$(mktemp -d /tmp/kolo-mps.XXXXXX)
  mkdir -p "$dir/pipe" "$dir/log"
  export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
  # Stops the daemon: asked first (it ends its server once the clients are gone), then whatever
  # MPS process started since this step began is killed. Runs on return and on any exit.
  mps_stop() {
    [ -n "${CUDA_MPS_PIPE_DIRECTORY-}" ] || return 0
    echo quit | timeout 5 "$ctl" >> "$log" 2>&1
    sleep 1
    local p
    for p in $(pgrep -f 'nvidia-cuda-mps-(control|server)'); do
      case "$before" in *" $p "*) ;; *) kill -KILL "$p" 2>/dev/null ;; esac
    done
    echo "== mps: stopped; control log:" >> "$log"
    cat "$dir/log/control.log" >> "$log" 2>/dev/null
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  }
  trap mps_stop EXIT
  echo "== mps: $ctl -d (pipe $CUDA_MPS_PIPE_DIRECTORY)" >> "$log"
  local rc o
  timeout 10 "$ctl" -d >> "$log" 2>&1
  rc=$?  # (inside `if ! ...; then` $? would be the negation's 0)
  if [ $rc != 0 ]; then
    line+=" daemon did not start (rc=$rc)"
    mps_stop; trap - EXIT
    summary+=("$line"); return
  fi
  for o in events host; do
    echo "== mps $o: kolorun -n 2 kolo-ipc-test --bench KOLO_IPC_ORDERING=$o (timeout 60 s)" >> "$log"
    KOLO_IPC_ORDERING=$o timeout -k 2 60 "$B/tools/kolorun/kolorun" -n 2 "$exe" --bench >> "$log" 2>&1
    rc=$?
    echo "== mps $o: rc=$rc" >> "$log"
    line+=" $o rc=$rc"
    # Whether the ranks really were MPS clients: the control daemon lists a server only once a
    # client connected (a run that fell back to its own context would prove nothing).
    [ "$o" = events ] && line+=" servers=[$(echo get_server_list | timeout 5 "$ctl" 2>/dev/null | tr '\n' ' ')]"
  done
  mps_stop; trap - EXIT
  local passed failed
  passed=$(grep -cE '^\[       OK \]' "$log")
  failed=$(grep -cE '^\[  FAILED  \]' "$log")
  line+=" (OK lines $passed, FAILED lines $failed)"
  line+=" $(grep -hE '^BENCH parts ' "$log" | sed 's/^BENCH parts //' | tr '\n' ';')"
  line+=" $(grep -hE '^SUMMARY ipc' "$log" | sed -E 's/^SUMMARY ipc allreduce //; s/ \(target.*//' | tr '\n' ';')"
  summary+=("$line")
  grep -E '^(BENCH|SUMMARY|\[  FAILED|== )' "$log"
}
