"""A WGAN watched with no code change on a CPU (the real `gpubench watch`, fake GPU counters): its critic steps
five times for each generator step, and each iteration is one step, whose FLOPs are one whole iteration's
(torch's FLOP counter over one iteration of the same job), never a whole iteration's given to each critic step;
the pattern is said in the marks, the summary's rows, their sentence and the manifest."""

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
from fakes import GPU, FakeSource
from torch.utils.flop_counter import FlopCounterMode

from gpubench.job import markfile, markreader, provenance, watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "unmodified" / "wgan_critic.py"
PATTERN = "5 × RMSprop #1, 1 × RMSprop #2"  # the critic's optimizer steps first: the first numbered


def example():
    spec = importlib.util.spec_from_file_location("wgan_critic", JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_iteration() -> tuple[int, int]:
    """(torch's FLOP counter over one iteration of the tiny job, the job's own count of it)."""
    wgan = example()
    net_g, net_c, opt_g, opt_c, real = wgan.build(4, 2, "cpu")
    wgan.iteration(net_g, net_c, opt_g, opt_c, real, 5)  # as the job's first: lazy state made
    with FlopCounterMode(display=False) as counter:
        wgan.iteration(net_g, net_c, opt_g, opt_c, real, 5)
    return counter.get_total_flops(), wgan.iteration_flops(net_g, net_c, 2, 5)


def busy(n):
    return {"gpu_util_pct": 100.0, "sm_active_pct": 60.0, "power_w": 300.0}


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    out = tmp_path_factory.mktemp("wgan") / "run"
    printed = out.parent / "job.log"
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "OMP_NUM_THREADS")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        config = RecordingConfig(interval_s=0.05, sources=[FakeSource(busy)])
        opts = WatchOptions(out, [GPU], {"name": GPU.name}, config)
        # the job's own words go to a file: the shell redirects them, the job is run as it is
        # 4 s and at least 16 iterations: the count is taken over the eleventh, whatever the machine's speed
        command = [
            "sh",
            "-c",
            'exec "$0" "$1" --tiny --seconds 4 --iterations 16 > "$2"',
            sys.executable,
            str(JOB),
            str(printed),
        ]
        code, w = watch.run(opts, command)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return code, w, out, printed.read_text()


def test_each_iteration_is_one_step_with_one_iterations_flops(watched):
    code, w, out, printed = watched
    assert code == 0, printed
    iterations = int(re.search(r"iterations: (\d+)", printed)[1])
    assert iterations > 12  # the count is taken over the eleventh pattern
    events = markfile.read_all(out / "marks.tsv")
    (told,) = [e for e in events if isinstance(e, markreader.Pattern)]
    # the first critic steps, written before the generator first stepped, are taken back: they were iteration 1
    assert (told.written, told.back, told.name) == (5, 5, PATTERN)
    kept = [e for e in provenance.resolve(events) if isinstance(e, markreader.Steps)]
    assert sum(e.n for e in kept) == iterations
    assert {e.pattern for e in kept} == {PATTERN}
    counted, own = one_iteration()
    assert own == counted  # the job's analytic count is what ran
    (c_line,) = [e for e in kept if e.origin == "counted"]
    assert c_line.flops == pytest.approx(counted, rel=0.01)
    # every step carries one iteration's FLOPs: none is a critic step given a whole iteration's
    assert all(e.counted == e.n and e.flops == pytest.approx(counted * e.n, rel=0.01) for e in kept)
    assert f"own count: {own:.6g} FLOPs a step" in printed


def test_the_rows_the_sentence_and_the_manifest_say_the_pattern(watched):
    _, w, out, _ = watched
    manifest, _, summary = load_run(out)
    counted, _ = one_iteration()
    train = {r["phase"]: r for r in summary}["train"]
    assert train["steps_source"] == "optimizer" and train["flops_source"] == "one step counted"
    assert train["steps_pattern"] == PATTERN
    assert train["flops_per_step"] == pytest.approx(counted, rel=0.01)
    assert train["provenance"].startswith(
        f"Steps from the job's optimizer steps (no code change), one step per "
        f"pattern of {PATTERN}; FLOPs counted by gpubench from one step"
    )
    auto = manifest["auto"]
    (process,) = auto["processes"]
    assert process["counted"]["model_flops"] == pytest.approx(counted, rel=0.01)
    assert process["patterns"] == [{"after_steps": 0, "pattern": PATTERN, "taken_back": 5}]
    assert auto["rows"]["train"] == {"steps": "optimizer", "flops": "one step counted", "pattern": PATTERN}
    assert process["steps"] == manifest["marks"]["steps"]  # the steps taken back are in neither
