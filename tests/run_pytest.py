"""Runs one pytest file for `meson test` and prints GoogleTest-style summary lines, so that
scripts/test.sh counts the Python tests with the C++ ones:

    [  PASSED  ] N tests.
    [  FAILED  ] N tests, listed below:

Exit status: pytest's (non-zero when any test failed or none ran).
usage: run_pytest.py BUILD_PYTHON_DIR TEST_FILE [pytest args...]
"""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def main():
    build_python, test_file, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [build_python, env.get("PYTHONPATH", "")] if p)
    env["KOLO_BUILD_PYTHON"] = build_python
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "junit.xml")
        rc = subprocess.call([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--junitxml", xml,
                              test_file] + extra, env=env)
        passed, failed = [], []
        if os.path.exists(xml):
            for case in ET.parse(xml).getroot().iter("testcase"):
                name = "%s.%s" % (case.get("classname"), case.get("name"))
                if case.find("skipped") is not None:
                    continue
                (failed if case.find("failure") is not None or case.find("error") is not None else passed).append(name)
    print("[  PASSED  ] %d tests." % len(passed))
    if failed or rc != 0:
        n = max(len(failed), 1)
        print("[  FAILED  ] %d tests, listed below:" % n)
        for f in failed or ["%s (pytest exit status %d)" % (test_file, rc)]:
            print("[  FAILED  ] " + f)
        return rc or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
