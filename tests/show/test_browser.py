"""Each committed report.html, and each page of the documentation site, as a reader's browser draws it: headless
Chromium loads it and logs no error; a report shows its headline figure, legend included, and a page its point (a
figure, or what gpubench printed) in the first screen of a 1280x800 window; no table hides GPU-Util, the work
done, the tensor ceiling or the verdict beyond its column. One browser serves every page. Skipped where Python's
playwright or a Chromium is not installed (.ci/run installs Debian's)."""

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted(p.parent.name for p in (ROOT / "results").glob("*/report.html"))
SCREEN = {"width": 1280, "height": 800}

pytestmark = pytest.mark.browser


def chromium() -> str | None:
    """The system's Chromium: GPUBENCH_CHROMIUM, else the first of Debian's and others' names on PATH."""
    named = os.environ.get("GPUBENCH_CHROMIUM")
    if named:
        return named if Path(named).is_file() else None
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    executable = chromium()
    if executable is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def page(browser):
    page = browser.new_page(viewport=SCREEN)
    page.errors = []  # what the console said was an error, and what the page threw
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    page.close()


def first_screen(page, report: Path) -> dict:
    """Load report.html; the headline image's box in the first screen, whether it drew, and the errors logged."""
    page.errors.clear()
    page.goto(report.as_uri(), wait_until="load")
    headline = page.locator("figure.first img")
    box = headline.bounding_box() if headline.count() == 1 else None
    drawn = headline.evaluate("img => img.complete && img.naturalWidth > 0") if box else False
    return {"box": box, "drawn": drawn, "errors": list(page.errors)}


def screenshot(page, report: Path, png: Path) -> None:
    """The first screen of a report, as a reader sees it on opening it."""
    page.goto(report.as_uri(), wait_until="load")
    page.screenshot(path=str(png), clip={"x": 0, "y": 0, **SCREEN})


@pytest.mark.parametrize("name", REPORTS)
def test_a_committed_report_shows_its_headline_in_the_first_screen_without_errors(page, name):
    seen = first_screen(page, ROOT / "results" / name / "report.html")
    assert not seen["errors"], seen["errors"]
    box = seen["box"]
    assert box is not None and seen["drawn"], "no headline figure drawn"
    assert (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= SCREEN["width"]
        and box["y"] + box["height"] <= SCREEN["height"]
    ), f"the headline lies outside the first screen: {box}"
    assert box["width"] >= 600, f"the headline is drawn too small to read: {box}"


def test_the_check_sees_a_headline_below_the_first_screen(page, tmp_path):
    """A page whose headline comes after a tall table fails the check that the committed reports pass."""
    report = ROOT / "results" / REPORTS[0] / "report.html"
    text = report.read_text().replace("<body>", "<body><div style='height:900px'>versions, a wide table</div>", 1)
    (tmp_path / "report.html").write_text(text + "<script>console.error('broken')</script>")
    seen = first_screen(page, tmp_path / "report.html")
    assert seen["box"]["y"] + seen["box"]["height"] > SCREEN["height"] and seen["errors"] == ["broken"]


# The site's pages, and what the first screen of some must show: the point, not set-up or mechanics.
PAGES = ["index", "tutorial", "watch", "top", "gate", "gate-runs", "gpus", "dashboards", "measured", "ceiling"]
PAGES += ["cupti", "kernels", "storage", "promises", "contributing"]
POINT = {
    "index": ("img", "headline"),  # the ladder's figure: every kernel at 100% GPU-Util, the work done beside it
    "watch": ("pre", "medians over each phase"),  # what gpubench watch printed for a job
    "gate": ("pre", "slower"),  # what a run against a baseline printed
}
# Column headers a reader came for: a table that puts them past its column's right edge hides its point.
LEADING = re.compile(r"^(GPU-Util|nvidia-smi util|MFU|MBU|HFU|tensor ceiling|verdict|work done \(ground truth\))$")


def site_page(page, site: Path, name: str) -> dict:
    """Load a built page: the errors logged, the point's top edge (where POINT names one), and the leading
    headers that lie beyond the content column's right edge."""
    page.errors.clear()
    path = site / "index.html" if name == "index" else site / name / "index.html"
    page.goto(path.as_uri(), wait_until="load")
    tag, text = POINT.get(name, ("", ""))
    top = page.evaluate(
        """([tag, text]) => {
            const hit = [...document.querySelectorAll('article ' + tag)].find(
                e => (e.getAttribute('src') || '').includes(text) || e.innerText.includes(text));
            return hit ? hit.getBoundingClientRect().top : null;
        }""",
        [tag or "none", text],
    )
    hidden = page.evaluate(
        """(pattern) => {
            const edge = document.querySelector('article').getBoundingClientRect().right;
            return [...document.querySelectorAll('article table th')]
                .filter(th => new RegExp(pattern).test(th.innerText.trim()))
                .filter(th => th.getBoundingClientRect().right > edge + 1)
                .map(th => th.innerText.trim() + ' of a table beginning ' + th.closest('tr').innerText.slice(0, 40));
        }""",
        LEADING.pattern,
    )
    wrapped = page.evaluate(
        """() => [...document.querySelectorAll('article pre')]
            .filter(pre => !['pre', 'nowrap'].includes(getComputedStyle(pre).whiteSpace))
            .map(pre => pre.innerText.slice(0, 40))"""
    )
    return {"errors": list(page.errors), "top": top, "hidden": hidden, "wrapped": wrapped}


@pytest.mark.parametrize("name", PAGES)
def test_a_page_of_the_site_shows_its_point_first_and_hides_no_leading_column(page, site, name):
    seen = site_page(page, site, name)
    assert not seen["errors"], seen["errors"]
    if name in POINT:
        assert seen["top"] is not None and 0 <= seen["top"] < SCREEN["height"] - 100, (
            f"the point is not in view: {seen}"
        )
    assert not seen["hidden"], seen["hidden"]
    assert not seen["wrapped"], f"printed text that breaks its lines mid-word: {seen['wrapped']}"


def test_the_page_check_sees_a_hidden_column_and_a_point_below_the_screen(page, site):
    """The watch page with a tall block before its capture and a table whose verdict lies far right fails both
    (written beside the built pages, so that it loads the same style sheets)."""
    text = (site / "watch" / "index.html").read_text()
    cells = "".join(f"<th style='white-space:nowrap'>{h}</th>" for h in ["job"] + ["a wide column"] * 12 + ["verdict"])
    text = text.replace("<h1", f"<div style='height:900px'>set-up</div><table><tr>{cells}</tr></table><h1", 1)
    (site / "planted").mkdir(exist_ok=True)
    (site / "planted" / "index.html").write_text(text)
    seen = site_page(page, site, "planted")
    assert seen["top"] is None  # POINT names nothing for this page: where the check looks, the capture lies low
    page.goto((site / "planted" / "index.html").as_uri(), wait_until="load")
    assert page.locator("article pre").first.bounding_box()["y"] > SCREEN["height"]
    assert any(h.startswith("verdict of a table beginning job\ta wide column") for h in seen["hidden"]), seen["hidden"]


def test_a_compare_report_shows_its_figure_in_the_first_screen_without_errors(page, tmp_path):
    from gpubench.cli import main

    runs = [ROOT / "results" / f"watch-llama-{k}-h100-80gb-hbm3" for k in ("eager", "compiled")]
    assert main(["compare", *map(str, runs), "--out", str(tmp_path / "c")]) == 0
    seen = first_screen(page, tmp_path / "c" / "report.html")
    assert not seen["errors"] and seen["drawn"], seen
    assert seen["box"]["y"] + seen["box"]["height"] <= SCREEN["height"] and seen["box"]["width"] >= 600
