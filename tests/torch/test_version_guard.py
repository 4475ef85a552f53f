"""The version guard (python/kolo_torch/_guard.py): kolo_torch records the torch release and
C++11 ABI flag _C was compiled for (_build_info.py, written at configure time) and, imported
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


def info(version, abi, built_by="meson-python"):
    return types.SimpleNamespace(TORCH_VERSION=version, CXX11_ABI=abi, BUILT_BY=built_by,
                                 SOURCE_DIR="/src/kolo", BUILD_DIR="/src/kolo/build", PYTHON="/usr/bin/python3")


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


def test_meson_build_names_meson_command():
    msg = _guard.mismatch(info("2.6.0", True, built_by="meson"), "2.7.0", True)
    assert "meson setup --reconfigure /src/kolo/build -Dtorch_python=%s" % sys.executable in msg, msg
    assert "ninja -C /src/kolo/build" in msg, msg


def import_copy(tmp_path, version=None, abi=None):
    """Imports a copy of the built package whose _build_info.py says `version` / `abi`."""
    copy = tmp_path / "kolo_torch"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    text = (copy / "_build_info.py").read_text()
    if version is not None:
        text = re.sub(r'^TORCH_VERSION = "[^"]*"', 'TORCH_VERSION = "%s"' % version, text, flags=re.M)
    if abi is not None:
        text = re.sub(r"^CXX11_ABI = \w+", "CXX11_ABI = %s" % abi, text, flags=re.M)
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
