"""The report's blocks written out: report.md, and a self-contained report.html with its figures embedded."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from gpubench.show import markdown as md


def to_markdown(bl) -> str:
    lines = []
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            lines += ["#" * int(kind[1]) + " " + b[1], ""]
        elif kind == "p":
            lines += [b[1], ""]
        elif kind == "ul":
            lines += [f"- {item}" for item in b[1]] + [""]
        elif kind == "img":
            lines += [f"![{b[2]}]({b[1]})", ""]
        elif kind == "table":
            lines.append("| " + " | ".join(b[1]) + " |")
            lines.append("|" + "---|" * len(b[1]))
            lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in b[2]]
            lines.append("")
    return "\n".join(lines)


NUMBER = re.compile(r"n/a|—|not recorded|[<\d][\d.,e+\-–()% ]*")


def _table(head, rows) -> str:
    """Columns of numbers right-aligned so their digits line up; columns of words left-aligned."""
    numeric = [bool(rows) and all(NUMBER.fullmatch(str(r[i])) for r in rows) for i in range(len(head))]

    def cell(tag, i, text):
        return f"<{tag}{' class=num' if numeric[i] else ''}>{md.inline(str(text))}</{tag}>"

    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(cell("th", i, h) for i, h in enumerate(head)) + f"</tr>{body}</table>"


def to_html(bl, figures_dir: Path) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>gpubench report</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;line-height:1.45;color:#222}"
        "table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
        ".num{text-align:right}"
        "td:first-child{white-space:nowrap}"
        "img{max-width:100%}code{background:#f3f3f3}"
        # the headline, legend and all, in the first screen: as wide as it can be below a bounded height
        "h1{font-size:1.6em;margin:.2em 0 .4em}"
        "figure.first{margin:0}figure.first img{max-height:min(500px,60vh);width:auto}"
        "td:last-child{min-width:12em}</style>"
        "</head><body>"
    ]
    for b in bl:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            parts.append(f"<{kind}>{md.inline(b[1])}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{md.inline(b[1])}</p>")
        elif kind == "ul":
            parts.append("<ul>" + "".join(f"<li>{md.inline(item)}</li>" for item in b[1]) + "</ul>")
        elif kind == "img":
            data = base64.b64encode((figures_dir / Path(b[1]).name).read_bytes()).decode()
            first = " class=first" if b[3:] == ("first",) else ""
            parts.append(
                f"<figure{first}><img alt='{html.escape(b[2])}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{html.escape(b[2])}</figcaption></figure>"
            )
        elif kind == "table":
            parts.append(_table(b[1], b[2]))
    parts.append("</body></html>")
    return "\n".join(parts)
