"""Text from a run (a GPU's name, a warning, a phase, the watched command) made safe for report.md, and
report.md's inline marks turned into HTML for report.html.

A run's words are data, not markup: in report.md a `<` or `&` that could start a tag or an entity becomes
an entity, and the characters that mark up Markdown (`*`, backquote, `|`, backslash, the `](` of a link)
are escaped with a backslash, all on one line, so a GPU named `<script>` or a phase named `a|b` reads as
written in both files and runs nothing. A control character (a NUL, an ESC) is written out as an escape
(gpubench.usage.visible), never put into the file, and never turned into a space that would make two
names read as one.
"""

from __future__ import annotations

import html
import re

from gpubench.usage import visible

ESCAPED = re.compile(r"\\([\\`*\[\]|])")


def text(value) -> str:
    """value as text for report.md: one line, no HTML (a `<` that could open a tag and an `&` that could open
    an entity become entities; "<0.01%" stays as it reads), no Markdown marks."""
    value = str(value)
    line = " ".join((value if value.isprintable() else visible(value)).split())
    line = re.sub(r"<(?=[A-Za-z/!?])", "&lt;", re.sub(r"&(?=[#A-Za-z])", "&amp;", line))
    return re.sub(r"([\\`*|])", r"\\\1", line).replace("](", "\\](")  # a bracket alone makes no link


def code(value) -> str:
    """value as a code span, which Markdown shows as written, HTML included; as text where it holds a
    backquote (which would end the span) or a backslash."""
    line = " ".join(str(value).split())
    return f"`{line}`" if line and line.isprintable() and not set(line) & set("`\\") else text(value)


def inline(md: str) -> str:
    """One line of report.md as HTML: escaped characters as themselves, `code` spans as <code> (their text as
    written), **strong** as <strong>, and every character of the run's words escaped once."""
    held: list[str] = []

    def hold(markup: str) -> str:
        held.append(markup)
        return f"\x00{len(held) - 1}\x00"

    md = ESCAPED.sub(lambda m: hold(html.escape(m.group(1))), md.replace("\x00", ""))
    md = re.sub(r"`([^`]+)`", lambda m: hold(f"<code>{html.escape(m.group(1))}</code>"), md)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", html.escape(html.unescape(md)))
    return re.sub("\x00(\\d+)\x00", lambda m: held[int(m.group(1))], out)
