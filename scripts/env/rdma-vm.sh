#!/usr/bin/env bash
# Tests the ibverbs transport for real, on Soft-RoCE (rdma_rxe), inside a qemu VM: this machine's
# kernel has no RDMA. Builds (once, cached) a Debian 12 disk image with rdma-core and a kernel,
# boots it under qemu (TCG emulation; KOLO_RDMA_VM_ACCEL=kvm to use KVM), shares the repository
# read-only over 9p, and runs tests/rdma/guest-run.sh inside: ibv_rc_pingpong, ib_write_bw,
# kolo-perf over ibverbs, and the multi-process collective tests with KOLO_TRANSPORT=ibverbs.
# The last line is "N passed, N failed" (GoogleTest cases inside the VM), like scripts/test.sh's.
#
#   scripts/env/rdma-vm.sh [--build-dir DIR] [--cache DIR] [--filter GTEST_FILTER] [--timeout S]
#   scripts/env/rdma-vm.sh --prepare      # only build (and cache) the image
#
# Needs root (mmdebstrap into a directory, mkfs.ext4 -d), qemu-system-x86, mmdebstrap and
# e2fsprogs, and the Debian mirror. Without them it says so, prints "0 passed, 0 failed" and
# exits 0 (exit 77 with --strict-skip, meson's "skipped").
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

build_dir=${BUILD_DIR:-build}
cache=${KOLO_RDMA_VM_CACHE:-$HOME/.cache/kolo-rdma-vm}
filter=${KOLO_RDMA_VM_FILTER:-}
timeout_s=${KOLO_RDMA_VM_TIMEOUT:-900}
skip_rc=0
prepare_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --strict-skip) skip_rc=77; shift ;;
    --prepare) prepare_only=1; shift ;;
    *) echo "rdma-vm: unknown argument $1" >&2; exit 2 ;;
  esac
done

skip() {
  echo "rdma-vm: SKIPPED: $*"
  echo "0 passed, 0 failed"
  exit "$skip_rc"
}

missing=()
for t in qemu-system-x86_64 mmdebstrap mkfs.ext4; do command -v "$t" >/dev/null || missing+=("$t"); done
[ ${#missing[@]} -eq 0 ] || skip "missing ${missing[*]} (apt-get install qemu-system-x86 mmdebstrap e2fsprogs)"
[ "$(id -u)" -eq 0 ] || skip "needs root to build the VM image"
# The image: rebuilt when this list changes. Runtime libraries of kolo's binaries (libstdc++,
# libibverbs) come with the packages; gtest is linked statically.
packages="linux-image-amd64,kmod,iproute2,rdma-core,ibverbs-providers,ibverbs-utils,perftest,libibverbs1,procps,libstdc++6"
key=$( (echo "bookworm $packages"; cat tests/rdma/guest-init.sh) | sha256sum | cut -c1-12)
img=$cache/rootfs-$key.ext4
mkdir -p "$cache"
start=$(date +%s)
if [ ! -s "$img" ]; then
  echo "rdma-vm: building the VM image ($img)"
  root=$(mktemp -d "$cache/root.XXXXXX")
  if ! nice -n 10 mmdebstrap --quiet --variant=minbase --include="$packages" \
      --customize-hook='cp '"$repo"'/tests/rdma/guest-init.sh "$1/sbin/kolo-init" && chmod 755 "$1/sbin/kolo-init"' \
      bookworm "$root" http://deb.debian.org/debian > "$cache/mmdebstrap.log" 2>&1; then
    tail -20 "$cache/mmdebstrap.log"
    rm -rf "$root"
    skip "mmdebstrap failed (no Debian mirror reachable?)"
  fi
  cp "$root"/boot/vmlinuz-* "$cache/vmlinuz-$key"
  cp "$root"/boot/initrd.img-* "$cache/initrd-$key"
  mkdir -p "$root/kolo" "$root/results"
  rm -f "$img.tmp"
  if ! nice -n 10 mkfs.ext4 -q -L kolo-rdma -d "$root" "$img.tmp" 2G; then
    rm -rf "$root" "$img.tmp"
    echo "rdma-vm: mkfs.ext4 failed"; echo "0 passed, 1 failed"; exit 1
  fi
  mv "$img.tmp" "$img"
  rm -rf "$root"
  echo "rdma-vm: image built in $(( $(date +%s) - start )) s"
fi
[ "$prepare_only" = 1 ] && { echo "rdma-vm: image ready: $img"; exit 0; }

case "$build_dir" in /*) ;; *) build_dir=$repo/$build_dir ;; esac
for b in tests/collectives/collectives-test tests/collectives/kolo-test-worker tests/ibverbs/kolo-test-ibverbs tests/transports/kolo-test-transports bench/perf/kolo-perf tools/kolorun/kolorun; do
  [ -x "$build_dir/$b" ] || { echo "rdma-vm: $build_dir/$b is not built"; echo "0 passed, 1 failed"; exit 1; }
done
grep -q "KOLO_HAVE_IBVERBS 1" "$build_dir/transports/ibverbs/ibverbs_config.hpp" 2>/dev/null ||
  { echo "rdma-vm: $build_dir was configured without the ibverbs transport"; echo "0 passed, 1 failed"; exit 1; }
case "$build_dir" in "$repo"/*) ;; *) echo "rdma-vm: the build dir must be inside $repo (shared with the VM)"; echo "0 passed, 1 failed"; exit 1 ;; esac

results=$(mktemp -d "${TMPDIR:-/tmp}/kolo-rdma-vm.XXXXXX")
# Libraries the binaries need that the Debian image lacks (the CUDA runtime, when the build found
# the CUDA toolkit: libkolo links it and loads it even where no GPU is): the guest finds them in
# /results/hostlibs (guest-run.sh puts that on LD_LIBRARY_PATH).
mkdir -p "$results/hostlibs"
for lib in $(ldd "$build_dir"/libkolo.so* 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u); do
  case "$lib" in /lib/*|/usr/lib/*) ;; *) cp -L "$lib" "$results/hostlibs/" ;; esac
done
# TCG emulation by default: /dev/kvm may exist where nested virtualisation hangs the guest
# (seen on this project's machines). KOLO_RDMA_VM_ACCEL=kvm where KVM works.
accel=${KOLO_RDMA_VM_ACCEL:-tcg,thread=multi}
echo "rdma-vm: booting (accel $accel, 2 vCPUs, 2 GiB); guest log follows"
boot=$(date +%s)
rel_build=${build_dir#"$repo"/}
# Soft-RoCE needs 2 vCPUs: with one, rxe's packet processing starves the ranks.
timeout --foreground "$timeout_s" nice -n 5 qemu-system-x86_64 \
  -machine q35 -accel $accel -cpu max -smp 2 -m 2048 \
  -kernel "$cache/vmlinuz-$key" -initrd "$cache/initrd-$key" \
  -append "root=/dev/vda rw console=ttyS0 quiet init=/sbin/kolo-init panic=-1 kolo_build=$rel_build kolo_filter=${filter:-default}" \
  -drive file="$img",format=raw,if=virtio,snapshot=on \
  -virtfs local,path="$repo",mount_tag=kolo,security_model=none,readonly=on \
  -virtfs local,path="$results",mount_tag=results,security_model=none \
  -nic none -display none -serial stdio -no-reboot < /dev/null 2>&1 | tee "$results/console.log" | sed -u 's/^/  vm| /'
qrc=${PIPESTATUS[0]}
echo "rdma-vm: VM ran $(( $(date +%s) - boot )) s (qemu exit $qrc)"

passed=0; failed=0
# Test by test (not GoogleTest's final summary), so that a run cut short still counts what ran.
if ls "$results"/gtest*.log >/dev/null 2>&1; then
  passed=$(cat "$results"/gtest*.log | grep -cE '^\[       OK \] ')
  failed=$(cat "$results"/gtest*.log | grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$')
fi
# Checks outside GoogleTest (pingpong, kolo-perf) and a guest that never finished count as failures.
extra=$(grep -c '^CHECK FAIL' "$results/guest.log" 2>/dev/null); extra=${extra:-0}
if [ ! -f "$results/done" ]; then
  echo "rdma-vm: the guest did not finish (timeout ${timeout_s}s or crash)"; extra=$((extra + 1))
else
  for g in gtest.log gtest-ibverbs.log gtest-transports.log; do
    grep -q '^\[==========\].*ran' "$results/$g" 2>/dev/null || { echo "rdma-vm: no GoogleTest summary in $g (crash?)"; extra=$((extra + 1)); }
  done
fi
failed=$((failed + extra))
echo "rdma-vm: results in $results; total $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
