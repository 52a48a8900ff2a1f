"""The tools (tools/, a package of rooms) and the research probes (research/) beside the package: they import
gpubench, gpubench never imports them; the tools never import a probe; tests import both by name, never by
putting a folder on sys.path or loading a file by its path; and no folder outside gpubench/ grows into a junk
room holding a large share of the repository's code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ["gate", "longrun", "readme", "runs", "truth", "tune", "watch"]
REACHED = re.compile(r"\b(scripts|tools|research)\b")
SHARE = 0.15  # of the repository's Python and shell lines, at most, in any one folder outside gpubench/


def imported(path: Path) -> set[str]:
    """The top-level names a file imports, wherever in it the import stands (relative imports left out)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add((node.module or "").split(".")[0])
    return out


def test_gpubench_never_imports_the_tools_or_the_probes():
    files = [*(ROOT / "gpubench").rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]
    assert len(files) > 50
    assert {
        str(p.relative_to(ROOT)): sorted(imported(p) & {"tools", "research"})
        for p in files
        if imported(p) & {"tools", "research"}
    } == {}


def test_the_tools_import_gpubench_and_never_a_research_probe():
    files = sorted((ROOT / "tools").rglob("*.py"))
    assert any("gpubench" in imported(p) for p in files)
    assert [str(p.relative_to(ROOT)) for p in files if "research" in imported(p)] == []


def test_every_room_of_the_tools_is_a_package_named_where_the_rooms_are_listed():
    rooms = sorted(p.name for p in (ROOT / "tools").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert rooms == ROOMS
    assert all((ROOT / "tools" / room / "__init__.py").is_file() for room in rooms)
    listed = (ROOT / "tools" / "__init__.py").read_text()
    contributing = (ROOT / "docs" / "contributing.md").read_text()
    assert [r for r in rooms if f"    {r} " not in listed or f"`tools/{r}/`" not in contributing] == []
    assert (ROOT / "research" / "__init__.py").is_file()


def test_no_tool_is_over_350_lines():
    """The package's rule (tests/test_layout.py) holds in tools/ too: a tool that grows past it is split by subject."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in sorted((ROOT / "tools").rglob("*.py"))}
    assert len(sizes) > 30 and {path: n for path, n in sizes.items() if n > 350} == {}


def test_no_research_probe_is_over_350_lines():
    """The same rule in research/: a probe that grows past it is split by subject into a package beside it (its
    `python -m research.<probe>` entry kept), as research/cupti/ holds the CUPTI probe's and comparison's parts."""
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in sorted((ROOT / "research").rglob("*.py"))
    }
    assert len(sizes) > 10 and "research/cupti/metrics.py" in sizes
    assert {path: n for path, n in sizes.items() if n > 350} == {}


def reaches(text: str) -> list[str]:
    """The calls of a test file that put a folder of the tools on sys.path or load one of their files by path:
    sys.path.insert/append, a slice of sys.path assigned, spec_from_file_location, or a helper of the file
    that calls spec_from_file_location, named with scripts, tools or research in their arguments."""
    tree = ast.parse(text)
    helpers = {
        f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and "spec_from_file_location" in ast.unparse(f)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            loads = name.endswith(("sys.path.insert", "sys.path.append", "spec_from_file_location")) or name in helpers
            if loads and REACHED.search(ast.unparse(node)):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Assign) and any(ast.unparse(t).startswith("sys.path[") for t in node.targets):
            if REACHED.search(ast.unparse(node.value)):
                found.append(ast.unparse(node))
    return found


def test_no_test_reaches_into_the_tools_by_path():
    found = {str(p.relative_to(ROOT)): reaches(p.read_text()) for p in sorted((ROOT / "tests").rglob("*.py"))}
    assert {path: calls for path, calls in found.items() if calls} == {}


def test_the_check_finds_what_was_planted():
    """The check above could pass by reading nothing: each way a file could reach in is found here."""
    planted = {
        'sys.path.insert(0, str(ROOT / "scripts"))': True,
        'sys.path[:0] = [str(ROOT), str(ROOT / "tools")]': True,
        'spec = importlib.util.spec_from_file_location("x", ROOT / "research" / "x.py")': True,
        # a helper whose own call names no folder: its caller does
        "def load(path):\n    return importlib.util.spec_from_file_location(path.stem, path)\n"
        'load(ROOT / "tools" / "tune" / "space.py")': True,
        'spec = importlib.util.spec_from_file_location("hooks", DOCS / "hooks.py")': False,
        'sys.path.insert(0, str(ROOT / "tests"))': False,
    }
    assert {code: bool(reaches(code)) for code in planted} == planted


def lines_by_folder() -> dict[str, int]:
    """Each folder's own Python and shell lines (not its sub-folders'), over the folders of the repository."""
    out = {}
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if (
            path.suffix in (".py", ".sh")
            and path.is_file()
            and not any(p.startswith(".") or p in ("__pycache__", "build", "site") for p in parts)
            and not (ROOT / parts[0] / "pyvenv.cfg").exists()
        ):  # a virtual environment made in the checkout
            folder = "/".join(parts[:-1]) or "."
            out[folder] = out.get(folder, 0) + len(path.read_text(errors="replace").splitlines())
    return out


def test_no_folder_outside_the_package_holds_a_large_share_of_the_code():
    sizes = lines_by_folder()
    total = sum(sizes.values())
    assert total > 20_000 and sizes["tools/readme"] > 0
    assert {
        f: round(n / total, 3) for f, n in sizes.items() if n > SHARE * total and not f.startswith("gpubench")
    } == {}
