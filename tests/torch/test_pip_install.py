"""`pip install` of kolo_torch from the source tree (pyproject.toml, meson-python) into a fresh
venv that sees this Python's torch (--system-site-packages), offline (--no-build-isolation
--no-index), then a 2-rank job through kolo_torch.run from another directory with no PYTHONPATH:
init_process_group("kolo"), all_reduce, every element checked. Before the install the same venv
must fail to import kolo_torch (so the job cannot be running the build tree's copy).

Builds kolo's layers and kolo_torch from scratch: minutes on a small machine.
Skipped when meson-python (Debian's python3-mesonpy) or venv is missing.
"""
import os
import subprocess
import sys
import textwrap

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_TIMEOUT_S = 2400
RUN_TIMEOUT_S = 240

WORKER = textwrap.dedent("""
    import os, sys
    import torch
    import torch.distributed as dist
    import kolo_torch

    venv = sys.argv[1]
    assert os.path.realpath(kolo_torch.__file__).startswith(os.path.realpath(venv)), kolo_torch.__file__
    dist.init_process_group("kolo")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "kolo", dist.get_backend()
    for n in (1, 1000, 300001):
        t = torch.arange(n, dtype=torch.float32) + 1000 * (rank + 1)
        dist.all_reduce(t)
        want = torch.arange(n, dtype=torch.float32) * size + 1000 * size * (size + 1) / 2
        bad = int((t != want).sum())
        assert bad == 0, "rank %d: %d of %d elements wrong" % (rank, bad, n)
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d of %d OK from %s" % (rank, size, kolo_torch.__file__), flush=True)
""")


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "KOLO_BUILD_PYTHON", "PYTHONHOME") and not k.startswith("MESON")}
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    try:
        import mesonpy  # noqa: F401
    except ImportError:
        pytest.skip("meson-python is not installed for %s (Debian: apt-get install python3-mesonpy "
                    "python3-pyproject-metadata): pip install . cannot build kolo_torch" % sys.executable)
    try:
        import ensurepip  # noqa: F401
    except ImportError:
        pytest.skip("venv cannot install pip (Debian: apt-get install python3-venv)")
    root = tmp_path_factory.mktemp("pip")
    v = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(v)], check=True, timeout=300)
    return root, v


def test_pip_install_then_two_ranks(venv):
    root, v = venv
    py = str(v / "bin" / "python")
    env = clean_env()
    # Before the install this venv has no kolo_torch: the job below cannot be using the build tree's.
    r = subprocess.run([py, "-c", "import kolo_torch"], cwd=str(root), env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "No module named 'kolo_torch'" in r.stderr, (r.returncode, r.stderr)

    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", SOURCE],
                       cwd=str(root), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", timeout=BUILD_TIMEOUT_S)
    assert r.returncode == 0, "pip install failed:\n" + r.stdout[-20000:]

    script = root / "job.py"
    script.write_text(WORKER)
    r = subprocess.run([py, "-m", "kolo_torch.run", "--nproc_per_node", "2", str(script), str(v)],
                       cwd="/tmp", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, "the 2-rank job failed:\n" + r.stdout
    for rank in range(2):  # each worker checked that its kolo_torch is the venv's
        assert "rank %d of 2 OK from " % rank in r.stdout, r.stdout

    # The installed module is one file: kolo is linked in, no libkolo.so to find. It records the
    # torch's CUDA version and whether _C serves CUDA tensors; for a CPU torch kolo's CUDA parts
    # stay out (no libcudart, even where nvcc is installed).
    r = subprocess.run([py, "-c", "import torch, kolo_torch, kolo_torch._C as c, kolo_torch._build_info as b\n"
                        "print(c.__file__); print(torch.version.cuda, b.TORCH_CUDA, c.cuda, b.CUDA)"], cwd="/",
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    so, recorded = r.stdout.strip().splitlines()[-2:]
    torch_cuda, info_cuda, c_cuda, info_c_cuda = recorded.split()
    assert torch_cuda == info_cuda and c_cuda == info_c_cuda, recorded
    needed = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
    assert "libkolo" not in needed, needed
    if torch_cuda == "None":
        assert c_cuda == "False" and "libcudart" not in needed and "torch_cuda" not in needed, needed
