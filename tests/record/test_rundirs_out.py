"""Run directories that are read-only, and plot/report --out: a read-only run says to use --out, --out leaves
the run untouched and refuses a folder of other files or a kernel file system, the no-GPU hint names a
command that works on the newest full run of the reference GPU, and replotting changes no byte."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rundamage import refused, run_dir, set_field, snapshot
from synthetic import make_run

from gpubench.cli import main
from gpubench.record import preflight
from gpubench.record.rundir import load_run
from gpubench.show import figures

FIXTURES = (run_dir,)  # pytest finds it by its name in this module


def _read_only(run_dir: Path, args: list[str]) -> subprocess.CompletedProcess:
    """gpubench ARGS with run_dir read-only, as it is to a user: a read-only bind mount where this runs as
    root (root writes through file modes), else the directory's mode."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "gpubench", *args]
    if os.geteuid() != 0:
        run_dir.chmod(0o555)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        finally:
            run_dir.chmod(0o755)
    if not shutil.which("unshare"):
        pytest.skip("no unshare to make a read-only mount as root")
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(run_dir), *cmd],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if "mount" in r.stderr and r.returncode != 2:
        pytest.skip(f"cannot make a read-only mount here: {r.stderr.strip()}")
    return r


def test_a_read_only_run_directory_says_to_use_out(run_dir, tmp_path):
    before = snapshot(run_dir)
    for command in ("plot", "report"):
        r = _read_only(run_dir, [command, str(run_dir)])
        assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert "is not writable; write elsewhere with --out DIR" in r.stderr
    r = _read_only(run_dir, ["report", str(run_dir), "--out", str(tmp_path / "elsewhere")])
    assert r.returncode == 0, r.stderr
    assert snapshot(run_dir) == before
    assert (tmp_path / "elsewhere" / "report.html").is_file()


def test_out_leaves_the_run_untouched_and_can_be_written_again(run_dir, tmp_path):
    before = snapshot(run_dir)
    out = tmp_path / "explore"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert main(["report", str(run_dir), "--out", str(out)]) == 0  # its own files may be replaced
    assert snapshot(run_dir) == before
    drawn = figures.figures_for(load_run(run_dir)[0])
    assert {p.name for p in (out / "figures").glob("*.png")} == {f"{f.name}.png" for f in drawn}
    assert "figures/headline.png" in (out / "report.md").read_text()


@pytest.mark.parametrize("command", ["plot", "report"])
def test_out_refuses_a_folder_with_other_files_or_a_kernel_file_system(run_dir, tmp_path, capsys, command):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused(capsys, [command, str(run_dir), "--out", str(other)], "already holds files (notes.txt)")
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    refused(capsys, [command, str(run_dir), "--out", "/sys/gpubench"], "lies under /sys")


def test_the_no_gpu_hint_names_a_command_that_works(tmp_path, monkeypatch):
    run = make_run(tmp_path / "results" / "h200-20261121-114933")
    monkeypatch.chdir(tmp_path)
    # no runs of the checkout
    monkeypatch.setattr(preflight, "__file__", str(tmp_path / "gpubench" / "record" / "preflight.py"))
    monkeypatch.setattr(preflight, "EXPLORE_DIR", tmp_path / "explore")
    hint = preflight.reference_hint()
    assert hint.endswith(f"gpubench report {run.resolve()} --out {tmp_path / 'explore'}"), hint
    before = snapshot(run)
    assert main(hint.split("gpubench ", 1)[1].split()) == 0
    assert snapshot(run) == before and (tmp_path / "explore" / "report.html").is_file()


def test_the_no_gpu_hint_names_the_newest_full_suite_run_of_the_reference_gpu(tmp_path, monkeypatch):
    results = tmp_path / "results"
    full = {f"family{k}": {} for k in range(9)}
    for name, gpu, start, kind, families in (
        ("h100-80gb-hbm3-20261120-090000", preflight.REFERENCE_GPU, "2026-11-20T09:00:00+0000", "run", full),
        ("h100-80gb-hbm3-20261124-013259", preflight.REFERENCE_GPU, "2026-11-24T01:32:59+0000", "run", full),
        # newer, but a comparison of a few families
        (
            "profiling-gpm-h100-80gb-hbm3",
            preflight.REFERENCE_GPU,
            "2026-11-25T00:00:00+0000",
            "run",
            dict(list(full.items())[:5]),
        ),
        ("h200-20261130-120000", "NVIDIA H200", "2026-11-30T12:00:00+0000", "run", full),  # newer, another GPU
        ("watch-tiny-batch-h100-80gb-hbm3", preflight.REFERENCE_GPU, "2026-12-01T00:00:00+0000", "watch", {}),
    ):
        run = make_run(results / name, kind=kind, scenarios=[])
        set_field(run / "manifest.json", gpu={"name": gpu}, start_wall=start, families=families)
    (results / "zz-damaged").mkdir()
    (results / "zz-damaged" / "manifest.json").write_text("{")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight, "__file__", str(tmp_path / "gpubench" / "record" / "preflight.py"))
    assert f"gpubench report {results.resolve() / 'h100-80gb-hbm3-20261124-013259'} --out" in preflight.reference_hint()


def test_replotting_an_unchanged_run_changes_no_byte(run_dir):
    assert main(["plot", str(run_dir)]) == 0
    first = snapshot(run_dir / "figures")
    assert main(["plot", str(run_dir)]) == 0
    assert snapshot(run_dir / "figures") == first
    png, svg = first["headline.png"], first["headline.svg"]
    assert b"Software\x00gpubench" in png and b"Matplotlib" not in png  # no library version in the file
    assert b"<dc:date>" not in svg and b"Matplotlib" not in svg
