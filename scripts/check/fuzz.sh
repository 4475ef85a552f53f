#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (Debian's clang + libclang-rt-14-dev, ASan+UBSan) and
# runs each for SECONDS (default 30) or RUNS executions, starting from its corpus in the tree
# (tests/fuzz/corpus/<target>).
#   scripts/check/fuzz.sh [--seconds N | --runs N] [target...]
# Targets (default: all): hello (the TCP handshake's acceptor), tcp_frames (the TCP frame reader),
# shm_ring (the shared-memory ring reader), options (kolorun's and kolo-perf's command lines),
# store (the TCPStore server's protocol state machine, both c10d dialects, and the authentication
# handshake before it), tls_records (TLS records and handshakes from someone without the key,
# KOLO_TLS=1).
# New inputs found go to build-fuzz/corpus-*/ (not the tree); crashes to build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/../.."
limit=(-max_total_time=30)
case "${1:-}" in
  --seconds) limit=(-max_total_time="$2"); shift 2 ;;
  --runs) limit=(-runs="$2"); shift 2 ;;
  ""|hello|tcp_frames|shm_ring|options|store|tls_records) ;;
  *) echo "usage: scripts/check/fuzz.sh [--seconds N | --runs N] [hello|tcp_frames|shm_ring|options|store|tls_records]..."; exit 2 ;;
esac
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(hello tcp_frames shm_ring options store tls_records)
out=${FUZZ_BUILD_DIR:-build-fuzz}
mkdir -p "$out"
CXX=${CXX:-clang++}
# The version comes from meson.build alone, as in the meson build (the option parsers print it).
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -1)
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc -Itools -I.
       "-DKOLO_VERSION=\"$version\"")
tcp=(transports/tcp/socket.cpp transports/tcp/handshake.cpp transports/common/auth.cpp common/crypto.cpp transports/common/setup_text.cpp
     transports/common/fd.cpp)
engine=(transports/registry.cpp transports/setup_failure.cpp transports/pair_base.cpp common/config.cpp common/log.cpp)
build() {  # target, sources...
  local t=$1; shift
  "$CXX" "${flags[@]}" "tests/fuzz/fuzz_$t.cpp" "$@" -lssl -lcrypto -o "$out/fuzz_$t"
}
max_len() {  # inputs longer than this add nothing but slowness
  case "$1" in tcp_frames) echo 65536 ;; shm_ring) echo 4096 ;; options) echo 512 ;; *) echo 4096 ;; esac
}
root=$PWD
[ -d "$root/tests/fuzz/corpus" ] || { echo "fuzz.sh: no corpus in $root/tests/fuzz/corpus"; exit 1; }
rc=0
for t in "${targets[@]}"; do
  case "$t" in
    hello) build hello "${tcp[@]}" ;;
    tcp_frames) build tcp_frames "${tcp[@]}" "${engine[@]}" transports/tcp/tcp_device.cpp transports/tcp/tcp_pair.cpp \
                  transports/tcp/hello_inbox.cpp transports/tcp/on_demand.cpp transports/tcp/dial.cpp \
                  transports/tcp/pending_pair.cpp common/tls.cpp ;;
    tls_records) build tls_records common/tls.cpp common/crypto.cpp common/config.cpp ;;
    shm_ring) build shm_ring "${tcp[@]}" "${engine[@]}" transports/shm/shm_device.cpp transports/shm/shm_pair.cpp \
                transports/shm/shm_pair_remote_read.cpp transports/shm/shm_pair_control.cpp \
                transports/shm/shm_pair_abort_handover.cpp \
                transports/shm/shm_segment.cpp transports/shm/shm_connect.cpp transports/common/seqpacket.cpp \
                transports/shm/shm_fence.cpp common/thread_fence.cpp ;;
    store) build store src/store/store_auth.cpp common/crypto.cpp src/store/tcp_store_state.cpp src/store/tcp_store_wire.cpp src/store/store_common.cpp ;;
    options) build options -Ibench/common -Icommon -Ibench/perf bench/perf/options.cpp \
               common/types.cpp bench/common/common_options.cpp bench/common/sizes.cpp \
               bench/common/collective_specs.cpp tools/kolorun/options.cpp tools/kolorun/host_list.cpp \
               tools/kolorun/cpu_binding.cpp ;;
    *) echo "fuzz.sh: unknown target '$t'"; exit 2 ;;
  esac
  mkdir -p "$out/corpus-$t"
  echo "== fuzz_$t ${limit[*]}"
  (cd "$out" && ./fuzz_$t "${limit[@]}" -max_len="$(max_len "$t")" -print_final_stats=1 "corpus-$t" \
     "$root/tests/fuzz/corpus/$t" 2>&1 | awk '/^(Done|stat::|SUMMARY|artifact_prefix)|ERROR|runtime error/') || rc=1
done
exit $rc
