"""MkDocs hooks. The pages link into the repository as a reader of docs/ on GitHub follows them
(`../results/RUN/...`, `../examples/...`); the site gets a copy of each file they link to, under the same path,
and each such link is made relative to the site's root. A run directory's link goes to its self-contained
report.html, a report.md's to the report.html beside it; a folder with no report is named, not linked."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
ROOMS = "results|examples|scripts|tests|kernels|gpubench"
LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(\.\./((?:" + ROOMS + r")/[^)\s#]*)(#[^)\s]*)?\)")


def site_path(path: str) -> str | None:
    """What the site serves for a link to this repository path, or None where it serves nothing."""
    found = ROOT / path
    if found.name == "report.md" and (found.parent / "report.html").is_file():
        return str(Path(path).parent / "report.html")
    if found.is_file():
        return path.rstrip("/")
    if found.is_dir() and (found / "report.html").is_file():
        return path.rstrip("/") + "/report.html"
    return None


def on_files(files, config):
    for page in Path(config["docs_dir"]).glob("*.md"):
        for m in LINK.finditer(page.read_text()):
            path = site_path(m.group(3))
            if path and not files.get_file_from_path(path):
                files.append(File(path, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    def relink(m):
        bang, text, path, anchor = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        target = site_path(path)
        if target is None:
            return text  # nothing to serve: the name stays, readable
        up = "../" * (len(Path(page.file.src_uri).parts) - 1)
        return f"{bang}[{text}]({up}{target}{anchor})"

    return LINK.sub(relink, markdown)
