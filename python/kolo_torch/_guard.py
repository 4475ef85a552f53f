"""The version guard: kolo_torch's _C is C++ compiled against one torch's headers and
libraries, and under another torch its import fails with an undefined symbol (or worse, loads
and misbehaves). __init__.py calls check() after `import torch` and before importing _C, so a
mismatch is one ImportError that says which torch the module needs and how to rebuild it.

What must match: torch's release, major.minor.patch (torch's C++ ABI changes between releases,
patch releases included), and the C++11 ABI flag (torch._C._GLIBCXX_USE_CXX11_ABI: pip's wheels
changed it at 2.7, and std::string in a signature then means another symbol).
And whether torch has CUDA, with the same CUDA major version (_build_info.TORCH_CUDA, torch.version.cuda):
built against a CUDA torch, _C is compiled with KOLO_TORCH_CUDA and links libtorch_cuda, c10_cuda
and libcudart.so.<major>, which a CPU torch lacks (an undefined-library error otherwise); built
against a CPU torch, _C would load under a CUDA torch but refuse every CUDA tensor, which a
rebuild (the same pip install) fixes, so that is refused too. A _build_info.py without TORCH_CUDA
(written before it was recorded) is not compared on it.
What is ignored: pre-release and local parts of the version ("1.13.0a0+gitunknown", "+cu130",
"+cpu": CUDA is compared as above, not by its suffix), and CUDA minor versions. Nightlies of one
release (2.6.0.devYYYYMMDD) are not told apart.
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


NOT_RECORDED = object()  # torch_cuda when the running torch's CUDA is not to be compared


def cuda_text(cuda):
    """'CUDA 13.0' or 'no CUDA' for a torch.version.cuda value."""
    return "CUDA %s" % cuda if cuda else "no CUDA"


def same_cuda(built, found):
    """Whether a _C built against a torch with CUDA `built` (torch.version.cuda, None: CPU)
    suits a torch with CUDA `found`: both without, or both with the same major version
    (libcudart.so.<major>)."""
    if not built or not found:
        return not built and not found
    return str(built).split(".")[0] == str(found).split(".")[0]


def mismatch(info, torch_version, torch_abi, torch_cuda=NOT_RECORDED):
    """The ImportError message when the running torch is not the one kolo_torch was built for,
    else None. torch_cuda: the running torch's torch.version.cuda."""
    built, found = release(info.TORCH_VERSION), release(torch_version)
    same_release = built is not None and built == found
    same_abi = torch_abi is None or bool(info.CXX11_ABI) == bool(torch_abi)  # None: torch does not say
    built_cuda = getattr(info, "TORCH_CUDA", NOT_RECORDED)
    compare_cuda = built_cuda is not NOT_RECORDED and torch_cuda is not NOT_RECORDED
    cuda_ok = not compare_cuda or same_cuda(built_cuda, torch_cuda)
    if same_release and same_abi and cuda_ok:
        return None
    what = []
    if not same_release:
        what.append("torch %s" % ".".join(map(str, built)) if built else "torch %s" % info.TORCH_VERSION)
    if not same_abi:
        what.append("_GLIBCXX_USE_CXX11_ABI=%d" % int(bool(info.CXX11_ABI)))
    if not cuda_ok:
        what.append("a torch with %s" % cuda_text(built_cuda) if built_cuda else "a torch without CUDA")
    cuda_built = cuda_found = ""
    if compare_cuda:
        cuda_built, cuda_found = ", %s" % cuda_text(built_cuda), ", %s" % cuda_text(torch_cuda)
    return ("kolo_torch was built for torch %s (_GLIBCXX_USE_CXX11_ABI=%d%s) but this Python (%s) "
            "imports torch %s (_GLIBCXX_USE_CXX11_ABI=%d%s): its compiled part needs %s. "
            "Rebuild it for this torch: %s" % (
                info.TORCH_VERSION, int(bool(info.CXX11_ABI)), cuda_built, sys.executable,
                torch_version, int(bool(torch_abi)), cuda_found, " and ".join(what), rebuild_command(info)))


def check(info, torch):
    """Raises ImportError when the imported torch is not the one info says _C was built for."""
    version = getattr(torch, "version", None)
    message = mismatch(info, torch.__version__, getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None),
                       getattr(version, "cuda", NOT_RECORDED))
    if message:
        raise ImportError(message)
