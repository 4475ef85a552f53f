# Sourced by scripts/env/device-check.sh (which defines $D, $OUT, step, the summary and failed
# arrays). Defines prepare_torch_pip (here, at `prepare`) and run_torch_pip (there): kolo_torch
# installed as a user would, `pip install --no-build-isolation --no-index .` from the carried tree
# into a fresh `python3 -m venv --system-site-packages` venv, built there against that machine's
# torch (2.11+cu130: _C with CUDA, python/kolo_torch/meson.build), then a 2-rank job from another
# directory with the installed package: all_reduce and broadcast on CUDA tensors and on CPU
# tensors, every element checked (torch_pip_job.py). Each part's seconds are printed.
#
# That machine has meson, ninja, nvcc and g++ but neither meson-python nor pyproject-metadata,
# and nothing can be fetched there: `prepare` carries Debian's pure-Python packages of them
# (python3-mesonpy 0.12, python3-pyproject-metadata 0.6.1, from this machine's apt cache or
# `apt-get download`), copied into the venv's site-packages there, and checks their
# Requires-Python against 3.12 and 3.13 (that image's Python is 3.12). It also carries the
# headers kolo's build needs that the image may lack (OpenSSL's, nlohmann/json), used only where
# the machine's compiler does not find its own, with link names for the machine's
# libssl.so.3/libcrypto.so.3.
#
# That machine's python3 is itself a venv (/opt/torch/.venv): a venv made from it with
# --system-site-packages sees the base Python's site-packages, not torch's, so the new venv gets
# a .pth naming the parent venv's site-packages (a "stacked" venv). Without ensurepip (Ubuntu
# without python3-venv) the venv is made --without-pip and pip comes from the parent.
#
# Every failure says why and where in the summary ("torch pip: FAILED at <part>: <reason>") and
# marks the run failed; nothing is skipped silently. A torch without CUDA (as here, Debian's 1.13)
# runs the CPU part and says why the CUDA part did not run. PIP_FORCE_CARRIED=1 uses the carried
# headers even where the machine has its own (to try that path here); PIP_VENV_WITHOUT_PIP=1
# makes the venv without pip (the path taken without ensurepip). PIP_WORK: the scratch folder
# (default /tmp/kolo-pip, emptied first).
# Timeouts: pip install 360 s (PIP_TIMEOUT; a build of kolo's layers, its CUDA kernels and
# kolo_torch with no ccache: ~2-3 min expected on 16 cores), the job 100 s per device
# (PIP_JOB_TIMEOUT): under 10 min at worst.
# Tried without a GPU, each from a venv that lacks meson-python, on the carried copies: Debian 12's
# torch 1.13 (Python 3.11, meson 1.0.1), and trixie's torch 2.6 in scripts/env/torch2-chroot.sh's
# chroot (Python 3.13, meson 1.7, PIP_FORCE_CARRIED=1 PIP_VENV_WITHOUT_PIP=1); meson-python 0.12
# also installed a small extension module with meson 1.12.1 on Python 3.14 (forky).
# Afterwards /tmp/py/kolo_torch, where no torch step made it, is the installed package, so that
# `run torch_pip,torch_cuda,torch_peers` runs those suites on the pip-built module.
# One log: $OUT/torch-pip.log; one summary line.
CARRY_torch_pip=()

prepare_torch_pip() {
  local P=$D/pip tmp pkg deb
  rm -rf "$P" && mkdir -p "$P/site"
  tmp=$(mktemp -d)
  for pkg in python3-mesonpy python3-pyproject-metadata; do
    deb=$(ls /var/cache/apt/archives/${pkg}_*_all.deb 2>/dev/null | tail -n 1)
    if [ -z "$deb" ]; then
      (cd "$tmp" && apt-get download "$pkg" >/dev/null) || { echo "device-check: torch_pip: no $pkg .deb (apt-get download $pkg failed)" >&2; exit 1; }
      deb=$(ls "$tmp"/${pkg}_*_all.deb | tail -n 1)
    fi
    dpkg-deb -x "$deb" "$tmp/x" || { echo "device-check: torch_pip: cannot unpack $deb" >&2; exit 1; }
    echo "torch_pip: carrying $(basename "$deb")"
  done
  cp -r "$tmp"/x/usr/lib/python3/dist-packages/. "$P/site/"
  find "$P/site" -name __pycache__ -prune -exec rm -rf {} +
  rm -rf "$tmp"
  # Their Python needs against the Pythons the GPU image may have (3.12 seen; 3.13 next).
  /usr/bin/python3 - "$P/site" <<'PY' || exit 1
import email, glob, sys
from packaging.specifiers import SpecifierSet
ok = True
for meta in sorted(glob.glob(sys.argv[1] + "/*.dist-info/METADATA")):
    m = email.message_from_file(open(meta))
    spec = SpecifierSet(m.get("Requires-Python", ""))
    for py in ("3.12.3", "3.13.0"):
        if py not in spec:
            print("device-check: torch_pip: %s %s requires Python %s: not %s" % (m["Name"], m["Version"], spec, py),
                  file=sys.stderr)
            ok = False
    print("torch_pip: %s %s: Requires-Python %s (3.12, 3.13 fit); needs %s" % (
        m["Name"], m["Version"], spec, "; ".join(r for r in m.get_all("Requires-Dist", []) if "extra ==" not in r)))
sys.exit(0 if ok else 1)
PY
  # Headers the image may lack: OpenSSL 3.0 (libssl-dev) and nlohmann/json (the engine's flight recorder).
  # gzip, not xz: tar on a bare image may lack xz (Debian minbase does).
  tar -C / -czf "$P/headers.tgz" usr/include/openssl usr/include/x86_64-linux-gnu/openssl usr/include/nlohmann ||
    { echo "device-check: torch_pip: headers missing (libssl-dev, nlohmann-json3-dev)" >&2; exit 1; }
  du -sh "$P"
}

run_torch_pip() {
  step "torch pip: pip install . into a fresh venv (carried meson-python), then 2 ranks on CUDA and CPU tensors"
  local P=$D/pip W=${PIP_WORK:-/tmp/kolo-pip} log=$OUT/torch-pip.log V t line times="" devices=cpu
  local why_no_cuda="" inc="" libdir="" missing=() stacked parent sp
  : > "$log"
  # fail PART REASON: the summary line, the log's tail, and the run marked failed.
  _pip_fail() {
    echo "torch pip: FAILED at $1: $2" | tee -a "$log"
    tail -n 30 "$log" | grep -v '^torch pip: FAILED' | sed 's/^/  | /'
    summary+=("torch pip: FAILED at $1: $2 (log: torch-pip.log)${times:+; before that:$times}")
    failed+=(torch_pip)
  }
  _pip_time() { times+=" $1 $(( $(date +%s%N) / 1000000 - t ))ms"; }
  [ -d "$P/site/mesonpy" ] || { _pip_fail prepare "no $P/site/mesonpy: run 'scripts/env/device-check.sh prepare' here and carry .devcarry"; return; }
  rm -rf "$W" && mkdir -p "$W/job" || { _pip_fail setup "cannot make $W"; return; }
  V=$W/venv
  {
    echo "== machine: $(command -v python3) ($(python3 -c 'import sys; print(sys.version.split()[0])')); meson $(meson --version 2>&1);" \
      "ninja $(ninja --version 2>&1); nvcc $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo absent); g++ $(g++ -dumpfullversion 2>&1)"
    python3 -c 'import torch; print("== torch", torch.__version__, "CUDA", torch.version.cuda, "GPU available", torch.cuda.is_available())' 2>&1
  } >> "$log"
  cat "$log"

  # 1. The venv: sees the machine's torch, not a kolo_torch.
  t=$(( $(date +%s%N) / 1000000 ))
  local vargs=(--system-site-packages)
  [ "${PIP_VENV_WITHOUT_PIP:-0}" = 1 ] && vargs+=(--without-pip)
  if ! python3 -m venv "${vargs[@]}" "$V" >> "$log" 2>&1; then
    echo "== python3 -m venv failed (no ensurepip?): again --without-pip, pip from the parent" >> "$log"
    rm -rf "$V"
    python3 -m venv --system-site-packages --without-pip "$V" >> "$log" 2>&1 || { _pip_fail venv "python3 -m venv failed"; return; }
  fi
  sp=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  stacked=$(python3 -c 'import sys; print(int(sys.prefix != sys.base_prefix))')
  if [ "$stacked" = 1 ]; then
    # python3 is a venv: name its site-packages in the new one (after the new venv's own).
    parent=$(python3 -c 'import sysconfig; p = sysconfig.get_paths(); print("\n".join(dict.fromkeys([p["purelib"], p["platlib"]])))')
    echo "$parent" > "$sp/_kolo_parent_venv.pth"
    echo "== python3 is a venv ($(python3 -c 'import sys; print(sys.prefix)')): the new venv reads its site-packages: $(echo $parent)" >> "$log"
  fi
  "$V/bin/python" -c 'import torch' >> "$log" 2>&1 || { _pip_fail venv "the venv $V does not see torch"; return; }
  if "$V/bin/python" -c 'import kolo_torch' >> "$log" 2>&1; then
    _pip_fail venv "the fresh venv already imports a kolo_torch: the job could not tell the installed one"; return
  fi
  "$V/bin/python" -m pip --version >> "$log" 2>&1 || { _pip_fail venv "no pip in the venv nor in its parent"; return; }
  # meson-python and pyproject-metadata, carried: copied in as if installed, then checked against
  # this Python and what they require (meson, packaging), so that a refusal says so here.
  cp -r "$P/site/." "$sp/"
  "$V/bin/python" - >> "$log" 2>&1 <<'PY' || { _pip_fail meson-python "$(tail -n 1 "$log")"; return; }
import importlib.metadata as md, platform, shutil, subprocess, sys
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
bad = [] if shutil.which("ninja") else ["no ninja on PATH"]
for dist in ("meson-python", "pyproject-metadata"):
    d = md.distribution(dist)
    spec = d.metadata.get("Requires-Python") or ""
    if platform.python_version() not in SpecifierSet(spec):
        bad.append("%s %s requires Python %s, this is %s" % (dist, d.version, spec, platform.python_version()))
    for r in map(Requirement, d.requires or []):
        if r.marker and not r.marker.evaluate({"extra": ""}):
            continue
        if r.name == "meson":  # meson-python runs the meson command, not the module
            out = subprocess.run(["meson", "--version"], capture_output=True, text=True) if shutil.which("meson") else None
            have = out.stdout.strip() if out and out.returncode == 0 else None
        else:
            try:
                have = md.version(r.name)
            except md.PackageNotFoundError:
                have = None
        if have is None or (r.specifier and Version(have) not in r.specifier):
            bad.append("%s %s needs %s, found %s" % (dist, d.version, r, have or "none"))
        else:
            print("== %s %s: %s satisfied by %s" % (dist, d.version, r, have))
import mesonpy, pyproject_metadata  # noqa: E402  (imports under this Python)
if bad:
    sys.exit("; ".join(bad))
print("== meson-python %s and pyproject-metadata %s import under Python %s" % (
    md.version("meson-python"), md.version("pyproject-metadata"), platform.python_version()))
PY
  _pip_time venv

  # 2. Headers the machine lacks come from the carry; link names for its libssl/libcrypto.
  for h in openssl/ssl.h nlohmann/json.hpp; do
    if [ "${PIP_FORCE_CARRIED:-0}" = 1 ] || ! echo "#include <$h>" | g++ -std=c++20 -E -x c++ - > /dev/null 2>&1; then
      missing+=("$h")
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    mkdir -p "$W/dev/lib" && tar -C "$W/dev" -xzf "$P/headers.tgz" || { _pip_fail headers "cannot unpack $P/headers.tgz"; return; }
    inc=$W/dev/usr/include:$W/dev/usr/include/x86_64-linux-gnu
    local l so
    for l in ssl crypto; do
      so=$(ldconfig -p 2>/dev/null | grep -oE "/[^ ]*/lib$l\.so\.3$" | head -n 1)
      [ -n "$so" ] || so=$(ls /usr/lib/x86_64-linux-gnu/lib$l.so.3 /lib/x86_64-linux-gnu/lib$l.so.3 2>/dev/null | head -n 1)
      [ -n "$so" ] || { _pip_fail headers "no lib$l.so.3 on this machine (OpenSSL 3), which _C would link"; return; }
      ln -sf "$so" "$W/dev/lib/lib$l.so"
    done
    libdir=$W/dev/lib
    echo "== using carried headers for: ${missing[*]} (CPATH=$inc; LIBRARY_PATH=$libdir -> $(readlink "$libdir/libssl.so"))" >> "$log"
  fi

  # 3. pip install from the carried tree (this repository's root), offline, no build isolation.
  t=$(( $(date +%s%N) / 1000000 ))
  echo "== pip install --no-build-isolation --no-index $PWD" >> "$log"
  env -u PYTHONPATH -u LD_LIBRARY_PATH PATH="$V/bin:$PATH:/usr/local/cuda/bin" PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ${inc:+CPATH=$inc} ${libdir:+LIBRARY_PATH=$libdir} \
    timeout -k 10 "${PIP_TIMEOUT:-360}" "$V/bin/python" -m pip install -v --no-build-isolation --no-index "$PWD" > "$W/pip.log" 2>&1
  local rc=$?
  cat "$W/pip.log" >> "$log"
  _pip_time "pip-install(build)"
  grep -E 'kolo_torch: building against|Run-time dependency (CUDA|libcrypto|libssl)|Program nvcc' "$W/pip.log" | sed 's/^ *//' | sort -u
  [ $rc = 0 ] || { _pip_fail "pip install" "rc=$rc$([ $rc = 124 ] && echo ' (timed out)'): $(grep -m1 -E 'ERROR|error:|Error' "$W/pip.log" | cut -c1-300)"; return; }

  # 4. What got installed: one _C, no libkolo, CUDA where torch has it.
  t=$(( $(date +%s%N) / 1000000 ))
  local info
  info=$(cd "$W/job" && env -u PYTHONPATH -u LD_LIBRARY_PATH "$V/bin/python" -c '
import torch, kolo_torch, kolo_torch._build_info as b
print(kolo_torch._C.__file__); print(int(kolo_torch._C.cuda)); print(int(torch.version.cuda is not None))
print("TORCH_VERSION=%s TORCH_CUDA=%s CUDA=%s BUILT_BY=%s" % (b.TORCH_VERSION, b.TORCH_CUDA, b.CUDA, b.BUILT_BY))' 2>> "$log")
  [ -n "$info" ] || { _pip_fail import "import kolo_torch failed from $W/job: $(tail -n 1 "$log")"; return; }
  local so=${info%%$'\n'*} c_cuda torch_cuda
  c_cuda=$(echo "$info" | sed -n 2p) torch_cuda=$(echo "$info" | sed -n 3p)
  { echo "== installed: $info" | tr '\n' ' '; echo; readelf -d "$so" | grep -E 'NEEDED|RUNPATH|RPATH'; } >> "$log"
  case "$so" in "$V"/*) ;; *) _pip_fail import "kolo_torch._C is $so, not the venv's"; return ;; esac
  readelf -d "$so" | grep -q 'libkolo' && { _pip_fail import "$so needs a libkolo"; return; }
  if [ "$torch_cuda" = 1 ]; then
    [ "$c_cuda" = 1 ] || { _pip_fail import "torch has CUDA but the installed _C has none ($(echo "$info" | tail -n 1)): $(grep -m1 'kolo_torch: building against' "$log")"; return; }
    "$V/bin/python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
      { _pip_fail cuda "torch has CUDA but sees no GPU"; return; }
    devices=cuda,cpu
  else
    why_no_cuda="CUDA part not run: torch $(python3 -c 'import torch; print(torch.__version__)') has no CUDA"
    echo "== $why_no_cuda" >> "$log"
  fi
  _pip_time import

  # 5. The job, from another folder, no PYTHONPATH: each device part timed (the job prints them).
  cp scripts/env/device-check.d/torch_pip_job.py "$W/job/job.py"
  t=$(( $(date +%s%N) / 1000000 ))
  (cd "$W/job" && env -u PYTHONPATH -u LD_LIBRARY_PATH timeout -k 5 $(( ${PIP_JOB_TIMEOUT:-100} * $(echo ${devices//,/ } | wc -w) )) \
    "$V/bin/python" -m kolo_torch.run --nproc_per_node 2 job.py "$V" "$devices") > "$W/job.log" 2>&1
  rc=$?
  cat "$W/job.log" >> "$log"
  _pip_time "job($devices)"
  grep -E 'rank [0-9]+: ' "$W/job.log" | sort
  [ $rc = 0 ] || { _pip_fail job "rc=$rc: $(grep -m1 -E 'Error|error|wrong|FAILED' "$W/job.log" | cut -c1-300)"; return; }
  local d ok=1
  for d in ${devices//,/ }; do
    [ "$(grep -cE "rank [01]: $d(:[0-9]+)? part OK" "$W/job.log")" = 2 ] || ok=0
  done
  [ $ok = 1 ] || { _pip_fail job "not every rank reported every part ($devices) OK"; return; }
  line="torch pip: OK, torch $(echo "$info" | tail -n 1 | cut -d' ' -f1 | cut -d= -f2) ($(echo "$info" | tail -n 1 | cut -d' ' -f2-3)):"
  line+=" installed and 2 ranks checked on $devices;$times"
  for d in ${devices//,/ }; do
    line+="; $d part $(grep -m1 -oE "rank 0: $d(:[0-9]+)? part OK.* ([0-9.]+ s)$" "$W/job.log" | grep -oE '[0-9.]+ s$')"
  done
  [ -z "$why_no_cuda" ] || line+="; $why_no_cuda"
  # The later torch steps (torch_cuda, torch_peers) read kolo_torch from /tmp/py, which the torch
  # step builds by hand; without that step they run on this installed package instead.
  if [ ! -e /tmp/py/kolo_torch ]; then
    mkdir -p /tmp/py && ln -s "$(dirname "$so")" /tmp/py/kolo_torch && line+="; /tmp/py/kolo_torch is this install"
  fi
  summary+=("$line")
}
