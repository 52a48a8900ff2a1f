"""Installing this project as a new user would: its own distribution name, install hints that install this
project and not the unrelated `gpubench` on PyPI, Triton only where it has wheels, and a laptop that can
list, plot and report without torch or Triton."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench import install as hints

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_is_not_named_after_the_other_project_on_pypi():
    assert PROJECT["name"] == hints.DIST == "gpubench-ladder"
    assert PROJECT["scripts"] == {"gpubench": "gpubench.cli:main"}


def test_triton_is_required_only_on_linux():
    triton = [d for d in PROJECT["dependencies"] if d.startswith("triton")]
    assert triton and all("sys_platform == 'linux'" in d for d in triton)
    assert {"cu12", "cu13", "dev"} <= set(PROJECT["optional-dependencies"])


def test_every_install_hint_installs_this_project_from_its_checkout():
    sources = [
        ROOT / "README.md",
        *ROOT.glob("docs/*"),
        *ROOT.glob("gpubench/**/*.py"),
        *ROOT.glob("kernels/*.py"),
        *ROOT.glob("tools/**/*"),
        *ROOT.glob("research/**/*"),
    ]
    for path in (p for p in sources if p.is_file() and p.suffix != ".pyc"):  # not a folder, nor compiled bytes
        text = path.read_text()
        assert not re.search(r"pip install\s+['\"]?gpubench(?![-\w])", text), f"{path} installs PyPI's gpubench"
    for hint in (hints.CUPY_HINT, hints.TORCH_HINT, hints.TRITON_HINT):
        assert "pip install -e" in hint and "checkout" in hint, hint


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for block in re.findall(r"```\n(.*?)```", section, re.S) for line in block.splitlines()]


def test_the_readme_gives_a_cuda_12_path_and_ci_runs_its_test_command():
    commands = _setup_commands()
    cu12 = [c for c in commands if "cu12" in c]
    assert any(c.startswith("pip install torch --index-url") and "/cu12" in c for c in cu12), commands
    assert "pip install -e '.[cu12]' && gpubench run" in commands
    tests = next(c for c in commands if "&& pytest" in c)
    assert tests in (ROOT / ".ci" / "run").read_text()


BLOCK_GPU_LIBRARIES = """
import importlib.abc, sys
class NoGpuLibraries(importlib.abc.MetaPathFinder):  # a laptop: no torch, no Triton, no CuPy
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'triton', 'cupy'):
            raise ImportError(f'No module named {name!r}')
sys.meta_path.insert(0, NoGpuLibraries())
from gpubench.cli import main
"""


def test_list_plot_and_report_work_without_torch_or_triton(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic import (
        make_run,  # needs torch to read each family's story; the laptop only reads files
    )

    run = make_run(tmp_path / "run")
    code = BLOCK_GPU_LIBRARIES + (
        f"assert main(['list']) == 0\n"
        f"assert main(['report', {str(run)!r}, '--out', {str(tmp_path / 'out')!r}]) == 0\n"
        f"assert main(['plot', {str(run)!r}, '--out', {str(tmp_path / 'figs')!r}]) == 0\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "report.html").is_file() and (tmp_path / "figs" / "headline.svg").is_file()


def test_list_starts_fast():
    """Fast as in loading nothing heavy, which a loaded machine's clock cannot judge: `gpubench list` imports
    none of the libraries whose import takes seconds."""
    code = (
        "import io, sys\nfrom contextlib import redirect_stdout\nfrom gpubench.cli import main\n"
        "with redirect_stdout(io.StringIO()):\n    assert main(['list']) == 0\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    heavy = {"torch", "triton", "cupy", "numpy", "pyarrow", "matplotlib", "pandas", "scipy"}
    assert "gpubench" in r.stdout.split() and not heavy & set(r.stdout.split()), r.stdout


def test_the_bench_script_skips_cupy_rows_with_one_sentence(monkeypatch, capsys):
    from gpubench.kernels.common import CupyMissing
    from tools.tune import bench

    def missing():
        raise CupyMissing(f"CuPy is not installed: {hints.CUPY_HINT}")

    monkeypatch.setattr(bench, "cupy", missing)
    assert bench.has_cupy() is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("CuPy rows skipped: CuPy is not installed: in this project")


def test_the_installed_packages_are_found_not_listed(monkeypatch):
    """pyproject.toml finds gpubench's packages and setup.py adds the ones its package-dir maps from elsewhere:
    every package folder of gpubench/ installs (a hand-written list once left gpubench.show.top out), so do
    kernels/ and the calibrations, and neither tools/ nor research/ does."""
    from setup import MappedPackages

    monkeypatch.chdir(ROOT)
    dist = MappedPackages({"script_name": "setup.py"})
    dist.parse_config_files()
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gpubench").rglob("__init__.py")}
    assert set(dist.packages) == folders | {"gpubench.kernels", "gpubench.calibration"}
    assert dist.package_dir["gpubench.kernels"] == "kernels"
    assert dist.package_dir["gpubench.calibration"] == "results/calibration"
