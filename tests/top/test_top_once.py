"""gpubench top for scripts, on a CPU: five fake GPUs behind NVML's door (fakenvml), --once as a frame and as
JSON, a frame with no terminal, a JSON line per refresh, and the sentence where there is no NVML."""

import json
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakenvml import FakeNvml, machine, order

from gpubench.cli import main
from gpubench.record import nvml

HERE = Path(__file__).resolve().parent
ME = pwd.getpwuid(os.getuid()).pw_name
GONE = 2**22 + 12345  # past the kernel's highest process id: no such process here (another namespace's)


@pytest.fixture
def fake(monkeypatch):
    def install(spec):
        nvml.reset_for_tests()
        fake = FakeNvml(spec)
        monkeypatch.setattr(nvml, "pynvml", fake)
        return fake

    yield install
    nvml.reset_for_tests()


def test_once_prints_one_frame_with_the_ladder_the_verdicts_and_the_processes(fake, capsys):
    spec = fake(machine(spinner=os.getpid(), trainer=GONE))
    assert main(["top", "--once", "--interval", "0.1"]) == 0
    out, err = capsys.readouterr()
    assert order(out) == [0, 1, 2, 3, 4]
    lines = {
        int(line.split()[0]): line for line in out.splitlines() if line[:3].strip().isdigit() and line[3:5] == "  "
    }
    assert lines[1].split()[1:5] == ["fake-busy", "100%", "0.76%", "0.012%"] and "124/700 W" in lines[1]
    assert lines[0].split()[1] == "idle" and lines[2].split()[1] == "compute-bound"
    assert lines[4].split()[1] == "memory-bound" and lines[4].endswith("  H100 80GB HBM3")  # NVIDIA said once
    assert lines[3].split()[1:7] == ["host-bound", "30%", "–", "–", "–", "–"] and "150/400 W  1410 MHz" in lines[3]
    assert "19.5/80 GiB" in lines[3] and "1410 MHz" in lines[3]
    me = next(line for line in out.splitlines() if line.split()[:1] == [str(os.getpid())])
    assert me.split()[1:4] == [ME, "600", "MiB"] and "python" in me.split()[4]  # user and command from /proc
    assert out.count(f"{GONE}  ?") == 2  # the trainer, on two GPUs: not a process of this namespace
    assert "fake-busy      GPU-Util high, yet SM active under 5%" in out  # what each word shown means
    assert "few-sms" not in out  # ... and only those shown
    assert "(keys" not in out  # no keys to press
    # GPM's gap said once, on standard error, so standard output holds only the frame
    assert err.count("GPU 3: SM active, occupancy, tensor and DRAM show – as they come from NVML GPM") == 1
    assert spec.samples >= 8  # every GPU with GPM sampled at open and at the reading


def test_json_once_is_one_document_with_nulls_for_what_was_not_read(fake, capsys):
    fake(machine(spinner=os.getpid(), trainer=GONE))
    assert main(["top", "--once", "--json", "--interval", "0.1", "--sort", "power"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert out.count("\n") == 1 and doc["sort"] == "power" and doc["interval_s"] == 0.1
    assert [g["index"] for g in doc["gpus"]] == [2, 4, 3, 1, 0]
    gpu = {g["index"]: g for g in doc["gpus"]}
    assert gpu[1]["verdict"] == "fake-busy" and gpu[1]["because"] == "GPU-Util 100% ≥ 50%, SM active 0.76% < 5%"
    assert gpu[1]["sm_active_pct"] == pytest.approx(0.757) and gpu[1]["power_limit_w"] == 700
    assert gpu[1]["processes"] == [
        {"pid": os.getpid(), "user": ME, "command": gpu[1]["processes"][0]["command"], "mem_used_mib": 600.0}
    ]
    assert gpu[3]["gpm"] is False and gpu[3]["sm_active_pct"] is None and gpu[3]["verdict"] == "host-bound"
    assert gpu[3]["processes"][0] == {"pid": GONE, "user": "?", "command": "?", "mem_used_mib": 19000.0}
    assert any("GPU 3" in n for n in doc["notes"]) and doc["thresholds"]["FAKE_BUSY_SM_PCT"] == 5
    assert set(doc["verdicts"]) >= {"idle", "fake-busy", "memory-bound", "compute-bound", "host-bound"}


@pytest.mark.parametrize(
    "sort,expected",
    [("sm", [4, 2, 1, 0, 3]), ("power", [2, 4, 3, 1, 0]), ("memory", [2, 3, 4, 1, 0]), ("index", [0, 1, 2, 3, 4])],
)
def test_sort_orders_the_gpus_largest_first_and_missing_values_last(fake, capsys, sort, expected):
    fake(machine(spinner=os.getpid(), trainer=GONE))
    assert main(["top", "--once", "--interval", "0.1", "--sort", sort]) == 0
    assert order(capsys.readouterr().out) == expected


def test_a_gpu_lost_or_its_counters_taken_is_said_and_the_others_still_shown(fake, capsys):
    spec = machine(spinner=os.getpid(), trainer=GONE)
    spec["gpus"][2]["lost"] = True
    spec["gpus"][4]["counters_busy"] = True  # another reader holds the profiling counters
    fake(spec)
    assert main(["top", "--once", "--json", "--interval", "0.1"]) == 0
    out, err = capsys.readouterr()
    gpu = {g["index"]: g for g in json.loads(out)["gpus"]}
    assert gpu[2]["verdict"] == "unknown" and "NVML cannot read it" in gpu[2]["error"]
    assert gpu[4]["gpm"] is False and gpu[4]["gpu_util_pct"] == 100 and gpu[4]["sm_active_pct"] is None
    assert (
        "GPU 4: SM active, occupancy, tensor and DRAM show –: the GPU's performance counters serve one "
        "reader at a time" in err
    )
    assert gpu[1]["verdict"] == "fake-busy"


def test_without_nvml_it_says_why_in_one_sentence_and_exits_2(fake, capsys):
    fake({"no_driver": True, "gpus": []})
    assert main(["top", "--once"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "gpubench top: error: nothing to show: no NVIDIA driver found, as the NVML "
        "library libnvidia-ml.so could not be loaded; run on a machine with an NVIDIA GPU "
        "and driver\n"
    )


def test_no_gpu_is_a_sentence_too(fake, capsys):
    fake({"gpus": []})
    assert main(["top"]) == 2
    assert capsys.readouterr().err == "gpubench top: error: nothing to show: NVML finds no GPU on this machine\n"


def test_an_interval_shorter_than_gpm_refreshes_is_refused(capsys):
    with pytest.raises(SystemExit) as done:
        main(["top", "--interval", "0.05"])
    assert (
        done.value.code == 2 and "must be at least 0.1 s, the GPM counters' refresh period" in capsys.readouterr().err
    )


def top(spec: dict, tmp_path: Path, *args) -> subprocess.Popen:
    """gpubench top in a process of its own, behind the fake NVML, with pipes (no terminal)."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen(
        [sys.executable, str(HERE / "fakenvml.py"), str(path), "top", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )


def ctrl_c_as_at_a_terminal():
    """A shell starts a background job (`pytest &`, a CI step) with SIGINT ignored, and its children inherit
    that: the Ctrl-C a test sends would be dropped."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_with_no_terminal_it_prints_one_frame_and_exits(tmp_path):
    proc = top(machine(spinner=os.getpid(), trainer=GONE), tmp_path, "--interval", "0.1")
    out, err = proc.communicate(timeout=120)  # hang protection only: it ends by itself
    assert proc.returncode == 0, err
    assert order(out) == [0, 1, 2, 3, 4] and out.count("gpubench top ") == 1 and "Traceback" not in err


def test_json_without_once_is_a_line_per_refresh_until_interrupted(tmp_path):
    proc = top(machine(spinner=os.getpid(), trainer=GONE), tmp_path, "--json", "--interval", "0.1")
    try:
        docs = [json.loads(proc.stdout.readline()) for _ in range(3)]
        proc.send_signal(signal.SIGINT)  # Ctrl-C: how a stream is ended, not an error
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [len(d["gpus"]) for d in docs] == [5, 5, 5] and docs[0]["time"] <= docs[2]["time"]
    assert proc.returncode == 0 and "Traceback" not in err
    assert err.count("GPU 3: SM active") == 1  # said once, not per refresh


def test_no_nvml_in_a_process_of_its_own_is_no_traceback_and_no_cuda_library_is_loaded(tmp_path):
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); import fakenvml; "
        "fakenvml.install(json.loads(sys.argv[2])); from gpubench.cli import main; c = main(['top', '--once', "
        "'--json', '--interval', '0.1']); "
        "print('loaded', sorted(m for m in ('torch', 'cupy', 'triton', 'jax') if m in sys.modules)); sys.exit(c)"
    )
    ok = subprocess.run(
        [sys.executable, "-c", code, str(HERE), json.dumps(machine(os.getpid(), GONE))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1] == "loaded []", ok.stderr
    none = subprocess.run(
        [sys.executable, "-c", code, str(HERE), json.dumps({"no_driver": True, "gpus": []})],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert none.returncode == 2 and "Traceback" not in none.stderr
    assert none.stderr.startswith("gpubench top: error: nothing to show: no NVIDIA driver found")
