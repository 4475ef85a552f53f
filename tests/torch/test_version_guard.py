"""The version guard (python/kolo_torch/_guard.py): kolo_torch records the torch release and
C++11 ABI flag and CUDA version _C was compiled for (_build_info.py, written at configure time) and, imported
under another torch, raises one ImportError naming both torches and the rebuild command, before
_C is imported. The mismatches are faked by rewriting _build_info.py in a temporary copy of the
built package; nothing in the package has a test-only switch.
"""
import os
import re
import shutil
import subprocess
import sys
import types

import pytest
import torch

BUILD_PYTHON = os.environ.get("KOLO_BUILD_PYTHON") or os.path.join(os.path.dirname(__file__), "..", "..", "build", "python")
PACKAGE = os.path.join(BUILD_PYTHON, "kolo_torch")
sys.path.insert(0, PACKAGE)  # _guard alone, without importing the package (and _C)
import _guard  # noqa: E402
sys.path.remove(PACKAGE)

TORCH_ABI = bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def info(version, abi, built_by="meson-python", **cuda):
    """A _build_info; cuda: TORCH_CUDA (and CUDA) where the test records them."""
    return types.SimpleNamespace(TORCH_VERSION=version, CXX11_ABI=abi, BUILT_BY=built_by,
                                 SOURCE_DIR="/src/kolo", BUILD_DIR="/src/kolo/build", PYTHON="/usr/bin/python3",
                                 **cuda)


def test_release_parsing():
    assert _guard.release("2.11.0+cu130") == (2, 11, 0)
    assert _guard.release("1.13.0a0+gitunknown") == (1, 13, 0)
    assert _guard.release("2.6.0.dev20241001+cpu") == (2, 6, 0)
    assert _guard.release("2.14") == (2, 14, 0)
    assert _guard.release("garbage") is None


@pytest.mark.parametrize("built,found", [("1.13.0a0+gitunknown", "1.13.0"), ("2.11.0+cpu", "2.11.0+cu130"),
                                         ("2.11.0+cu130", "2.11.0")])
def test_same_release_passes(built, found):
    assert _guard.mismatch(info(built, True), found, True) is None


def test_other_release_is_refused():
    msg = _guard.mismatch(info("2.11.0+cu130", True), "2.6.0", True)
    assert msg.startswith("kolo_torch was built for torch 2.11.0+cu130 (_GLIBCXX_USE_CXX11_ABI=1)"), msg
    assert "imports torch 2.6.0 (_GLIBCXX_USE_CXX11_ABI=1)" in msg, msg
    assert "needs torch 2.11.0." in msg, msg
    assert "-m pip install --no-build-isolation --force-reinstall /src/kolo" in msg or \
        "--force-reinstall <kolo source tree>" in msg, msg


def test_patch_release_matters():
    assert _guard.mismatch(info("2.6.0", False), "2.6.1", False) is not None


def test_other_abi_is_refused():
    msg = _guard.mismatch(info("2.6.0", False), "2.6.0+cpu", True)
    assert "needs _GLIBCXX_USE_CXX11_ABI=0" in msg, msg
    assert "torch 2.6.0 (_GLIBCXX_USE_CXX11_ABI=0)" in msg and "torch 2.6.0+cpu (_GLIBCXX_USE_CXX11_ABI=1)" in msg, msg


def test_unknown_abi_is_not_compared():
    assert _guard.mismatch(info("2.6.0", False), "2.6.0", None) is None


@pytest.mark.parametrize("built,found", [(None, None), ("13.0", "13.0"), ("13.0", "13.2"), ("12.8", "12.4")])
def test_same_cuda_passes(built, found):
    assert _guard.mismatch(info("2.11.0", True, TORCH_CUDA=built), "2.11.0", True, found) is None


def test_cuda_build_under_cpu_torch_is_refused():
    msg = _guard.mismatch(info("2.11.0+cu130", True, TORCH_CUDA="13.0", CUDA=True), "2.11.0+cpu", True, None)
    assert msg.startswith("kolo_torch was built for torch 2.11.0+cu130 (_GLIBCXX_USE_CXX11_ABI=1, CUDA 13.0)"), msg
    assert "imports torch 2.11.0+cpu (_GLIBCXX_USE_CXX11_ABI=1, no CUDA)" in msg, msg
    assert "needs a torch with CUDA 13.0." in msg, msg


def test_cpu_build_under_cuda_torch_is_refused():
    msg = _guard.mismatch(info("2.11.0+cpu", True, TORCH_CUDA=None, CUDA=False), "2.11.0+cu130", True, "13.0")
    assert "needs a torch without CUDA." in msg, msg
    assert "imports torch 2.11.0+cu130 (_GLIBCXX_USE_CXX11_ABI=1, CUDA 13.0)" in msg, msg


def test_other_cuda_major_is_refused():
    msg = _guard.mismatch(info("2.11.0+cu128", True, TORCH_CUDA="12.8"), "2.11.0+cu130", True, "13.0")
    assert "needs a torch with CUDA 12.8." in msg, msg


def test_unrecorded_cuda_is_not_compared():
    # A _build_info.py from before TORCH_CUDA was recorded, or a torch that does not say.
    assert _guard.mismatch(info("2.11.0+cpu", True), "2.11.0+cu130", True, "13.0") is None
    assert _guard.mismatch(info("2.11.0", True, TORCH_CUDA=None), "2.11.0", True) is None


def test_meson_build_names_meson_command():
    msg = _guard.mismatch(info("2.6.0", True, built_by="meson"), "2.7.0", True)
    assert "meson setup --reconfigure /src/kolo/build -Dtorch_python=%s" % sys.executable in msg, msg
    assert "ninja -C /src/kolo/build" in msg, msg


def import_copy(tmp_path, version=None, abi=None, torch_cuda=None):
    """Imports a copy of the built package whose _build_info.py says `version` / `abi` /
    `torch_cuda` (a Python literal for TORCH_CUDA)."""
    copy = tmp_path / "kolo_torch"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    text = (copy / "_build_info.py").read_text()
    if version is not None:
        text = re.sub(r'^TORCH_VERSION = "[^"]*"', 'TORCH_VERSION = "%s"' % version, text, flags=re.M)
    if abi is not None:
        text = re.sub(r"^CXX11_ABI = \w+", "CXX11_ABI = %s" % abi, text, flags=re.M)
    if torch_cuda is not None:
        text, n = re.subn(r"^TORCH_CUDA = .*$", "TORCH_CUDA = %s" % torch_cuda, text, flags=re.M)
        assert n == 1, text
    (copy / "_build_info.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KOLO_BUILD_PYTHON")}
    env["PYTHONPATH"] = str(tmp_path)
    return subprocess.run([sys.executable, "-c",
                           "import sys, kolo_torch; print(kolo_torch.__file__); print('_C' in dir(kolo_torch))"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)


def test_built_info_matches_this_torch(tmp_path):
    # The unmodified copy imports: the guard passes for the torch the build used.
    r = import_copy(tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(str(tmp_path)), r.stdout


def test_import_under_other_torch_fails_clearly(tmp_path):
    r = import_copy(tmp_path, version="0.9.9")
    assert r.returncode != 0, r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: kolo_torch was built for torch 0.9.9"), r.stderr
    assert "imports torch %s" % torch.__version__ in last, last
    assert "Rebuild it for this torch: " in last, last
    assert "undefined symbol" not in r.stderr, r.stderr


def test_import_under_other_abi_fails_clearly(tmp_path):
    r = import_copy(tmp_path, abi=str(not TORCH_ABI))
    assert r.returncode != 0, r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: kolo_torch was built for torch"), r.stderr
    assert "needs _GLIBCXX_USE_CXX11_ABI=%d" % int(not TORCH_ABI) in last, last


def test_build_info_records_cuda():
    # What meson.build wrote: this torch's CUDA version, and whether _C serves CUDA tensors.
    sys.path.insert(0, PACKAGE)
    try:
        import _build_info
    finally:
        sys.path.remove(PACKAGE)
    assert _build_info.TORCH_CUDA == torch.version.cuda, (_build_info.TORCH_CUDA, torch.version.cuda)
    r = import_copy_cuda_flag()
    assert r == _build_info.CUDA, (r, _build_info.CUDA)


def import_copy_cuda_flag():
    """_C.cuda of the built package, imported in a fresh Python."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KOLO_BUILD_PYTHON")}
    env["PYTHONPATH"] = os.path.dirname(PACKAGE)
    r = subprocess.run([sys.executable, "-c", "import kolo_torch; print(kolo_torch._C.cuda)"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1] == "True"


def test_import_under_other_cuda_fails_clearly(tmp_path):
    # A CUDA-built module under this torch when it has none (or a CPU-built one when it has CUDA).
    fake = "None" if torch.version.cuda else '"13.0"'
    r = import_copy(tmp_path, torch_cuda=fake)
    assert r.returncode != 0, r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: kolo_torch was built for torch"), r.stderr
    want = "needs a torch without CUDA" if torch.version.cuda else "needs a torch with CUDA 13.0"
    assert want in last, last
    assert "Rebuild it for this torch: " in last, last
