"""The metrics endpoint of a watch on a CPU: scraped over HTTP during a watch that replays a recorded
samples.csv while a real child process steps, parsed with prometheus-client's parser and checked against
the run directory; the steps of a recording in process; a failing live window. Its helpers serve
test_exporter_endpoint.py (a port in use, signals, the endpoint's own thread) and test_prometheus.py."""

import csv
import os
import socket
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from fakes import GPU

from gpubench.job import inprocess, markfile, markreader, watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.read.summary import TRAIL_S
from gpubench.record.rundir import load_run
from gpubench.record.sources.replay import ReplaySource

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from gpubench.job.exporter import Endpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "results" / "watch-healthy-h100-80gb-hbm3" / "samples.csv"
INFO = {"nvml_index": 0, "name": GPU.name, "uuid": GPU.uuid}
FLOPS, BYTES, TOKENS = 2e12, 1e9, 1000.0

# dcgm-exporter's names and units (etc/default-counters.csv, etc/dcp-metrics-included.csv): % for the
# utilizations, W, MHz, MiB, mJ for the energy counter, ratios 0-1 for the profiling fields. A column that
# repeats a field already named (the nvidia-smi process, dcgmi's util) keeps gpubench's own name.
EXPECTED = {
    "gpu_util_pct": ("DCGM_FI_DEV_GPU_UTIL", 1.0),
    "mem_util_pct": ("DCGM_FI_DEV_MEM_COPY_UTIL", 1.0),
    "power_w": ("DCGM_FI_DEV_POWER_USAGE", 1.0),
    "sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK", 1.0),
    "mem_used_mib": ("DCGM_FI_DEV_FB_USED", 1.0),
    "energy_j": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e3),
    "graphics_active_pct": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.01),
    "sm_active_pct": ("DCGM_FI_PROF_SM_ACTIVE", 0.01),
    "sm_occupancy_pct": ("DCGM_FI_PROF_SM_OCCUPANCY", 0.01),
    "tensor_active_pct": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.01),
    "dram_active_pct": ("DCGM_FI_PROF_DRAM_ACTIVE", 0.01),
    "fp64_active_pct": ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", 0.01),
    "fp32_active_pct": ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", 0.01),
    "fp16_active_pct": ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0.01),
    "smi_gpu_util_pct": ("gpubench_smi_gpu_util_pct", 1.0),
    "smi_mem_util_pct": ("gpubench_smi_mem_util_pct", 1.0),
    "smi_power_w": ("gpubench_smi_power_w", 1.0),
    "smi_sm_clock_mhz": ("gpubench_smi_sm_clock_mhz", 1.0),
}

# One process that steps 60 times, has every step on disk, says so, and waits until it has been scraped.
STEPPING = textwrap.dedent(f"""
    import sys, time, gpubench
    from pathlib import Path
    from gpubench.inside import markwriter
    gpubench.mark("train")
    for _ in range(60):
        time.sleep(0.05)
        gpubench.step(flops={FLOPS!r}, bytes={BYTES!r}, tokens={TOKENS!r})
    markwriter.flush()
    Path(sys.argv[1]).write_text("stepped")
    deadline = time.monotonic() + 600  # a hang guard only: the test scrapes as soon as it can
    while not Path(sys.argv[2]).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
""")
HANG_S = 600  # how long a test waits for an event before it gives up: no measure of the machine's speed


@pytest.fixture(autouse=True)
def _children_import_this_gpubench(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("GPUBENCH_MARKS", raising=False)


def replayed(tmp_path: Path, phase: str = "train", n: int = 600) -> ReplaySource:
    """A replay of the committed healthy run's train phase on an H100: the ladder of a real training loop."""
    with open(RECORDED, newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["phase"] == phase][:n]
        fields = reader.fieldnames
    path = tmp_path / "replayed.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return ReplaySource(path)


def options(out: Path, sources, endpoint) -> WatchOptions:
    return WatchOptions(
        out,
        [GPU],
        INFO,
        RecordingConfig(interval_s=0.05, sources=sources, command=["gpubench", "watch"]),
        metrics=endpoint,
    )


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def one(families: dict, name: str):
    samples = families[name].samples
    assert len(samples) == 1, (name, samples)
    return samples[0]


def window_steps(out: Path, start: float, end: float, n: int) -> list:
    """The groups of steps in marks.tsv that made the window's first n stamps: those wholly inside it, in time
    order (a group written after the scrape comes later than them)."""
    groups = sorted(
        (
            e
            for e in markfile.read_all(out / "marks.tsv")
            if isinstance(e, markreader.Steps) and start <= e.t_first and e.t_last <= end
        ),
        key=lambda e: e.t_first,
    )
    taken, count = [], 0
    for g in groups:
        if count == n:
            break
        taken.append(g)
        count += g.n
    assert count == n, f"the window's {n} steps are not whole groups of marks.tsv"
    return taken


def names(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def stepped_window(text: str) -> bool:
    """The ladder is served, and the job's window holds the steps it took after its phase began."""
    families = names(text)
    steps = families.get("gpubench_window_steps")
    return "DCGM_FI_PROF_SM_ACTIVE" in families and steps is not None and steps.samples[0].value >= 40


def scraped_until(port: int, ready) -> tuple[str, int]:
    """Scrape until ready(text): the marks' tail and the sampler catch up in their own time, which a loaded
    machine stretches. The text and how many scrapes it took."""
    deadline, n = time.monotonic() + HANG_S, 0
    while True:
        text, n = scrape(port), n + 1
        if ready(text) or time.monotonic() > deadline:
            return text, n
        time.sleep(0.05)


def watched_and_scraped(tmp_path: Path, ready=stepped_window) -> tuple[int, str, int]:
    """A watch of STEPPING on the replayed ladder, scraped once the child has every step on disk until the
    scrape is ready(text); its exit code, the scrape and the number of scrapes."""
    stepped, scraped = tmp_path / "stepped", tmp_path / "scraped"
    endpoint = Endpoint(0, "127.0.0.1")
    got = {}

    def scraper():
        try:
            deadline = time.monotonic() + HANG_S
            while not stepped.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            got["text"], got["scrapes"] = scraped_until(endpoint.port, ready)
        finally:
            scraped.write_text("")

    thread = threading.Thread(target=scraper)
    thread.start()
    code, _ = watch.run(
        options(tmp_path / "run", [replayed(tmp_path)], endpoint),
        [sys.executable, "-c", STEPPING, str(stepped), str(scraped)],
    )
    thread.join()
    assert "text" in got
    return code, got["text"], got["scrapes"]


def test_a_scrape_during_a_watch_matches_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    out = tmp_path / "run"
    code, text, scrapes = watched_and_scraped(tmp_path)
    assert code == 0
    families = names(text)
    manifest, samples, _ = load_run(out)
    labels = {"gpu": "0", "UUID": GPU.uuid, "modelName": GPU.name, "Hostname": socket.gethostname(), "rank": "3"}

    # the ladder: the samples.csv row of the same interval, each column under dcgm-exporter's name and unit
    end = one(families, "gpubench_sample_end_seconds")
    assert end.labels == labels
    (row,) = [r for r in samples if abs(r["t_end_s"] - end.value) < 5e-4]
    assert row["tensor_active_pct"] > 1 and row["sm_active_pct"] > 10  # a training loop's ladder, replayed
    shown = 0
    for column in manifest["columns"]:
        name, scale = EXPECTED[column]
        if row[column] == row[column]:  # a value the interval has
            sample = one(families, name)
            assert sample.labels == labels and sample.value == pytest.approx(row[column] * scale, rel=1e-6), column
            shown += 1
        else:
            assert name not in families, f"{name} is shown for an interval without a value"
    assert shown >= 15

    # the job: the steps of the same window in marks.tsv, the peaks of the manifest
    start, stop = one(families, "gpubench_window_start_seconds"), one(families, "gpubench_window_end_seconds")
    assert start.labels == dict(labels, phase="train")
    n = int(one(families, "gpubench_window_steps").value)
    groups = window_steps(out, start.value, stop.value, n)
    rate = (n - 1) / (groups[-1].t_last - groups[0].t_first)
    sheet = manifest["peaks"]["datasheet"]
    assert n >= 40 and one(families, "gpubench_steps_per_second").value == pytest.approx(rate, rel=1e-6)
    assert one(families, "gpubench_flops_per_second").value == pytest.approx(rate * FLOPS, rel=1e-6)
    assert one(families, "gpubench_mfu").value == pytest.approx(rate * FLOPS / sheet["bf16_tensor"], rel=1e-6)
    assert one(families, "gpubench_mbu").value == pytest.approx(rate * BYTES / sheet["dram"], rel=1e-6)
    assert one(families, "gpubench_tokens_per_second").value == pytest.approx(rate * TOKENS, rel=1e-6)
    trail = TRAIL_S["gpu_util_pct"]  # a row counts where its value covers only the window
    inside = [
        r["gpu_util_pct"]
        for r in samples
        if r["t_start_s"] >= groups[0].t_first + trail - 2e-4 and r["t_end_s"] <= groups[-1].t_last + 2e-4
    ]
    assert one(families, "gpubench_gpu_util_mean").value == pytest.approx(sum(inside) / len(inside), rel=1e-6)
    verdict = one(families, "gpubench_verdict")
    assert verdict.value == 1 and verdict.labels["phase"] == "train"
    # the replayed loop keeps its tensor cores busy part of the time; 20 steps/s of 1 GB read on a GPU busy
    # all the time: MBU 0.6%, and its kernels, not the host, hold it there
    assert verdict.labels["rules"] == "tensor-part, mbu-low-kernels", verdict.labels
    assert "gpubench_mfu_measured" not in families  # no --peaks: left out, never 0
    assert manifest["metrics"]["scrapes"] == scrapes and manifest["metrics"]["errors"] == []


def test_recording_serves_the_steps_of_its_own_process_while_the_block_runs(tmp_path, monkeypatch):
    import gpubench
    from gpubench.inside import markwriter

    monkeypatch.setenv("RANK", "1")
    with inprocess.recording(
        tmp_path / "rec",
        gpus=[GPU],
        info=INFO,
        sources=[replayed(tmp_path)],
        interval_s=0.05,
        metrics_port=0,
        quiet=True,
    ) as rec:
        gpubench.mark("decode")
        for _ in range(30):
            time.sleep(0.05)
            gpubench.step(flops=1e9, tokens=64.0)
        markwriter.flush()  # the open group of steps is not shown
        text, scrapes = scraped_until(rec.manifest["metrics"]["port"], lambda t: "gpubench_tokens_per_second" in t)
        families = names(text)
    tokens = one(families, "gpubench_tokens_per_second")
    assert tokens.labels["phase"] == "decode" and tokens.labels["rank"] == "1"
    assert tokens.value == pytest.approx(64.0 * one(families, "gpubench_steps_per_second").value, rel=1e-9)
    assert rec.manifest["metrics"]["scrapes"] == scrapes
    assert [r["phase"] for r in rec.summary if r["phase"] != "start-up"] == ["decode"]


def test_a_live_window_that_fails_leaves_the_ladder_and_the_recording(tmp_path, monkeypatch):
    """The job's numbers cannot be computed: the scrape still answers with the ladder, the watch completes,
    and the manifest says what failed."""
    import gpubench.job.live as live

    def broken(*a, **k):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(live, "summarize_row", broken)
    code, text, _ = watched_and_scraped(tmp_path, ready=lambda t: "DCGM_FI_PROF_SM_ACTIVE" in t)
    served = names(text)
    assert "DCGM_FI_PROF_SM_ACTIVE" in served and "gpubench_mfu" not in served
    manifest, _, summary = load_run(tmp_path / "run")
    # the train phase's row: on a loaded machine the child's start-up lasts long enough to get a row before it
    train = [row for row in summary if row["phase"] == "train"]
    assert code == 0 and manifest["status"] == "completed" and train and train[0]["steps"] > 0, summary
    assert manifest["metrics"]["errors"] == ["ZeroDivisionError: planted"]
    assert "the metrics endpoint failed: ZeroDivisionError: planted" in manifest["warnings"]
