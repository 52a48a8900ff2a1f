"""Work in a thread of its own, held to a time limit: a watch's summary never holds the job's exit code from
whoever waits on it."""

from __future__ import annotations

import threading


def bounded(work, limit_s: float):
    """work() in a thread of its own: its result, or None where it has not ended within limit_s (the thread is
    left behind, a daemon, and what it returns later is dropped); its exception, raised here."""
    box: list = []

    def run():
        try:
            box.append((True, work()))
        except BaseException as err:  # noqa: BLE001 -- handed to the caller's thread
            box.append((False, err))

    worker = threading.Thread(target=run, name="gpubench-summary", daemon=True)
    worker.start()
    worker.join(limit_s)
    if not box:
        return None
    ok, value = box[0]
    if not ok:
        raise value
    return value
