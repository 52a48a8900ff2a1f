"""Each committed report.html as a reader's browser draws it: headless Chromium loads it, logs no error, and
shows the headline figure, legend included, in the first screen of a 1280x800 window. One browser serves
every report. Skipped where Python's playwright or a Chromium is not installed (.ci/run installs Debian's)."""

import os
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
