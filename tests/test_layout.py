"""The package's parts and the way their imports run: no import cycle anywhere in gpubench/ and kernels/,
and no part imports one above it. The parts, bottom up, as the map of docs/contributing.md draws them:

    inside    the code that runs inside the user's job: marks, the hook, FLOP counting (imports only itself)
    floor     metrics (the vocabulary), stats, install, usage, the package's face
    read      summaries and verdicts: pure functions over sample rows
    record    NVML, GPU identity, sources, sampler, the Recording, run directories   |  truth: peaks, timing, FLOPs
    kernels   one file per family (gpubench.kernels)
    show      console, figures, report
    suite     scenarios, backend, the scenario loop, `run`   |  job: marks, child, watch, phases
    ranks     torchrun: launch, lock-step, merge   |  gate: the regression gate behind the pytest plugin
    top       the command line, the pytest plugin

Parts on one level never import each other. Every import is read from the source with ast, function-level
imports included, so a deferred import cannot hide a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEVELS = [
    ["inside"],
    ["floor"],
    ["read"],
    ["record", "truth"],
    ["kernels"],
    ["show"],
    ["suite", "job"],
    ["ranks", "gate"],
    ["top"],
]
FLOOR = {"gpubench", "gpubench.metrics", "gpubench.stats", "gpubench.install", "gpubench.usage"}
TOP = {"gpubench.cli", "gpubench.options", "gpubench.__main__", "gpubench.pytest_plugin"}


def modules() -> dict[str, Path]:
    """Every module of the package by its import name; kernels/ installs as gpubench.kernels."""
    found = {}
    for folder, name in ((ROOT / "gpubench", "gpubench"), (ROOT / "kernels", "gpubench.kernels")):
        for path in folder.rglob("*.py"):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(module: str, path: Path, known) -> set[str]:
    """The package modules `module` imports, wherever in the file the import stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in known:  # from pkg import name: the module, else the package
                name = name.rpartition(".")[0]
            # a package that holds the importer is loaded before it: no edge to one's own ancestors
            if name and name != module and not module.startswith(name + "."):
                out.add(name)
    return out


def part(module: str) -> str:
    if module in FLOOR:
        return "floor"
    if module in TOP:
        return "top"
    return module.split(".")[1]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_every_module_belongs_to_a_part():
    named = {p for level in LEVELS for p in level}
    assert {m: part(m) for m in graph() if part(m) not in named} == {}


def upward(g) -> list[str]:
    """Imports of a part on the same level or above."""
    level = {p: i for i, ps in enumerate(LEVELS) for p in ps}
    return sorted(
        f"{a} -> {b}"
        for a, targets in g.items()
        for b in targets
        if part(a) != part(b) and level[part(a)] <= level[part(b)]
    )


def cycles(g) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in g:
        if v not in index:
            visit(v)
    return found


def test_no_part_imports_one_above_it_or_beside_it():
    assert upward(graph()) == []


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_checks_see_a_planted_cycle_and_upward_import(tmp_path, monkeypatch):
    """The checks above could pass by reading nothing: here they must find what was planted."""
    pkg = tmp_path / "gpubench"
    for folder in ("read", "show"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "read" / "a.py").write_text("def f():\n    from gpubench.show import b\n")  # deferred, still seen
    (pkg / "show" / "b.py").write_text("from ..read import a\n")
    (tmp_path / "kernels").mkdir()
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    g = graph()
    assert g["gpubench.read.a"] == {"gpubench.show", "gpubench.show.b"}
    assert cycles(g) == [["gpubench.read.a", "gpubench.show.b"]]
    assert "gpubench.read.a -> gpubench.show.b" in upward(g)


def house() -> list[str]:
    """The layout as lines, top level first: each room's level, modules, lines, largest module and the rooms
    it imports (with how many imports)."""
    from collections import Counter

    known, edges = modules(), graph()
    lines = []
    for depth in range(len(LEVELS), 0, -1):
        for room in LEVELS[depth - 1]:
            mine = [m for m in known if part(m) == room]
            sizes = {m: len(known[m].read_text().splitlines()) for m in mine}
            big = max(sizes, key=sizes.get)
            out = Counter(part(t) for m in mine for t in edges[m] if part(t) != room)
            lines.append(
                f"{depth}  {room:<8} {len(mine):>3} modules {sum(sizes.values()):>6} lines  largest "
                f"{big.rpartition('.')[2]} {sizes[big]:>4}  -> " + ", ".join(f"{r} {n}" for r, n in sorted(out.items()))
            )
    return lines


def test_the_house_names_every_room_and_no_module_over_350_lines():
    lines = house()
    assert len(lines) == sum(len(level) for level in LEVELS)
    assert max(len(p.read_text().splitlines()) for p in modules().values()) <= 350


if __name__ == "__main__":  # python tests/test_layout.py: the rooms, their sizes and their arrows
    print("\n".join(house()))


def test_the_code_inside_the_job_imports_nothing_of_gpubench_but_itself():
    """The bootstrap loads gpubench/inside under a private name, never as `gpubench` (a job may own that
    name): an absolute import of gpubench there would load the job's module, or none."""
    found = {}
    for path in (ROOT / "gpubench" / "inside").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found.update({f"{path.name}: {n}": path for n in names if n.split(".")[0] == "gpubench"})
    assert found == {}


def test_no_file_of_the_tests_is_over_350_lines():
    """Every .py file under tests/, test modules and their shared fakes alike, holds at most 350 lines: a file
    that grows past it is split by subject."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in sorted((ROOT / "tests").rglob("*.py"))}
    assert {path: n for path, n in sizes.items() if n > 350} == {}
