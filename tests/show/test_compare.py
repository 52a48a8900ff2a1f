"""`gpubench compare`: committed runs side by side, phase by phase, with the change of the rate against the
first run and whether it lies beyond the runs' own spread; in the console and as report.md/.html with one
figure; and one sentence, with nothing written, for what it cannot compare."""

from pathlib import Path

import pytest

from gpubench.cli import main
from gpubench.show import compare_runs as cr

RESULTS = Path(__file__).resolve().parents[2] / "results"
EAGER, COMPILED = RESULTS / "watch-llama-eager-h100-80gb-hbm3", RESULTS / "watch-llama-compiled-h100-80gb-hbm3"
B1, B64 = RESULTS / "watch-decode-graph-b1-h200", RESULTS / "watch-decode-graph-b64-h200"
SUITE = RESULTS / "h200-20261124-233527"


def test_before_and_after_compile_side_by_side(tmp_path, capsys):
    """torch.compile: the same GPU-Util, 57% more steps/s, beyond both runs' p10–p90; the report opens with the
    figure and that sentence, and its table holds the runs' own numbers, A / B."""
    assert main(["compare", str(EAGER), str(COMPILED), "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert (
        "train: B is 57.3% faster than A in tokens/s, beyond the runs' spread, while GPU-Util read 95% and 94%" in out
    )
    assert "MFU from 25% to 39%" in out
    md = (tmp_path / "c" / "report.md").read_text()
    assert md.index("figures/change.png") < md.index("**train: B is 57.3% faster") < md.index("| phase |")
    assert "| train | 95% / 94% | MFU 25% / MFU 39% | 25% / 39% | 185,059 tokens/s / 291,028 tokens/s |" in md
    assert (tmp_path / "c" / "figures" / "change.png").stat().st_size > 10_000
    assert "<img" in (tmp_path / "c" / "report.html").read_text() and "n/a" not in md


def test_decode_at_two_batches_is_compared_by_tokens_not_steps(tmp_path, capsys):
    """A step of 64 sequences is not one of 1: the rate is in tokens/s, and it moved 20.6× at one GPU-Util."""
    assert main(["compare", str(B1), str(B64), "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "decode: B ran at 20.6 times A's rate in tokens/s, beyond the runs' spread" in out
    assert "GPU-Util read 100% and 100%, and MBU from 24% to 24%" in out


def test_a_change_lies_beyond_the_spread_only_where_the_ranges_part():
    base = {"step_ms": 10.0, "step_ms_p10": 9.5, "step_ms_p90": 10.5}
    near = {"step_ms": 9.8, "step_ms_p10": 9.0, "step_ms_p90": 10.2}  # 2% faster, ranges overlap
    far = {"step_ms": 8.0, "step_ms_p10": 7.8, "step_ms_p90": 8.3}  # 25% faster, ranges apart
    assert cr.change(base, near, True)["beyond"] is False
    assert cr.change(base, far, True) == {"pct": pytest.approx(25.0), "beyond": True}
    assert cr.change(base, {"step_ms": 8.0}, True)["beyond"] is None  # no spread recorded: not claimed either way
    assert cr.said(cr.change(base, {"step_ms": 8.0}, True)) == "+25.0% (spread not recorded)"
    assert cr.amount(1960.6) == "20.6×" and cr.amount(-40.0) == "-40.0%" and cr.amount(-75.5) == "0.245×"


@pytest.mark.parametrize(
    "argv,said",
    [
        (lambda t: [str(EAGER)], "compare needs two run directories or more"),
        (lambda t: [str(EAGER)] * 7, "compare sets at most 6 runs side by side, and was given 7"),
        (lambda t: [str(EAGER), str(t / "nowhere")], "is not a directory"),
        (lambda t: [str(EAGER), str(SUITE)], "compares runs of one kind"),
        (lambda t: [str(EAGER), str(COMPILED), "--out", str(EAGER / "c")], "lies inside the run directory"),
        (lambda t: [str(EAGER), str(COMPILED), "--out", str(t / "taken")], "holds files compare did not write"),
    ],
)
def test_what_it_cannot_compare_is_one_sentence_and_writes_nothing(tmp_path, capsys, argv, said):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["compare", *argv(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and not (EAGER / "c").exists()
    assert not list(Path.cwd().glob("compare-*"))


def test_a_second_compare_into_its_own_folder_replaces_it(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["compare", str(EAGER), str(COMPILED), "--out", str(out)]) == 0
    first = (out / "report.md").read_text()
    assert main(["compare", str(EAGER), str(COMPILED), "--out", str(out)]) == 0
    assert (out / "report.md").read_text() == first
