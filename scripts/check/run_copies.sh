# Sourced by the long series (chaos.sh, soak.sh, shrink_trials.sh): builds TEST and the worker in
# $BUILD_DIR, then copies them and libkolo into a temporary folder, $bin, removed on exit, and
# points LD_LIBRARY_PATH there. A series runs for minutes to hours: a rebuild meanwhile must not
# pull the binaries from under it.
#   run_copies tests/collectives/reliability-test
run_copies() {
  ninja -C "$BUILD_DIR" "$1" tests/collectives/kolo-test-worker >/dev/null || exit 1
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  cp "$BUILD_DIR/$1" "$BUILD_DIR/tests/collectives/kolo-test-worker" "$BUILD_DIR/libkolo.so.0" "$bin/" || exit 1  # cp follows the soname link
  export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
