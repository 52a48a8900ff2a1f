"""The metrics endpoint of a watch, on a CPU: a port in use or not a port, SIGINT that reaches the child once
while the endpoint serves, a closed endpoint that frees its port, a server thread that blocks the signals the
watch passes on, prometheus-client imported only for the endpoint, and the Grafana dashboard asking only for
series the endpoint serves. Scrapes checked against the run directory: test_exporter.py."""

import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import GPU
from test_exporter import HANG_S, INFO, ROOT, _children_import_this_gpubench, scraped_until

from gpubench.cli import main
from gpubench.job import inprocess
from gpubench.record.rundir import load_run

pytest.importorskip("prometheus_client")
from gpubench.job.exporter import CannotServe, Endpoint  # noqa: E402

FIXTURES = (_children_import_this_gpubench,)  # pytest finds it by its name in this module


def test_a_port_in_use_is_one_sentence_and_exit_2_before_anything_runs(tmp_path, capsys):
    flag = tmp_path / "ran"
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(
            [
                "watch",
                "--metrics-port",
                str(port),
                "--out",
                str(tmp_path / "run"),
                "--",
                sys.executable,
                "-c",
                f"open({str(flag)!r}, 'w')",
            ]
        )
        err = capsys.readouterr().err
        with pytest.raises(ValueError, match=f"port {port}: it is in use"):
            with inprocess.recording(tmp_path / "rec", gpus=[GPU], info=INFO, metrics_port=port, quiet=True):
                pass
    assert code == 2 and err == (
        f"gpubench watch: error: cannot serve metrics on port {port}: it is in use; "
        "choose another with --metrics-port\n"
    )
    assert not flag.exists() and not (tmp_path / "run").exists() and not (tmp_path / "rec").exists()


def test_the_port_must_be_a_port(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["watch", "--metrics-port", "70000", "--", "true"])
    assert exit_.value.code == 2 and "a port is 0 to 65535, got 70000" in capsys.readouterr().err


HARNESS = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from fakes import GPU, FakeSource
from gpubench.job import watchcmd as watch
from gpubench.job.exporter import Endpoint
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
opts = WatchOptions(Path(sys.argv[1]), [GPU], {{"name": GPU.name}},
                    RecordingConfig(interval_s=0.05, sources=[FakeSource()]), metrics=Endpoint(0, "127.0.0.1"))
Path(sys.argv[2]).write_text(str(opts.metrics.port))
code, w = watch.run(opts, sys.argv[3:])
sys.exit(code)
"""

# Ends when it has had one SIGINT, and says how many it had.
GRACEFUL = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    got = []
    signal.signal(signal.SIGINT, lambda *a: got.append(1))
    Path(sys.argv[1]).write_text("ready")
    while not got:  # the test's own timeout ends a wait for a signal that never comes
        time.sleep(0.01)
    time.sleep(0.3)
    Path(sys.argv[1]).write_text(str(len(got)))
    sys.exit(7)
""")


def test_sigint_reaches_the_child_once_while_the_endpoint_serves(tmp_path):
    """The server's threads take no signal: Ctrl-C sent to gpubench alone still goes to the command once."""
    script, flag, port_file = tmp_path / "harness.py", tmp_path / "flag", tmp_path / "port"
    script.write_text(HARNESS.format(tests=str(ROOT / "tests")))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "run"), str(port_file), sys.executable, "-c", GRACEFUL, str(flag)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + HANG_S
    while not (flag.is_file() and flag.read_text() == "ready"):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "no flag"
        time.sleep(0.02)
    # served while the child runs; on a busy machine the first sample may land after the child is ready,
    # and until then a scrape is empty
    text, scrapes = scraped_until(int(port_file.read_text()), lambda t: "DCGM_FI_DEV_GPU_UTIL" in t)
    assert "DCGM_FI_DEV_GPU_UTIL" in text, "no sample served"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 7 and flag.read_text() == "1", err
    manifest = load_run(tmp_path / "run")[0]
    assert manifest["status"] == "interrupted" and manifest["metrics"]["scrapes"] == scrapes


def test_prometheus_client_is_imported_only_for_the_endpoint():
    code = (
        "import sys, gpubench, gpubench.job.watcher, gpubench.job.live, gpubench.cli, gpubench.options; "
        "gpubench.options.parser(); print('prometheus_client' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_closed_endpoint_frees_its_port():
    endpoint = Endpoint(0, "127.0.0.1")
    port = endpoint.port
    endpoint.close()
    endpoint.close()
    again = Endpoint(port, "127.0.0.1")
    again.close()
    with pytest.raises(CannotServe):
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", port))
            busy.listen()
            Endpoint(port, "127.0.0.1")


def test_the_servers_thread_blocks_the_signals_the_watch_passes_on():
    """A signal sent to gpubench must reach its main thread (which passes it to the job), never the server's."""
    endpoint = Endpoint(0, "127.0.0.1")
    try:
        status = Path(f"/proc/self/task/{endpoint._thread.native_id}/status").read_text()
    finally:
        endpoint.close()
    blocked = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        assert blocked >> (sig - 1) & 1, sig.name
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # and the caller's own mask is as it was


def test_the_dashboard_asks_only_for_series_the_endpoint_serves():
    """examples/grafana_dashboard.json: every query names series the endpoint (or dcgm-exporter, under the same
    names) serves, and its first panel puts MFU beside DCGM's GPU util and SM active."""
    import json
    import re

    from gpubench.job.exporter import JOB, LADDER, SAMPLE_END

    served = {s.name for s in (*LADDER, *JOB, SAMPLE_END)} | {"gpubench_verdict"}
    dashboard = json.loads((ROOT / "examples" / "grafana_dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = [set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\{", e)) for e in exprs]
    assert all(names and names <= served for names in named), list(zip(exprs, named))
    first = set().union(*named[: len(dashboard["panels"][0]["targets"])])
    assert first == {"gpubench_mfu", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE"}
