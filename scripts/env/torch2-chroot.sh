#!/usr/bin/env bash
# Builds kolo_torch against torch 2.x and runs its test suite (tests/torch: collectives vs gloo
# at 2/3/4 ranks, DDP variants, errors, torchrun) in a Debian chroot, because Debian 12 (what
# this repository builds and CI runs on) ships only torch 1.13 and PyPI is not reachable here.
# Debian's archive is: forky/sid carry python3-torch + libtorch-dev 2.14, trixie 2.6.
#
#   scripts/env/torch2-chroot.sh [--suite forky|trixie] [--cache DIR] [--shell] [--build-only]
#                            [-- PYTEST ARGS for every torch test, e.g. -k allreduce]
#
#   --suite       Debian suite to bootstrap (default forky: torch 2.14; trixie: torch 2.6).
#   --cache       where the chroots live, outside the repository (default /var/tmp/kolo-torch2);
#                 the chroot is <cache>/<suite>.
#   --shell       after building, open a shell in the chroot (the tree is at /kolo).
#   --build-only  configure and build, run no tests.
#
# Idempotent: the chroot is bootstrapped once (debootstrap, minbase) and its packages are
# installed once per package list (a stamp file records the list); later runs only build
# (incrementally, in build-torch2-<suite>/ of this tree, git-ignored) and test. Needs root
# (debootstrap, chroot, mounts); installs the `debootstrap` package with apt-get if missing.
# Everything runs in a private mount namespace (unshare), so the bind mounts of this tree,
# /proc, /dev, /dev/shm and /sys vanish with it even if the script is killed; the trap also
# unmounts them on an orderly exit. Network: the chroot shares the host's; the tests use
# loopback only.
#
# Prints each phase's wall time and, last, the summed GoogleTest-style lines of the torch
# tests ("[  PASSED  ] N tests." / "[  FAILED  ] ..."). Exit status: non-zero when a test failed.
set -euo pipefail

suite=forky
cache=/var/tmp/kolo-torch2
shell=0
build_only=0
in_namespace=0
pytest_args=()
all_args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --shell) shell=1; shift ;;
    --build-only) build_only=1; shift ;;
    --in-namespace) in_namespace=1; shift ;;  # internal: the re-run under unshare
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "torch2-chroot: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/../.." && pwd)
root=$cache/$suite
build=build-torch2-$suite
mirror=http://deb.debian.org/debian
# What building kolo + kolo_torch and running tests/torch needs (see python/kolo_torch/meson.build
# and the top-level meson.build): gtest because tests/ (where the torch suite is declared) is
# only configured with it; python3-dev for the extension module; libssl-dev for libcrypto;
# nlohmann-json3-dev for the benchmarks' JSON output (kolo-perf); libopenblas-dev for kolo-train
# (test_torchrun.py); libcli11-dev for the programs' command lines; bible-kjv(-text) for kolo-train's
# corpus and examples/torch/train.py's (test_ddp.py);
# python3-venv, python3-mesonpy, python3-pyproject-metadata and patchelf (newer meson-python
# rewrites the RUNPATH of what it installs) for `pip install .`
# (test_pip_install.py).
packages=(python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest
          meson ninja-build g++ pkg-config libssl-dev libgtest-dev nlohmann-json3-dev
          libopenblas-dev libcli11-dev bible-kjv bible-kjv-text python3-venv python3-mesonpy
          python3-pyproject-metadata patchelf)

if [ "$(id -u)" -ne 0 ]; then
  exec sudo "$0" "${all_args[@]}"
fi

mkdir -p "$cache"
t_start=$((SECONDS - ${T2_ELAPSED:-0}))
phase() { echo "torch2-chroot: $* (at $((SECONDS - t_start)) s)"; }

# --- 1. the chroot (once) ---------------------------------------------------------------------
if [ "$in_namespace" = 0 ] && ! command -v debootstrap >/dev/null; then
  phase "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
if [ "$in_namespace" = 0 ] && [ ! -f "$root/.kolo-bootstrapped" ]; then
  phase "debootstrap $suite into $root"
  # A half-made chroot is started afresh; never while something is mounted in it (the tree!).
  if grep -q " $root/" /proc/mounts; then echo "torch2-chroot: $root has mounts, not removing it" >&2; exit 1; fi
  rm -rf "$root"
  mkdir -p "$root"
  # Debian 12's debootstrap has no script for suites newer than trixie: sid's fits any of them.
  script=/usr/share/debootstrap/scripts/$suite
  [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
  debootstrap --variant=minbase "$suite" "$root" "$mirror" "$script" > "$cache/$suite-debootstrap.log" 2>&1 ||
    { tail -20 "$cache/$suite-debootstrap.log"; echo "torch2-chroot: debootstrap failed" >&2; exit 1; }
  touch "$root/.kolo-bootstrapped"
fi
# The archive's Release files can be older than their Valid-Until on a machine whose clock is
# ahead of the mirror (seen here: "Release file ... is expired"); the signature still counts.
echo 'Acquire::Check-Valid-Until "false";' > "$root/etc/apt/apt.conf.d/99kolo-valid-until"

# --- 2. in a private mount namespace: packages, mounts, build, tests -----------------------------
if [ "$in_namespace" = 0 ]; then
  exec unshare --mount --propagation private env T2_ELAPSED=$((SECONDS - t_start)) "$0" --in-namespace "${all_args[@]}"
fi
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mnt() { mount "$@"; mounted+=("${@: -1}"); }
mkdir -p "$root/kolo"
mnt -t proc proc "$root/proc"
mnt --bind /dev "$root/dev"
mnt -t tmpfs -o mode=1777 shm "$root/dev/shm"  # the shm transport's rings: private to this run
mnt --bind /sys "$root/sys"
mnt --bind "$repo" "$root/kolo"
# The host's names, so that this machine's hostname resolves as outside: torch 2.x's c10d
# rendezvous advertises its shared store as <hostname>:<port>, and every rank must reach it.
cp /etc/hosts "$root/etc/hosts"

stamp=$root/.kolo-packages
if [ "$(cat "$stamp" 2>/dev/null)" != "${packages[*]}" ]; then
  phase "apt-get install ${packages[*]}"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" apt-get update -qq
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${packages[@]}" > "$cache/$suite-apt.log" 2>&1 ||
    { tail -20 "$cache/$suite-apt.log"; echo "torch2-chroot: apt-get install failed" >&2; exit 1; }
  echo "${packages[*]}" > "$stamp"
fi
torch_version=$(chroot "$root" python3 -c "import torch; print(torch.__version__)")
phase "torch $torch_version, g++ $(chroot "$root" g++ -dumpfullversion)"

# USE_LIBUV=0: Debian builds torch 2.x without libuv, yet its TCPStore asks for libuv by default
# ("use_libuv was requested but PyTorch was built without libuv support"). import kolo_torch
# and kolo_torch.run fix that themselves (kolo_torch/_libuv.py); this covers what runs here
# before importing kolo_torch, as every user of Debian's torch 2.x must.
in_tree() { chroot "$root" env -C /kolo HOME=/tmp LC_ALL=C.UTF-8 USE_LIBUV=0 "$@"; }
if [ ! -f "$repo/$build/build.ninja" ]; then
  phase "meson setup $build"
  in_tree meson setup "$build" -Dbuildtype=release -Dcuda=disabled -Dmpi=disabled -Dibverbs=disabled \
    -Dtorch=enabled -Dtorch_python=/usr/bin/python3 -Dtests=enabled >/dev/null
fi
# Only what the torch suite runs: the extension and its Python files, kolo-perf and kolo-train
# (test_torchrun.py launches them) and kolorun (test_elastic_ddp.py); no GoogleTest binaries.
phase "building kolo_torch, kolo-perf, kolo-train, kolorun"
in_tree ninja -C "$build" build.ninja >/dev/null  # regenerate first: the target list may have changed
mapfile -t targets < <(in_tree ninja -C "$build" -t targets all |
  sed -n 's/^\(python\/kolo_torch\/[^:]*\|bench\/perf\/kolo-perf\|examples\/train\/kolo-train\|tools\/kolorun\/kolorun\): .*/\1/p')
in_tree ninja -C "$build" -j"$(nproc)" "${targets[@]}"

rc=0
if [ "$build_only" = 1 ]; then
  phase "built (--build-only)"
else
  phase "meson test --suite torch"
  test_args=()
  # meson splits --test-args like a shell: quote each argument ("-k 'not c10d'").
  [ ${#pytest_args[@]} -eq 0 ] || test_args=("--test-args=$(printf '%q ' "${pytest_args[@]}")")
  rm -f "$repo/$build/meson-logs/testlog.txt"  # no stale counts if meson test fails early
  in_tree meson test -C "$build" --no-rebuild --suite torch --print-errorlogs "${test_args[@]}" || rc=$?
  log=$repo/$build/meson-logs/testlog.txt
  touch "$log"
  passed=$(grep -ho '^\[  PASSED  \] [0-9]* tests\?\.' "$log" | awk '{s += $4} END {print s + 0}')
  mapfile -t failed < <(grep -h '^\[  FAILED  \] ' "$log" | grep -v 'listed below' | sort -u)
  phase "done, torch $torch_version"
  echo "[  PASSED  ] $passed tests."
  if [ $rc -ne 0 ]; then
    [ ${#failed[@]} -gt 0 ] || failed=("[  FAILED  ] meson test exit status $rc")
    echo "[  FAILED  ] ${#failed[@]} tests, listed below:"
    printf '%s\n' "${failed[@]}"
  fi
fi
if [ "$shell" = 1 ]; then
  chroot "$root" env -C /kolo PYTHONPATH=/kolo/$build/python bash -i || true
fi
exit $rc
