"""A real Prometheus server scraping a watch's metrics endpoint every second, on a CPU: the watch replays a
recorded samples.csv while a child process steps, and Prometheus' HTTP API is asked for gpubench_mfu, which
must be the MFU of the scraped window recomputed from marks.tsv; every query of the Grafana dashboard in
examples/ must run there and find series. Runs where a `prometheus` binary is on PATH (Debian: apt-get
install prometheus), skips elsewhere. With GPUBENCH_PROMETHEUS_LOG=FILE, Prometheus' answers are kept."""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from fakes import GPU
from test_exporter import ROOT, options, replayed, window_steps

from gpubench.job import watchcmd as watch

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH")
pytest.importorskip("prometheus_client")
from gpubench.job.exporter import Endpoint  # noqa: E402

DASHBOARD = ROOT / "examples" / "grafana_dashboard.json"
FLOPS = 3e12
STEPPING = textwrap.dedent(f"""
    import sys, time, gpubench
    from pathlib import Path
    gpubench.mark("train")
    deadline = time.monotonic() + 600  # a hang guard: the test says when it has what it asked
    while not Path(sys.argv[1]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
        gpubench.step(flops={FLOPS!r}, bytes=1e9, tokens=512)
""")
# the README's join of the two exporters, here with gpubench's own DCGM_FI_DEV_GPU_UTIL standing in
JOIN = 'gpubench_mfu / on(UUID) (DCGM_FI_DEV_GPU_UTIL{job="gpubench"} / 100)'
SERIES = ("gpubench_mfu", "gpubench_window_start_seconds", "gpubench_window_end_seconds", "gpubench_window_steps")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(web: int, path: str, **params) -> dict:
    url = f"http://127.0.0.1:{web}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read().decode()) if path.startswith("/api") else {"status": response.status}


def value(web: int, query: str, at: float) -> list:
    answer = ask(web, "/api/v1/query", query=query, time=f"{at:.3f}")
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def test_prometheus_scrapes_a_watch_and_answers_gpubench_mfu(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("GPUBENCH_MARKS", raising=False)
    monkeypatch.setenv("RANK", "0")
    endpoint, web, done = Endpoint(0, "127.0.0.1"), free_port(), tmp_path / "done"
    config = tmp_path / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
        f"  - job_name: gpubench\n    static_configs:\n      - targets: ['127.0.0.1:{endpoint.port}']\n"
    )
    log = open(tmp_path / "prometheus.log", "w")
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    got: dict = {}

    def asker():
        try:
            deadline = time.monotonic() + 600  # a hang guard: a loaded machine's Prometheus starts slowly
            while time.monotonic() < deadline and server.poll() is None:
                time.sleep(0.5)
                try:
                    at = time.time()
                    results = {name: value(web, name, at) for name in SERIES}
                except OSError:
                    continue  # not listening yet
                if all(results.values()) and float(results["gpubench_window_steps"][0]["value"][1]) >= 30:
                    stamps = {name: value(web, f"timestamp({name})", at)[0]["value"][1] for name in SERIES}
                    dashboard = json.loads(DASHBOARD.read_text())
                    queries = [t["expr"].replace("$uuid", ".*") for p in dashboard["panels"] for t in p["targets"]]
                    got.update(
                        at=at,
                        results=results,
                        stamps=stamps,
                        join=value(web, JOIN, at),
                        util=value(web, "DCGM_FI_DEV_GPU_UTIL", at),
                        version=ask(web, "/api/v1/status/buildinfo"),
                        dashboard={q: value(web, q, at) for q in queries},
                    )
                    return
        finally:
            done.write_text("")

    thread = threading.Thread(target=asker)
    thread.start()
    try:
        code, _ = watch.run(
            options(tmp_path / "run", [replayed(tmp_path)], endpoint), [sys.executable, "-c", STEPPING, str(done)]
        )
    finally:
        thread.join()
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert code == 0 and "results" in got, (tmp_path / "prometheus.log").read_text()[-2000:]

    results = {name: r[0] for name, r in got["results"].items()}
    assert len(set(got["stamps"].values())) == 1  # the four series of one scrape
    mfu = results["gpubench_mfu"]
    assert mfu["metric"]["job"] == "gpubench" and mfu["metric"]["UUID"] == GPU.uuid
    assert (mfu["metric"]["gpu"], mfu["metric"]["rank"], mfu["metric"]["phase"]) == ("0", "0", "train")
    start, end = (float(results[f"gpubench_window_{k}_seconds"]["value"][1]) for k in ("start", "end"))
    n = int(float(results["gpubench_window_steps"]["value"][1]))
    groups = window_steps(tmp_path / "run", start, end, n)
    rate = (n - 1) / (groups[-1].t_last - groups[0].t_first)
    peak = json.loads((tmp_path / "run" / "manifest.json").read_text())["peaks"]["datasheet"]["bf16_tensor"]
    if os.environ.get("GPUBENCH_PROMETHEUS_LOG"):
        got["from_marks_tsv"] = {
            "steps": n,
            "first_stamp": groups[0].t_first,
            "last_stamp": groups[-1].t_last,
            "steps_per_s": rate,
            "flops_per_step": FLOPS,
            "bf16_peak": peak,
            "mfu": rate * FLOPS / peak,
        }
        Path(os.environ["GPUBENCH_PROMETHEUS_LOG"]).write_text(json.dumps(got, indent=1) + "\n")
    assert float(mfu["value"][1]) == pytest.approx(rate * FLOPS / peak, rel=1e-9)
    util = float(got["util"][0]["value"][1])
    assert float(got["join"][0]["value"][1]) == pytest.approx(float(mfu["value"][1]) / (util / 100), rel=1e-9)
    assert all(got["dashboard"].values()), {q: len(r) for q, r in got["dashboard"].items()}
