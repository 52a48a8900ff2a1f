"""Words from outside (a phase name, a path, a value) made visible as text: shared by the code inside the job
and gpubench's own output."""

import unicodedata


def visible(text) -> str:
    """text with every character a terminal would act on instead of show written out as an escape: C0 and C1
    controls (NUL, ESC that opens a colour or an OSC title, BEL, a newline), DEL, and the invisible format
    characters that reorder a line (bidi overrides); a space of another width is a space. A phase name or a
    path is shown as what it holds, and never moves the cursor, retitles the window or splits a line."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else " " if unicodedata.category(c) == "Zs" else _escape(c) for c in text)


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"
