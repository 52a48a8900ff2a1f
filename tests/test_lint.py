"""The lint gate: `ruff check` with the project's configuration (pyproject.toml: pycodestyle's errors and
warnings and pyflakes, 120 columns) reports nothing over the repository, `ruff format --check` finds every file
formatted, and each does report what it is there to catch."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
    return [found]


def _check(*args: str, source: str | None = None) -> subprocess.CompletedProcess:
    # --no-cache: the gate writes nothing into the checkout
    return _run("check", "--output-format=concise", *args, source=source)


def _run(command: str, *args: str, source: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_ruff(), command, "--no-cache", *args],
        cwd=ROOT,
        input=source,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff_reports_nothing_over_the_repository():
    r = _check(".")
    assert r.returncode == 0, f"ruff check found problems (run `ruff check .` to see them):\n{r.stdout}{r.stderr}"


def test_the_projects_configuration_catches_a_long_line_an_unused_import_and_trailing_space():
    """Planted in a module of the package: a clean run above means these would have been reported."""
    fits = "x = '" + "a" * 114 + "'\n"  # 120 columns: allowed
    planted = "import os\n" + fits + "y = '" + "a" * 115 + "'\n" + "z = 1 \n"
    r = _check("--stdin-filename", str(ROOT / "gpubench" / "planted.py"), "-", source=planted)
    assert r.returncode == 1, r.stdout + r.stderr
    found = {(line.split(":")[1], line.split()[1]) for line in r.stdout.splitlines() if "planted.py:" in line}
    assert found == {("1", "F401"), ("3", "E501"), ("4", "W291")}, r.stdout


def test_every_file_is_formatted():
    r = _run("format", "--check", ".")
    assert r.returncode == 0, f"files the formatter would change (run `ruff format .`):\n{r.stdout}{r.stderr}"


def test_the_formatter_check_reports_a_file_it_would_change():
    """A call folded by hand onto two lines is what the check above is there to refuse."""
    folded = "def f(a, b):\n    return a + b\n\n\nx = f(1,\n      2)\n"
    r = _run("format", "--check", "--stdin-filename", str(ROOT / "gpubench" / "planted.py"), "-", source=folded)
    assert r.returncode == 1, r.stdout + r.stderr
    fixed = _run("format", "--stdin-filename", str(ROOT / "gpubench" / "planted.py"), "-", source=folded)
    assert fixed.returncode == 0 and "x = f(1, 2)" in fixed.stdout, fixed.stdout + fixed.stderr
