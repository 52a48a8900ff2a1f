"""The documentation site: it builds with `mkdocs build --strict` (a broken link or anchor fails it), its
tutorial executes on a machine without a GPU and shows what it says, its map of the package is the package's,
and the README stays a front door."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NAV_PAGES = [
    "index",
    "tutorial",
    "watch",
    "gate",
    "gpus",
    "dashboards",
    "measured",
    "ceiling",
    "cupti",
    "kernels",
    "storage",
    "promises",
    "contributing",
]


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_page_of_the_nav_is_built(site):
    for name in NAV_PAGES:
        page = site / ("index.html" if name == "index" else f"{name}/index.html")
        assert page.is_file(), name


def test_the_figures_and_runs_the_pages_link_to_are_on_the_site(site):
    home = (site / "index.html").read_text()
    assert 'src="results/h100-80gb-hbm3-20261124-232113/figures/headline.png"' in home
    assert (site / "results" / "h100-80gb-hbm3-20261124-232113" / "figures" / "headline.png").is_file()
    gpus = (site / "gpus" / "index.html").read_text()
    assert 'href="../results/watch-ddp-slow-rank-h200-x2/report.html"' in gpus  # a run: its report
    assert (site / "results" / "watch-ddp-slow-rank-h200-x2" / "report.html").is_file()
    for html in site.glob("*/index.html"):
        for link in re.findall(r'(?:href|src)="((?:\.\./)*results/[^"#]+)"', html.read_text()):
            assert (html.parent / link).resolve().is_file(), f"{html.parent.name}: {link}"


def test_every_relative_link_of_every_built_page_resolves(site):
    """mkdocs --strict checks the Markdown pages' links, not those a notebook's cells write: the tutorial is
    rendered at tutorial/, where a cell's 'watch.md' would name tutorial/watch.md. Run reports are left out: they
    are pages of their runs, checked by the report's own tests."""
    broken = []
    for html in site.rglob("*.html"):
        if html.relative_to(site).parts[0] == "results":
            continue
        for link in re.findall(r'(?:href|src)="([^"#?]+)[^"]*"', html.read_text(errors="replace")):
            if re.match(r"^(?:[a-z]+:|//)", link):
                continue
            target = (site / link.lstrip("/") if link.startswith("/") else html.parent / link).resolve()
            if not (target / "index.html" if target.is_dir() else target).is_file():
                broken.append(f"{html.relative_to(site)}: {link}")
    assert broken == []


def test_the_tutorial_is_rendered_with_its_outputs(site):
    html = (site / "tutorial" / "index.html").read_text()
    assert "each rung tells apart what the one before it could not" in html
    assert "host-bound" in html and "MFU 25%" in html
    assert html.count("data:image/png;base64") >= 3  # its three figures, drawn when the site was built


def test_the_tutorial_executes_and_says_its_point(tmp_path):
    """Executed as a notebook without a GPU, well inside a minute; its asserts hold the committed numbers."""
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    nb = jupytext.read(DOCS / "tutorial.py")
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    images = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert re.search(r"^spin-1thread +100% +0\.76% ", text, re.M)  # GPU-Util beside SM active, in columns
    assert "slow loader:" in text and "host-bound, idle" in text
    assert images == 3


def test_the_hook_serves_a_run_by_its_report_and_names_what_it_cannot_serve():
    h = hooks()
    assert h.site_path("results/watch-healthy-h100-80gb-hbm3") == "results/watch-healthy-h100-80gb-hbm3/report.html"
    assert h.site_path("results/watch-healthy-h100-80gb-hbm3/report.md").endswith("healthy-h100-80gb-hbm3/report.html")
    assert h.site_path("results/logs/watch-h100-80gb-hbm3.log") == "results/logs/watch-h100-80gb-hbm3.log"
    assert h.site_path("results/no-such-run") is None and h.site_path("results/calibration/") is None


def map_rooms() -> dict[str, int]:
    """The map's table on the contributing page: room -> level."""
    text = (DOCS / "contributing.md").read_text()
    table = text[text.index("## The map") : text.index("\n## ", text.index("## The map") + 1)]
    return {room: int(level) for level, room in re.findall(r"^\| (\d+) \| `(\w+)/?` \|", table, re.M)}


def test_the_map_names_every_room_and_its_level_as_the_layout_test_holds_them():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_layout import LEVELS

    rooms = map_rooms()
    assert rooms == {room: i + 1 for i, level in enumerate(LEVELS) for room in level}
    folders = {p.parent.name for p in (ROOT / "gpubench").glob("*/__init__.py")} | {"kernels"}
    assert {r for r in rooms if r not in ("floor", "top")} == folders


def test_the_readme_is_a_front_door_that_links_into_the_site():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "figures/headline.png" in text and "<!-- gpubench:ladder -->" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), link
    linked = set(re.findall(r"\]\(docs/(\w+)\.(?:md|py)", text))
    assert set(NAV_PAGES) - {"index"} <= linked | {"index"}, set(NAV_PAGES) - linked
    assert "about 25 minutes" in text


def test_every_terminal_capture_in_the_docs_is_the_logs_own_lines():
    """A block after `<!-- capture: LOG -->` shows what a real run printed: each of its lines is a line of that
    committed log, in the log's order."""
    docs = Path(__file__).parents[1] / "docs"
    found = 0
    for page in sorted(docs.glob("*.md")):
        for log, block in re.findall(r"<!-- capture: (\S+) -->\n```\n(.*?)\n```", page.read_text(), re.S):
            lines = [x.rstrip() for x in (docs.parent / log).read_text().splitlines()]
            at = 0
            for line in block.splitlines():
                assert line in lines[at:], f"{page.name}: {line!r} is not a line of {log} after the one before it"
                at = lines.index(line, at) + 1
            found += 1
    assert found >= 1
