"""A test session ends on pytest's count line, with pytest's exit status, whatever native libraries print as
the interpreter tears them down (tests/conftest.py ends the process once pytest is done)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

INNER = textwrap.dedent('''
    import os


    class Native:
        """Stands for a native library that complains as the interpreter tears it down."""

        def __init__(self):
            self.write = os.write  # held: by teardown the module's globals are gone

        def __del__(self):
            self.write(2, b"nanobind: leaked 3 instances!\\n")


    KEPT = Native()


    def test_passes():
        assert True


    def test_may_fail():
        assert os.environ.get("INNER_FAIL") != "1"
''')


@pytest.mark.parametrize("fail,status,counts", [("0", 0, "2 passed"), ("1", 1, "1 failed, 1 passed")])
def test_the_count_line_is_the_last_line_and_the_status_pytests(tmp_path, fail, status, counts):
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ, INNER_FAIL=fail, PYTHONPATH=str(Path(__file__).parent))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "test_inner.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == status, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].startswith(counts) and "leaked" not in r.stdout + r.stderr, r.stdout + r.stderr
