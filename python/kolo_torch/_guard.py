"""The version guard: kolo_torch's _C is C++ compiled against one torch's headers and
libraries, and under another torch its import fails with an undefined symbol (or worse, loads
and misbehaves). __init__.py calls check() after `import torch` and before importing _C, so a
mismatch is one ImportError that says which torch the module needs and how to rebuild it.

What must match: torch's release, major.minor.patch (torch's C++ ABI changes between releases,
patch releases included), and the C++11 ABI flag (torch._C._GLIBCXX_USE_CXX11_ABI: pip's wheels
changed it at 2.7, and std::string in a signature then means another symbol).
What is ignored: pre-release and local parts ("1.13.0a0+gitunknown", "2.11.0+cu130", "+cpu").
A CPU and a CUDA build of one release share the CPU-side libraries _C links (libtorch_cpu, c10,
torch_python; _C is compiled without CUDA), so a kolo_torch built against "+cpu" loads under
"+cu130" of the same release and the other way round. Nightlies of one release (2.6.0.devYYYYMMDD)
are not told apart.
"""
import os
import re
import sys


def release(version):
    """'2.11.0+cu130' -> (2, 11, 0); '1.13.0a0+gitunknown' -> (1, 13, 0); None if unparsable."""
    m = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def rebuild_command(info):
    """The command that rebuilds kolo_torch for the running Python and its torch."""
    source = info.SOURCE_DIR if os.path.isdir(getattr(info, "SOURCE_DIR", "")) else "<kolo source tree>"
    if getattr(info, "BUILT_BY", "") == "meson":
        return "meson setup --reconfigure %s -Dtorch_python=%s %s && ninja -C %s" % (
            info.BUILD_DIR, sys.executable, source, info.BUILD_DIR)
    command = "%s -m pip install --no-build-isolation --force-reinstall %s" % (sys.executable, source)
    if sys.prefix == sys.base_prefix:  # not a venv: Debian's own Python refuses pip (PEP 668)
        command += " (from a venv: python3 -m venv --system-site-packages DIR; README.md, Use from PyTorch)"
    return command


def mismatch(info, torch_version, torch_abi):
    """The ImportError message when the running torch is not the one kolo_torch was built for,
    else None."""
    built, found = release(info.TORCH_VERSION), release(torch_version)
    same_release = built is not None and built == found
    same_abi = torch_abi is None or bool(info.CXX11_ABI) == bool(torch_abi)  # None: torch does not say
    if same_release and same_abi:
        return None
    what = []
    if not same_release:
        what.append("torch %s" % ".".join(map(str, built)) if built else "torch %s" % info.TORCH_VERSION)
    if not same_abi:
        what.append("_GLIBCXX_USE_CXX11_ABI=%d" % int(bool(info.CXX11_ABI)))
    return ("kolo_torch was built for torch %s (_GLIBCXX_USE_CXX11_ABI=%d) but this Python (%s) "
            "imports torch %s (_GLIBCXX_USE_CXX11_ABI=%d): its compiled part needs %s. "
            "Rebuild it for this torch: %s" % (
                info.TORCH_VERSION, int(bool(info.CXX11_ABI)), sys.executable,
                torch_version, int(bool(torch_abi)), " and ".join(what), rebuild_command(info)))


def check(info, torch):
    """Raises ImportError when the imported torch is not the one info says _C was built for."""
    message = mismatch(info, torch.__version__, getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None))
    if message:
        raise ImportError(message)
