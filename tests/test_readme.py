"""The README's numbers are written from results/: they must agree with the committed runs."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_tables_agree_with_the_committed_results():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_tables.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_every_generated_part_has_results_behind_it():
    text = (ROOT / "README.md").read_text()
    for name in ("ladder", "peaks", "kernels"):
        start = text.index(f"<!-- gpubench:{name} -->")
        body = text[start:text.index(f"<!-- /gpubench:{name} -->")]
        assert "H100" in body and "H200" in body, name
