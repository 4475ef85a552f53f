"""Proves that the build enforces kolo's layering (meson.build, "Layers"): with each layer's own
compile flags, a header the layer may use compiles, and one from a layer above it (or from a
sibling transport) does not. With --root, first checks that no two folders of the source tree
include each other (check_folders.py), and prints the folder graph. Prints GoogleTest-style
summary lines for scripts/test.sh.

usage: check_layering.py [--root SOURCE_ROOT] "CXX [ARGS]" LAYER=FLAGS... -- CASE...
  FLAGS: the layer's -I flags joined by '|'
  CASE:  LAYER:allow:HEADER or LAYER:deny:HEADER
"""
import os
import subprocess
import sys
import tempfile

import check_folders


def compiles(cxx, flags, header):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cpp")
        with open(src, "w") as f:
            f.write('#include "%s"\n' % header)
        r = subprocess.run(cxx.split() + ["-std=c++20", "-fsyntax-only"] + flags + [src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return r.returncode == 0, r.stdout


def main():
    args = sys.argv[1:]
    passed, failed = 0, []
    if args[0] == "--root":
        passed, failed = check_folders.check(args[1])
        args = args[2:]
    cxx = args[0]
    sep = args.index("--")
    flags = {}
    for spec in args[1:sep]:
        layer, joined = spec.split("=", 1)
        flags[layer] = [f for f in joined.split("|") if f]
    for case in args[sep + 1:]:
        layer, verdict, header = case.split(":", 2)
        ok, out = compiles(cxx, flags[layer], header)
        want = verdict == "allow"
        name = "Layering.%s_%s_%s" % (layer, verdict, header.replace("/", "_").replace(".", "_"))
        if ok == want:
            passed += 1
            print("[       OK ] %s" % name)
        else:
            failed.append(name)
            print("[  FAILED  ] %s: %s compiled=%s\n%s" % (name, header, ok, out[-2000:]))
    print("[  PASSED  ] %d tests." % passed)
    if failed:
        print("[  FAILED  ] %d tests, listed below:" % len(failed))
        for n in failed:
            print("[  FAILED  ] %s" % n)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
