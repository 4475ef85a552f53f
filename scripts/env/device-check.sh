#!/usr/bin/env bash
# The checks that need the lent GPU machine (see the device tool's README), run from binaries
# built HERE: that machine is bare (Ubuntu, torch, nvcc, g++, Open MPI; no libibverbs, no
# libnl, no OpenBLAS, no Debian packages) and device time is short, so nothing is built there but
# the torch extension, which must match that machine's torch.
#
#   scripts/env/device-check.sh prepare [BUILD] [BASE]  # here: fill .devcarry/ (git-ignored) from
#                                             # BUILD (default build; needs the CUDA build,
#                                             # kolo-train) and, for the step ab, from BASE: an
#                                             # older build (libkolo, kolo-perf, kolorun)
#   scripts/env/device-check.sh run [STEPS]       # there, through the device tool, with carry
#                                             # [".devcarry"]; STEPS: any of gpu,device,torch,compare,
#                                             # ab, algos and the steps of device-check.d/ (default
#                                             # gpu,torch,compare)
#
# device:  device memory through the engine on the GPU: the collectives matrix on CUDA memory at 1-4
#          ranks sharing the GPU, and the stream semantics, refusals and failures (tests/collectives,
#          KOLO_TEST_REAL_GPU=1).
# staging: kolo-bench-device-staging, the parts of one staged device operation, each timed alone.
# device-check.d/NAME.sh: more steps, one file each, defining run_NAME (and CARRY_NAME: built
#          files `prepare` must carry, relative to the build; prepare_NAME: more that `prepare`
#          puts in .devcarry). A step that appends its name to `failed` makes `run` exit 1.
# gpu:     the CUDA kernel tests (tests/cuda), compute-sanitizer memcheck (with leak check) and
#          racecheck over them, the kernel bandwidth benchmark (reduce vs device-to-device copy).
# torch:   kolo_torch compiled with g++ against the machine's torch (2.11 when last run), then
#          the torch pytest suites on it (collectives, errors, DDP, split/share, torchrun).
# compare: scripts/bench/compare.sh, kolo vs Open MPI (vader), all nine collectives, 2 and 4 ranks up
#          to 16 MiB, 3 repetitions, on that machine's 16 cores (no oversubscription);
#          CMP_COLLECTIVES narrows the list.
# ab:      scripts/bench/ab-perf.sh, BASE against BUILD interleaved: broadcast and all-reduce, 8 B to
#          64 KiB, 2 and 4 ranks (the per-call cost of a change, on idle cores); AB_VARIANTS
#          adds configurations of BUILD with an environment variable each (a tunable's value).
# algos:   scripts/bench/ab-perf.sh, this build's automatic choice against each other algorithm by
#          name (KOLO_ALGO), 8 B to 32 KiB, 3, 4 and 8 ranks on idle cores: the small-message
#          selection measured where ranks do not outnumber cores (scripts/bench/algo-ab.sh; COLLS
#          narrows the collectives).
# Logs land in $OUT (the device tool brings back at most 8 files); the last lines summarize.
set -uo pipefail
cd "$(dirname "$0")/../.."
D=$PWD/.devcarry
EXTRA_CARRY=(tests/collectives/collectives-test tests/collectives/kolo-test-worker bench/micro/kolo-bench-device-staging)
STEP_FILES=()  # the steps of device-check.d/, by name
for f in scripts/env/device-check.d/*.sh; do
  [ -e "$f" ] || continue
  # shellcheck source=/dev/null
  . "$f"
  name=$(basename "$f" .sh)
  STEP_FILES+=("$name")
  carry_var="CARRY_${name//-/_}[@]"
  EXTRA_CARRY+=(${!carry_var-})
done

prepare() {
  local build=${1:-build}
  for f in tests/cuda/cuda-test bench/micro/kolo-bench-cuda-kernels bench/perf/kolo-perf \
           bench/peers/kolo-perf-mpi tools/kolorun/kolorun examples/train/kolo-train libkolo.so.0; do
    [ -e "$build/$f" ] || { echo "device-check: $build/$f missing (build with -Dcuda=enabled and Open MPI)" >&2; exit 1; }
  done
  # In a worktree .git is a file: the exclude list is the common one, wherever git keeps it.
  local exclude
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx '/.devcarry/' "$exclude" 2>/dev/null || echo /.devcarry/ >> "$exclude"
  rm -rf "$D" && mkdir -p "$D/lib" "$D/libfallback"
  # The binaries keep the build's layout: their RUNPATH finds libkolo through $ORIGIN/../..
  for f in tests/cuda/cuda-test bench/micro/kolo-bench-cuda-kernels bench/perf/kolo-perf \
           bench/peers/kolo-perf-mpi tools/kolorun/kolorun examples/train/kolo-train; do
    mkdir -p "$D/build/$(dirname $f)" && cp "$build/$f" "$D/build/$f" && strip "$D/build/$f"
  done
  for f in "${EXTRA_CARRY[@]}"; do
    [ -e "$build/$f" ] || { echo "device-check: $build/$f missing" >&2; exit 1; }
    mkdir -p "$D/build/$(dirname $f)" && cp "$build/$f" "$D/build/$f" && strip "$D/build/$f"
  done
  cp -L "$build/libkolo.so.0" "$D/build/libkolo.so.0" && strip "$D/build/libkolo.so.0"
  if [ -n "${2:-}" ]; then
    for f in bench/perf/kolo-perf tools/kolorun/kolorun libkolo.so.0; do
      src=$2/$f
      # A base from before kolorun moved to tools/ has it in src/launcher/.
      [ -e "$src" ] || [ "$f" != tools/kolorun/kolorun ] || src=$2/src/launcher/kolorun
      mkdir -p "$D/base/$(dirname $f)" && cp -L "$src" "$D/base/$f" && strip "$D/base/$f"
    done
  fi
  # Libraries that machine lacks (libkolo: ibverbs, libnl; kolo-train: OpenBLAS and Fortran's
  # run time, packed: 36 MiB unpacked against the 64 MiB a call may carry).
  cp -L /lib/x86_64-linux-gnu/{libibverbs.so.1,libnl-3.so.200,libnl-route-3.so.200} "$D/lib/"
  cp -L /lib/x86_64-linux-gnu/libcrypto.so.3 "$D/libfallback/"
  tar -C / -chJf "$D/blas.txz" usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 \
    lib/x86_64-linux-gnu/libgfortran.so.5 lib/x86_64-linux-gnu/libquadmath.so.0
  # kolo-train's --data kjv reads the Bible through Debian's `bible` program.
  tar -C / -czf "$D/bible.tgz" usr/bin/bible usr/lib/bible.data usr/lib/bible.data.conc
  local name
  for name in "${STEP_FILES[@]}"; do
    if declare -F "prepare_$name" > /dev/null; then "prepare_$name" "$build" || exit 1; fi
  done
  du -sh "$D"
}

OUT=${OUT:-/tmp/device-out}
B=$D/build
t0=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - t0 )) s] $*"; }
summary=()
failed=()

setup_env() {
  export PATH=$PATH:/usr/local/cuda/bin
  export LD_LIBRARY_PATH=$D/lib:$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  if ldd "$B/bench/perf/kolo-perf" | grep -q 'libcrypto.*not found'; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$D/libfallback; fi
  mkdir -p /tmp/blas && tar -C /tmp/blas -xJf "$D/blas.txz" &&
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/tmp/blas/usr/lib/x86_64-linux-gnu/openblas-pthread:/tmp/blas/lib/x86_64-linux-gnu
  command -v bible >/dev/null || tar -C / --skip-old-files -xzf "$D/bible.tgz"
  step probe
  date -u; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total --format=csv,noheader
  echo "kernel $(uname -r), $(head -1 /etc/os-release), $(nproc) cores"
  # Whether cycles and instructions can be counted there (perf_event_open needs arch_perfmon).
  echo "pmu: $(grep -m1 -o arch_perfmon /proc/cpuinfo || echo none), perf: $(command -v perf || echo absent), paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
  # Whether this kernel seals TLS records (kTLS: TCP_ULP "tls"), which issue 47's cost target
  # needs and the CI VMs lack: a connected loopback socket asks for it.
  python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname()); a, _ = s.accept()
try:
    c.setsockopt(socket.IPPROTO_TCP, 31, b"tls"); print("ktls: TCP_ULP tls accepted")
except OSError as e:
    print("ktls: TCP_ULP tls refused (%s)" % e.strerror)' 2>&1
  ldd "$B/tests/cuda/cuda-test" "$B/bench/perf/kolo-perf" "$B/examples/train/kolo-train" | grep 'not found'
}

gtest_counts() { grep -hoE '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ test' "$1" | tr '\n' ' '; }

run_gpu() {
  step cuda-test
  timeout 120 "$B/tests/cuda/cuda-test" --gtest_brief=1 > "$OUT/cuda-test.log" 2>&1
  summary+=("cuda-test: rc=$? $(gtest_counts "$OUT/cuda-test.log")")
  step kernel benchmark
  timeout 120 "$B/bench/micro/kolo-bench-cuda-kernels" > "$OUT/bench.log" 2>&1
  summary+=("kernel bench: rc=$? $(grep -E 'SUMMARY dtype=(float32|bfloat16) ' "$OUT/bench.log" | tr '\n' ' ')")
  for tool in memcheck racecheck; do
    step compute-sanitizer $tool
    local extra=(); [ $tool = memcheck ] && extra=(--leak-check full)
    timeout 110 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 1 "$B/tests/cuda/cuda-test" \
      --gtest_brief=1 '--gtest_filter=-*CudaLongReduceTest*' > "$OUT/$tool.log" 2>&1
    summary+=("$tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tr '\n' ' ')")
  done
}

run_device() {
  step "device memory: the collectives matrix on CUDA memory (1-4 ranks on the GPU), stream semantics"
  local filter='Api.Device*:DeviceMatrixChunked.*'
  for w in 1 2 3 4; do filter+=":*DeviceMatrix*_world$w"; done
  # DEVICE_TESTS=0 skips these (only the sanitizer runs below).
  if [ "${DEVICE_TESTS:-1}" = 1 ]; then
    KOLO_TEST_REAL_GPU=1 KOLO_TEST_WORKER=$B/tests/collectives/kolo-test-worker timeout "${DEVICE_TIMEOUT:-240}" \
      "$B/tests/collectives/collectives-test" --gtest_filter="$filter" > "$OUT/device.log" 2>&1
    summary+=("device memory tests: rc=$? $(gtest_counts "$OUT/device.log")")
    grep -E '^\[  FAILED' "$OUT/device.log" | head -20
  fi
  # compute-sanitizer over each rank of the 2-rank stream-semantics scenario and of the
  # all-reduce matrix on device memory (the staging: copies, events, flag waits).
  # DEVICE_SANITIZE=0 skips this.
  [ "${DEVICE_SANITIZE:-1}" = 1 ] || return 0
  local tool scen
  for tool in memcheck racecheck; do
    for scen in device "matrix allreduce"; do
      [ $tool = racecheck ] && [ "$scen" != device ] && continue  # racecheck: kernels only; one run
      step "compute-sanitizer $tool: $scen, 2 ranks on the GPU"
      KOLO_TEST_DEVICE_MEMORY=1 timeout 100 "$B/tools/kolorun/kolorun" -n 2 -- compute-sanitizer --tool $tool \
        --error-exitcode 9 "$B/tests/collectives/kolo-test-worker" $scen > /tmp/san.log 2>&1
      local rc=$?
      summary+=("$tool ($scen): rc=$rc $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | sort | uniq -c | tr '\n' ' ') $(grep -c '^OK rank' /tmp/san.log) ranks OK")
      { echo "== $tool $scen rc=$rc"; tail -n 40 /tmp/san.log; } >> "$OUT/device.log"
      grep -m1 -h "device runtime:" /tmp/san.log
    done
  done
}

run_staging() {
  step "device staging: the parts of one staged operation (copy out, flag waits, pinning), 8 B all-reduce"
  timeout 60 "$B/bench/micro/kolo-bench-device-staging" > "$OUT/staging.log" 2>&1
  summary+=("staging: rc=$? $(grep -h '^PART' "$OUT/staging.log" | sed 's/^PART //' | tr '\n' ';')")
}

run_torch() {
  step build kolo_torch against this machine\'s torch
  eval "$(python3 - <<'PY'
import sysconfig, torch, torch.utils.cpp_extension as c
print("TI='%s'" % " ".join("-isystem" + p for p in c.include_paths()))
print("TL='%s'" % " ".join("-L" + p for p in c.library_paths()))
print("PYI=%s" % sysconfig.get_paths()["include"])
print("SUF=%s" % sysconfig.get_config_var("EXT_SUFFIX"))
print("ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("TV=%s" % torch.__version__)
print("TCU=%d" % (torch.version.cuda is not None))
PY
)"
  # A torch with CUDA: kolo_torch serves CUDA tensors too (KOLO_TORCH_CUDA, csrc/*.cpp).
  local P=/tmp/py/kolo_torch ok pids CUF=() CUL=()
  [ "$TCU" = 1 ] && CUF=(-DKOLO_TORCH_CUDA -I/usr/local/cuda/include) && CUL=(-ltorch_cuda -lc10_cuda)
  [ -L $P ] && rm $P  # torch_pip's link to its installed package: not to be written over
  mkdir -p $P/obj && cp python/kolo_torch/*.py $P/
  while :; do
    ok=1 pids=()
    for f in python/kolo_torch/csrc/*.cpp; do
      g++ -std=c++20 -O2 -fPIC -fvisibility=hidden -DNDEBUG -D_GLIBCXX_USE_CXX11_ABI=$ABI -DTORCH_EXTENSION_NAME=_C \
        -Ipython/kolo_torch/csrc -Iinclude -Isrc -I"$PYI" $TI "${CUF[@]}" -w -c "$f" -o $P/obj/"$(basename "$f" .cpp)".o &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    if [ $ok = 1 ] && g++ -shared -o $P/_C"$SUF" $P/obj/*.o -L"$B" -l:libkolo.so.0 $TL -ltorch -ltorch_cpu -lc10 \
         "${CUL[@]}" -ltorch_python -Wl,-rpath,"$B"; then
      break
    fi
    [ ${#CUF[@]} -gt 0 ] || { summary+=("torch $TV: kolo_torch build FAILED"); return; }
    # The CUDA build failed: once more without CUDA, so that the CPU suites still run.
    summary+=("torch $TV: kolo_torch build with KOLO_TORCH_CUDA FAILED (errors above); rebuilt without CUDA")
    CUF=() CUL=()
  done
  # What python/kolo_torch/meson.build writes from _build_info.py.in: __init__.py's version guard.
  cat > $P/_build_info.py <<EOF
TORCH_VERSION = "$TV"
CXX11_ABI = $([ "$ABI" = 1 ] && echo True || echo False)
TORCH_CUDA = $(python3 -c 'import torch; print(repr(torch.version.cuda))')
CUDA = $([ ${#CUF[@]} -gt 0 ] && echo True || echo False)
PYTHON = "$(command -v python3)"
BUILT_BY = "device-check"
SOURCE_DIR = "$PWD"
BUILD_DIR = "$P"
EOF
  export KOLO_PERF_EXE=$B/bench/perf/kolo-perf KOLO_TRAIN_EXE=$B/examples/train/kolo-train
  local line="torch $TV:"
  # TORCH_SUITES narrows the CPU suites (empty: only build, for the CUDA step of device-check.d).
  for t in ${TORCH_SUITES-test_collectives test_errors test_ddp test_split_share test_torchrun}; do
    step "$t"
    timeout "${T_TIMEOUT:-150}" python3 tests/run_pytest.py /tmp/py tests/torch/$t.py -q > /tmp/$t.log 2>&1
    line+=" $t rc=$? ($(grep -hoE '^\[  (PASSED|FAILED) *\] [0-9]+ test' /tmp/$t.log | tr '\n' ' '))"
    tail -n 3 /tmp/$t.log
  done
  cat /tmp/test_*.log > "$OUT/torch.log" 2>/dev/null
  summary+=("$line")
}

run_compare() {
  step compare, 2 and 4 ranks
  RUN_TIMEOUT=120 timeout "${CMP_TIMEOUT:-240}" scripts/bench/compare.sh --build "$B" --ranks "2 4" --reps 3 --max 16M \
    --collectives "${CMP_COLLECTIVES:-allreduce,broadcast,reduce,reducescatter,allgather,alltoall,gather,scatter,sendrecv}" \
    --peers mpi --no-plots --no-limits --out /tmp/cmp > "$OUT/compare.log" 2>&1
  summary+=("compare: rc=$?")
  cp /tmp/cmp/report.md /tmp/cmp/compare.csv "$OUT/" 2>/dev/null
}

run_ab() {
  step "ab: base (.devcarry/base) against this build, 2 and 4 ranks"
  [ -d "$D/base" ] || { summary+=("ab: no .devcarry/base (prepare BUILD BASE)"); return; }
  # Each side's kolo-perf must load its own libkolo: LD_LIBRARY_PATH (which names this build's
  # folder) goes before RUNPATH, so each configuration passes its own to the ranks.
  local libs=$D/lib:/usr/local/cuda/lib64
  # AB_RANKS, AB_COLLS, AB_ARGS (sizes and iterations), AB_REPS and AB_WARM narrow or widen it.
  # AB_VARIANTS="label=VAR=value ...": more configurations of this build, one per word, each
  # with one environment variable (a tunable, or an experiment's switch).
  local cfgs=("base|$D/base|LD_LIBRARY_PATH=$D/base:$libs" "new|$B|LD_LIBRARY_PATH=$B:$libs") v
  for v in ${AB_VARIANTS:-}; do cfgs+=("${v%%=*}|$B|LD_LIBRARY_PATH=$B:$libs ${v#*=}"); done
  for n in ${AB_RANKS:-2 4}; do
    for c in ${AB_COLLS:-broadcast allreduce}; do
      echo "-- $c, $n ranks"
      WARM=${AB_WARM:-20} timeout 150 scripts/bench/ab-perf.sh "$n" "${AB_REPS:-7}" "$c ${AB_ARGS:--b 8 -e 64K -f 8 -n 20}" "${cfgs[@]}"
    done
  done > "$OUT/ab.log" 2>&1
  summary+=("ab: rc=$?")
  cat "$OUT/ab.log"
}

run_algos() {
  step "algos: automatic choice against each algorithm by name, 3, 4 and 8 ranks"
  LIBS="LD_LIBRARY_PATH=$B:$D/lib:/usr/local/cuda/lib64" timeout "${ALGO_TIMEOUT:-200}" \
    scripts/bench/algo-ab.sh "$B" "3 4 8" 5 > "$OUT/algos.log" 2>&1
  summary+=("algos: rc=$?")
  cat "$OUT/algos.log"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run)
    [ -d "$B" ] || { echo "device-check: no $B: run 'scripts/env/device-check.sh prepare' here and carry .devcarry" >&2; exit 1; }
    mkdir -p "$OUT"
    exec > >(tee "$OUT/device-check.log") 2>&1
    setup_env
    steps=${2:-gpu,torch,compare}
    for s in ${steps//,/ }; do
      declare -F "run_$s" > /dev/null || { echo "device-check: no step $s" >&2; continue; }
      summary_before=${#summary[@]}
      "run_$s"
      # Each step's lines as soon as it ends: the steps' bounds add up to more than a call's
      # limit (docs/gpu-runs/README.md), and a call stopped at its limit keeps only what was
      # printed (tee'd into $OUT/device-check.log), never the final summary below.
      for l in "${summary[@]:summary_before}"; do echo "summary [$(( $(date +%s) - t0 )) s] $l"; done
    done
    step summary
    for s in "${summary[@]}"; do echo "$s"; done
    [ ${#failed[@]} -eq 0 ] || { echo "device-check: FAILED: ${failed[*]}"; exit 1; } ;;
  *) sed -n '2,30p' "$0"; exit 2 ;;
esac
