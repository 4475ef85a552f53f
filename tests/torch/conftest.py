# Makes the built kolo_torch importable when pytest runs outside `meson test`.
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_build_python = os.environ.get("KOLO_BUILD_PYTHON", os.path.join(_here, "..", "..", "build", "python"))
if _build_python not in sys.path:
    sys.path.insert(0, _build_python)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [_build_python, os.environ.get("PYTHONPATH", "")] if p)
