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
    for name, gpus in (("ladder", ("H100", "H200")), ("peaks", ("H100", "H200")), ("kernels", ("H100", "H200")),
                       ("baselines", ("H100", "H200")), ("watch", ("H100",)), ("dist", ("H200",))):
        start = text.index(f"<!-- gpubench:{name} -->")
        body = text[start:text.index(f"<!-- /gpubench:{name} -->")]
        assert all(g in body for g in gpus) and "<<measure" not in body, name
    assert "<<measure" not in text


def test_every_promise_names_tests_that_exist():
    import re

    text = (ROOT / "README.md").read_text()
    promises = text[text.index("## Promises"):text.index("## Contributing")]
    named = re.findall(r"`(tests/\w+\.py)::(\w+)`", promises)
    assert len(named) >= 4 * 2
    for path, name in named:
        assert f"\ndef {name}(" in (ROOT / path).read_text(), f"{path}::{name}"
