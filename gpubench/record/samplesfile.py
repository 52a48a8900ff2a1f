"""A run's samples file read, samples.arrows or samples.csv, and checked as it is read: its columns and
times (gpubench.record.schema), a GPU's rows in time order, never repeated; what stands in its place when
it is not a file (a folder, a device, a named pipe). rundir reads every other file of a run, and re-exports
what is here."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import weakref
from pathlib import Path

from gpubench.record import schema

SAMPLES_FILE, CSV_SAMPLES = "samples.arrows", "samples.csv"


class RunDirError(ValueError):
    """A run directory that cannot be read or written; the message is one sentence for the user."""


def not_a_file(path: Path) -> str | None:
    """None for a regular file (or a link to one), else what stands at path instead: reading a folder, a
    device (/dev/zero has no end) or a named pipe (which blocks) is no way to read a run."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a link to nothing" if os.path.islink(path) else None
    except OSError as err:
        return f"unreadable ({(err.strerror or str(err)).lower()})"
    for test, what in (
        (stat.S_ISREG, None),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def read_samples(path: str | Path, notes: list[str] | None = None, left_out: set | None = None):
    """A samples file, samples.arrows or samples.csv, as Samples (gpubench.read.samples): metric columns as
    float64 (missing values NaN), text as written. A torn last batch or line (a kill mid-write) is skipped
    with a note; damage anywhere else is an error naming the file and where, and so are rows of a GPU out of
    time order or repeated. Values out of their column's range become NaN, said in notes, their columns named
    in left_out (as each column is read)."""
    from gpubench.record import arrowread

    path = Path(path)
    left_out = set() if left_out is None else left_out
    if what := not_a_file(path):
        raise RunDirError(f"{path} is {what}, not a samples file")
    csv_file = path.suffix != ".arrows"
    where = (lambda i: f"line {i + 2}") if csv_file else (lambda i: f"row {i + 1}")  # a CSV's line 1 is its header
    check = _checker(path, notes, left_out, where, texts=False)

    def guard(fetch):
        def checked(wanted, rows):
            try:
                columns = fetch(wanted, rows)
            except arrowread.DamagedSamples as err:
                raise RunDirError(f"{path} is damaged: {err}") from None
            return check(columns, rows)

        return checked

    try:
        samples = _read_csv(path, notes, guard) if csv_file else arrowread.read(path, notes, guard)
        if samples.names or len(samples):  # no header at all: killed before it was written, no rows
            schema.sample_names(samples.names)
            _in_time_order(samples, path, where)
    except (arrowread.DamagedSamples, schema.Bad) as err:
        raise RunDirError(f"{path} is damaged: {err}") from None
    return samples


def _read_csv(path: Path, notes, guard):
    """samples.csv converted, a block at a time, into a temporary samples.arrows that lives as long as the
    samples read from it (gpubench.record.csvfile)."""
    from gpubench.read.samples import Samples
    from gpubench.record import arrowread, csvfile

    folder = _scratch()
    try:
        names = csvfile.convert(path, folder / SAMPLES_FILE, notes)
        if not names:
            shutil.rmtree(folder, ignore_errors=True)
            return Samples()
        samples = arrowread.read(folder / SAMPLES_FILE, notes, guard, float_times=True, shown_as=path.name)
    except csvfile.BadCsv as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise RunDirError(f"{path} {err}") from None
    except OSError as err:
        shutil.rmtree(folder, ignore_errors=True)
        if err.filename is None or str(folder) in str(err.filename):
            raise RunDirError(
                f"{path} cannot be read: it is read through a copy in {folder.parent}, which failed "
                f"({(err.strerror or str(err)).lower()})"
            ) from None
        raise
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    weakref.finalize(samples._fetch, shutil.rmtree, folder, True)  # every view of the rows shares this fetch
    return samples


def _scratch() -> Path:
    """A new private folder under the system's temporary directory."""
    while True:
        folder = Path(tempfile.gettempdir()) / f"gpubench-csv-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            folder.mkdir(mode=0o700)
            return folder
        except FileExistsError:
            continue


def _in_time_order(samples, path: Path, where) -> None:
    """schema.Bad where a GPU's rows are out of time order or repeated: in every file gpubench writes, each
    row's interval starts where the GPU's previous one ended, or later; averaged, a repeated row would count
    twice and a reversed one land in another window. Read three columns, a million rows at a time, each part
    checked for all GPUs at once (a loop per batch and GPU took seconds for a day of eight)."""
    import numpy as np

    key = "uuid" if samples.has("rank") and samples.has("uuid") else "gpu"  # ranks on several nodes repeat gpu 0
    last: dict = {}
    row = 0
    for ts, te, gpu in _parts(samples, ("t_start_s", "t_end_s", key), 1 << 20):
        worst = None  # (row in the part, its GPU's previous end): the part's earliest row out of order
        for value in _distinct(gpu):
            idx = np.flatnonzero(gpu == value)
            a, b = ts[idx], te[idx]
            before = np.concatenate([[last.get(value, -np.inf)], b[:-1]])
            bad = np.flatnonzero(a < before - 1e-6)
            if len(bad) and (worst is None or idx[bad[0]] < worst[0]):
                worst = (int(idx[bad[0]]), before[bad[0]])
            last[value] = b[-1]
        if worst is not None:
            i, end = worst
            name = f"GPU {gpu[i]:g}" if key == "gpu" else f"GPU {gpu[i]}"
            raise schema.Bad(
                f"{where(row + i)}: its t_start_s {ts[i]:.4f} comes before the end of {name}'s "
                f"previous row ({end:.4f}): rows out of time order, or repeated, which no recording "
                "writes"
            )
        row += len(ts)


def _distinct(column) -> list:
    """The values of a column, once each: GPU indices by counting (a hash of a million values took most of
    the check's time), anything else (a UUID) by a dict."""
    import numpy as np

    if column.dtype.kind == "f" and len(column):
        low, high = column.min(), column.max()
        if 0 <= low and high < 1 << 16 and np.array_equal(column, np.floor(column)):
            return np.flatnonzero(np.bincount(column.astype(np.int64))).astype(column.dtype).tolist()
    return list(dict.fromkeys(column.tolist()))


def _parts(samples, names, rows: int):
    """The columns of names, the file's batches joined into parts of at least rows rows (memory stays a
    part's), each part a tuple in names' order."""
    import numpy as np

    held: list = []
    count = 0
    for cols in samples.chunks(*names):
        held.append([cols[n] for n in names])
        count += len(cols[names[0]])
        if count >= rows:
            yield tuple(np.concatenate(c) for c in zip(*held))
            held, count = [], 0
    if held:
        yield tuple(np.concatenate(c) for c in zip(*held))


def _checker(path: Path, notes, flagged: set, where, texts: bool = True):
    """check(columns, rows) for the columns of some rows of a samples file, as they are read (schema's)."""
    said: list = []

    def check(columns: dict, rows=None) -> dict:
        line = where if rows is None else (lambda i: where(int(rows[i])))
        try:
            return schema.sample_columns(columns, line, said, flagged, texts)
        except schema.Bad as err:
            raise RunDirError(f"{path} is damaged: {err}") from None
        finally:
            if notes is not None:
                notes.extend(f"{path.name}: {n}" for n in said)
            said.clear()

    return check
