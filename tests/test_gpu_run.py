"""A short real run of two scenarios through the command line."""

import pytest

from gpubench.cli import main
from gpubench.results import load_run

pytestmark = pytest.mark.gpu


def test_short_real_run(tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "spin-1thread", "copy-torch", "--duration", "2", "--gap", "0.5", "--out", str(out), "--no-peaks"])
    assert rc == 0
    manifest, samples, summary = load_run(out)
    assert manifest["completed"] is True
    rows = {r["scenario"]: r for r in summary}
    assert set(rows) == {"spin-1thread", "copy-torch"}
    assert rows["spin-1thread"]["gpu_util_pct"] >= 90
    assert rows["copy-torch"]["gbps"] > 500
    assert {r["phase"] for r in samples} >= {"spin-1thread", "copy-torch", "gap"}
