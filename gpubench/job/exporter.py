"""The metrics endpoint of a watch (`gpubench watch --metrics-port PORT`): while the job runs, Prometheus'
text format at http://HOST:PORT/metrics, served by prometheus-client (imported only here).

Two kinds of series, every one labelled as dcgm-exporter labels its own (`gpu`, the NVML index, `UUID`,
`modelName`, `Hostname`) and with the `rank` whose steps are credited to the GPU:

- the ladder of the latest sample interval per GPU: a column that is the same metric as a DCGM field is
  named and scaled as dcgm-exporter exposes that field (DCGM_FI_DEV_GPU_UTIL in %, DCGM_FI_PROF_* as
  ratios 0-1, DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION in mJ), any other column `gpubench_<column>`;
- the job over the live window (gpubench.job.live): `gpubench_mfu` and the rest, with the phase as a label,
  `gpubench_verdict` whose `rules` label holds the verdict's rule names, and `gpubench_source` whose `steps`
  and `flops` labels say where the steps and FLOPs came from (gpubench.job.provenance).

A metric the run has no value for is left out, never 0. Serving happens in the server's own threads,
which block the signals the watch passes to the job; a scrape that fails is answered with an error and
noted for the manifest, and nothing of it reaches the recording or the job.
"""

from __future__ import annotations

import errno
import signal
import socket
from dataclasses import dataclass

from gpubench.install import CHECKOUT
from gpubench.metrics import BY_COLUMN, METRICS, RATIO_FIELDS, finite

LABELS = ("gpu", "UUID", "modelName", "Hostname", "rank")
ENERGY_FIELD = 156  # dcgm-exporter gives the energy counter in mJ; the column is in J
UNITS = {"_pct": "in %", "_w": "in W", "_mhz": "in MHz", "_mib": "in MiB", "_j": "in J"}
HINT = f"--metrics-port needs prometheus-client: {CHECKOUT}, pip install -e '.[metrics]'"
# Signals a helper thread must never take from the main thread, which passes them on to the job.
ASYNC_SIGNALS = set(signal.valid_signals()) - {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


@dataclass(frozen=True)
class Series:
    name: str
    column: str
    scale: float  # the column's value times this is the series' value
    help: str
    type: str = "gauge"


def _ladder() -> tuple[Series, ...]:
    """One series per sampled column; the first column of a DCGM field takes the field's name."""
    out, named = [], set()
    for m in METRICS:
        if m.dcgm_name and m.dcgm_name not in named:
            named.add(m.dcgm_name)
            ratio = m.dcgm_id in RATIO_FIELDS
            scale, unit = (
                (0.01, "a ratio 0-1")
                if ratio
                else (1e3, "in mJ")
                if m.dcgm_id == ENERGY_FIELD
                else (1.0, _unit(m.column))
            )
            # prometheus-client names every counter *_total; dcgm-exporter's energy counter has no suffix
            out.append(
                Series(
                    m.dcgm_name,
                    m.column,
                    scale,
                    f"{m.meaning} ({unit}); the latest sample interval, gpubench's {m.column}",
                    "unknown" if m.dcgm_id == ENERGY_FIELD else "gauge",
                )
            )
        else:
            out.append(
                Series(
                    f"gpubench_{m.column}",
                    m.column,
                    1.0,
                    f"{m.meaning} ({_unit(m.column)}); the latest sample interval",
                )
            )
    return tuple(out)


def _unit(column: str) -> str:
    return next((u for suffix, u in UNITS.items() if column.endswith(suffix)), "")


LADDER = _ladder()
WINDOW = "over the live window of the current phase"
JOB = (
    Series("gpubench_steps_per_second", "steps_per_s", 1.0, f"steps the job's process reported per second, {WINDOW}"),
    Series("gpubench_flops_per_second", "tflops", 1e12, f"model FLOPs the job reported per second, {WINDOW}"),
    Series("gpubench_mfu", "mfu_pct", 0.01, f"MFU, a ratio 0-1: {BY_COLUMN['mfu_pct'].meaning} (--dtype), {WINDOW}"),
    Series(
        "gpubench_mfu_measured",
        "mfu_measured_pct",
        0.01,
        f"achieved FLOP/s over the matmul peak measured with --peaks, a ratio 0-1, {WINDOW}",
    ),
    Series("gpubench_hfu", "hfu_pct", 0.01, f"HFU, a ratio 0-1: {BY_COLUMN['hfu_pct'].meaning}, {WINDOW}"),
    Series("gpubench_mbu", "mbu_pct", 0.01, f"MBU, a ratio 0-1: {BY_COLUMN['mbu_pct'].meaning}, {WINDOW}"),
    Series(
        "gpubench_mbu_measured",
        "mbu_measured_pct",
        0.01,
        f"useful bytes/s over the copy peak measured with --peaks, a ratio 0-1, {WINDOW}",
    ),
    Series("gpubench_tokens_per_second", "tokens_per_s", 1.0, f"tokens the job reported per second, {WINDOW}"),
    Series(
        "gpubench_gpu_util_mean",
        "gpu_util_mean_pct",
        1.0,
        f"mean GPU-Util (in %) {WINDOW}: the GPU busy share its verdict reads",
    ),
    Series("gpubench_window_steps", "steps", 1.0, "steps stamped inside the live window"),
    Series(
        "gpubench_window_start_seconds",
        "t_start",
        1.0,
        "start of the live window, on the monotonic clock of samples.csv's t_start_s and marks.tsv",
    ),
    Series("gpubench_window_end_seconds", "t_end", 1.0, "end of the live window (the scrape), on the same clock"),
)
SAMPLE_END = Series(
    "gpubench_sample_end_seconds",
    "t_end_s",
    1.0,
    "end of the latest sample interval, samples.csv's t_end_s (monotonic clock)",
)
SOURCE_HELP = (
    "1 for where the live window's numbers came from: `steps` is step() (the job's own gpubench.step()) "
    "or optimizer (its optimizer's steps, no code change); `flops` is step(), one step counted (by "
    "gpubench, from one whole step) or counters (none known: the tensor pipes' activity bounds them)"
)
VERDICT_HELP = (
    "1 for the verdict on the live window: `rules` holds its rule names, as summary.csv's verdict_rules "
    "(the rules are gpubench/read/phase_verdict.py's)"
)


class CannotServe(ValueError):
    """The endpoint cannot be opened; the message is one sentence."""


def families(snap, gpus: list, host: str):
    """The metric families of one snapshot (gpubench.job.live.Snapshot)."""
    from prometheus_client.core import Metric

    labels = {g.nvml_index: (str(g.nvml_index), g.uuid, g.name, host, snap.ranks.get(g.nvml_index, "")) for g in gpus}

    def family(series: Series, values, extra=()):
        m = Metric(series.name, series.help, series.type)
        for gpu, more, value in values:
            if finite(value) and gpu in labels:
                m.add_sample(
                    series.name,
                    dict(zip(LABELS + tuple(extra), labels[gpu] + tuple(more))),
                    float(value) * series.scale,
                )
        return m

    for series in (*LADDER, SAMPLE_END):
        yield family(series, [(g, (), row.get(series.column)) for g, row in snap.latest.items()])
    for series in JOB:
        yield family(series, [(r["gpu"], (r["phase"],), r.get(series.column)) for r in snap.rows], ["phase"])
    yield family(
        Series("gpubench_verdict", "", 1.0, VERDICT_HELP),
        [(r["gpu"], (r["phase"], r["verdict_rules"]), 1.0) for r in snap.rows],
        ["phase", "rules"],
    )
    yield family(
        Series("gpubench_source", "", 1.0, SOURCE_HELP),
        [
            (r["gpu"], (r["phase"], r.get("steps_source") or "", r.get("flops_source") or ""), 1.0)
            for r in snap.rows
            if r.get("steps_source") or r.get("flops_source")
        ],
        ["phase", "steps", "flops"],
    )


class Collector:
    """What the registry asks at each scrape: nothing until a watch serves its live state."""

    def __init__(self):
        self.live = None
        self.gpus: list = []
        self.host = socket.gethostname()
        self.scrapes = 0
        self.errors: list[str] = []

    def describe(self):
        return []  # the series are known only at a scrape

    def collect(self):
        live = self.live
        if live is None:
            return []
        self.scrapes += 1
        try:
            return [f for f in families(live.snapshot(), self.gpus, self.host) if f.samples]
        except Exception as err:  # noqa: BLE001 -- an empty answer, noted for the manifest; never a traceback
            if len(self.errors) < 5:
                self.errors.append(f"{type(err).__name__}: {err}")
            return []


class Endpoint:
    """The HTTP server, bound when made (so a port in use is said before anything runs) and serving a
    watch's live state from serve() to close()."""

    def __init__(self, port: int, addr: str = "0.0.0.0"):
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError:
            raise CannotServe(HINT) from None
        self.collector = Collector()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        # The server's threads inherit this mask: every signal stays with the main thread.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, ASYNC_SIGNALS)
        try:
            self._server, self._thread = start_http_server(port, addr, registry)
        except OSError as err:
            raise CannotServe(
                f"cannot serve metrics on port {port}: "
                f"{'it is in use' if err.errno == errno.EADDRINUSE else err.strerror or err}; "
                "choose another with --metrics-port"
            ) from None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        self._served = None
        self.port = self._server.server_port
        self.url = f"http://{socket.gethostname()}:{self.port}/metrics"

    def serve(self, live, gpus: list) -> None:
        self.collector.gpus = list(gpus)
        self.collector.live = self._served = live

    def close(self) -> None:
        """Stop serving; safe to call twice."""
        self.collector.live = None
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def facts(self) -> dict:
        """For the manifest."""
        live = self._served
        return {
            "port": self.port,
            "url": self.url,
            "window_s": live.window_s if live is not None else None,
            "scrapes": self.collector.scrapes,
            "errors": self.collector.errors + (live.errors if live is not None else []),
        }
