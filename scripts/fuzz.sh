#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (Debian's clang + libclang-rt-14-dev, ASan+UBSan) and
# runs each for SECONDS (default 30) or RUNS executions, starting from the corpus in the tree.
#   scripts/fuzz.sh [--seconds N | --runs N]
# New inputs found go to build-fuzz/corpus-*/ (not the tree); crashes to build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=30)
case "${1:-}" in
  --seconds) limit=(-max_total_time="$2") ;;
  --runs) limit=(-runs="$2") ;;
  "") ;;
  *) echo "usage: scripts/fuzz.sh [--seconds N | --runs N]"; exit 2 ;;
esac
out=${FUZZ_BUILD_DIR:-build-fuzz}
mkdir -p "$out"
CXX=${CXX:-clang++}
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc -I.)
# hello: the acceptor's half of the TCP handshake, with the code it runs.
"$CXX" "${flags[@]}" tests/fuzz/fuzz_hello.cpp transports/common/auth.cpp transports/tcp/handshake.cpp \
  transports/tcp/socket.cpp transports/common/setup_text.cpp transports/common/fd.cpp -lcrypto -o "$out/fuzz_hello"
rc=0
for t in hello; do
  mkdir -p "$out/corpus-$t"
  echo "== fuzz_$t ${limit[*]}"
  (cd "$out" && ./fuzz_$t "${limit[@]}" -print_final_stats=1 "corpus-$t" "../tests/fuzz/corpus/$t" 2>&1 | tail -n 12) || rc=1
done
exit $rc
