"""The end of a watch on the console: the phases' table, each phase's verdict and where its numbers came from,
the idle GPUs, the receipt, how the command ended and where the run is."""

from __future__ import annotations

from gpubench.job.watcher import Watch
from gpubench.read.receipt import lines as receipt_lines


def show(watch: Watch, console=None) -> None:
    """The phases' ladder as a table, each phase's verdict, the receipt, how the command ended and where the run
    is; every word from the job (its phases, its command, the GPU's name, the paths) printed as text, not markup."""
    from gpubench.metrics import WATCH_TABLE
    from gpubench.show.console import make_console, say, say_run_dir, summary_table

    console = console or make_console()
    console.print(
        summary_table(
            watch.summary,
            f"{watch.manifest.get('gpu', {}).get('name', 'GPU')} — medians over each phase",
            columns=WATCH_TABLE,
            header="phase",
        )
    )
    for r in watch.summary:
        say(console, (str(r["scenario"]), "bold"), f": {r['verdict']}")
        if r.get("provenance"):
            say(console, f"  {r['provenance']}")
        if r.get("streams", 0) > 1:
            say(
                console, f"  steps/s per process on GPU {r['gpu']}: {r['stream_rates']} (TFLOP/s and MFU are their sum)"
            )
    if idle := watch.manifest.get("gpus_idle") or []:
        say(
            console,
            "idle, no process of the command used them: "
            + ", ".join(f"GPU {g['nvml_index']} ({g['name']})" for g in idle)
            + " (--all-gpus keeps their rows)",
        )
    for i, line in enumerate(receipt_lines(watch.manifest.get("receipt"))):
        say(console, ("  " if i else "") + line)
    ended = watch.manifest.get("child") or {}
    if ended.get("signal"):
        say(console, f"the command was ended by {ended['signal']} (exit code {ended['exit_code']})")
    elif ended and ended.get("pid") is None:
        say(console, "the command was not started")
    elif ended.get("still_running"):
        say(console, f"the command (pid {ended['pid']}) is still running; gpubench stopped watching it")
    elif ended:
        say(console, f"the command exited with code {ended['exit_code']}")
    status = "" if watch.manifest.get("completed") else f" ({watch.manifest.get('status')})"
    # plot and report refuse a run with no sample: the hint names only what will work
    say_run_dir(console, watch.out_dir, status, hint=bool(watch.samples))
    if not watch.samples:
        say(console, "nothing to plot or report: no sample was recorded while the command ran")
