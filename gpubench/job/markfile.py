"""The marks file a watched job writes (marks.tsv), read whole or as it grows: every version of it where the job
removes, replaces or cuts it short, and each line read once (gpubench.job.markreader parses the lines)."""

from __future__ import annotations

import os

from gpubench.inside.markline import BOM
from gpubench.job.markreader import parse

WHY = {
    "time": ("whose time is not a time on the monotonic clock",) * 2,  # (one line, several)
    "line": ("that is not a line of marks", "that are not lines of marks"),
    "again": ("that repeats one read before (counted once)", "that repeat lines read before (counted once)"),
}


class Reader:
    """Reads a marks file as it grows: each poll() returns what the lines completed since say.

    The file is held open once seen, and the path looked at again at each poll: a job that removes the file
    (the writer then makes it anew) or truncates it loses none of its lines here; again() reads every file
    seen, whole, in order. A line that repeats one read before (a copy of the file appended to itself) is
    left out and counted: no step is counted twice."""

    def __init__(self, path: str | os.PathLike, files=(), once: bool = True):
        self.path = path
        self.lines = 0  # whole lines read so far
        self.skipped: dict[str, list] = {}  # why -> [how many, (line, value) of the first]
        self.replaced = 0  # times the file at path was found removed, replaced or cut short
        self._files: list = list(files)  # each file read, open; the last is read on
        self._at = 0  # the one in hand
        self._partial = b""
        self._uuids: dict = {}  # each stream's last uuid, for the lines that say "="
        # a key of each line read, where a repeat is to count once (once=False: a reader that keeps nothing of
        # what passes by, the watch's tail, whose memory stays flat however long the job)
        self._seen: set | None = set() if once else None
        if not self._files:
            self._open()  # held from now: a file removed before the first poll is read all the same

    def poll(self) -> list:
        data = self._take()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        if not lines:
            return []
        text = b"\n".join(lines).decode(errors="replace")  # one decode for the lot: a day of lines reads fast
        uuids, why, out, seen = self._uuids, [], [], self._seen
        for k, line in enumerate(text.split("\n")):
            e = parse(line, uuids, why)
            if e is not None and seen is None:
                out.append(e)
                continue
            if e is not None:
                key = (e.stream, e.t, e.t_last, e.n, e.origin) if e.kind == "steps" else (e.stream, e.t, e.name)
                if key not in seen:
                    seen.add(key)
                    out.append(e)
                    continue
                why.append(("again", ""))
            if line.strip() and why:
                kind, value = why.pop()
                found = self.skipped.setdefault(kind, [0, (self.lines + k + 1, value)])
                found[0] += 1
            why.clear()
        self.lines += len(lines)
        return out

    def again(self) -> "Reader":
        """A reader of every file this one has seen, each from its start (a removed one too, held open)."""
        files = []
        for f in self._files:
            try:
                files.append(open(f"/proc/self/fd/{f.fileno()}", "rb"))  # its own offset, where dup() shares one
            except OSError:
                continue
        again = Reader(self.path, files)
        again.replaced = self.replaced
        return again

    def note(self) -> str | None:
        """What was skipped, in one sentence naming the file, the reason and the first line; None if nothing."""
        name = os.path.basename(self.path)
        parts = [
            f"{n} line{'s' if n > 1 else ''} {WHY[kind][n > 1]} ({'the first, ' if n > 1 else ''}line {line}"
            f"{f', reads {value}' if value else ''})"
            for kind, (n, (line, value)) in sorted(self.skipped.items())
        ]
        said = [f"left out {' and '.join(parts)}; the phases and steps are read without them"] if parts else []
        if self.replaced:
            times = f"{self.replaced} time{'s' if self.replaced > 1 else ''}"
            said.append(
                f"the file was removed, replaced or cut short {times} while the job ran; every version of it was read"
            )
        return f"{name}: {'; '.join(said)}" if said else None

    def close(self) -> None:
        for f in self._files:
            f.close()

    # --- inside
    def _take(self) -> bytes:
        """The bytes written since the last poll: the rest of the file in hand, then of those after it."""
        if not self._files and not self._open():
            return b""
        data = self._read(self._files[self._at])
        while self._at < len(self._files) - 1:  # again(): the later files of those seen
            self._at += 1
            data = self._next_file(data)
        f = self._files[-1]
        try:
            now = os.stat(self.path)
            held = os.fstat(f.fileno())
        except OSError:  # removed, and not made anew yet: what the held file has is read
            return data
        same = (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
        if same and now.st_size >= f.tell():
            return data
        self.replaced += 1
        if same:
            f.seek(0)  # cut short in place: read again from its start
        elif not self._open():
            return data
        self._at = len(self._files) - 1
        return self._next_file(data)

    def _next_file(self, data: bytes) -> bytes:
        """data, then the file in hand from where it stands: an unended line before it ends unread."""
        cut = data.rfind(b"\n") + 1
        if cut:
            data = data[:cut]
        else:
            self._partial, data = b"", b""
        return data + self._read(self._files[self._at])

    def _open(self) -> bool:
        try:
            self._files.append(open(self.path, "rb"))
            return True
        except OSError:  # not there yet, a directory, not readable: nothing to read
            return False

    @staticmethod
    def _read(f) -> bytes:
        start = f.tell()
        data = f.read()
        return data[len(BOM) :] if start == 0 and data.startswith(BOM) else data


def read_all(path: str | os.PathLike) -> list:
    reader = Reader(path)
    try:
        return reader.poll()
    finally:
        reader.close()
